"""The meaning of ``proxy.a2a`` and of the faults on a downstream A2A agent (SPEC §17), each
problem located, with what is valid."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from support.config_text import load, problems

from flakestorm.authoring.preview import summary
from flakestorm.cli import main

HEAD = """\
agent:
  endpoint: http://localhost:8000/chat
golden_prompts: [hi]
contract:
  name: c
  invariants:
    - {id: answers, type: output_not_empty}
  chaos_matrix:
    - name: s
      tool_faults:
"""
PROXY = "proxy:\n  a2a: {booking: http://booking:9000}\n"


def test_faults_on_an_a2a_agent_and_a_count_of_its_calls_are_valid() -> None:
    counted = "    - {id: once, type: no_duplicate_effects, target: booking}\n"
    text = HEAD.replace("  chaos_matrix:", counted + "  chaos_matrix:")
    text += "        - {tool: booking, mode: task_state, state: input-required}\n"
    text += "        - {tool: booking, mode: lost_reply, method: message/send}\n" + PROXY
    loaded = load(text)
    assert loaded.config.proxy is not None
    assert loaded.config.proxy.a2a == {"booking": "http://booking:9000"}
    assert loaded.config.contract is not None
    faults = loaded.config.contract.chaos_matrix[0].tool_faults
    assert faults[0].state is not None and faults[0].state.value == "INPUT_REQUIRED"
    assert faults[1].method is not None and faults[1].method.value == "SendMessage"


def test_task_state_needs_its_state_and_an_a2a_agent() -> None:
    text = HEAD + "        - {tool: quotes, mode: task_state}\n"
    text += "proxy:\n  tools: {quotes: http://q}\n  a2a: {booking: http://b}\n"
    assert problems(text) == [
        "flakestorm.yaml:11:11: contract.chaos_matrix[0].tool_faults[0]: a 'task_state' tool "
        "fault needs 'state'",
        "flakestorm.yaml:11:32: contract.chaos_matrix[0].tool_faults[0].mode: mode 'task_state' "
        "acts on a downstream A2A agent, and 'quotes' is not one of proxy.a2a (booking)",
    ]


def test_a_method_scope_needs_an_a2a_agent_and_a_known_method() -> None:
    text = HEAD + "        - {tool: quotes, mode: error, method: SendMessage}\n"
    text += "proxy:\n  tools: {quotes: http://q}\n"
    assert problems(text) == [
        "flakestorm.yaml:11:47: contract.chaos_matrix[0].tool_faults[0].method: 'method' acts "
        "on a downstream A2A agent, and proxy.a2a names none (add proxy.a2a: {quotes: URL})",
    ]
    bad = HEAD + "        - {tool: booking, mode: error, method: Book}\n" + PROXY
    assert problems(bad) == [
        "flakestorm.yaml:11:48: contract.chaos_matrix[0].tool_faults[0].method: 'Book' is not "
        "valid (expected one of: SendMessage, SendStreamingMessage, GetTask, CancelTask, "
        "SubscribeToTask)"
    ]


def test_an_a2a_route_is_a_url_with_a_name_of_its_own_for_any_agent() -> None:
    text = HEAD + "        - {tool: booking, mode: error}\n"
    text += "proxy:\n  tools: {booking: http://q}\n  a2a: {booking: ftp://b}\n"
    assert problems(text) == [
        "flakestorm.yaml:14:9: proxy.a2a.booking: 'booking' also names a route of proxy.tools "
        "or proxy.mcp: a fault's tool would not say which; give the A2A agent a name of its own",
        "flakestorm.yaml:14:18: proxy.a2a.booking: 'ftp://b' is not an http(s) URL (the "
        "downstream agent's base URL, where its card is at /.well-known/agent-card.json)",
    ]
    python = "agent:\n  type: python\n  endpoint: m:f\n"
    python += HEAD.split("\n", 2)[2] + "        - {tool: booking, mode: error}\n" + PROXY
    load(python)  # a python agent's HTTP clients are routed to the agent's route


def test_validate_lists_each_a2a_agent_and_what_each_fault_acts_on() -> None:
    text = (
        HEAD + "        - {tool: booking, mode: task_state, state: failed, method: SendMessage}\n"
    )
    text += "    - name: t\n      tool_faults: [{tool: booking, mode: lost_reply, calls: '1'}]\n"
    text += "    - name: u\n      tool_faults: [{tool: booking, mode: card, card: missing}]\n"
    text += PROXY
    lines = dict(summary(load(text).config))
    assert lines["a2a"] == (
        "booking at /a2a/booking -> http://booking:9000; s: task_state(FAILED) on its "
        "SendMessage calls; t: lost_reply on every call (calls 1); u: card(missing) on every "
        "fetch of its card"
    )


def test_validate_lists_a_context_attack_on_an_a2a_agent_s_answers() -> None:
    text = HEAD + "        - {tool: booking, mode: slow, delay_ms: 10}\n"
    text += "      context_attacks:\n"
    text += "        - {type: indirect_injection, tool: booking, payloads: [OBEY]}\n"
    text += "        - {type: indirect_injection, tool: other, payloads: [OBEY]}\n"
    text += "proxy:\n  tools: {other: http://other}\n  a2a: {booking: http://booking:9000}\n"
    lines = dict(summary(load(text).config))
    assert lines["a2a"] == (
        "booking at /a2a/booking -> http://booking:9000; s: slow(10 ms) on every call; "
        "s: indirect_injection on the text of its answers"
    )


def test_stream_cut_needs_its_events_and_an_a2a_agent() -> None:
    text = HEAD + "        - {tool: quotes, mode: stream_cut}\n"
    text += "proxy:\n  tools: {quotes: http://q}\n  a2a: {booking: http://b}\n"
    assert problems(text) == [
        "flakestorm.yaml:11:11: contract.chaos_matrix[0].tool_faults[0]: a 'stream_cut' tool "
        "fault needs 'after_events'",
        "flakestorm.yaml:11:32: contract.chaos_matrix[0].tool_faults[0].mode: mode 'stream_cut' "
        "acts on a downstream A2A agent, and 'quotes' is not one of proxy.a2a (booking)",
    ]


def test_a_card_fault_needs_what_the_card_becomes() -> None:
    text = HEAD + "        - {tool: booking, mode: card}\n" + PROXY
    assert problems(text) == [
        "flakestorm.yaml:11:11: contract.chaos_matrix[0].tool_faults[0]: a 'card' tool fault "
        "needs 'card'"
    ]
    load(HEAD + "        - {tool: booking, mode: card, card: v0_3}\n" + PROXY)


def test_validate_json_names_each_agent_and_its_faults(tmp_path: Path) -> None:
    text = HEAD + "        - {tool: booking, mode: lost_reply, method: SendMessage}\n"
    text += "proxy:\n  a2a: {booking: 'http://user:secret@booking:9000'}\n"
    path = tmp_path / "flakestorm.yaml"
    path.write_text(text)
    done = CliRunner().invoke(main, ["validate", "--json", "-c", str(path)])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["a2a"] == [
        {
            "name": "booking",
            "route": "/a2a/booking",
            "url": "http://***@booking:9000",  # its credentials masked
            "faults": [
                {"scenario": "s", "fault": "lost_reply", "acts_on": "its SendMessage calls"}
            ],
        }
    ]
