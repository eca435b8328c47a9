"""A python-agent project for run tests: an agent that asks its ``get_quote`` tool for a price,
with the tool wrapped by flakestorm (SPEC §4.2), run in-process through
:func:`flakestorm.engine.runner.run_phases`.

::

    path = quote_project(tmp_path, [{"name": "down", "tool_faults": [...]}])
    result = run_config(path)
    assert contract_cells(result)["answers[down]"].status is Status.PASSED

Module names are unique per project so ``sys.modules`` never hands one test another test's
agent.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from flakestorm.engine.runner import run_phases
from flakestorm.loader import load_config
from flakestorm.results.model import CellResult, RunResult

AGENT = """
import {tools}
from flakestorm import ToolFaultError


def answer(prompt):
    try:
        quote = {tools}.get_quote("AAPL")
    except ToolFaultError as exc:
        return f"Market data is unavailable ({{exc.error_code}}); source: none."
    return f"According to the feed: {{quote}}"
"""
TOOLS = """
CALLS = []


def get_quote(ticker):
    CALLS.append(ticker)
    return {"ticker": ticker, "price": "123.45"}


def reset():
    raise RuntimeError("the reset service is down")
"""


def quote_project(tmp_path: Path, scenarios: list[dict[str, Any]], **extra: Any) -> Path:
    """Write the project with this contract matrix; return the config path. ``extra`` is merged
    into the config (``agent`` entries into the agent section; ``reset_function:
    "TOOLS:reset"`` is the tools module's reset, which always fails)."""
    suffix = uuid.uuid4().hex[:10]
    agent_mod, tools_mod = f"rv_agent_{suffix}", f"rv_tools_{suffix}"
    (tmp_path / f"{agent_mod}.py").write_text(AGENT.format(tools=tools_mod))
    (tmp_path / f"{tools_mod}.py").write_text(TOOLS)
    agent = {
        "type": "python",
        "endpoint": f"{agent_mod}:answer",
        "tools": [f"{tools_mod}:get_quote"],
        **extra.pop("agent", {}),
    }
    if agent.get("reset_function") == "TOOLS:reset":
        agent["reset_function"] = f"{tools_mod}:reset"
    doc: dict[str, Any] = {
        "agent": agent,
        "golden_prompts": ["price of AAPL?", "quote AAPL"],
        "contract": {
            "name": "c",
            "invariants": extra.pop(
                "invariants",
                [{"id": "answers", "type": "output_not_empty", "severity": "high"}],
            ),
            "chaos_matrix": scenarios,
        },
        **extra,
    }
    path = tmp_path / "flakestorm.yaml"
    path.write_text(json.dumps(doc))
    return path


def run_config(path: Path, phases: tuple[str, ...] = ("contract",), **kw: Any) -> RunResult:
    """Load the config at ``path`` and run these phases (``kw`` goes to ``run_phases``)."""
    return run_phases(load_config(path), list(phases), **kw)


def contract_cells(result: RunResult) -> dict[str, CellResult]:
    """The contract phase's cells by id."""
    assert "contract" in result.phases
    return {c.id: c for c in result.phases["contract"].cells}
