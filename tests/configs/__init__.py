"""Config fixtures: invalid/, valid/ and upstream/ configs with their expected loader output."""
