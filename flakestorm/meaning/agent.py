"""Meaning checks of the ``agent`` section: the endpoint fits the agent's type, fields of the
other type are refused, ``response_path`` is dotted, ``request_template`` sends the prompt, and
``session`` sends its id one way (a header or the template) and makes resets moot."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from flakestorm.agents.source import yields
from flakestorm.config import AgentConfig, AgentType, StreamFormat
from flakestorm.meaning.scope import Scope
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import MIGRATE

REFERENCE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
"""A python ``module:attr`` reference."""
URL = re.compile(r"^https?://[^\s/?#]+(?:[/?#]\S*)?$")
"""An http(s) URL."""

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (RFC 9110 token)."""
SESSION_ID = "{session_id}"

_HTTP_ONLY = ("reset_endpoint", "health_endpoint", "start")
_PYTHON_ONLY = ("reset_function", "tools", "tool_registry", "llm", "tool_delivery")


def check_agent(scope: Scope) -> None:
    """Reads ``agent``."""
    agent = scope.parts.agent
    if agent is None:
        return
    if agent.type is AgentType.PYTHON:
        _python(scope, agent)
    else:
        _http(scope, agent)
    if agent.response_path is not None and agent.response_path.startswith("$"):
        scope.error(
            ("agent", "response_path"),
            f"JSONPath is not supported; write the dotted path {_dotted(agent.response_path)!r}"
            + MIGRATE,
        )
    _request_template(scope, agent)
    _session(scope, agent)
    _stream(scope, agent)


def check_streamed(scope: Scope) -> None:
    """Reads ``agent``: an invariant on a stream's timing needs a reply that streams."""
    agent = scope.parts.agent
    assert agent is not None
    if agent.stream is not None:
        return
    if agent.type is AgentType.PYTHON:
        if yields(agent.endpoint, scope.base_dir) is not False:
            return  # a generator streams its reply (undecided: the run reads the callable)
        why = (
            f'its callable ("{agent.endpoint}") returns its reply whole: make it a generator '
            "(sync or async) that yields the reply's text as it comes"
        )
    else:
        why = (
            "agent.stream is not set: set agent.stream.format (openai, anthropic, sse, ndjson "
            "or text) for an http agent that streams its reply"
        )
    for items in (scope.parts.invariants, scope.parts.contract_invariants):
        for item in items:
            if item.model is not None and item.model.type.reads_stream:
                scope.error(
                    (*item.path, "type"),
                    f"{item.model.type.value} times the agent's streamed reply, but {why}",
                )


def _python(scope: Scope, agent: AgentConfig) -> None:
    if not REFERENCE.match(agent.endpoint):
        scope.error(
            ("agent", "endpoint"),
            f"{agent.endpoint!r} is not a python reference for a python agent "
            "(expected module:attr, e.g. myagent:handle)",
        )
    for name in _HTTP_ONLY:
        if getattr(agent, name) is not None:
            scope.error(
                ("agent", name),
                f"'{name}' applies to http agents only (this agent is type: python)",
                key=True,
            )


def _http(scope: Scope, agent: AgentConfig) -> None:
    if not URL.match(agent.endpoint):
        hint = (
            " (for a python callable write type: python)" if REFERENCE.match(agent.endpoint) else ""
        )
        scope.error(("agent", "endpoint"), f"{agent.endpoint!r} is not an http(s) URL{hint}")
    for name in _PYTHON_ONLY:
        if getattr(agent, name) is not None:
            scope.error(
                ("agent", name),
                f"'{name}' applies to python agents only (write type: python, or "
                "route an http agent's traffic through the proxy)",
                key=True,
            )
    health = agent.health_endpoint
    if health is not None and not (URL.match(health) or health.startswith("/")):
        scope.error(
            ("agent", "health_endpoint"),
            f"{health!r} is not an http(s) URL or a path like /health",
        )


def _session(scope: Scope, agent: AgentConfig) -> None:
    session = agent.session
    at: ConfigPath = ("agent", "session")
    if session is None or not _http_only(scope, agent, "session"):
        return
    if (session.header is None) == (not session.template):
        scope.error(
            at,
            "give exactly one of `header: NAME` (the session id in that request header) "
            "and `template: true` (the session id fills {session_id} in request_template)",
        )
        return
    if session.header is not None and not _TOKEN.fullmatch(session.header):
        scope.error((*at, "header"), f"{session.header!r} is not an HTTP header name")
    if session.template and not any(SESSION_ID in s for s in _strings(agent.request_template)):
        scope.error(
            (*at, "template"),
            "request_template does not contain {session_id}, so the session id would "
            'never be sent (e.g. {"input": "{prompt}", "session": "{session_id}"})',
        )
    for name in ("reset_endpoint", "reset_function"):
        if getattr(agent, name) is not None:
            scope.warn(
                ("agent", name),
                f"is not called: agent.session gives each cell its own conversation, so "
                f"cells need no reset (remove {name}, or the session, to choose)",
            )


def _http_only(scope: Scope, agent: AgentConfig, name: str) -> bool:
    """Whether ``agent.NAME``, which is set, may be: an error on a python agent."""
    if agent.type is AgentType.PYTHON:
        scope.error(
            ("agent", name),
            f"'{name}' applies to http agents only (this agent is type: python)",
            key=True,
        )
        return False
    return True


def _request_template(scope: Scope, agent: AgentConfig) -> None:
    template = agent.request_template
    at: ConfigPath = ("agent", "request_template")
    if "request_template" not in agent.model_fields_set:
        return
    if isinstance(template, str):
        if "{prompt}" not in template:
            scope.error(at, "does not contain {prompt}, so the prompt would never be sent")
            return
        body = template.replace('"{prompt}"', '"p"').replace("{prompt}", '"p"')
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            scope.error(
                at,
                f"is not valid JSON once {{prompt}} is substituted ({exc.msg} at line "
                f"{exc.lineno}, column {exc.colno})",
            )
        except RecursionError:
            scope.error(at, "is nested too deeply to read as JSON once {prompt} is substituted")
    elif not any("{prompt}" in s for s in _strings(template)):
        scope.error(at, "does not contain {prompt}, so the prompt would never be sent")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _dotted(jsonpath: str) -> str:
    """``$.choices[0].message.content`` -> ``choices.0.message.content``."""
    text = jsonpath.lstrip("$").lstrip(".")
    text = re.sub(r"\[(\d+)\]", r".\1", text)
    text = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    return text.lstrip(".")


def _stream(scope: Scope, agent: AgentConfig) -> None:
    stream = agent.stream
    at: ConfigPath = ("agent", "stream")
    if stream is None or not _http_only(scope, agent, "stream"):
        return
    if agent.response_path is not None:
        scope.error(
            ("agent", "response_path"),
            "does not apply to a streamed reply (agent.stream): its text is assembled from the "
            "events (for format sse or ndjson, agent.stream.path says where it is in each)",
            key=True,
        )
    kind = stream.format.value
    if not stream.format.generic:
        for name in ("path", "done"):
            if getattr(stream, name) is not None:
                scope.error(
                    (*at, name),
                    f"'{name}' applies to format sse and ndjson only (format {kind} knows where "
                    "its text is and what ends it)",
                    key=True,
                )
        return
    if stream.done is None:
        scope.error(
            at,
            f"format {kind} needs 'done': the terminal event (an SSE event name, a data line "
            "such as [DONE], or PATH=VALUE on the event's JSON, e.g. type=done)",
        )
    elif "=" in stream.done and not _DOTTED.fullmatch(stream.done.partition("=")[0]):
        scope.error(
            (*at, "done"),
            f"{stream.done!r}: before '=' must be a dotted path into the event's JSON "
            "(e.g. type=done, done=true)",
        )
    if stream.path is None and stream.format is StreamFormat.NDJSON:
        scope.error(at, "format ndjson needs 'path': the dotted path to the text in each line")
    elif stream.path is not None and not _DOTTED.fullmatch(stream.path):
        scope.error(
            (*at, "path"),
            f"{stream.path!r} is not a dotted path (e.g. choices.0.delta.content, token)",
        )


_DOTTED = re.compile(r"[^.\s=]+(?:\.[^.\s=]+)*")
"""A dotted path: segments without dots, spaces or ``=``."""
