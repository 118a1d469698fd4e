"""skillvc: train LLM agent skills with the discipline of neural-network training, under git."""

__version__ = "0.1.0"
