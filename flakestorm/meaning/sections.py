"""Meaning checks of the smaller sections: golden prompts where a phase needs them, the proxy's
URLs and tool names, scoring weights that sum to 1.0, and ``advanced``."""

from __future__ import annotations

import re

from flakestorm.config import AgentType, SimilarityBackend, ToolRoute
from flakestorm.meaning.agent import URL
from flakestorm.meaning.scope import Scope

WEIGHT_TOLERANCE = 1e-6
_PATH_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]*$")


def check_golden_prompts(scope: Scope) -> None:
    """Reads ``golden_prompts``. A contract needs them unless every invariant has probes (an
    invariant that did not validate is not counted either way)."""
    parts = scope.parts
    if parts.golden_prompts:
        return
    needs: list[str] = [name for name in ("mutations", "chaos") if name in parts.written]
    if any(item.model is not None and not item.model.probes for item in parts.contract_invariants):
        needs.append("contract (not every invariant has probes)")
    if needs:
        scope.error(
            ("golden_prompts",),
            f"at least one golden prompt is required by {', '.join(needs)}",
            key=True,
        )


def check_proxy(scope: Scope) -> None:
    """Reads ``proxy``."""
    proxy = scope.parts.proxy
    if proxy is None:
        return
    if proxy.url is not None and not URL.match(proxy.url):
        scope.error(("proxy", "url"), f"{proxy.url!r} is not an http(s) URL")
    if proxy.url is not None and proxy.port is not None:
        scope.warn(
            ("proxy", "port"),
            "proxy.port is the port of a proxy flakestorm starts itself; with proxy.url the "
            "proxy service is used, so it is ignored",
        )
    upstream = proxy.llm_upstream
    if upstream == "cassette:":
        scope.error(("proxy", "llm_upstream"), "'cassette:' needs a path (cassette:PATH)")
    elif (
        upstream is not None
        and upstream != "mock"
        and not upstream.startswith("cassette:")
        and not URL.match(upstream)
    ):
        scope.error(
            ("proxy", "llm_upstream"),
            f"{upstream!r} is not valid (expected an http(s) URL, 'mock' or 'cassette:PATH')",
        )
    http_agent = scope.parts.agent is not None and scope.parts.agent.type is AgentType.HTTP
    for name, route in proxy.tools.items():
        problem = path_segment_problem(name, "tool name")
        if problem:
            scope.error(("proxy", "tools", name), problem, key=True)
        urls: dict[tuple[str, ...], str] = (
            {(): route}
            if isinstance(route, str)
            else {(key,): url for key, url in route.model_dump().items()}
        )
        for key, url in urls.items():
            if not URL.match(url):
                scope.error(("proxy", "tools", name, *key), f"{url!r} is not an http(s) URL")
        if isinstance(route, ToolRoute) and http_agent and route.match.startswith("https:"):
            scope.error(
                ("proxy", "tools", name, "match"),
                "an http agent's calls to an https URL reach the proxy as TLS tunnels, which "
                f"it can neither read nor send on to {route.forward}: point the agent's base "
                f"URL for {name} at the proxy's /tools/{name} route (proxy.tools.{name}: "
                f"{route.forward}), or match an http:// URL",
            )


def path_segment_problem(name: str, what: str) -> str:
    """Why ``name`` (a route's name) cannot be a URL path segment; "" when it can."""
    if not _PATH_SEGMENT.match(name) or name.startswith("_flakestorm"):
        return (
            f"{what} {name!r} cannot be a URL path segment (use letters, digits, "
            "'.', '_', '~', '-'; not starting with '_flakestorm')"
        )
    return ""


def check_scoring(scope: Scope) -> None:
    """Reads ``scoring``."""
    if scope.parts.scoring is None:
        return
    weights = scope.parts.scoring.weights.as_dict()
    total = sum(weights.values())
    if abs(total - 1.0) > WEIGHT_TOLERANCE:
        terms = " + ".join(f"{k} {v:g}" for k, v in weights.items())
        scope.error(("scoring", "weights"), f"weights must sum to 1.0, got {total:g} ({terms})")


def check_advanced(scope: Scope) -> None:
    """Reads ``advanced``."""
    advanced = scope.parts.advanced
    if advanced is None:
        return
    if advanced.min_pass is not None and advanced.min_pass > advanced.repeat:
        scope.error(
            ("advanced", "min_pass"),
            f"min_pass ({advanced.min_pass}) cannot exceed repeat ({advanced.repeat})",
        )
    if advanced.similarity is SimilarityBackend.EMBEDDINGS and advanced.embeddings is None:
        scope.error(
            ("advanced", "similarity"),
            "the embeddings backend needs advanced.embeddings {base_url, model, api_key}",
        )
