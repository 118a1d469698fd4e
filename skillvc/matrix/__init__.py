"""A skill scored on a matrix of target models: evaluation, paired regression tests, drift."""
