"""What helps a user write flakestorm.yaml: the JSON Schema, the reference, the field descriptions,
the starter config and validate's preview."""
