"""Meaning checks of downstream A2A agents (SPEC §17): the ``proxy.a2a`` routes, and the
faults that act on them — ``task_state`` and a ``method`` scope only on an agent of
``proxy.a2a``. An A2A agent's calls reach flakestorm through the proxy's ``/a2a/NAME`` route,
which an http agent's client is pointed at and a python agent's HTTP clients are routed to."""

from __future__ import annotations

from flakestorm.meaning.agent import URL
from flakestorm.meaning.scope import Scope, listing
from flakestorm.meaning.sections import path_segment_problem


def check_a2a(scope: Scope) -> None:
    """Reads ``proxy``."""
    proxy = scope.parts.proxy
    agents = dict(proxy.a2a) if proxy is not None else {}
    taken = (set(proxy.tools) | set(proxy.mcp)) if proxy is not None else set()
    for name, url in agents.items():
        problem = path_segment_problem(name, "A2A agent name")
        if problem:
            scope.error(("proxy", "a2a", name), problem, key=True)
        if not URL.match(url):
            scope.error(
                ("proxy", "a2a", name),
                f"{url!r} is not an http(s) URL (the downstream agent's base URL, where its "
                "card is at /.well-known/agent-card.json)",
            )
        if name in taken:
            scope.error(
                ("proxy", "a2a", name),
                f"{name!r} also names a route of proxy.tools or proxy.mcp: a fault's tool "
                "would not say which; give the A2A agent a name of its own",
                key=True,
            )
    for faults in scope.parts.fault_sets:
        for item in faults.tool_faults:
            fault = item.model
            if fault is None or fault.tool in agents:
                continue
            what = (
                ("mode", f"mode {fault.mode.value!r}")
                if fault.mode.a2a_only
                else ("method", "'method'")
                if fault.method is not None
                else None
            )
            if what is None:
                continue
            if agents:
                why = f"{fault.tool!r} is not one of proxy.a2a ({listing(sorted(agents))})"
            else:
                why = f"proxy.a2a names none (add proxy.a2a: {{{fault.tool}: URL}})"
            scope.error(
                (*item.path, what[0]), f"{what[1]} acts on a downstream A2A agent, and {why}"
            )
