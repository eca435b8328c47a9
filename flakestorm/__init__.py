"""flakestorm: chaos engineering and behavioural contracts for AI agents."""

from flakestorm.errors import RateLimitFaultError, ToolFaultError

__version__ = "2.0.0.dev0"

__all__ = ["RateLimitFaultError", "ToolFaultError", "__version__"]
