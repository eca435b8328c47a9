"""The phases (pillars) of a run: contract, chaos, mutation, replay."""
