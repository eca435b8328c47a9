"""Pure renderers of a finished run: ``render(result) -> str``, one module per format."""
