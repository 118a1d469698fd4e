"""Text for people: how the event log's records read in a terminal (``skillvc show``)."""
