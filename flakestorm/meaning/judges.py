"""Meaning checks of ``llm_judge`` invariants: each has a judge (its own ``judge``, else
``advanced.judge``, else the proxy's ``llm_upstream: mock``; an endpoint without ``base_url``
takes the proxy's ``llm_upstream`` URL), a judge endpoint is an http(s) URL that does not go
through the chaos proxy, and a rubric the mock judge is given quotes the phrases it looks
for."""

from __future__ import annotations

from flakestorm.checks.judge.which import resolve
from flakestorm.config import MOCK_JUDGE, Invariant, InvariantType, Judge
from flakestorm.meaning.agent import URL
from flakestorm.meaning.scope import Scope
from flakestorm.redaction import masked_url
from flakestorm.structure.paths import ConfigPath

NO_JUDGE = (
    "an 'llm_judge' invariant needs a judge: set `judge:` on it or advanced.judge (`mock`, or "
    "{base_url, model, api_key} of an OpenAI-compatible API, base_url defaulting to the "
    "proxy's llm_upstream URL); without one, the proxy's llm_upstream is the judge only when "
    "it is `mock`"
)
NO_BASE_URL = (
    "the judge names no base_url, and proxy.llm_upstream is not a URL it could default to: "
    "set base_url (an OpenAI-compatible API root, like https://api.openai.com/v1)"
)


def check_judges(scope: Scope) -> None:
    """Reads ``advanced`` and ``proxy``, and each invariant that validated."""
    parts = scope.parts
    default: Judge | None = parts.advanced.judge if parts.advanced is not None else None
    upstream = parts.proxy.llm_upstream if parts.proxy is not None else None
    if default is not None:
        _endpoint(scope, ("advanced", "judge"), default)
    for items in (parts.invariants, parts.contract_invariants):
        for item in items:
            inv = item.model
            if inv is None or inv.type is not InvariantType.LLM_JUDGE:
                continue
            if inv.judge is not None:
                _endpoint(scope, (*item.path, "judge"), inv.judge)
            chosen = inv.judge or default
            judge = resolve(chosen, upstream)
            if chosen is not None and judge is None:
                where = (*item.path, "judge") if inv.judge is not None else ("advanced", "judge")
                scope.error(where, NO_BASE_URL)
                continue
            _invariant(scope, item.path, inv, judge)


def _invariant(scope: Scope, at: ConfigPath, inv: Invariant, judge: Judge | None) -> None:
    if inv.rubric is not None and not inv.rubric.strip():
        scope.error((*at, "rubric"), "the rubric is blank: say what a passing output does")
        return
    if judge is None:
        scope.error((*at, "type"), NO_JUDGE)
    elif judge == MOCK_JUDGE and inv.rubric is not None:
        from flakestorm.checks.judge.mock import phrases

        if not phrases(inv.rubric):
            scope.error(
                (*at, "rubric"),
                "the mock judge passes an output that contains a phrase the rubric quotes "
                '("…" or `…`), and this rubric quotes none: quote what a passing output says',
            )


def _endpoint(scope: Scope, at: ConfigPath, judge: Judge) -> None:
    if isinstance(judge, str) or judge.base_url is None:
        return
    if not URL.match(judge.base_url):
        shown = masked_url(judge.base_url)
        scope.error((*at, "base_url"), f"{shown!r} is not an http(s) URL")
        return
    proxy = scope.parts.proxy
    through = proxy.url if proxy is not None else None
    if through and judge.base_url.rstrip("/").startswith(through.rstrip("/")):
        scope.error(
            (*at, "base_url"),
            "the judge is called directly, never through the chaos proxy (its calls would "
            "meet the chaos of the cell they judge): give the judge model's own API root",
        )
