"""A run's results: the result model, its results.json document read as a stream, the spool that
keeps memory flat, the tally and the scores."""
