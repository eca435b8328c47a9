"""The built-in chaos profiles: each is valid chaos and does what its name says."""

from __future__ import annotations

import pytest

from flakestorm.config import Chaos, LlmFaultMode, ToolFaultMode
from flakestorm.errors import UsageError
from flakestorm.loader import PROFILES, load_config_text, load_profile


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_is_valid_chaos_that_a_config_would_accept(name: str) -> None:
    chaos = load_profile(name)
    assert isinstance(chaos, Chaos)
    assert chaos.has_chaos
    # the same faults written into a config pass every semantic check
    doc = chaos.model_dump(mode="json", exclude_defaults=True, by_alias=True)
    loaded = load_config_text(
        '{"agent": {"endpoint": "http://127.0.0.1:1/chat"}, "golden_prompts": ["hi"], '
        f'"chaos": {__import__("json").dumps(doc)}}}'
    )
    assert loaded.config.chaos == chaos


def test_profiles_do_what_their_names_say() -> None:
    assert load_profile("api_outage").tool_faults[0].mode is ToolFaultMode.ERROR
    assert {f.mode for f in load_profile("degraded_llm").llm_faults} == {
        LlmFaultMode.RATE_LIMIT,
        LlmFaultMode.TRUNCATED_RESPONSE,
    }
    assert load_profile("indirect_injection").context_attacks[0].payloads
    flaky = load_profile("flaky_dependency")
    assert [(f.mode, f.calls) for f in flaky.tool_faults] == [(ToolFaultMode.ERROR, "1-2")]
    assert [(f.mode, f.calls) for f in flaky.llm_faults] == [(LlmFaultMode.RATE_LIMIT, "1")]
    healing = load_profile("healing_outage")
    assert [(f.mode, f.window_ms) for f in healing.tool_faults] == [
        (ToolFaultMode.ERROR, (0, 2000))
    ]


def test_an_unknown_profile_names_the_valid_ones_and_suggests() -> None:
    with pytest.raises(UsageError) as info:
        load_profile("api_outtage")
    message = str(info.value)
    assert "did you mean 'api_outage'?" in message
    assert all(name in message for name in PROFILES)
