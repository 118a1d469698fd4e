"""Agents that act in chat: the tools a target may call, and the bounded loop that runs them."""
