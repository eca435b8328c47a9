"""Attribution: which invocation (``CELL#RUN.PROMPT``) a call the agent made belongs to
(SPEC §4.2).

Every invocation flakestorm sends carries its id three ways (:func:`outgoing`): the
``X-Flakestorm-Cell`` header, a W3C ``baggage`` entry ``flakestorm-cell=<id>`` (merged with any
baggage the config sets), and a W3C ``traceparent`` whose trace id is derived from the run seed
and the invocation id (:func:`trace_id`). An agent that passes any of them on to its tool and
LLM calls — by hand, or because it is instrumented with OpenTelemetry, whose default
propagators (tracecontext, baggage) carry the last two — has each call attributed to its
invocation by the proxy, so the cells of a scenario can run side by side.

:data:`SOURCES` is the one ordered list of those sources, read by the proxy for each call
(:func:`read`) and by the forwarding check, which names the one the agent forwards. A call
none of them names is attributed to the cell the runner declared active (:attr:`Source.ACTIVE`),
which is exact only when cells run one at a time.
"""

from __future__ import annotations

import enum
import hashlib
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass

CELL_HEADER = "X-Flakestorm-Cell"
SCENARIO_HEADER = "X-Flakestorm-Scenario"
BAGGAGE_HEADER = "baggage"
TRACEPARENT_HEADER = "traceparent"
BAGGAGE_KEY = "flakestorm-cell"

# what a header value may carry as it is: printable ASCII but the percent sign; a baggage value
# not the space and the separators of baggage lists either
_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")
_BAGGAGE_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '%,;="\\')

PRE_MATRIX = ("stateful-check", "baseline", "forwarding-probe")
"""The invocations before a matrix (the stateful check, ``auto`` baselines, the forwarding
probe): their trace ids are known to the proxy from the start."""


class Source(str, enum.Enum):
    """Where a call's attribution came from, in the order the proxy reads them."""

    HEADER = "header"
    BAGGAGE = "baggage"
    TRACE = "trace"
    ACTIVE = "active"
    """None of the above: the cell the runner declared active (exact when cells run one at a
    time)."""

    @property
    def forwarded(self) -> bool:
        """Whether the agent passed this on to its call (exact under any concurrency)."""
        return self is not Source.ACTIVE

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Source.HEADER: f"the {CELL_HEADER} header",
    Source.BAGGAGE: f"the W3C baggage entry {BAGGAGE_KEY}",
    Source.TRACE: "the W3C trace context (traceparent)",
    Source.ACTIVE: "nothing (the cell declared active)",
}


def header_value(text: str) -> str:
    """``text`` as an HTTP header value: percent-encoded where it is not printable ASCII (and
    ``%`` itself), so any scenario or invariant name travels; ASCII names are unchanged. The
    proxy decodes it."""
    return urllib.parse.quote(text, safe=_HEADER_SAFE)


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode()).hexdigest()


def trace_id(seed: int, invocation: str) -> str:
    """The W3C trace id (32 lowercase hex digits, never all zero) of ``invocation``: the same
    for the same seed, so a rerun repeats it, and different for every invocation."""
    found = _digest("flakestorm-trace", seed, invocation)[:32]
    return found if found.strip("0") else "1".rjust(32, "0")


def traceparent(seed: int, invocation: str) -> str:
    """The ``traceparent`` header flakestorm sends with ``invocation`` (version 00, sampled)."""
    span = _digest("flakestorm-span", seed, invocation)[:16]
    span = span if span.strip("0") else "1".rjust(16, "0")
    return f"00-{trace_id(seed, invocation)}-{span}-01"


def baggage(invocation: str, configured: str | None = None) -> str:
    """The ``baggage`` header: the configured members (but a ``flakestorm-cell`` of theirs)
    and ``flakestorm-cell=<invocation>``."""
    members = [
        m.strip()
        for m in (configured or "").split(",")
        if m.strip() and m.split("=", 1)[0].strip() != BAGGAGE_KEY
    ]
    value = urllib.parse.quote(invocation, safe=_BAGGAGE_SAFE)
    return ",".join([*members, f"{BAGGAGE_KEY}={value}"])


def outgoing(
    invocation: str, scenario: str, seed: int | None, headers: dict[str, str]
) -> dict[str, str]:
    """``headers`` (the agent's own, replaced where they collide) with the attribution of
    ``invocation``: the cell and scenario headers, baggage and (with a seed) traceparent."""
    out = dict(headers)
    if not invocation:
        return out
    configured = [k for k in out if k.lower() == BAGGAGE_HEADER]
    joined = ",".join(out.pop(k) for k in configured)
    out[CELL_HEADER] = header_value(invocation)
    if scenario:
        out[SCENARIO_HEADER] = header_value(scenario)
    out[BAGGAGE_HEADER] = baggage(invocation, joined)
    if seed is not None:
        for k in [k for k in out if k.lower() == TRACEPARENT_HEADER]:
            del out[k]
        out[TRACEPARENT_HEADER] = traceparent(seed, invocation)
    return out


# --------------------------------------------------------------------------- reading


Lookup = Callable[[str], str | None]
"""A trace id → the invocation that started it (None: not flakestorm's)."""


@dataclass(frozen=True)
class Reader:
    source: Source
    read: Callable[[Callable[[str], list[str]], Lookup], str | None]
    """(the values of a header by name, the trace lookup) → the invocation, or None."""


def _from_header(values: Callable[[str], list[str]], lookup: Lookup) -> str | None:
    found = values(CELL_HEADER)
    return urllib.parse.unquote(found[0]) if found and found[0] else None


def _from_baggage(values: Callable[[str], list[str]], lookup: Lookup) -> str | None:
    return baggage_cell(values(BAGGAGE_HEADER))


def _from_trace(values: Callable[[str], list[str]], lookup: Lookup) -> str | None:
    found = values(TRACEPARENT_HEADER)
    trace = parse_traceparent(found[0]) if found else None
    return lookup(trace) if trace is not None else None


SOURCES: tuple[Reader, ...] = (
    Reader(Source.HEADER, _from_header),
    Reader(Source.BAGGAGE, _from_baggage),
    Reader(Source.TRACE, _from_trace),
)
"""The sources of attribution, in the order they are read (SPEC §4.2)."""


def read(values: Callable[[str], list[str]], lookup: Lookup) -> tuple[str | None, Source]:
    """The invocation a call names and where that came from; ``(None, ACTIVE)`` when none.
    ``values(name)``: the call's values of a header (any case)."""
    for reader in SOURCES:
        found = reader.read(values, lookup)
        if found:
            return found, reader.source
    return None, Source.ACTIVE


def baggage_cell(values: Iterable[str]) -> str | None:
    """The ``flakestorm-cell`` entry of ``baggage`` header values (percent-decoded)."""
    for header in values:
        for member in header.split(","):
            key, _, rest = member.partition("=")
            if key.strip() == BAGGAGE_KEY:
                value = urllib.parse.unquote(rest.split(";", 1)[0].strip())
                if value:
                    return value
    return None


def parse_traceparent(value: str) -> str | None:
    """The trace id of a ``traceparent`` value (any version but ``ff``), else None."""
    parts = value.strip().lower().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff" or len(parts[1]) != 32:
        return None
    trace = parts[1]
    if not all(c in "0123456789abcdef" for c in trace) or not trace.strip("0"):
        return None
    return trace
