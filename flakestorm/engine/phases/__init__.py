"""The phases (pillars) of a run — contract, chaos, mutation, replay — on one seam
(:mod:`flakestorm.engine.phases.phase`), registered in :mod:`flakestorm.engine.phases.registry`."""
