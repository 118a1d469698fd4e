"""The ground layer: errors, hashing, paths, settings, prices and the append-only event log."""
