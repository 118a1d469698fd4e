"""Output that fits the terminal: line width, tables by column priority, a pager, colour."""
