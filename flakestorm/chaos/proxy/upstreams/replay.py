"""Recorded responses of a replayed session, served in place of the real tools and LLM
(SPEC §7): the proxy's outermost upstream, on top of whatever ``llm_upstream`` chose.

While the active scenario carries a :class:`~flakestorm.chaos.faults.recording.Recording`, a call of
the scenario is answered from it: the n-th call of tool T (``call_index``, counted per cell by
the fault book) gets T's n-th recorded response — its status, its body (JSON, or text as it
is) and its latency (the reply is held that long) — and the n-th LLM call the n-th recorded
reply, shaped like the mock LLM's replies in the API the agent called (OpenAI chat
completions, completions, Responses, Anthropic messages; streamed as SSE when the request
streams), or the provider's error body for a recorded error status. A call with nothing
recorded is a replay miss: a 502 whose ``upstream_error`` names the call, which makes the
session ERRORED (``on_miss: live`` sends it upstream instead; a tool with no upstream URL to
go live to is a miss still). Everything else — no recording
active, a straggler from another scenario, traffic that is neither a tool nor an LLM call,
LLM calls of a session that recorded none — goes on to the upstream below.
"""

from __future__ import annotations

from collections.abc import Callable

from flakestorm.chaos import llm
from flakestorm.chaos.faults.decisions import ActiveScenario, Target
from flakestorm.chaos.faults.recording import Live, Miss, body_of, ordinal
from flakestorm.chaos.proxy.call import NOT_COUNTED
from flakestorm.chaos.proxy.reply import HttpResponse, UpstreamFailure, from_llm
from flakestorm.chaos.proxy.upstreams.base import Rewindable, Upstream, UpstreamRequest
from flakestorm.chaos.proxy.upstreams.mock_llm import mock_reply
from flakestorm.config import LlmReply, ToolResponse

REPLAY = "replay"
"""How a tool the proxy has no route for, reached only through a recording, is logged
(``replay:/path``)."""


class ReplayUpstream:
    """Serves the active scenario's recording, else passes calls to ``inner``."""

    def __init__(self, inner: Upstream, active: Callable[[], ActiveScenario]) -> None:
        self.inner = inner
        self.active = active

    def send(self, request: UpstreamRequest) -> HttpResponse:
        call = request.call
        scenario = self.active()
        recording = scenario.replay
        if (
            recording is None
            or call.scenario != scenario.name
            or call.call_index == NOT_COUNTED
            or call.target is Target.OTHER
        ):
            return self.inner.send(request)
        served: ToolResponse | LlmReply | Miss | Live
        if call.target is Target.TOOL:
            served = recording.tool(call.tool, call.call_index)
        else:
            served = recording.llm(call.call_index)
        if isinstance(served, Miss):
            raise UpstreamFailure(502, "replay_miss", str(served))
        if isinstance(served, Live):
            if call.upstream_url.startswith(f"{REPLAY}:"):
                # nowhere to go live: still a miss, which errors the session (never judged)
                raise UpstreamFailure(
                    502,
                    "replay_miss",
                    f"{ordinal(call.call_index + 1)} call to {call.tool}, which has no "
                    "upstream URL for live calls (add it under proxy.tools)",
                )
            return self.inner.send(request)
        call.upstream_status = served.status
        if isinstance(served, LlmReply):
            return self._llm(request, served)
        body, content_type = body_of(served)
        return HttpResponse(
            served.status, [("Content-Type", content_type)], body, delay_ms=served.latency_ms
        )

    def _llm(self, request: UpstreamRequest, reply: LlmReply) -> HttpResponse:
        call = request.call
        provider = call.provider or llm.provider_of(call.rel_path)
        if reply.failed:
            message = reply.content or f"recorded error {reply.status}"
            body = llm.error_body(provider, reply.status, message)
            out = HttpResponse(reply.status, list(llm.JSON_HEADERS), body)
        else:
            out = from_llm(mock_reply(provider, call.rel_path, request.body, reply.content))
        out.delay_ms = reply.latency_ms
        return out

    def rewind(self) -> None:
        if isinstance(self.inner, Rewindable):
            self.inner.rewind()
