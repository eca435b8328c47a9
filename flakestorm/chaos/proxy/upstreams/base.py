"""The upstream seam: :class:`Upstream`, one method wide, and the request it is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.inbound import RequestHeaders
from flakestorm.chaos.proxy.reply import HttpResponse


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """One call as it goes upstream: after routing and any request-side fault."""

    call: ServedCall
    """Its route (``upstream_url``, ``rel_path``, ``provider``, ``local``...). The upstream
    notes what it learns on it: ``upstream_status``, as soon as it is known."""
    headers: RequestHeaders
    """The agent's request headers, as received (forwarding filters them)."""
    body: bytes


class Upstream(Protocol):
    """Where a call is sent once the proxy has decided its faults."""

    def send(self, request: UpstreamRequest) -> HttpResponse:
        """The upstream's reply, whole or streamed (``HttpResponse.chunks``). An upstream that
        cannot answer raises :class:`~flakestorm.chaos.proxy.reply.UpstreamFailure`."""
        ...


@runtime_checkable
class Rewindable(Protocol):
    """An upstream that serves recordings in order: the control API's reset starts it over."""

    def rewind(self) -> None: ...
