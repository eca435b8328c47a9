"""What a python agent prints and logs, kept per invocation instead of among the run's lines.

A python agent runs in flakestorm's process, so what it writes to ``sys.stdout`` and
``sys.stderr`` and what it logs would land among the run's progress lines (and in the CI log,
unescaped). While an :class:`AgentConsole` is entered (the length of a run), ``sys.stdout`` and
``sys.stderr`` are routers: a write made inside an invocation (:meth:`AgentConsole.capturing`
sets a context variable in the invocation's context, which the coroutines and tasks it starts
inherit) goes to that invocation's :class:`Capture`; any other write goes on to the stream the
router replaced. The logging handlers that write to the console — a ``StreamHandler`` on
standard output or error, made before the run (it is pointed at the router for the run) or
during it, and logging's last resort — write through the routers too, so a record logged
inside an invocation is kept as its handler formats it.

When an invocation ends, its capture is redacted whole and written to the log file
(``agent.log`` beside the reports) under a line naming the invocation (``==> CELL#RUN.PROMPT
<==``); its last lines go with its reply (``Reply.console``), for the reports of a cell that
failed.

Not captured (it reaches the terminal as before): what is written to the file descriptors
themselves (a C extension's ``printf``, a subprocess that inherits them, ``os.write(1, ...)``,
``sys.stdout.buffer``), what a thread the agent starts itself writes (a ``threading.Thread``
does not inherit the invocation's context), records a handler emits on another thread (a
``QueueHandler``'s listener), and output outside any invocation (the agent's reset function,
the import of its tools). What an invocation writes after its ``agent.timeout`` is dropped;
handlers writing to files are not touched.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any, TextIO

from flakestorm.agents.closing import Closing
from flakestorm.redaction import active

CAPTURE_CHARS = 262_144
"""What one invocation's capture keeps (the rest is counted, not kept): at most 64 MiB for
256 invocations in flight."""
EXCERPT_LINES = 20
EXCERPT_CHARS = 2_000
"""What a reply keeps of its invocation's capture: its last lines, at most this long."""

_CAPTURE: ContextVar[Capture | None] = ContextVar("flakestorm_console", default=None)


class Capture:
    """What one invocation wrote, in order, bounded; closed when the invocation ends."""

    def __init__(self, label: str, limit: int = CAPTURE_CHARS) -> None:
        self.label = label
        self._limit = limit
        self._parts: list[str] = []
        self._size = 0
        self._dropped = 0
        self._closed = False
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            if self._closed:
                return
            kept = text[: max(0, self._limit - self._size)]
            self._parts.append(kept)
            self._size += len(kept)
            self._dropped += len(text) - len(kept)

    def close(self) -> str:
        """Stop keeping what is written (a timed-out invocation goes on): the text so far."""
        with self._lock:
            self._closed = True
            text = "".join(self._parts)
            if self._dropped:
                text += f"\n[{self._dropped:,} more characters not kept]\n"
            return text


def bind(capture: Capture) -> None:
    """Make ``capture`` where this context's writes go (an invocation's own context, on its
    worker thread or in its task)."""
    _CAPTURE.set(capture)


def excerpt(text: str) -> str:
    """The last lines of ``text`` (at most :data:`EXCERPT_LINES`, :data:`EXCERPT_CHARS`)."""
    lines = text.rstrip("\n").splitlines()
    kept = "\n".join(lines[-EXCERPT_LINES:])
    if len(kept) > EXCERPT_CHARS:
        kept = "…" + kept[-EXCERPT_CHARS:]
    elif len(lines) > EXCERPT_LINES:
        kept = f"[{len(lines) - EXCERPT_LINES} earlier lines in the log]\n{kept}"
    return kept


class _Router:
    """Stands in for ``sys.stdout`` or ``sys.stderr``: a write inside an invocation goes to its
    capture, any other to ``stream``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        capture = _CAPTURE.get()
        if capture is None:
            return self.stream.write(text)
        capture.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _CAPTURE.get() is None:
            self.stream.flush()

    def isatty(self) -> bool:
        return _CAPTURE.get() is None and self.stream.isatty()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, fileno, buffer, ...
        return getattr(self.stream, name)


class AgentConsole(Closing):
    """Captures a python agent's console per invocation while entered, into ``log_path``
    (created on the first invocation that wrote anything). Entered once per run: the streams
    are put back on the way out (a handler the agent made during the run keeps its router,
    which passes everything through outside an invocation)."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._lock = threading.Lock()
        self._log: IO[str] | None = None
        self._retargeted: list[logging.StreamHandler[Any]] = []
        self._installed: list[tuple[str, _Router]] = []
        self.captured = 0
        """Invocations that wrote something."""

    def __enter__(self) -> AgentConsole:
        routers = {}
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is None:  # no console at all (pythonw): nothing to keep apart
                continue
            if not isinstance(stream, _Router):  # else a run inside a run: already routed
                stream = _Router(stream)
                setattr(sys, name, stream)
                self._installed.append((name, stream))
            routers[id(stream.stream)] = stream
        for handler in _console_handlers(routers):
            router = routers[id(handler.stream)]
            handler.setStream(router)
            self._retargeted.append(handler)
        return self

    def close(self) -> None:
        """Put the streams and the handlers back, and close the log."""
        for handler in self._retargeted:
            if isinstance(handler.stream, _Router):
                handler.setStream(handler.stream.stream)
        self._retargeted.clear()
        for name, router in self._installed:
            if getattr(sys, name) is router:
                setattr(sys, name, router.stream)
        self._installed.clear()
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    @contextlib.contextmanager
    def capturing(self, label: str) -> Iterator[Capture]:
        """Capture what is written in this context while inside (an import of the agent);
        written to the log on the way out."""
        capture = Capture(label)
        token = _CAPTURE.set(capture)
        try:
            yield capture
        finally:
            _CAPTURE.reset(token)
            self.keep(capture)

    def keep(self, capture: Capture, note: str = "") -> str:
        """Close ``capture`` and write it, redacted, to the log under its label (``note``
        after it); its excerpt for the reply ("" when it wrote nothing)."""
        text = capture.close()
        if not text:
            return ""
        text = active()(text)
        with self._lock:
            self.captured += 1
            if self._log is None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log = self.log_path.open("a", encoding="utf-8", errors="replace")
            self._log.write(f"==> {capture.label}{f' ({note})' if note else ''} <==\n")
            self._log.write(text if text.endswith("\n") else text + "\n")
            self._log.flush()
        return excerpt(text)


def _console_handlers(routers: dict[int, _Router]) -> list[logging.StreamHandler[Any]]:
    """The logging handlers writing to a stream a router replaced (not files)."""
    loggers: list[Any] = [logging.getLogger()]
    loggers += list(logging.Logger.manager.loggerDict.values())
    found: dict[int, logging.StreamHandler[Any]] = {}
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            if (
                isinstance(handler, logging.StreamHandler)
                and not isinstance(handler, logging.FileHandler)
                and id(handler.stream) in routers
            ):
                found[id(handler)] = handler
    return list(found.values())
