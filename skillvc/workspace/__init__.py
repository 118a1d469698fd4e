"""An opened skills repository (settings, log, repo, task sets) and patches applied to it."""
