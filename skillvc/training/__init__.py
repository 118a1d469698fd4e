"""The training loop (``loop.train`` is the spine) and its stages."""
