"""The upstream a proxy sends calls to, chosen once at start-up from ``llm_upstream``.

``llm_upstream`` is an http(s) URL (LLM calls go there; default: each provider's public API),
or names one of the proxy's own LLM upstreams, registered in :data:`LOCAL_UPSTREAMS`:
``mock`` (:class:`~.mock_llm.MockLlm`) or ``cassette:PATH``
(:class:`~.cassette.CassetteReplay`). A local upstream serves the LLM calls routed to it
(``ServedCall.local``) and passes the rest to the network upstream it is built on; its calls are
logged under ``NAME:/path`` (``mock:/v1/chat/completions``).

Adding one is a class with ``send`` (and ``rewind`` if it replays in order) and one entry here.
Whatever is chosen, the proxy puts :class:`~.replay.ReplayUpstream` on top: it answers from a
replayed session's recordings while one is active, and passes everything else through.
"""

from __future__ import annotations

from collections.abc import Callable

from flakestorm.chaos.proxy.routes import check_url
from flakestorm.chaos.proxy.upstreams.base import Upstream
from flakestorm.chaos.proxy.upstreams.cassette import CASSETTE_PREFIX, CassetteReplay
from flakestorm.chaos.proxy.upstreams.mock_llm import MOCK, MockLlm

Build = Callable[[Upstream], Upstream]
"""How a local upstream is built on the network upstream."""

LOCAL_UPSTREAMS: dict[str, Callable[[str], Build]] = {
    MOCK: MockLlm.load,
    CASSETTE_PREFIX: CassetteReplay.load,
}
"""``llm_upstream`` settings the proxy serves itself: a key ending in ``:`` is a prefix (its
argument follows it), any other the whole setting. Each loads what it needs from the argument
(failing at start-up) and returns how to build the upstream."""


def local_upstream(setting: str | None) -> tuple[str | None, Build | None]:
    """``(name, build)`` of the local upstream ``setting`` selects, or ``(None, None)`` when
    LLM calls go to a URL (``setting``, checked here, or the providers' default)."""
    if setting is None:
        return None, None
    for key, load in LOCAL_UPSTREAMS.items():
        if key.endswith(":") and setting.startswith(key):
            return key[:-1], load(setting[len(key) :])
        if setting == key:
            return key, load("")
    check_url(setting, "proxy.llm_upstream")
    return None, None
