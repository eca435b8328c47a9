"""GitHub at the edge: the workflow commands and REST client, the action's settings, and the base
branch's baseline artifacts."""
