"""`flakestorm replay import langsmith` driven by the real langsmith client against a fake
LangSmith REST API on loopback: a project of three traces becomes the expected session files
(tests/replay_langsmith/; `FLAKESTORM_REGENERATE=1` rewrites them after review)."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from support.server import LoopbackServer, Request, Response

from flakestorm.cli import main

EXPECTED = Path(__file__).resolve().parent / "replay_langsmith"
PROJECT_ID = "5b2a8d6e-0000-4000-8000-000000000001"
TENANT_ID = "5b2a8d6e-0000-4000-8000-0000000000ff"
KEY = "lsv2-test-key-0123456789"


def run_doc(
    trace: int,
    step: int,
    name: str,
    run_type: str,
    inputs: dict[str, Any],
    outputs: dict[str, Any] | None = None,
    error: str | None = None,
    duration_ms: int = 10,
) -> dict[str, Any]:
    trace_id = f"00000000-0000-4000-8000-{trace:012d}"
    run_id = trace_id if step == 0 else f"00000000-0000-4000-9{step:03d}-{trace:012d}"
    start = f"2026-01-0{trace}T10:00:{step:02d}.000000+00:00"
    end = f"2026-01-0{trace}T10:00:{step:02d}.{duration_ms:03d}000+00:00"
    stamp = f"2026010{trace}T1000{step:02d}000000Z"
    root_stamp = f"2026010{trace}T100000000000Z"
    dotted = f"{root_stamp}{trace_id}" + ("" if step == 0 else f".{stamp}{run_id}")
    return {
        "id": run_id,
        "name": name,
        "run_type": run_type,
        "start_time": start,
        "end_time": end,
        "inputs": inputs,
        "outputs": outputs,
        "error": error,
        "trace_id": trace_id,
        "dotted_order": dotted,
        "parent_run_id": None if step == 0 else trace_id,
        "session_id": PROJECT_ID,
    }


RUNS = [
    # 1: two tool calls and an LLM run (listed out of order: dotted_order decides)
    run_doc(1, 0, "quote_agent", "chain", {"input": "What is AAPL at?"}, {"output": "187.50"}),
    run_doc(
        1,
        3,
        "ChatOpenAI",
        "llm",
        {"messages": []},
        {"generations": [[{"text": "AAPL is at $187.50 according to the feed."}]]},
    ),
    run_doc(1, 2, "news_api", "tool", {"input": "AAPL"}, {"output": "no news today"}),
    run_doc(1, 1, "market_data_api", "tool", {"ticker": "AAPL"}, {"output": {"price": 187.5}}),
    # 2: the tool errored
    run_doc(2, 0, "quote_agent", "chain", {"input": "Quote MSFT"}, {"output": "sorry"}),
    run_doc(2, 1, "market_data_api", "tool", {"ticker": "MSFT"}, None, "HTTPError: 503 down", 120),
    # 3: another input key, no tools
    run_doc(3, 0, "faq_agent", "chain", {"question": "What is diversification?"}, {"answer": "…"}),
]


def fake_langsmith(every: list[dict[str, Any]] | None = None) -> LoopbackServer:
    """The parts of the LangSmith REST API the client's list_runs and read_run use (a
    thread's filter keeps the root runs whose metadata names the thread)."""
    known = RUNS if every is None else every

    def handle(request: Request) -> Response:
        if request.headers.get("x-api-key") != KEY:
            return Response.json({"detail": "unauthorized"}, status=401)
        path = request.path.split("?", 1)[0]
        if path == "/sessions":
            if "name=finance-prod" not in request.path:
                return Response.json([])
            project = {
                "id": PROJECT_ID,
                "name": "finance-prod",
                "tenant_id": TENANT_ID,
                "reference_dataset_id": None,
                "start_time": "2026-01-01T00:00:00+00:00",
            }
            return Response.json([project])
        if path == "/runs/query":
            query = request.json()
            runs = known
            if "trace" in query:
                runs = [r for r in runs if r["trace_id"] == query["trace"]]
            if query.get("is_root"):
                runs = [r for r in runs if r["parent_run_id"] is None]
                assert query["session"] == [PROJECT_ID]
            thread = re.search(r'eq\(metadata_value, "([^"]+)"\)', query.get("filter") or "")
            if thread:
                runs = [r for r in runs if _thread_of(r) == thread[1]]
            if "limit" in query:
                runs = runs[: query["limit"]]
            return Response.json({"runs": runs, "cursors": {"next": None}})
        if path.startswith("/runs/"):
            run_id = path.rsplit("/", 1)[1]
            found = [r for r in known if r["id"] == run_id]
            if not found:
                return Response.json({"detail": "not found"}, status=404)
            return Response.json(found[0])
        return Response.json({}, status=200)

    return LoopbackServer(handle)


def _thread_of(run: dict[str, Any]) -> str | None:
    return ((run.get("extra") or {}).get("metadata") or {}).get("thread_id")


def in_thread(run: dict[str, Any], thread: str) -> dict[str, Any]:
    return {**run, "extra": {"metadata": {"thread_id": thread}}}


THREAD = [
    # the second turn listed first: the roots' start order decides
    in_thread(
        run_doc(5, 0, "quote_agent", "chain", {"input": "And MSFT?"}, {"output": "down"}), "t-42"
    ),
    run_doc(5, 1, "market_data_api", "tool", {"ticker": "MSFT"}, None, "HTTPError: 503 down"),
    in_thread(
        run_doc(4, 0, "quote_agent", "chain", {"input": "What is AAPL at?"}, {"output": "187.50"}),
        "t-42",
    ),
    run_doc(4, 1, "market_data_api", "tool", {"ticker": "AAPL"}, {"output": {"price": 187.5}}),
    in_thread(
        run_doc(6, 0, "quote_agent", "chain", {"input": "Another user"}, {"output": "hi"}), "t-7"
    ),
]


def test_a_thread_becomes_one_conversation_session(tmp_path: Path) -> None:
    with fake_langsmith(THREAD) as server:
        result = import_cli(server, tmp_path, "--project", "finance-prod", "--thread", "t-42")
    assert result.exit_code == 0, result.output
    (written,) = tmp_path.glob("*.yaml")
    assert written.name == "langsmith-thread-t-42.yaml"
    session = yaml.safe_load(written.read_text())
    assert "input" not in session
    assert [t["input"] for t in session["turns"]] == ["What is AAPL at?", "And MSFT?"]
    assert [
        [(r["tool"], r.get("status", 200)) for r in t["tool_responses"]] for t in session["turns"]
    ] == [[("market_data_api", 200)], [("market_data_api", 500)]]


def import_cli(server: LoopbackServer, out: Path, *args: str) -> Any:
    env = {"LANGSMITH_API_KEY": KEY, "LANGSMITH_ENDPOINT": server.url, "LANGSMITH_TRACING": "false"}
    return CliRunner().invoke(
        main, ["replay", "import", "langsmith", *args, "-o", str(out)], env=env
    )


def test_a_project_of_three_traces_becomes_the_expected_session_files(tmp_path: Path) -> None:
    with fake_langsmith() as server:
        result = import_cli(server, tmp_path, "--project", "finance-prod", "--with-llm")
    assert result.exit_code == 0, result.output
    written = {p.name: p.read_text() for p in tmp_path.glob("*.yaml")}
    if os.environ.get("FLAKESTORM_REGENERATE") == "1":
        EXPECTED.mkdir(exist_ok=True)
        for name, text in written.items():
            (EXPECTED / name).write_text(text)
    expected = {p.name: p.read_text() for p in EXPECTED.glob("*.yaml")}
    assert written == expected
    assert len(written) == 3
    for text in written.values():
        assert KEY not in text
    # the written files are sessions the loader accepts
    config = tmp_path / "flakestorm.yaml"
    config.write_text(
        "agent: {endpoint: 'http://127.0.0.1:9/chat'}\n"
        "golden_prompts: [x]\n"
        "contract: {name: c, invariants: [{id: i, type: completes}], chaos_matrix: [{name: s}]}\n"
        "replays: {sessions: [{file: 'langsmith-*.yaml'}]}\n"
    )
    from flakestorm.loader import load_config

    load_config(config)


def test_one_run_and_a_missing_input_key_names_the_keys_present(tmp_path: Path) -> None:
    with fake_langsmith() as server:
        run_id = RUNS[0]["id"]
        ok = import_cli(server, tmp_path / "one", "--run", run_id)
        assert ok.exit_code == 0, ok.output
        (written,) = (tmp_path / "one").glob("*.yaml")
        assert "llm_responses" not in written.read_text()  # without --with-llm
        limited = import_cli(
            server, tmp_path / "limited", "--project", "finance-prod", "--limit", "1"
        )
        assert limited.exit_code == 0, limited.output
        assert len(list((tmp_path / "limited").glob("*.yaml"))) == 1
        missing = import_cli(server, tmp_path / "two", "--run", RUNS[-1]["id"], "--input-key", "q")
    assert missing.exit_code == 2
    assert "has no input 'q' (its input keys: question)" in missing.output


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({}, ["--project", "finance-prod"], "set LANGSMITH_API_KEY"),
        ({"LANGSMITH_API_KEY": "wrong-key-000"}, ["--project", "finance-prod"], "refused the key"),
        ({"LANGSMITH_API_KEY": KEY}, ["--project", "nope"], "LangSmith has no project 'nope'"),
        ({"LANGSMITH_API_KEY": KEY}, [], "give --project NAME or --run ID"),
    ],
)
def test_credentials_and_names_are_checked(
    env: dict[str, str], args: list[str], message: str, tmp_path: Path
) -> None:
    with fake_langsmith() as server:
        result = CliRunner().invoke(
            main,
            ["replay", "import", "langsmith", *args, "-o", str(tmp_path)],
            env={"LANGSMITH_API_KEY": None, "LANGSMITH_ENDPOINT": server.url, **env},
        )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not list(tmp_path.glob("*.yaml"))


def test_session_ids_are_stable_uuids() -> None:
    assert uuid.UUID(RUNS[0]["id"]) and json.dumps(RUNS)


def test_replays_sources_are_imported_when_the_phase_is_planned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.engine.phases.phase import PhaseRequest
    from flakestorm.engine.phases.replay import ReplayPhase
    from flakestorm.loader import load_config_text

    text = (
        "agent: {endpoint: 'http://127.0.0.1:9/chat'}\n"
        "golden_prompts: [x]\n"
        "contract: {name: c, invariants: [{id: i, type: completes}], chaos_matrix: [{name: s}]}\n"
        "replays:\n"
        "  sessions: [{id: listed, input: hi}]\n"
        "  sources: [{type: langsmith, project: finance-prod, contract: c}]\n"
    )
    loaded = load_config_text(text, base_dir=tmp_path, env={})
    with fake_langsmith() as server:
        monkeypatch.setenv("LANGSMITH_API_KEY", KEY)
        monkeypatch.setenv("LANGSMITH_ENDPOINT", server.url)
        plan = ReplayPhase().plan(loaded, PhaseRequest())
    assert [(s.index, s.id) for s in plan.sessions] == [
        (0, "listed"),
        (1, "langsmith-00000000-0000-4000-8000-000000000001"),
        (2, "langsmith-00000000-0000-4000-8000-000000000002"),
        (3, "langsmith-00000000-0000-4000-8000-000000000003"),
    ]
    assert plan.sessions[2].session.tool_responses[0].status == 500
    assert {s.contract.name for s in plan.sessions} == {"c"}
