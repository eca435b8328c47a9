"""validate_model: pydantic errors worded for people, about the document's nodes, for any model.

The config file's wording is pinned by the fixtures (test_loader.py); these tests pin what the
other users of :func:`validate_model` rely on: documents that are not flakestorm.yaml, the
paths of the document (not the model's), and secrets never quoted.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from flakestorm.config import AgentConfig, Faults, ToolFault
from flakestorm.structure import FieldProblem, InvalidData, validate_alone, validate_model


def _problems(model: type[BaseModel], data: Any, **kw: Any) -> list[str]:
    with pytest.raises(InvalidData) as info:
        validate_model(model, data, **kw)
    return [str(p) for p in info.value.problems]


def test_valid_data_is_the_model() -> None:
    faults = validate_model(Faults, {"tool_faults": [{"tool": "w", "mode": "error"}]})
    assert faults.tool_faults == [ToolFault(tool="w", mode="error")]


def test_problems_name_the_document_node_and_what_is_valid() -> None:
    doc = {
        "tool_faults": [{"tool": "w", "mode": "eror"}, 5],
        "context_attacks": {"overflow": {"inject_tokenz": 1}},
        "lm_faults": [],
    }
    with pytest.raises(InvalidData) as info:
        validate_model(Faults, doc)
    assert info.value.problems == (
        FieldProblem(
            ("tool_faults", 0, "mode"),
            "'eror' is not valid (expected one of: timeout, error, malformed, slow, "
            "malicious_response, empty, tool_removed, session_expired, task_state, lost_reply, "
            "stream_cut, card; did you mean 'error'?)",
        ),
        FieldProblem(("tool_faults", 1), "expected a mapping, got an integer"),
        FieldProblem(
            ("context_attacks", "overflow", "inject_tokenz"),
            "unknown key 'inject_tokenz' (did you mean 'inject_tokens'?; valid keys: "
            "inject_tokens, tool, calls, every, window_ms)",
            key=True,
        ),
        FieldProblem(
            ("lm_faults",),
            "unknown key 'lm_faults' (did you mean 'llm_faults'?; valid keys: tool_faults, "
            "llm_faults, context_attacks)",
            key=True,
        ),
    )
    assert str(info.value) == "; ".join(str(p) for p in info.value.problems)
    assert str(info.value).startswith("tool_faults[0].mode: 'eror' is not valid")


def test_a_missing_field_is_named_on_its_parent() -> None:
    assert _problems(Faults, {"tool_faults": [{"mode": "error"}]}) == [
        "tool_faults[0]: missing required field 'tool'"
    ]
    assert _problems(AgentConfig, {}) == ["missing required field 'endpoint'"]


def test_a_boolean_for_a_number_is_reported_with_the_models_other_problems() -> None:
    # one check per model refuses booleans for numbers (and numbers for booleans); the rest
    # of that model is still validated, and every problem is listed in the fields' order
    found = _problems(
        AgentConfig,
        {"endpoint": "http://a", "method": "DELETE", "timeout": True, "ready_timeout": -1},
    )
    assert found == [
        "method: 'DELETE' is not valid (expected one of: GET, POST, PUT, PATCH)",
        "timeout: expected an integer, got a boolean true",
        "ready_timeout: must be greater than 0, got -1",
    ]
    assert _problems(AgentConfig, {"endpoint": "http://a", "timeout": True, "tools": [3]}) == [
        "timeout: expected an integer, got a boolean true",
        "tools[0]: expected a string, got an integer",
    ]


def test_no_pydantic_wording() -> None:
    found = _problems(AgentConfig, {"endpoint": [], "timeout": "soon", "headers": 3, "method": 7})
    assert found and all("Input" not in p and "pydantic" not in p for p in found)


def test_secrets_are_never_quoted() -> None:
    found = _problems(
        AgentConfig, {"endpoint": "x", "type": "from-the-env-1234"}, secrets={"from-the-env-1234"}
    )
    assert found == ["type: '***' is not valid (expected one of: http, python)"]


def test_source_text_of_scalars_suggests_quotes() -> None:
    data = {"endpoint": "http://x", "headers": {"X-Id": 5}}
    assert _problems(AgentConfig, data) == ["headers.X-Id: expected a string, got an integer"]
    assert _problems(AgentConfig, data, scalars={("headers", "X-Id"): "5"}) == [
        "headers.X-Id: expected a string, got an integer (write '5' in quotes if you mean the text)"
    ]


# --------------------------------------------------------------------------- one part alone


def test_a_part_alone_is_its_model_or_none() -> None:
    valid = validate_alone(AgentConfig, {"endpoint": "http://a", "timeout": 5})
    assert valid is not None and valid.value == AgentConfig(endpoint="http://a", timeout=5)
    assert validate_alone(AgentConfig, {"endpoint": "http://a", "timeout": -5}) is None
    assert validate_alone(AgentConfig, {"endpoint": "http://a", "tiemout": -5}) is None


def test_a_part_with_misspelt_keys_is_read_as_meant() -> None:
    data = {"endpont": "http://a", "tiemout": 5, "bogus": 1}
    valid = validate_alone(AgentConfig, data)
    assert valid is not None and valid.value == AgentConfig(endpoint="http://a", timeout=5)
    assert data == {"endpont": "http://a", "tiemout": 5, "bogus": 1}  # not changed
    # a suggestion that is set already wins: the misspelt key is left out
    valid = validate_alone(AgentConfig, {"endpoint": "http://a", "endpont": "http://b"})
    assert valid is not None and valid.value.endpoint == "http://a"
    # deep in a fault list, in the dict form of context attacks too
    faults = {
        "tool_faults": [{"tool": "w", "mode": "slow", "delay_m": 5}],
        "context_attacks": {"overflow": {"inject_tokns": 9}},
    }
    valid = validate_alone(Faults, faults)
    assert valid is not None
    assert valid.value.tool_faults[0].delay_ms == 5
    assert valid.value.context_attacks[0].inject_tokens == 9
