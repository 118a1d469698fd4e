"""Agent CLIs as hermetic targets: presets, scratch homes, trajectories."""
