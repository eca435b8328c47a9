"""Result values and the versioned results.json document."""

from __future__ import annotations

import json
from pathlib import Path

from support.quote_project import quote_project, run_config

from flakestorm.results.model import from_document, to_document


def test_results_json_round_trips_a_run_with_both_phases(tmp_path: Path) -> None:
    path = quote_project(
        tmp_path,
        [
            {"name": "calm"},
            {"name": "down", "tool_faults": [{"tool": "get_quote", "mode": "error"}]},
        ],
        chaos={"tool_faults": [{"tool": "get_quote", "mode": "malformed"}]},
    )
    result = run_config(path, ("contract", "chaos"))
    doc = json.loads(json.dumps(to_document(result)))
    assert from_document(doc) == result


def test_results_json_round_trips_what_a_cell_spent_and_each_call_s_facts() -> None:
    """A cell's and a scenario's ``spend`` and each call's ``started_ms``, ``retry_after_s``,
    ``idempotency_key``, ``fingerprint`` and ``usage`` are written and read back as they were."""
    import dataclasses

    from golden.cases import failing

    from flakestorm.results.model import CallRecord
    from flakestorm.results.usage import Counted, Spend, Usage

    usage = Usage(
        90, 12, cache_read=10, cache_write=0, model="gpt-4o-mini", counted=Counted.ESTIMATED
    )
    llm = CallRecord(
        "llm",
        None,
        "POST",
        "http://127.0.0.1:1/v1/chat/completions",
        200,
        started_ms=1500.25,
        fingerprint="38c29fa75377f50190c8fde7",
        usage=usage,
    )
    limited = CallRecord(
        "llm",
        None,
        "POST",
        "http://127.0.0.1:1/v1/chat/completions",
        429,
        fired=("llm_faults[0] rate_limit",),
        started_ms=1490.0,
        retry_after_s=1.5,
    )
    paid = CallRecord(
        "tool",
        "payments",
        "POST",
        "http://127.0.0.1:1/pay",
        201,
        started_ms=1600.0,
        idempotency_key="order-42",
        fingerprint="ab12",
    )
    spend = Spend({"llm": 2, "payments": 1}, {"llm": 1}, usage, None, ("gpt-4o-mini",))
    base = failing()
    contract = base.phases["contract"]
    cells = list(contract.cells)
    cells[1] = dataclasses.replace(cells[1], calls=(limited, llm, paid), spend=spend)
    scenarios = list(contract.scenarios)
    scenarios[1] = dataclasses.replace(scenarios[1], spend=spend)
    contract = dataclasses.replace(contract, cells=tuple(cells), scenarios=tuple(scenarios))
    result = dataclasses.replace(base, phases={**base.phases, "contract": contract})

    doc = json.loads(json.dumps(to_document(result)))
    assert from_document(doc) == result
    cell = doc["phases"]["contract"]["cells"][1]
    assert cell["spend"] == {
        "calls": {"llm": 2, "payments": 1},
        "faulted": {"llm": 1},
        "usage": {"input": 90, "output": 12, "cache_read": 10, "cache_write": 0,
                  "model": "gpt-4o-mini", "counted": "estimated"},
        "cost_usd": None,
        "unpriced": ["gpt-4o-mini"],
    }  # fmt: skip
    assert doc["phases"]["contract"]["scenarios"][1]["spend"] == cell["spend"]
    first, second, third = cell["calls"]
    assert (first["started_ms"], first["retry_after_s"], first["usage"]) == (1490.0, 1.5, None)
    assert (second["fingerprint"], second["usage"]["counted"]) == (
        "38c29fa75377f50190c8fde7",
        "estimated",
    )
    assert (third["idempotency_key"], third["retry_after_s"]) == ("order-42", None)
    assert doc["phases"]["contract"]["cells"][0]["spend"]["cost_usd"] == 0.000081
