"""The run engine: the plan, the runner (orchestration), the executor, the probes and the phases."""
