"""Tool fault modes: one unit per mode, and what each does to an HTTP call, a ``CONNECT``
tunnel and a python call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flakestorm.chaos.faults.modes import CALL_THROUGH, DEFAULT_TIMEOUT_MS
from flakestorm.chaos.faults.tool_modes import (
    DEFAULT_SLOW_MS,
    MALFORMED_TEXT,
    TOOL_MODES,
    InjectedResponse,
    Tunnel,
    TunnelAction,
)
from flakestorm.config import ToolFault, ToolFaultMode
from flakestorm.errors import ToolFaultError


def fault_response(fault: ToolFault) -> InjectedResponse | None:
    return TOOL_MODES[fault.mode].response(fault)


def slow_delay_ms(fault: ToolFault) -> int:
    return TOOL_MODES[fault.mode].delay_ms(fault)


def tool_fault(mode: str, **fields: Any) -> ToolFault:
    return ToolFault(tool="market_data_api", mode=ToolFaultMode(mode), **fields)


def header(response: InjectedResponse, name: str) -> str | None:
    return next((v for k, v in response.headers if k.lower() == name.lower()), None)


def test_every_tool_fault_mode_has_a_unit() -> None:
    assert set(TOOL_MODES) == set(ToolFaultMode)


# --------------------------------------------------------------------------- fault responses


def test_error_is_a_json_error_body_with_the_status() -> None:
    response = fault_response(tool_fault("error"))
    assert response is not None
    assert response.status == 503
    assert header(response, "content-type") == "application/json"
    assert json.loads(response.body) == {"error": {"code": 503, "message": "Service Unavailable"}}
    assert not response.drop and response.delay_ms == 0


def test_error_with_code_and_message() -> None:
    response = fault_response(tool_fault("error", error_code=429, message="slow down"))
    assert response is not None and response.status == 429
    assert json.loads(response.body)["error"] == {"code": 429, "message": "slow down"}
    assert header(response, "retry-after") == "1"
    unknown = fault_response(tool_fault("error", error_code=599))
    assert unknown is not None and json.loads(unknown.body)["error"]["message"] == "Error"


def test_timeout_holds_then_drops() -> None:
    response = fault_response(tool_fault("timeout"))
    assert response is not None and response.drop
    assert response.delay_ms == DEFAULT_TIMEOUT_MS == 30_000
    held = fault_response(tool_fault("timeout", delay_ms=1234))
    assert held is not None and held.delay_ms == 1234 and held.drop


def test_malformed_is_200_json_typed_and_unparseable() -> None:
    response = fault_response(tool_fault("malformed"))
    assert response is not None and response.status == 200
    assert header(response, "content-type") == "application/json"
    with pytest.raises(ValueError):
        json.loads(response.body)
    with pytest.raises(ValueError):
        json.loads(response.body.decode("utf-8", "replace"))
    with pytest.raises(ValueError):
        json.loads(MALFORMED_TEXT)


@pytest.mark.parametrize(
    ("payload", "content_type", "body"),
    [
        ({"price": 0, "note": "x"}, "application/json", b'{"price": 0, "note": "x"}'),
        ([1, "a"], "application/json", b'[1, "a"]'),
        ('{"ok": true}', "application/json", b'{"ok": true}'),
        ("plain words", "text/plain; charset=utf-8", b"plain words"),
    ],
)
def test_malicious_response_serves_the_payload(
    payload: Any, content_type: str, body: bytes
) -> None:
    response = fault_response(tool_fault("malicious_response", payload=payload))
    assert response is not None and response.status == 200
    assert header(response, "content-type") == content_type
    assert response.body == body


def test_slow_is_forwarded_by_the_proxy() -> None:
    fault = tool_fault("slow", delay_ms=750)
    assert fault_response(fault) is None
    assert slow_delay_ms(fault) == 750
    assert slow_delay_ms(tool_fault("slow")) == DEFAULT_SLOW_MS


# --------------------------------------------------------------------------- CONNECT tunnels


@pytest.mark.parametrize(
    ("mode", "fields", "tunnel"),
    [
        ("error", {}, Tunnel(TunnelAction.REFUSE)),
        ("timeout", {}, Tunnel(TunnelAction.DROP, DEFAULT_TIMEOUT_MS)),
        ("timeout", {"delay_ms": 40}, Tunnel(TunnelAction.DROP, 40)),
        ("slow", {"delay_ms": 750}, Tunnel(TunnelAction.DELAY, 750)),
        ("malformed", {}, Tunnel(TunnelAction.RESET)),
        ("malicious_response", {"payload": "x"}, Tunnel(TunnelAction.RESET)),
    ],
)
def test_tunnel_actions(mode: str, fields: dict[str, Any], tunnel: Tunnel) -> None:
    fault = tool_fault(mode, **fields)
    assert TOOL_MODES[fault.mode].tunnel(fault) == tunnel


# --------------------------------------------------------------------------- python plans


def test_python_plans() -> None:
    error = TOOL_MODES[ToolFaultMode.ERROR].plan(tool_fault("error", error_code=502), "quote")
    assert isinstance(error.error, ToolFaultError) and error.error.error_code == 502
    assert error.error.message == "Bad Gateway" and error.delay_s == 0
    timeout = TOOL_MODES[ToolFaultMode.TIMEOUT].plan(tool_fault("timeout"), "quote")
    assert isinstance(timeout.error, TimeoutError) and timeout.delay_s == 30.0
    assert str(timeout.error) == "quote timed out after 30000 ms"
    slow = TOOL_MODES[ToolFaultMode.SLOW].plan(tool_fault("slow", delay_ms=250), "quote")
    assert slow.delay_s == 0.25 and slow.error is None and slow.value is CALL_THROUGH
    malformed = TOOL_MODES[ToolFaultMode.MALFORMED].plan(tool_fault("malformed"), "quote")
    assert malformed.value == MALFORMED_TEXT
    payload = {"note": ["sell"]}
    fault = tool_fault("malicious_response", payload=payload)
    first = TOOL_MODES[fault.mode].plan(fault, "quote").value
    assert first == payload and first is not fault.payload  # a fresh copy each call


FIELDS: dict[ToolFaultMode, dict[str, Any]] = {
    ToolFaultMode.SLOW: {"delay_ms": 100},
    ToolFaultMode.MALICIOUS_RESPONSE: {"payload": "obey"},
}


@pytest.mark.parametrize("mode", list(ToolFaultMode), ids=lambda m: m.value)
def test_a_mode_replaces_the_result_exactly_when_it_answers_instead_of_the_tool(
    mode: ToolFaultMode,
) -> None:
    # the fault book decides from ``replaces_result`` whether tool-result attacks still have a
    # result to poison; the proxy and the wrappers act from response() and plan()
    fault = tool_fault(mode.value, **FIELDS.get(mode, {}))
    unit = TOOL_MODES[mode]
    plan = unit.plan(fault, "market_data_api")
    calls_through = plan.error is None and plan.value is CALL_THROUGH
    assert unit.replaces_result is (unit.response(fault) is not None)
    assert unit.replaces_result is not calls_through
