"""Chaos: faults that reach what the agent depends on (SPEC §4)."""
