"""Tool fault modes, one registered unit each (SPEC §4.1; the unit contract is in
:mod:`flakestorm.chaos.faults.modes`).

- ``timeout``: an HTTP call is held ``delay_ms`` (default 30 s), then dropped; a ``CONNECT``
  is held, then reset; a python call waits, then raises ``TimeoutError``.
- ``error``: an HTTP call gets ``error_code`` with a JSON error body (and ``Retry-After: 1`` on
  429 and 503); a ``CONNECT`` is refused with ``error_code``; a python call raises
  :class:`~flakestorm.errors.ToolFaultError`.
- ``malformed``: an HTTP call gets a 200 whose body is not JSON (nor even UTF-8); a python
  call returns text that is not JSON.
- ``slow``: the call is held ``delay_ms``, then goes through (HTTP, ``CONNECT`` and python):
  the one mode that does not replace the result (``replaces_result``), so tool-result attacks
  on the same call still poison the real result.
- ``malicious_response``: an HTTP call gets a 200 with ``payload`` (JSON, or text when it is
  a string that does not parse); a python call returns a fresh copy of ``payload``.
- ``empty``: an HTTP call gets a 200 with an empty body; a python call returns ``""``.
- ``lost_reply``: the call goes through and the tool acts on it, then its reply is lost: an
  HTTP call's connection is reset, a python call raises ``ConnectionResetError`` once the tool
  has run.
- ``task_state``, ``stream_cut``, ``card``: made for downstream A2A agents
  (:mod:`flakestorm.chaos.a2a`); elsewhere as ``tool_removed``.
- ``tool_removed``, ``session_expired``: made for MCP tools (:mod:`flakestorm.chaos.mcp`, whose
  units say what an MCP client meets); on an HTTP tool a 404, on a python tool a
  :class:`~flakestorm.errors.ToolFaultError` with 404.

An MCP tool's call is faulted by the unit of the same mode in :data:`flakestorm.chaos.mcp.MCP_MODES`
(its JSON-RPC answer); the fields, labels and delays are these units'.

A body cannot be forged inside a TLS tunnel: the closest a ``CONNECT`` gets to a malformed or
malicious answer is a reset once the tunnel is established.
"""

from __future__ import annotations

import abc
import enum
import http
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flakestorm.chaos.attacks.tool_results import DEFAULT_INJECTION, is_json
from flakestorm.chaos.faults.modes import DEFAULT_TIMEOUT_MS, Fields, PythonPlan, registry
from flakestorm.config import ToolFault, ToolFaultMode
from flakestorm.errors import ToolFaultError

DEFAULT_SLOW_MS = 5_000
"""How long a ``slow`` fault delays the call when it has no ``delay_ms`` (config requires one)."""

MALFORMED_TEXT = '{"status": "ok", "data": {"items": [{"id": 1, "value": "\x00\x1b[2J'
"""A tool result that is not valid JSON: truncated mid-document, with control characters."""
_MALFORMED_BODY = MALFORMED_TEXT.encode() + b"\xff\xfe\x00\x80\xc3("
"""The HTTP form: the same, plus bytes that are not even UTF-8."""

_JSON = ("Content-Type", "application/json")


@dataclass(frozen=True)
class InjectedResponse:
    """What the proxy sends back for an injected tool fault.

    Wait ``delay_ms``, then either drop the connection (``drop``) or reply with ``status``,
    ``headers`` and ``body``. The proxy adds ``Content-Length`` itself.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    delay_ms: int = 0
    drop: bool = False


class TunnelAction(enum.Enum):
    """What a tool fault does to a ``CONNECT`` tunnel."""

    RELAY = "relay"
    """Open the tunnel and relay (no fault)."""
    DELAY = "delay"
    """Hold ``delay_ms``, then open the tunnel."""
    REFUSE = "refuse"
    """Answer the ``CONNECT`` with the fault's ``error_code``."""
    DROP = "drop"
    """Hold ``delay_ms``, then reset the connection: the tunnel never opens."""
    RESET = "reset"
    """Open the tunnel, then reset it at once."""


@dataclass(frozen=True)
class Tunnel:
    """A ``CONNECT`` tunnel's fate: its action and how long it is held first."""

    action: TunnelAction
    delay_ms: int = 0


RELAY = Tunnel(TunnelAction.RELAY)
"""The tunnel of a ``CONNECT`` no fault fired on."""


def reason_phrase(code: int) -> str:
    """``503`` -> ``Service Unavailable``; a code without a standard phrase -> ``Error``."""
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return "Error"


def error_message(fault: ToolFault) -> str:
    """The message an ``error`` fault carries: its ``message``, else the reason phrase."""
    return fault.message or reason_phrase(fault.error_code)


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


# --------------------------------------------------------------------------- the units


class ToolMode(abc.ABC):
    """One tool fault mode (see the module doc)."""

    fields = Fields()
    replaces_result = True
    """The agent gets the fault's answer instead of the tool's result (False: the real result
    still comes, so tool-result attacks still poison it)."""
    drops_reply = False
    """The call reaches the tool, which acts on it; then its reply is lost (``lost_reply``)."""

    def detail(self, fault: ToolFault) -> str:
        """What the fault's label adds after the mode: ``error(503)``."""
        return ""

    def delay_ms(self, fault: ToolFault) -> int:
        """How long the fault holds the call before it acts."""
        return 0

    @abc.abstractmethod
    def response(self, fault: ToolFault) -> InjectedResponse | None:
        """The response an HTTP call gets; None: it is forwarded after :meth:`delay_ms`."""

    def tunnel(self, fault: ToolFault) -> Tunnel:
        """What happens to a ``CONNECT`` tunnel: by default a reset once it is open (a body
        cannot be forged inside TLS)."""
        return Tunnel(TunnelAction.RESET)

    @abc.abstractmethod
    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        """What a call of the python tool named ``tool`` gets."""


class TimeoutMode(ToolMode):
    fields = Fields(optional=("delay_ms", "message"))

    def detail(self, fault: ToolFault) -> str:
        return f"({fault.delay_ms} ms)" if fault.delay_ms is not None else ""

    def delay_ms(self, fault: ToolFault) -> int:
        return DEFAULT_TIMEOUT_MS if fault.delay_ms is None else fault.delay_ms

    def response(self, fault: ToolFault) -> InjectedResponse:
        return InjectedResponse(504, (), b"", delay_ms=self.delay_ms(fault), drop=True)

    def tunnel(self, fault: ToolFault) -> Tunnel:
        return Tunnel(TunnelAction.DROP, self.delay_ms(fault))

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        delay_ms = self.delay_ms(fault)
        message = fault.message or f"{tool} timed out after {delay_ms} ms"
        return PythonPlan(delay_s=delay_ms / 1000, error=TimeoutError(message))


class ErrorMode(ToolMode):
    fields = Fields(optional=("error_code", "message", "as"))

    def detail(self, fault: ToolFault) -> str:
        return f"({fault.error_code})"

    def response(self, fault: ToolFault) -> InjectedResponse:
        code = fault.error_code
        body = {"error": {"code": code, "message": error_message(fault)}}
        headers = [_JSON]
        if code in (429, 503):
            headers.append(("Retry-After", "1"))
        return InjectedResponse(code, tuple(headers), _json_bytes(body))

    def tunnel(self, fault: ToolFault) -> Tunnel:
        return Tunnel(TunnelAction.REFUSE)

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan(error=ToolFaultError(fault.error_code, error_message(fault)))


class MalformedMode(ToolMode):
    def response(self, fault: ToolFault) -> InjectedResponse:
        return InjectedResponse(200, (_JSON,), _MALFORMED_BODY)

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan(value=MALFORMED_TEXT)


class SlowMode(ToolMode):
    fields = Fields(required=("delay_ms",))
    replaces_result = False

    def detail(self, fault: ToolFault) -> str:
        return f"({fault.delay_ms} ms)"

    def delay_ms(self, fault: ToolFault) -> int:
        return DEFAULT_SLOW_MS if fault.delay_ms is None else fault.delay_ms

    def response(self, fault: ToolFault) -> None:
        return None

    def tunnel(self, fault: ToolFault) -> Tunnel:
        return Tunnel(TunnelAction.DELAY, self.delay_ms(fault))

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan(delay_s=self.delay_ms(fault) / 1000)


class MaliciousResponseMode(ToolMode):
    fields = Fields(required=("payload",))

    def response(self, fault: ToolFault) -> InjectedResponse:
        payload = fault.payload if fault.payload is not None else DEFAULT_INJECTION
        if isinstance(payload, str):
            content_type = "application/json" if is_json(payload) else "text/plain; charset=utf-8"
            return InjectedResponse(200, (("Content-Type", content_type),), payload.encode())
        return InjectedResponse(200, (_JSON,), _json_bytes(payload))

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        payload = fault.payload
        if isinstance(payload, (dict, list)):
            # the agent may mutate it: never share config
            return PythonPlan(value=json.loads(json.dumps(payload)))
        return PythonPlan(value=payload if payload is not None else DEFAULT_INJECTION)


class EmptyMode(ToolMode):
    def response(self, fault: ToolFault) -> InjectedResponse:
        return InjectedResponse(200, (_JSON,), b"")

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan(value="")


class GoneMode(ToolMode):
    """``tool_removed`` and ``session_expired`` outside MCP: the tool (or its session) is not
    found."""

    def __init__(self, what: str) -> None:
        self.what = what

    def response(self, fault: ToolFault) -> InjectedResponse:
        body = {"error": {"code": 404, "message": fault.message or self.what}}
        return InjectedResponse(404, (_JSON,), _json_bytes(body))

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan(error=ToolFaultError(404, fault.message or f"{tool}: {self.what}"))


class LostReplyMode(ToolMode):
    """``lost_reply``: the tool gets the call and acts on it, then the reply is lost."""

    replaces_result = False
    drops_reply = True

    def response(self, fault: ToolFault) -> None:
        return None

    def plan(self, fault: ToolFault, tool: str) -> PythonPlan:
        return PythonPlan()  # called through; the wrapper then raises LOST_REPLY


LOST_REPLY = "the connection was reset before the reply came (flakestorm lost_reply)"
"""What a python tool's caller meets under ``lost_reply``, once the tool has run."""


class TaskStateMode(GoneMode):
    """``task_state`` is made for downstream A2A agents (:mod:`flakestorm.chaos.a2a`); on
    another tool (which validate refuses) a 404, as ``tool_removed``."""

    fields = Fields(required=("state",))

    def detail(self, fault: ToolFault) -> str:
        return f"({fault.state.value})" if fault.state is not None else ""


class StreamCutMode(GoneMode):
    """``stream_cut`` is made for downstream A2A agents' streams (:mod:`flakestorm.chaos.a2a`);
    on another tool (which validate refuses) a 404, as ``tool_removed``."""

    fields = Fields(required=("after_events",))

    def detail(self, fault: ToolFault) -> str:
        return f"(after {fault.after_events} events)"


class CardMode(GoneMode):
    """``card`` is made for downstream A2A agents' cards (:mod:`flakestorm.chaos.a2a`); on
    another tool (which validate refuses) a 404, as ``tool_removed``."""

    fields = Fields(required=("card",))

    def detail(self, fault: ToolFault) -> str:
        return f"({fault.card.value})" if fault.card is not None else ""


TOOL_MODES: Mapping[ToolFaultMode, ToolMode] = registry(
    [
        (ToolFaultMode.TIMEOUT, TimeoutMode()),
        (ToolFaultMode.ERROR, ErrorMode()),
        (ToolFaultMode.MALFORMED, MalformedMode()),
        (ToolFaultMode.SLOW, SlowMode()),
        (ToolFaultMode.MALICIOUS_RESPONSE, MaliciousResponseMode()),
        (ToolFaultMode.EMPTY, EmptyMode()),
        (ToolFaultMode.TOOL_REMOVED, GoneMode("unknown tool")),
        (ToolFaultMode.SESSION_EXPIRED, GoneMode("session not found")),
        (ToolFaultMode.TASK_STATE, TaskStateMode("not an A2A agent")),
        (ToolFaultMode.LOST_REPLY, LostReplyMode()),
        (ToolFaultMode.STREAM_CUT, StreamCutMode("not an A2A agent")),
        (ToolFaultMode.CARD, CardMode("not an A2A agent")),
    ]
)
"""Every tool fault mode's unit."""


# --------------------------------------------------------------------------- for the proxy
