"""Checking the event log's integrity and copying a damaged one into a fresh log."""
