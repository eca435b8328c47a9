"""The exception tree and exit codes.

::

    FlakestormError
    ├── ConfigError            the config file is wrong (exit 2); carries every Problem at once
    ├── UsageError             the command line is wrong (exit 2)
    ├── InfrastructureError    the run could not be carried out (exit 3)
    │   ├── AgentNotReady      the agent never became ready within ready_timeout
    │   └── ProxyUnreachable   faults need a proxy and none answers
    ├── AgentError             an invocation failed (no answer): fails a cell
    ├── HarnessError           a harness failure (reset, proxy): errors a cell
    └── RestError              a GitHub REST read failed (the baseline): a notice, never a failure

Faults raised *into* a python agent's tools and LLM callables are not part of the tree: they
must look like the failures real clients raise, so they subclass the builtin exceptions.

Only the CLI (``cli/app.py``) and ``entrypoint.py`` map these to exit codes, through ``ExitCode``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class ExitCode(enum.IntEnum):
    """Process exit codes (SPEC §5)."""

    PASSED = 0
    GATE_FAILED = 1
    CONFIG_ERROR = 2
    INFRASTRUCTURE_ERROR = 3


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth a warning) in a config file, with where it is."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class FlakestormError(Exception):
    """Base of every error flakestorm raises on purpose."""

    exit_code: ExitCode = ExitCode.INFRASTRUCTURE_ERROR
    cause: str = "flakestorm could not carry the run out"
    """What went wrong, in a few words, for the ERROR verdict line of an exit-3 error."""


class ConfigError(FlakestormError):
    """The config is invalid; ``problems`` lists every problem found, in file order, and
    ``warnings`` what else is worth saying about the file (a ``when`` that never applies)."""

    exit_code = ExitCode.CONFIG_ERROR

    def __init__(self, problems: Sequence[Problem], warnings: Sequence[Problem] = ()) -> None:
        self.problems = tuple(problems)
        self.warnings = tuple(warnings)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        """The problems and the warnings (``warning: ...``) together, in file order."""
        lines = [(p.line, p.column, str(p)) for p in self.problems]
        lines += [(w.line, w.column, f"warning: {w}") for w in self.warnings]
        return [text for _, _, text in sorted(lines, key=lambda line: line[:2])]


class UsageError(FlakestormError):
    """The command line asks for something that cannot be done."""

    exit_code = ExitCode.CONFIG_ERROR


class InfrastructureError(FlakestormError):
    """The run could not be carried out: the agent, the proxy or the machine failed us."""

    exit_code = ExitCode.INFRASTRUCTURE_ERROR


class AgentNotReady(InfrastructureError):
    """The agent did not become ready within ``agent.ready_timeout``."""

    cause = "the agent never became ready"


class ProxyUnreachable(InfrastructureError):
    """Scenarios need the chaos proxy and it does not answer."""

    cause = "the chaos proxy is unreachable"


class AgentErrorKind(enum.Enum):
    """Why an invocation produced no answer."""

    CONNECTION = "connection"
    TIMEOUT = "timeout"
    STATUS = "status"  # non-2xx reply
    UNPARSEABLE = "unparseable"  # not JSON, not UTF-8
    RESPONSE_PATH = "response_path"
    """The agent answered, and ``agent.response_path`` is not in its reply: the config reads
    the reply wrong (the cell is errored, not failed; at the run's first reply, the run stops)."""
    TOO_LARGE = "too_large"
    EXCEPTION = "exception"  # a python agent raised


class AgentError(FlakestormError):
    """One invocation failed: the agent did not answer. Fails the cell."""

    def __init__(self, kind: AgentErrorKind, message: str, status: int | None = None) -> None:
        self.kind = kind
        self.status = status
        super().__init__(message)


class HarnessError(FlakestormError):
    """flakestorm's own machinery failed for a cell (reset, proxy): the cell is ERRORED."""

    cause = "a harness error"


class RestError(FlakestormError):
    """A GitHub REST read that failed (:mod:`flakestorm.github.baseline_source` turns it into a
    notice): ``status`` is the HTTP status, None when there was no reply at all."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ToolFaultError(ConnectionError):
    """Raised into a python agent's tool (or LLM callable) by an ``error`` fault."""

    def __init__(self, error_code: int = 503, message: str = "Service Unavailable") -> None:
        self.error_code = error_code
        self.message = message
        super().__init__(f"{error_code} {message}")


class RateLimitFaultError(ToolFaultError):
    """Raised into a python agent's LLM callable by a ``rate_limit`` fault."""

    def __init__(self, message: str = "Rate limit exceeded", retry_after_s: float = 1.0) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(429, message)
