"""LLM fault modes: one unit per mode; the replies that replace the upstream call
(``rate_limit``, ``timeout``), the python plans, and the labels."""

from __future__ import annotations

import json
import random

import pytest
from support.llm_shapes import API_IDS, APIS, LENGTH, NATURAL, Api, apply, baseline, fault

from flakestorm.chaos.faults.labels import llm_fault_label
from flakestorm.chaos.faults.modes import CALL_THROUGH, DEFAULT_TIMEOUT_MS
from flakestorm.chaos.llm import (
    DEFAULT_MAX_TOKENS,
    LLM_MODES,
    RETRY_AFTER_S,
    STALL_COMMENT,
    Provider,
    count_tokens,
    drift_text,
    fault_before_upstream,
    rate_limit_body,
    truncate_text,
)
from flakestorm.config import DriftType, LlmFault, LlmFaultMode
from flakestorm.errors import RateLimitFaultError

apis = pytest.mark.parametrize("api", APIS, ids=API_IDS)
forms = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


def test_every_llm_fault_mode_has_a_unit() -> None:
    assert set(LLM_MODES) == set(LlmFaultMode)


# --------------------------------------------------------------------------- modes × shapes × forms
# Each content mode does the same to every API shape, on a whole JSON reply
# (llm/replies.py) and on an SSE stream (llm/streams.py).


@apis
@forms
def test_untouched_baseline_reads_back(api: Api, stream: bool) -> None:
    seen = baseline(api, stream)
    assert seen.text.startswith("Answer to")
    assert seen.stop == NATURAL[api.name]


@apis
@forms
def test_truncated_response_cuts_to_max_tokens_and_stops_on_length(api: Api, stream: bool) -> None:
    seen = apply(api, fault("truncated_response", max_tokens=6), stream)
    full = baseline(api, stream).text
    assert seen.text == truncate_text(full, 6)
    assert count_tokens(seen.text) == 6
    assert seen.stop == LENGTH.get(api.name, "max_tokens")
    if seen.output_tokens is not None:
        assert seen.output_tokens == 6


@apis
@forms
def test_truncated_response_default_budget(api: Api, stream: bool) -> None:
    seen = apply(api, fault("truncated_response"), stream)
    assert count_tokens(seen.text) == DEFAULT_MAX_TOKENS


@apis
@forms
def test_truncated_response_to_zero_tokens(api: Api, stream: bool) -> None:
    seen = apply(api, fault("truncated_response", max_tokens=0), stream)
    assert seen.text == ""
    assert seen.stop == LENGTH.get(api.name, "max_tokens")


@apis
@forms
def test_empty_gives_empty_content_and_a_normal_stop(api: Api, stream: bool) -> None:
    seen = apply(api, fault("empty"), stream)
    assert seen.text == ""
    assert seen.stop == NATURAL[api.name]
    if seen.output_tokens is not None:
        assert seen.output_tokens == 0


@apis
@forms
def test_garbage_replaces_content_with_noise(api: Api, stream: bool) -> None:
    seen = apply(api, fault("garbage"), stream)
    full = baseline(api, stream).text
    assert seen.text and seen.text != full
    assert not set(full.split()) & set(seen.text.split()) - {"|"}
    assert seen.stop == NATURAL[api.name]
    assert apply(api, fault("garbage"), stream).text == seen.text  # same seed, same garbage


@apis
@forms
@pytest.mark.parametrize("drift", list(DriftType))
def test_response_drift_rewrites_content(api: Api, drift: DriftType, stream: bool) -> None:
    seen = apply(api, fault("response_drift", drift_type=drift), stream)
    full = baseline(api, stream).text
    # the RNG drift_text sees: nothing is drawn before it when the drift type is given
    assert seen.text == drift_text(full, drift, random.Random(7))
    if drift is not DriftType.JSON_FIELD_RENAME:  # prose without identifiers stays as it is
        assert seen.text != full
    assert seen.stop == NATURAL[api.name]
    if seen.output_tokens is not None:
        assert seen.output_tokens == count_tokens(seen.text)


@apis
@forms
def test_response_drift_without_type_draws_one(api: Api, stream: bool) -> None:
    seen = apply(api, fault("response_drift"), stream)
    assert seen.text != baseline(api, stream).text


# --------------------------------------------------------------------------- rate limit, timeout


@pytest.mark.parametrize("mode", ["truncated_response", "empty", "garbage", "response_drift"])
def test_content_modes_need_the_upstream_reply(mode: str) -> None:
    for provider in Provider:
        for streaming in (False, True):
            assert fault_before_upstream(fault(mode), provider, streaming) is None


def test_rate_limit_openai_shape() -> None:
    got = fault_before_upstream(fault("rate_limit"), Provider.OPENAI, streaming=True)
    assert got is not None and got.body is not None
    assert got.status == 429
    headers = dict(got.headers)
    assert headers["retry-after"] == str(RETRY_AFTER_S)
    assert headers["content-type"] == "application/json"
    error = json.loads(got.body)["error"]
    assert error["code"] == "rate_limit_exceeded"
    assert error["type"] == "requests"
    assert error["param"] is None and "Rate limit" in error["message"]
    assert got.body == rate_limit_body(Provider.OPENAI)


def test_rate_limit_anthropic_shape() -> None:
    got = fault_before_upstream(fault("rate_limit"), Provider.ANTHROPIC, streaming=False)
    assert got is not None and got.body is not None
    doc = json.loads(got.body)
    assert doc["type"] == "error"
    assert doc["error"]["type"] == "rate_limit_error"
    assert doc["error"]["message"]


def test_rate_limit_delay_sets_retry_after_in_whole_seconds() -> None:
    got = fault_before_upstream(fault("rate_limit", delay_ms=2500), Provider.OPENAI, False)
    assert got is not None
    assert dict(got.headers)["retry-after"] == "3"


def test_timeout_drops_after_delay() -> None:
    got = fault_before_upstream(fault("timeout"), Provider.OPENAI, streaming=False)
    assert got is not None
    assert got.drop and got.delay_ms == DEFAULT_TIMEOUT_MS and got.body is None


def test_timeout_on_a_stream_opens_it_then_stalls() -> None:
    got = fault_before_upstream(fault("timeout", delay_ms=50), Provider.ANTHROPIC, streaming=True)
    assert got is not None
    assert got.status == 200 and not got.drop
    assert got.chunks == (STALL_COMMENT,) and got.stall_after_chunks == 1 and got.delay_ms == 50
    assert dict(got.headers)["content-type"].startswith("text/event-stream")


# --------------------------------------------------------------------------- python plans


def test_python_plans() -> None:
    limited = LLM_MODES[LlmFaultMode.RATE_LIMIT].plan(fault("rate_limit"))
    assert isinstance(limited.error, RateLimitFaultError) and limited.delay_s == 0
    timeout = LLM_MODES[LlmFaultMode.TIMEOUT].plan(fault("timeout", delay_ms=1500))
    assert isinstance(timeout.error, TimeoutError) and timeout.delay_s == 1.5
    assert str(timeout.error) == "the LLM call timed out after 1500 ms"
    assert LLM_MODES[LlmFaultMode.TIMEOUT].plan(fault("timeout")).delay_s == 30.0
    for mode in ("truncated_response", "empty", "garbage", "response_drift"):
        plan = LLM_MODES[LlmFaultMode(mode)].plan(fault(mode))
        assert plan.error is None and plan.value is CALL_THROUGH and plan.delay_s == 0


# --------------------------------------------------------------------------- labels


def test_labels_name_the_tokens_or_the_drift_type_the_fault_carries() -> None:
    cut = LlmFault.model_validate({"mode": "truncated_response", "max_tokens": 5})
    drift = LlmFault.model_validate({"mode": "response_drift", "drift_type": "tone_shift"})
    assert llm_fault_label(0, cut) == "llm_faults[0] truncated_response(5 tokens)"
    assert llm_fault_label(1, drift) == "llm_faults[1] response_drift(tone_shift)"
    assert llm_fault_label(2, fault("garbage")) == "llm_faults[2] garbage"
    # a control-API scenario is not checked for meaning: the label names what it carries
    odd = LlmFault.model_validate({"mode": "garbage", "max_tokens": 3})
    assert llm_fault_label(0, odd) == "llm_faults[0] garbage(3 tokens)"
