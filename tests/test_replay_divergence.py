"""How the tool calls of a replay differ from the recorded ones: tools, order, arguments."""

from __future__ import annotations

from flakestorm.config import ToolResponse
from flakestorm.replay.divergence import MAX_LINES, divergence
from flakestorm.results.model import CallRecord


def recorded(*tools: str, arguments: object = None) -> list[ToolResponse]:
    return [ToolResponse(tool=t, arguments=arguments) for t in tools]


def calls(*tools: str, request: str | None = None) -> list[CallRecord]:
    out = [CallRecord("tool", t, "GET", f"replay:/{t}", 200, request=request) for t in tools]
    return [*out, CallRecord("llm", None, "POST", "http://llm/v1/chat/completions", 200)]


def test_the_same_calls_do_not_diverge() -> None:
    assert divergence(recorded("a", "b"), calls("a", "b")) == []


def test_tools_and_order() -> None:
    assert divergence(recorded("a", "b"), calls("b", "a")) == [
        "tools called: recorded a → b; now b → a (same calls, another order)"
    ]
    assert divergence(recorded("a"), calls()) == ["tools called: recorded a; now none"]


def test_arguments_compared_as_json_when_recorded() -> None:
    then = recorded("quotes", arguments={"ticker": "ACME", "n": 1})
    assert divergence(then, calls("quotes", request='{"n": 1, "ticker": "ACME"}')) == []
    assert divergence(then, calls("quotes", request='{"ticker": "EVIL"}')) == [
        'arguments of the 1st call to quotes: recorded {"n":1,"ticker":"ACME"}, now '
        '{"ticker":"EVIL"}'
    ]
    assert divergence(recorded("quotes"), calls("quotes", request="anything")) == []


def test_many_differences_are_counted() -> None:
    many = recorded(*["t"] * 30, arguments="x")
    lines = divergence(many, calls(*["t"] * 30, request="y"))
    assert len(lines) == MAX_LINES + 1 and lines[-1] == "… and 20 more differences"


def test_a_python_tool_called_by_keyword_matches_arguments_recorded_as_its_inputs() -> None:
    # a LangSmith tool run's inputs ({"ticker": "ACME"}) against get_quote(ticker="ACME"),
    # which the wrapper records as {"args": [], "kwargs": {...}}: the same call
    then = recorded("quotes", arguments={"ticker": "ACME"})
    same = '{"args": [], "kwargs": {"ticker": "ACME"}}'
    assert divergence(then, calls("quotes", request=same)) == []
    other = '{"args": [], "kwargs": {"ticker": "EVIL"}}'
    assert divergence(then, calls("quotes", request=other)) == [
        'arguments of the 1st call to quotes: recorded {"ticker":"ACME"}, now {"ticker":"EVIL"}'
    ]
    # an exported python session recorded the wrapper's own form: still compared as is
    both = recorded("quotes", arguments={"args": ["ACME"], "kwargs": {"n": 1}})
    assert divergence(both, calls("quotes", request='{"args": ["ACME"], "kwargs": {"n": 1}}')) == []
