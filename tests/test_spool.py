"""Results streamed to disk as they finish (SPEC §9: memory flat in the run's size): a phase's
cells and mutations read back from the spool, redacted, and reports rendered from them as from
a tuple."""

from __future__ import annotations

import gc
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from golden.cases import CASES as GOLDEN_CASES
from golden.cases import mutation as golden_mutation_run

from flakestorm.engine.runner import Overrides, run_phases
from flakestorm.loader import load_config
from flakestorm.redaction import Redactor
from flakestorm.reporters import json as json_report
from flakestorm.reporters.public import public
from flakestorm.reporters.registry import REPORTS, write_reports
from flakestorm.results import spool as spool_module
from flakestorm.results.model import (
    CellResult,
    MutationResult,
    Status,
    from_document,
    to_document,
)
from flakestorm.results.scoring import score_mutations
from flakestorm.results.spool import CELLS, MUTATIONS, Spool, Spooled
from flakestorm.results.tally import Tally


def cell(index: int, reason: str = "held") -> CellResult:
    return CellResult(index, f"inv{index}", "calm", "high", Status.PASSED, reason)


def test_cells_come_back_in_index_order_and_a_rewrite_replaces(tmp_path: Path) -> None:
    spool = Spool(CELLS, tmp_path, Redactor(["hunter22"]))
    spool.extend([cell(2), cell(0, "password hunter22"), cell(1)])
    spool.add(cell(2, "settled"))
    cells = spool.items
    assert [c.index for c in cells] == [0, 1, 2]
    assert cells[0].reason == "password ***"
    assert cells[-1].reason == "settled"
    assert cells == (cell(0, "password ***"), cell(1), cell(2, "settled"))
    assert cells[1:] == (cell(1), cell(2, "settled"))
    assert list(tmp_path.iterdir()) == []  # an anonymous file: nothing is left behind


def test_the_spool_closes_its_file_when_its_cells_are_gone(tmp_path: Path) -> None:
    spool = Spool(CELLS, tmp_path)
    spool.add(cell(0))
    handle = spool._file
    del spool
    gc.collect()
    assert handle.closed


AGENT = """
def answer(prompt):
    return "the token is s3cr3t-value " + prompt
"""


def test_a_runs_cells_are_spooled_redacted_and_reported_as_usual(tmp_path: Path) -> None:
    (tmp_path / "spool_agent.py").write_text(AGENT)
    doc = {
        "agent": {"type": "python", "endpoint": "spool_agent:answer"},
        "golden_prompts": ["one", "two", "${TOKEN}"],
        "contract": {
            "name": "c",
            "invariants": [
                {"id": "answers", "type": "output_not_empty"},
                {"id": "short", "type": "contains", "value": "nothing"},
            ],
            "chaos_matrix": [
                {"name": "calm"},
                {"name": "p", "context_attacks": [{"type": "memory_poisoning", "payload": "x"}]},
            ],
        },
    }
    (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
    loaded = load_config(tmp_path / "flakestorm.yaml", env={"TOKEN": "s3cr3t-value"})
    out = tmp_path / "out"
    result = run_phases(loaded, ["contract"], Overrides(output_dir=str(out)))
    cells = result.phases["contract"].cells
    assert isinstance(cells, Spooled)
    assert [c.id for c in cells] == ["answers[calm]", "answers[p]", "short[calm]", "short[p]"]
    assert "s3cr3t" not in str([p.output for c in cells for p in c.prompts])
    assert result.phases["contract"].score.counts["failed"] == 2

    streamed = io.StringIO()
    json_report.write(result, streamed)
    assert streamed.getvalue() == json_report.render(result)
    write_reports(result, out)
    written = (out / "results.json").read_text()
    assert "s3cr3t" not in written
    again = from_document(json.loads(written))
    assert again.phases["contract"].cells == tuple(cells)
    assert to_document(again) == json.loads(written)
    assert sorted(p.name for p in out.iterdir()) == [
        "junit.xml",
        "report.html",
        "results.json",
        "summary.md",
    ]


def test_a_run_whose_reports_are_not_written_leaves_no_report_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spools live in the report directory (``output.dir``, default
    ``flakestorm-reports/`` in the working directory) while the run lasts; a run whose reports
    are not written does not leave it behind empty, and writing them makes it again."""
    (tmp_path / "spool_agent.py").write_text(AGENT)
    doc = {
        "agent": {"type": "python", "endpoint": "spool_agent:answer"},
        "golden_prompts": ["one"],
        "contract": {
            "name": "c",
            "invariants": [{"id": "answers", "type": "output_not_empty"}],
            "chaos_matrix": [{"name": "calm"}],
        },
    }
    (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_phases(load_config(tmp_path / "flakestorm.yaml", env={}), ["contract"])
    assert isinstance(result.phases["contract"].cells, Spooled)
    assert not (tmp_path / "flakestorm-reports").exists()
    assert [c.status for c in result.phases["contract"].cells] == [Status.PASSED]
    write_reports(result, tmp_path / "flakestorm-reports")
    assert (tmp_path / "flakestorm-reports" / "results.json").is_file()


def mutation(index: int, reason: str = "held all 1 invariant") -> MutationResult:
    return MutationResult(
        index=index,
        id=f"typos#0.{index}",
        type="typos",
        transform="swap",
        generator="templates",
        weight=1.0,
        original="what is the price?",
        sent="waht is the price?",
        request=None,
        changes=(),
        status=Status.PASSED,
        reason=reason,
        output="42",
    )


def test_mutations_come_back_in_index_order_redacted(tmp_path: Path) -> None:
    spool = Spool(MUTATIONS, tmp_path, Redactor(["hunter22"]))
    spool.extend([mutation(2), mutation(0, "said hunter22"), mutation(1)])
    mutations = spool.items
    assert [m.index for m in mutations] == [0, 1, 2]
    assert mutations == (mutation(0, "said ***"), mutation(1), mutation(2))
    assert list(tmp_path.iterdir()) == []


MUTATION_AGENT = """
def answer(prompt):
    if "1" in prompt:
        return "write to jane.doe@example.com, token s3cr3t-value, about " + prompt
    return "fine: " + prompt
"""


def test_a_spooled_mutation_phase_renders_every_report_as_an_in_memory_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "mutation_agent.py").write_text(MUTATION_AGENT)
    doc = {
        "agent": {"type": "python", "endpoint": "mutation_agent:answer"},
        "golden_prompts": ["price of ticker 1?", "price of ticker 2?", "price of ticker 3?"],
        "invariants": [
            {"type": "excludes_pii", "severity": "critical"},
            {"type": "contains", "value": "fine"},
            {"type": "excludes_pattern", "patterns": ["${TOKEN}"]},
        ],
        "mutations": {"types": ["noise", "prompt_injection", "encoding_attacks"], "count": 6},
    }
    (tmp_path / "flakestorm.yaml").write_text(json.dumps(doc))
    loaded = load_config(tmp_path / "flakestorm.yaml", env={"TOKEN": "s3cr3t-value"})
    spooled = run_phases(loaded, ["mutation"], Overrides(output_dir=str(tmp_path / "out")))
    outcome = spooled.phases["mutation"]
    assert isinstance(outcome.mutations, Spooled)
    assert [m.index for m in outcome.mutations] == list(range(18))
    assert {m.status for m in outcome.mutations} == {Status.PASSED, Status.FAILED}
    assert "s3cr3t" not in str(list(outcome.mutations))  # redacted as they were written
    held = replace(
        spooled, phases={"mutation": replace(outcome, mutations=tuple(outcome.mutations))}
    )

    for name, report in REPORTS.items():
        assert report.render(spooled) == report.render(held), name
    assert public(spooled).changed == public(held).changed > 0
    streamed = io.StringIO()
    json_report.write(spooled, streamed)
    assert streamed.getvalue() == json_report.render(held)
    again = from_document(json.loads(streamed.getvalue()))
    assert again.phases["mutation"].mutations == held.phases["mutation"].mutations
    assert again.phases["mutation"].score == outcome.score
    # what was counted as the mutations were spooled is a recount of them, read back or not
    assert outcome.mutations.tally == Tally.of(again.phases["mutation"].mutations)


def test_a_spools_tally_is_a_recount_of_its_items_after_rewrites_and_redaction(
    tmp_path: Path,
) -> None:
    spool = Spool(MUTATIONS, tmp_path, Redactor(["hunter22"]))

    def made(index: int, status: Status, kind: str = "typos", **fields: object) -> MutationResult:
        return replace(
            mutation(index), id=f"{kind}#hunter22.{index}", type=kind, status=status, **fields
        )

    spool.extend(
        [
            made(3, Status.ERRORED, "noise", latency_ms=2.5),
            made(0, Status.FAILED, failed_invariants=("no-hunter22",), latency_ms=1.25),
            made(2, Status.PASSED, "noise", weight=2.0, isolated=True),
            made(1, Status.NOT_RUN),
            made(4, Status.FAILED, "noise", failed_invariants=("other",), isolated=True),
        ]
    )
    # a rewrite counts the new item in place of the old one: the failure passed after all
    spool.add(made(4, Status.PASSED, "noise", isolated=True))
    tally = spool.tally
    assert tally == Tally.of(tuple(spool.items))
    assert tally.count == 5
    assert tally.statuses == {"passed": 2, "failed": 1, "errored": 1, "not_run": 1}
    assert tally.failed() == [0, 3]
    assert tally.critical(["no-***"]) == ("typos#***.0",)  # redacted as the items are
    assert tally.isolated == {2: True, 4: True}
    assert tally.microseconds == 3750
    assert (tally.earned, tally.total) == (3.0, 5.0)
    # per type: its first index (the table's order), mutations, scored, passed
    assert {t: (k.first, k.items, k.scored, k.passed) for t, k in tally.types.items()} == {
        "noise": (2, 3, 3, 2),
        "typos": (0, 2, 1, 0),
    }
    assert spool.items.at(3).status is Status.ERRORED


def test_a_golden_mutation_run_spooled_out_of_order_and_rewritten_reports_as_held(
    tmp_path: Path,
) -> None:
    held = golden_mutation_run()
    outcome = held.phases["mutation"]
    spool = Spool(MUTATIONS, tmp_path)
    for m in reversed(outcome.mutations):  # as a stopped run first left them…
        spool.add(replace(m, status=Status.NOT_RUN, reason="not run", failed_invariants=()))
    for m in outcome.mutations:  # …then final: each counted out, then in again
        spool.add(m)
    spooled = replace(held, phases={"mutation": replace(outcome, mutations=spool.items)})
    assert score_mutations(spool.items, ["no-pwn"]) == score_mutations(
        outcome.mutations, ["no-pwn"]
    )
    for name, report in REPORTS.items():
        assert report.render(spooled) == report.render(held), name


def test_lines_past_the_write_buffer_come_back_from_the_file_and_from_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "_BUFFER", 500)  # a few lines at a time go to the file
    spool = Spool(CELLS, tmp_path)
    cells = [cell(i, "held " * i) for i in range(50)]
    spool.extend(cells[::-1])
    spool.add(cell(7, "settled"))
    assert 0 < spool._written < spool._end  # some in the file, the last ones not yet
    assert spool.items == tuple(cell(7, "settled") if c.index == 7 else c for c in cells)


@pytest.mark.parametrize("block", [1, 200, 1 << 18])
@pytest.mark.parametrize("shards", [1, 4, 40])
def test_items_read_in_order_come_back_from_runs_of_blocks_as_read_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int, shards: int
) -> None:
    monkeypatch.setattr(spool_module, "_BUFFER", 500)
    monkeypatch.setattr(spool_module, "_BLOCK", block)  # 1: each line longer than a block
    spool = Spool(CELLS, tmp_path)
    cells = [cell(i, "held " * (i % 7)) for i in range(120)]
    for k in range(shards):  # as a merge writes its shards: each in order, one after another
        for item in cells[k::shards]:
            spool.add(item, json.dumps(CELLS.encode(item)))
    spool.add(cell(5, "settled"))  # an item written again: its line at the end
    expected = [cell(5, "settled") if c.index == 5 else c for c in cells]
    seen = []
    for item in spool.items:
        seen.append(item)
        if item.index == 10:  # a line written while they are read is read too
            spool.add(cell(100, "late"))
    expected[100] = cell(100, "late")
    assert seen == expected
    assert list(spool.items.documents()) == [CELLS.encode(c) for c in expected]
    assert [json.loads(d) if isinstance(d, str) else d for d in spool.items.written()] == [
        CELLS.encode(c) for c in expected
    ]


def _hostile_cells(start: int) -> list[CellResult]:
    """Cells whose cases the reports make from their documents alone, and one they do not
    (a conversation's), with agent output and names a report must escape."""
    from golden.cases import INJECTED_SCRIPT, RTL, hostile_output

    from flakestorm.results.model import PromptResult

    def prompt(latency_ms: float, run: int = 0, turn: int | None = None) -> PromptResult:
        conversation = None if turn is None else 0
        output = hostile_output()
        return PromptResult("p", "p", run, True, "ok", output, latency_ms, 200, None, "",
                            conversation=conversation, turn=turn)  # fmt: skip

    evil = f'x"&\t{RTL}\x1b::{INJECTED_SCRIPT}'
    return [
        CellResult(start, f"inv{evil}", f"scn{evil}]", "low", Status.PASSED, evil,
                   runs_passed=1, runs_total=1, prompts=(prompt(0.0),),
                   faults_fired=(evil, "tool_error(a, 503)")),
        CellResult(start + 1, "mentions_refund", evil, "critical", Status.SKIPPED, ""),
        CellResult(start + 2, "unlisted", "baseline", "high", Status.NOT_RUN, f"stopped {evil}"),
        CellResult(start + 3, "fast", evil, "low", Status.PASSED, "passed 2 of 3 runs",
                   flaky=True, runs_passed=2, runs_total=3,
                   prompts=(prompt(1.5), prompt(2.25, run=1))),
        CellResult(start + 4, "fast", "talk", "low", Status.PASSED, "held on every turn",
                   runs_passed=1, runs_total=1,
                   prompts=(prompt(3.0, turn=1), prompt(4.0, turn=2))),
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_every_golden_case_with_its_cells_spooled_reports_as_held(
    tmp_path: Path, name: str
) -> None:
    held = GOLDEN_CASES[name]()
    phases = {}
    for phase, outcome in held.phases.items():
        cells = [*outcome.cells, *_hostile_cells(len(outcome.cells))]
        spool = Spool(CELLS, tmp_path)
        for c in reversed(cells):  # out of order, some written twice: read from several runs
            spool.add(c)
        spool.extend(cells[::2])
        phases[phase] = (replace(outcome, cells=tuple(cells)), replace(outcome, cells=spool.items))
    held = replace(held, phases={phase: pair[0] for phase, pair in phases.items()})
    spooled = replace(held, phases={phase: pair[1] for phase, pair in phases.items()})
    for report_name, report in REPORTS.items():
        assert report.render(spooled) == report.render(held), report_name


def test_failed_cells_are_listed_critical_first_and_read_only_as_a_report_shows_them(
    tmp_path: Path,
) -> None:
    from flakestorm.reporters.view import all_bad_cells, bad_cells
    from flakestorm.results.model import PhaseOutcome, PhaseScore, RunResult

    made = [
        CellResult(
            i,
            f"inv{i}",
            "calm",
            "critical" if i % 4 == 0 else "high",
            Status.PASSED if i % 3 == 0 else Status.FAILED,
            "why",
        )
        for i in range(40)
    ]
    spool = Spool(CELLS, tmp_path)
    spool.extend(list(reversed(made)))
    failing = [c for c in made if c.status is Status.FAILED]
    expected = [c.index for c in sorted(failing, key=lambda c: (c.severity != "critical", c.index))]
    score = PhaseScore(None, True, (), {})
    spooled = PhaseOutcome("contract", "c", (), (), spool.items, score)
    held = PhaseOutcome("contract", "c", (), (), tuple(made), score)
    reads: list[int] = []
    read = spool._read
    spool._read = lambda index: reads.append(index) or read(index)  # type: ignore[method-assign]
    listed = bad_cells(spooled)
    assert len(listed) == len(failing) and reads == []  # ordered from the tally, nothing read
    assert listed[0].index == expected[0] and reads == [expected[0]]
    assert [c.index for c in listed] == expected == [c.index for c in bad_cells(held)]
    run = RunResult("2", "f.yaml", "d", 1, "t", 1.0, True, None, 1, {"contract": spooled}, None, 1)  # type: ignore[arg-type]
    assert [c.index for c in all_bad_cells(run)] == expected
