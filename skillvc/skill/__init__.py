"""Skill documents: SKILL.md parsing, format rules, edits, preflight and skill selection."""
