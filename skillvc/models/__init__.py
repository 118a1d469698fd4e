"""Model access: backends, the logged client, batches, executors, agents, prompts, sim worlds."""
