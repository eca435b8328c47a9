"""The control API from both ends: the scenario document, the proxy's routes, the client.

The runner activates one scenario at a time on the proxy (SPEC §4.2) with ``PUT
/_flakestorm/scenario``, whose body is a *scenario document*: the scenario's faults in the same
shapes as ``flakestorm.yaml`` plus the seed and the default cell::

    {"name": "tool outage", "seed": 20000605, "cell_id": "",
     "tool_faults": [{"tool": "search", "mode": "error", "error_code": 503}],
     "llm_faults": [], "context_attacks": [{"type": "overflow", "inject_tokens": 500}]}

:func:`scenario_document` and :func:`parse_scenario` convert between that document and an
:class:`~flakestorm.chaos.faults.decisions.ActiveScenario`; the proxy validates with the same
pydantic models as the config file, so a document the config would reject is rejected here too, with
the field named. ``context_attacks`` may be in list or dict form; every list may be omitted.

The proxy's end is :func:`answer`, which serves the routes below for a
:class:`~flakestorm.chaos.proxy.server.ChaosProxy`. :class:`ProxyControl` is the runner's end,
the client. It speaks plain JSON over HTTP and turns every ``requests`` failure into a
flakestorm error at this boundary.

Control routes (all JSON; with a token configured every call needs ``Authorization: Bearer
TOKEN``, else 401)::

    GET    /_flakestorm/health                   {"status": "ok", "version", "scenario",
                                                 "flight": true (it takes PUT /flight)}
    PUT    /_flakestorm/scenario                 activate a scenario document -> {"scenario",
                                                 "declared": [fault labels]}
    DELETE /_flakestorm/scenario                 pass-through (no faults) -> {"scenario": null}
    PUT    /_flakestorm/flight                   scenarios in flight together, {"scenarios":
                                                 [scenario documents], "cells": {CELL:
                                                 SCENARIO}}: a call of an invocation of one
                                                 of those cells is decided by its scenario ->
                                                 {"scenarios": [names]}; PUT /scenario (or
                                                 DELETE) lands them
    POST   /_flakestorm/reset                    clear interactions and fault counters
    GET    /_flakestorm/routes                   {"tools", "match", "mcp", "a2a": {NAME: URL},
                                                 "llm_upstream"}: the routes in use ("match":
                                                 the match URL of a {match, forward} route)
    PUT    /_flakestorm/routes                   a run's routes, {"tools", "match", "mcp", "a2a",
                                                 "llm_upstream"} (its config's proxy section),
                                                 over the proxy's
                                                 defaults -> the routes in use and
                                                 "conflicts": [{"route", "default", "config",
                                                 "origin"}]
    GET    /_flakestorm/interactions[?scenario=NAME][&since=SEQ]
                                                 {"interactions": [...], "next": SEQ,
                                                  "dropped": N, "bodies_dropped": N} (calls
                                                 not logged, or logged without bodies,
                                                 as the log is bounded); ``since`` keeps
                                                 seq >= SEQ,
                                                 so polling passes the previous ``next``
    DELETE /_flakestorm/interactions?scenario=NAME[&keep=CELL,...]
                                                 forget a scenario's interactions (but the
                                                 cells in ``keep``) once read -> {"forgotten": N}
    POST   /_flakestorm/begin                    {"cell": INVOCATION}: that invocation starts
                                                 now (the origin of its faults' ``window_ms``)
                                                 -> {"cell": INVOCATION}
"""

from __future__ import annotations

import dataclasses
import hmac
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import requests
from pydantic import Field

from flakestorm import __version__
from flakestorm.chaos.delivery.interactions import Interaction
from flakestorm.chaos.faults.decisions import UNATTRIBUTED, ActiveScenario
from flakestorm.chaos.faults.recording import Recording
from flakestorm.chaos.proxy.reply import HttpResponse, error_reply, json_reply
from flakestorm.config import DEFAULT_SEED, Faults, LlmReply, Model, OnMiss, ToolResponse
from flakestorm.errors import (
    HarnessError,
    InfrastructureError,
    ProxyUnreachable,
    UsageError,
)

if TYPE_CHECKING:
    from flakestorm.chaos.proxy.server import ChaosProxy

CONTROL_PREFIX = "/_flakestorm"
"""Every control route lives under this prefix; data routes never use it."""
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest control request body the proxy reads."""

DEFAULT_TIMEOUT_S = 10.0


class _Refused(HarnessError):
    """The proxy refused a control request as invalid (HTTP 400)."""


class ScenarioDocumentError(UsageError):
    """A scenario document is invalid; the message names every bad field."""


class ReplayDocument(Model):
    """A replayed session's recordings (:meth:`Recording.to_document`)."""

    session: str = Field(min_length=1)
    tool_responses: list[ToolResponse] = Field(default_factory=list)
    llm_responses: list[LlmReply] = Field(default_factory=list)
    on_miss: OnMiss = OnMiss.ERROR


class ScenarioDocument(Faults):
    """The body of ``PUT /_flakestorm/scenario``: a scenario plus its seed and default cell,
    and, when a session is replayed, its recordings."""

    name: str = Field(min_length=1)
    seed: int = DEFAULT_SEED
    cell_id: str = UNATTRIBUTED
    replay: ReplayDocument | None = None


# --------------------------------------------------------------------------- (de)serialisation


def scenario_document(active: ActiveScenario) -> dict[str, Any]:
    """The document that activates ``active`` on a proxy (inverse of :func:`parse_scenario`)."""

    def dump(items: Sequence[Any]) -> list[dict[str, Any]]:
        return [item.model_dump(mode="json", exclude_none=True, by_alias=True) for item in items]

    doc = {
        "name": active.name,
        "seed": active.seed,
        "cell_id": active.cell_id,
        "tool_faults": dump(active.tool_faults),
        "llm_faults": dump(active.llm_faults),
        "context_attacks": dump(active.context_attacks),
    }
    if active.replay is not None:
        doc["replay"] = active.replay.to_document()
    return doc


def parse_scenario(doc: Any) -> ActiveScenario:
    """Validate a scenario document; raise :class:`ScenarioDocumentError` naming the fields."""
    if not isinstance(doc, Mapping):
        raise ScenarioDocumentError(f"scenario document: expected a JSON object, got {_kind(doc)}")
    from flakestorm.structure import InvalidData, validate_model

    try:
        model = validate_model(ScenarioDocument, dict(doc))
    except InvalidData as exc:
        raise ScenarioDocumentError(f"scenario document: {exc}") from None
    return ActiveScenario(
        name=model.name,
        seed=model.seed,
        tool_faults=tuple(model.tool_faults),
        llm_faults=tuple(model.llm_faults),
        context_attacks=tuple(model.context_attacks),
        cell_id=model.cell_id,
        replay=None
        if model.replay is None
        else Recording.build(
            model.replay.session,
            model.replay.tool_responses,
            model.replay.llm_responses,
            model.replay.on_miss,
        ),
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


# --------------------------------------------------------------------------- the proxy's end


def is_control_path(path: str) -> bool:
    return path.startswith(CONTROL_PREFIX + "/") or path == CONTROL_PREFIX


def answer(
    proxy: ChaosProxy, method: str, path: str, authorization: str, body: bytes
) -> HttpResponse:
    """The proxy's reply to the control request ``method path`` (``authorization``: the value
    of its ``Authorization`` header, ``""`` when it has none)."""
    expected = f"Bearer {proxy.token}" if proxy.token is not None else None
    if expected is not None and not hmac.compare_digest(authorization.encode(), expected.encode()):
        return error_reply(
            401,
            "unauthorized",
            "this proxy needs `Authorization: Bearer <token>` on control calls "
            "(the token it was started with, FLAKESTORM_PROXY_TOKEN)",
        )
    parts = urlsplit(path)
    route = parts.path[len(CONTROL_PREFIX) :].rstrip("/")
    params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    handler = _ROUTES.get((method, route))
    if handler is not None:
        return handler(proxy, body, params)
    allowed = sorted(m for m, r in _ROUTES if r == route)
    if allowed:
        reply = error_reply(405, "method_not_allowed", f"{route} accepts {', '.join(allowed)}")
        reply.headers.append(("Allow", ", ".join(allowed)))
        return reply
    return error_reply(
        404,
        "not_found",
        f"no control route {parts.path}; routes: "
        + ", ".join(f"{m} {CONTROL_PREFIX}{r}" for m, r in _ROUTES),
    )


def _health(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    active = proxy.scenario
    return json_reply(
        {
            "status": "ok",
            "version": __version__,
            "scenario": active.name if active else None,
            "flight": True,  # PUT /flight: scenarios in flight together
        }
    )


def _put_scenario(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    try:
        doc = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError) as exc:
        return error_reply(400, "invalid_scenario", f"scenario document: not JSON ({exc})")
    try:
        active = parse_scenario(doc)
    except ScenarioDocumentError as exc:
        return error_reply(400, "invalid_scenario", str(exc))
    has_faults = active.tool_faults or active.llm_faults or active.context_attacks or active.replay
    proxy.activate(active)
    book = proxy.book
    return json_reply(
        {"scenario": active.name, "declared": list(book.declared()), "pass_through": not has_faults}
    )


def _put_flight(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    try:
        doc = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError) as exc:
        return error_reply(400, "invalid_flight", f"flight document: not JSON ({exc})")
    scenarios = doc.get("scenarios") if isinstance(doc, dict) else None
    cells = doc.get("cells") if isinstance(doc, dict) else None
    if not isinstance(scenarios, list) or not isinstance(cells, dict):
        return error_reply(
            400, "invalid_flight", 'expected {"scenarios": [scenario documents], "cells": {}}'
        )
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in cells.items()):
        return error_reply(400, "invalid_flight", "cells: each cell id names a scenario")
    try:
        actives = [parse_scenario(item) for item in scenarios]
    except ScenarioDocumentError as exc:
        return error_reply(400, "invalid_flight", str(exc))
    proxy.fly(actives, cells)
    return json_reply({"scenarios": [a.name for a in actives]})


def _delete_scenario(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    proxy.activate(None)
    return json_reply({"scenario": None})


def _reset(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    proxy.reset()
    return json_reply({"reset": True})


def _routes_document(proxy: ChaosProxy) -> dict[str, Any]:
    return {
        "tools": dict(proxy.tools),
        "match": dict(proxy.matches),
        "mcp": dict(proxy.mcp),
        "a2a": dict(proxy.a2a),
        "llm_upstream": proxy.llm_upstream,
    }


def _get_routes(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    return json_reply(_routes_document(proxy))


def _put_routes(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    try:
        doc = json.loads(body) if body.strip() else None
    except (ValueError, RecursionError) as exc:
        return error_reply(400, "invalid_routes", f"routes: not JSON ({exc})")
    if not isinstance(doc, Mapping):
        return error_reply(
            400, "invalid_routes", f"routes: expected a JSON object, got {_kind(doc)}"
        )
    tools, llm_upstream = doc.get("tools") or {}, doc.get("llm_upstream")
    mcp, matches, a2a = doc.get("mcp") or {}, doc.get("match") or {}, doc.get("a2a") or {}
    for key, routes in (("tools", tools), ("mcp", mcp), ("match", matches), ("a2a", a2a)):
        if not isinstance(routes, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in routes.items()
        ):
            return error_reply(
                400, "invalid_routes", f"routes: {key}: expected {{NAME: URL}} strings"
            )
    if llm_upstream is not None and not isinstance(llm_upstream, str):
        return error_reply(400, "invalid_routes", "routes: llm_upstream: expected a string")
    try:
        conflicts = proxy.route(tools, llm_upstream, mcp, matches, a2a)
    except UsageError as exc:
        return error_reply(400, "invalid_routes", str(exc))
    return json_reply(
        _routes_document(proxy) | {"conflicts": [dataclasses.asdict(c) for c in conflicts]}
    )


SETTLE_S = 0.5
"""How long a read of the interactions waits for calls still being answered: a streamed
reply's last bytes reach the agent just before its interaction is logged, and the runner reads
right after the agent answered (a call still held by a fault past that is a straggler)."""


def _interactions(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    since_text = params.get("since")
    try:
        since = int(since_text) if since_text is not None else None
    except ValueError:
        return error_reply(400, "bad_request", f"since: expected an integer, got {since_text!r}")
    items = proxy.log.snapshot(params.get("scenario"), wait_s=SETTLE_S)
    if since is not None:
        items = [i for i in items if i.seq >= since]
    next_seq = max((i.seq for i in items), default=(since or 0) - 1) + 1
    return json_reply(
        {
            "interactions": [i.to_document() for i in items],
            "next": next_seq,
            "dropped": proxy.log.dropped,
            "bodies_dropped": proxy.log.bodies_dropped,
        }
    )


def _forget(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    scenario = params.get("scenario")
    if not scenario:
        return error_reply(400, "bad_request", "scenario: required (the scenario to forget)")
    keep = [c for c in params.get("keep", "").split(",") if c]
    return json_reply({"forgotten": proxy.log.forget(scenario, keep)})


def _begin(proxy: ChaosProxy, body: bytes, params: Mapping[str, str]) -> HttpResponse:
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, RecursionError):
        doc = None
    cell = doc.get("cell") if isinstance(doc, dict) else None
    if not isinstance(cell, str) or not cell:
        return error_reply(400, "bad_request", 'cell: required (the invocation, "CELL#RUN.PROMPT")')
    proxy.begin(cell)
    return json_reply({"cell": cell})


_ROUTES: dict[tuple[str, str], Callable[[ChaosProxy, bytes, Mapping[str, str]], HttpResponse]] = {
    ("GET", "/health"): _health,
    ("PUT", "/scenario"): _put_scenario,
    ("DELETE", "/scenario"): _delete_scenario,
    ("PUT", "/flight"): _put_flight,
    ("POST", "/reset"): _reset,
    ("GET", "/interactions"): _interactions,
    ("DELETE", "/interactions"): _forget,
    ("GET", "/routes"): _get_routes,
    ("PUT", "/routes"): _put_routes,
    ("POST", "/begin"): _begin,
}


# --------------------------------------------------------------------------- the runner's end


class ProxyControl:
    """A client of a chaos proxy's control API (``url`` is the proxy's origin)."""

    def __init__(
        self, url: str, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.lost: dict[str, int] = {}
        """The most calls the proxy has said its log did not keep (``dropped``), or kept
        without bodies (``bodies_dropped``), as :meth:`interactions` read them."""
        self._session = requests.Session()
        self._session.trust_env = False  # the proxy is never reached through another proxy

    def close(self) -> None:
        self._session.close()

    def health(self) -> dict[str, Any]:
        """The proxy's health document; raises :class:`ProxyUnreachable` when it does not answer."""
        return self._call("GET", "/health")

    def activate(self, active: ActiveScenario | None) -> list[str]:
        """Activate ``active`` (None = pass-through); return the fault labels it declares."""
        if active is None:
            self._call("DELETE", "/scenario")
            return []
        reply = self._call("PUT", "/scenario", scenario_document(active))
        return [str(label) for label in reply.get("declared", [])]

    def fly(self, scenarios: Sequence[ActiveScenario], cells: Mapping[str, str]) -> None:
        """Put ``scenarios`` in flight together (``cells``: cell id -> scenario)."""
        body = {"scenarios": [scenario_document(s) for s in scenarios], "cells": dict(cells)}
        self._call("PUT", "/flight", body)

    def reset(self) -> None:
        """Clear the proxy's interactions and fault counters."""
        self._call("POST", "/reset")

    def route(
        self,
        tools: Mapping[str, str],
        llm_upstream: str | None,
        mcp: Mapping[str, str] | None = None,
        matches: Mapping[str, str] | None = None,
        a2a: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Push a run's routes (its config's ``proxy.tools``, ``proxy.mcp`` and
        ``llm_upstream``) to the proxy, over the defaults it was started with; return a warning
        for each default they override. A route the proxy cannot use is a :class:`UsageError`
        naming it."""
        body = {
            "tools": dict(tools),
            "match": dict(matches or {}),
            "mcp": dict(mcp or {}),
            "a2a": dict(a2a or {}),
            "llm_upstream": llm_upstream,
        }
        try:
            reply = self._call("PUT", "/routes", body)
        except _Refused as exc:
            raise UsageError(f"the config's routes: {exc}") from None
        return [
            f"{c.get('route')}: the config routes it to {c.get('config')}, the proxy service at "
            f"{self.url} was started with {c.get('default')} ({c.get('origin')}); using the "
            "config's"
            for c in reply.get("conflicts", [])
            if isinstance(c, dict)
        ]

    def interactions(
        self, scenario: str | None = None, since: int | None = None
    ) -> list[Interaction]:
        """What the proxy saw, in arrival order (``since``: only ``seq >= since``)."""
        params: dict[str, str] = {}
        if scenario is not None:
            params["scenario"] = scenario
        if since is not None:
            params["since"] = str(since)
        reply = self._call("GET", "/interactions", params=params)
        for key in ("dropped", "bodies_dropped"):  # the most the proxy has said (its own count)
            count = reply.get(key)
            if type(count) is int:
                self.lost[key] = max(self.lost.get(key, 0), count)
        try:
            return [Interaction.from_document(doc) for doc in reply["interactions"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise HarnessError(
                f"chaos proxy at {self.url} sent an unreadable interaction list: {exc}"
            ) from exc

    def begin(self, invocation: str) -> None:
        """Tell the proxy ``invocation`` starts now: its faults' ``window_ms`` count from here."""
        self._call("POST", "/begin", {"cell": invocation})

    def forget(self, scenario: str, keep: Collection[str] = ()) -> int:
        """Have the proxy forget ``scenario``'s interactions (but those of the cells in
        ``keep``) once they are read; how many it forgot. A proxy of an older version, without
        the route, keeps them (0)."""
        params = {"scenario": scenario, "keep": ",".join(keep)}
        reply = self._call("DELETE", "/interactions", params=params, missing_ok=True)
        forgotten = reply.get("forgotten", 0)
        return forgotten if isinstance(forgotten, int) else 0

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        missing_ok: bool = False,
    ) -> dict[str, Any]:
        """One control call; with ``missing_ok``, a route this proxy does not have (404, 405)
        answers ``{}``."""
        url = f"{self.url}{CONTROL_PREFIX}{path}"
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = self._session.request(
                method,
                url,
                json=body,
                params=params,
                headers=headers,
                timeout=self.timeout_s,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise ProxyUnreachable(
                f"chaos proxy not reachable: is the proxy running at {self.url}? start it with "
                f"`flakestorm proxy` or as a service container ({type(exc).__name__})"
            ) from exc
        if response.status_code == 401:
            raise InfrastructureError(
                f"chaos proxy at {self.url} refused the control token: set proxy.token (e.g. "
                "`token: ${FLAKESTORM_PROXY_TOKEN}`) to the token the proxy was started with"
            )
        try:
            reply = response.json()
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise ProxyUnreachable(
                f"{url} answered HTTP {response.status_code} without a flakestorm JSON reply: "
                f"is the chaos proxy (and not another server) running at {self.url}?"
            )
        if missing_ok and response.status_code in (404, 405):
            return {}
        if response.status_code >= 400:
            error = reply.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            error_type = HarnessError if response.status_code != 400 else _Refused
            raise error_type(
                f"chaos proxy at {self.url}: {method} {path} failed "
                f"(HTTP {response.status_code}): {message or response.text[:200]}"
            )
        return reply
