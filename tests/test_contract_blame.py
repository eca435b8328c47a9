"""Blame under concurrency for contract cells (SPEC §5): an agent that dies under one cell also
breaks every invocation in flight with it; those are judged again one at a time once the agent
is back, so exactly the cell the agent dies under fails."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from support.dying_agent import dying_agent
from support.server import free_port

from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.loader import load_config_text
from flakestorm.reporters import markdown
from flakestorm.results.model import Status

OTHERS = 7

AGENT = dying_agent(
    'b"crash now" in body',  # the input this agent dies on, every time
    takes_down=OTHERS,
    held='"[calm]#" in cell',
)


def test_an_agent_that_dies_under_one_cell_at_concurrency_8_fails_exactly_that_cell(
    tmp_path: Path,
) -> None:
    """Eight cells in flight at once; the agent process exits under the one whose probe it
    cannot take, resetting the seven others' connections. flakestorm starts it again before
    each of the eight is sent again on its own: the seven pass, judged on their own run, and
    the one it dies under again fails."""
    (tmp_path / "agent.py").write_text(AGENT)
    port = free_port()
    invariants = [
        {"id": f"holds-{i}", "type": "output_not_empty", "severity": "high"} for i in range(OTHERS)
    ]
    invariants.insert(
        3,
        {"id": "crasher", "type": "output_not_empty", "severity": "high", "probes": ["crash now"]},
    )
    doc = {
        "agent": {
            "endpoint": f"http://127.0.0.1:{port}/invoke",
            "timeout": 15_000,
            "ready_timeout": 20_000,
            "start": {"command": f"{shlex.quote(sys.executable)} agent.py {port}"},
        },
        "golden_prompts": ["What is AAPL trading at?"],
        "contract": {
            "name": "Blame",
            "invariants": invariants,
            "chaos_matrix": [{"name": "calm"}],
        },
        "advanced": {"concurrency": 8},
    }
    loaded = load_config_text(json.dumps(doc), base_dir=tmp_path)
    notices: list[str] = []
    result = run_phases(
        loaded,
        ["contract"],
        overrides=Overrides(output_dir=str(tmp_path / "reports")),
        on_notice=notices.append,
    )
    log = (tmp_path / "reports" / "agent.log").read_text()
    # it died twice under the crasher (with the others, then alone) and was started again
    assert log.count("agent crashed under crasher[calm]#") == 2, log
    assert log.count("agent crashed") == 2 and log.count("agent up") == 3, log
    cells = {c.invariant_id: c for c in result.phases["contract"].cells}
    failed = {name for name, c in cells.items() if c.status is not Status.PASSED}
    assert failed == {"crasher"}, [(c.id, c.status, c.reason) for c in cells.values()]
    crasher = cells["crasher"]
    assert crasher.status is Status.FAILED
    assert crasher.prompts[0].error == "connection"
    # the seven it took down with it passed, each judged on a run of its own
    for name in (n for n in cells if n != "crasher"):
        (note,) = cells[name].notes
        assert note.startswith("judged on an isolated re-run: the agent went down while other")
    assert crasher.notes and crasher.notes[0].startswith("judged on an isolated re-run")
    assert result.phases["contract"].score.score == round(100 * 2 * OTHERS / (2 * 8), 2)
    assert "judged on an isolated re-run" in markdown.render(result)


DIES_ON_CRASH = dying_agent('b"crash now" in body')


def test_a_replayed_session_the_agent_dies_under_is_blamed_alone(tmp_path: Path) -> None:
    """The replay phase marks the agent down as cells and mutations do: the agent is started
    again before the next session, which passes, instead of meeting a dead agent."""
    (tmp_path / "agent.py").write_text(DIES_ON_CRASH)
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "a-crash.yaml").write_text("id: a-crash\ninput: crash now\n")
    (tmp_path / "sessions" / "b-after.yaml").write_text("id: b-after\ninput: quote ACME\n")
    port = free_port()
    doc = {
        "agent": {
            "endpoint": f"http://127.0.0.1:{port}/invoke",
            "ready_timeout": 20_000,
            "start": {"command": f"{shlex.quote(sys.executable)} agent.py {port}"},
        },
        "golden_prompts": ["quote ACME"],
        "contract": {
            "name": "Replay",
            "invariants": [{"id": "answers", "type": "output_not_empty"}],
            "chaos_matrix": [{"name": "calm"}],
        },
        "replays": {"sessions": [{"file": "sessions/*.yaml"}]},
    }
    loaded = load_config_text(json.dumps(doc), base_dir=tmp_path, env={})
    result = run_phases(
        loaded, ["replay"], overrides=Overrides(output_dir=str(tmp_path / "reports"))
    )
    cells = {c.invariant_id: c for c in result.phases["replay"].cells}
    assert cells["a-crash"].status is Status.FAILED, cells["a-crash"].reason
    assert cells["a-crash"].prompts[0].error == "connection"
    assert cells["b-after"].status is Status.PASSED, cells["b-after"].reason
    log = (tmp_path / "reports" / "agent.log").read_text()
    assert log.count("agent up") == 2 and log.count("agent crashed") == 1, log
