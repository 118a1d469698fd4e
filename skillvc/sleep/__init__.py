"""Learning from your own agent sessions: harvest, mine recurring tasks, train nightly."""
