"""Edges to other tools: git hooks, CI workflow files and Datasette."""
