"""The phases (pillars) of a run — contract, chaos, mutation, replay — on one seam
(:mod:`flakestorm.phases.phase`), registered in :mod:`flakestorm.phases.registry`."""
