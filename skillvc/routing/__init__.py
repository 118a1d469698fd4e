"""Routing: which skill an agent loads for a prompt, measured on a trigger set and trained
through the skills' descriptions, gated on the whole library (docs/routing.md)."""
