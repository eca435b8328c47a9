"""GitHub at the edge: the workflow commands and REST client, the action's settings, the base
branch's baseline artifacts, and what the action tells GitHub as pure builders (outputs,
annotations, the sticky comment, the summary and verdict lines, the step's baseline judgement),
written by :mod:`flakestorm.github.publish`."""
