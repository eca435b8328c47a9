"""What ``validate`` says is what the run does (SPEC §13): over a corpus of configs — every agent
kind × every feature that changes how many times the agent is called (the stateful check, the
forwarding probe, sessions, resets, probes, baselines, conversations, repeat, sweeps,
schedules, the chaos-only, mutation and replay phases, bursts of identical requests, a budget,
``ci``'s phases in one run) — ``validate --json`` is run as a user runs it, then the phase's
command, and the requests the agent received are counted at the agent: a real loopback HTTP
server for http agents, the callable's own call log for python agents.

Every config passes ``validate`` and no run of it is refused (exit 2): a config ``validate``
accepts is never refused for a reason it could have known.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.server import LoopbackServer, Request, Response

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.cli import main

COMMANDS = {
    "contract": ["contract", "run"],
    "chaos": ["run", "--chaos", "--chaos-only"],
    "mutation": ["run"],
    "replay": ["replay", "run"],
    "ci": ["ci"],
}
"""Each phase's own command, and ``ci`` (every configured phase in one run)."""

PYTHON_AGENT = """
import functools

CALLS = []
TOOL_CALLS = []


def get_quote(ticker):
    TOOL_CALLS.append(ticker)
    return {{"ticker": ticker, "price": "123.45"}}


def complete(prompt):
    return "fine"


def answer(prompt{params}):
    CALLS.append(prompt)
    try:
        quote = get_quote("AAPL")
    except Exception as exc:
        return f"unavailable: {{exc}}"
    complete(prompt)
    return f"According to the feed: {{quote['price']}}"


def logged(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs)

    return inner


@logged
def decorated(prompt, session_id=""):
    CALLS.append(prompt)
    return "According to the feed: 123.45"


def _make():
    def made(prompt):
        CALLS.append(prompt)
        return "According to the feed: 123.45"

    return made


undecided = _make()


def reset():
    pass
"""


INVARIANTS = [
    {"id": "answers", "type": "output_not_empty", "severity": "high"},
    {"id": "quotes", "type": "contains", "value": "123.45", "when": "no_chaos"},
]
SCENARIOS = [
    {"name": "calm"},
    {"name": "down", "tool_faults": [{"tool": "quotes", "mode": "error", "error_code": 503}]},
]


@pytest.fixture
def tool_server() -> Iterator[LoopbackServer]:
    with LoopbackServer(lambda r: Response.json({"price": "123.45"})) as server:
        yield server


@pytest.fixture
def proxy_service(tool_server: LoopbackServer) -> Iterator[ChaosProxy]:
    """The chaos proxy as a service (``proxy.url``), as in a workflow: the http agent knows
    its address before the run, and the run pushes the config's routes to it."""
    with ChaosProxy(tools={"quotes": tool_server.url}) as proxy:
        yield proxy


@pytest.fixture
def http_agent(tool_server: LoopbackServer) -> Iterator[LoopbackServer]:
    """An http agent that asks its quotes tool through the proxy flakestorm starts (its URL
    in the request body's ``proxy`` field) and forwards the cell header when asked to."""
    import requests

    def handle(request: Request) -> Response:
        if request.path.startswith("/reset"):
            return Response.json({"ok": True})
        try:
            body = request.json()
        except ValueError:
            body = {}
        proxy = body.get("proxy") if isinstance(body, dict) else None
        price = "123.45"
        if proxy and "{" not in proxy:
            headers = {}
            if body.get("forward") == "yes":
                headers["X-Flakestorm-Cell"] = request.headers.get("X-Flakestorm-Cell", "")
            got = requests.get(f"{proxy}/tools/quotes/price", headers=headers, timeout=5)
            price = got.json().get("price", "unavailable") if got.ok else "unavailable"
        return Response.json({"output": f"According to the feed: {price}"})

    with LoopbackServer(handle) as server:
        yield server


def agent_requests(server: LoopbackServer) -> int:
    return sum(1 for r in server.requests if not r.path.startswith("/reset"))


@dataclass(frozen=True)
class Case:
    """One config of the corpus: the agent kind, the config's parts, and the command run."""

    id: str
    kind: str
    command: str
    config: dict[str, Any]
    agent: dict[str, Any] = field(default_factory=dict)
    endpoint: str = "answer"
    params: str = ""


def contract(scenarios: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "contract": {
            "name": "corpus",
            "invariants": extra.pop("invariants", INVARIANTS),
            "chaos_matrix": scenarios if scenarios is not None else SCENARIOS,
        },
        **extra,
    }


PROMPTS = {"golden_prompts": ["What is AAPL?", "And MSFT?"]}
CONVERSATION = {"golden_prompts": ["What is AAPL?", {"turns": ["AAPL?", "MSFT?", "Higher?"]}]}
SCHEDULED = [
    {"name": "calm"},
    {
        "name": "flaky",
        "tool_faults": [{"tool": "quotes", "mode": "error", "calls": "1", "probability": 0.5}],
    },
]
SWEPT = [
    {
        "name": "slow",
        "tool_faults": [{"tool": "quotes", "mode": "slow", "delay_ms": 1}],
        "sweep": {"field": "tool_faults[0].delay_ms", "values": [1, 2, 3]},
    }
]
PROBES = [
    {"id": "answers", "type": "output_not_empty"},
    {"id": "refuses", "type": "output_not_empty", "probes": ["a probe", "another probe"]},
]
BASELINE = [{"id": "same", "type": "behavior_unchanged", "baseline": "auto"}]
MUTATIONS = {"mutations": {"count": 3, "types": ["paraphrase", "noise", "multi_turn_attack"]}}
BURSTS = {
    "mutations": {"count": 2, "types": ["concurrent_request_pattern", "paraphrase"]},
}
CHAOS = {"chaos": {"tool_faults": [{"tool": "quotes", "mode": "error"}]}}
REPLAYS = {
    "replays": {
        "sessions": [
            {
                "id": "one",
                "input": "What is AAPL?",
                "tool_responses": [{"tool": "quotes", "status": 503, "response": {"e": 1}}],
                "contract": "corpus",
            },
            {
                "id": "talk",
                "turns": [
                    {"input": "AAPL?", "tool_responses": []},
                    {"input": "MSFT?", "tool_responses": []},
                ],
                "contract": "corpus",
            },
        ]
    }
}
FORWARD = {"request_template": '{"input": "{prompt}", "proxy": "PROXY", "forward": "yes"}'}
SILENT = {"request_template": '{"input": "{prompt}", "proxy": "PROXY", "forward": "no"}'}
SESSION = {"session": {"header": "X-Session"}}
RESET = {"reset_endpoint": "/reset"}

CASES = [
    # http agents
    Case("http-stateful-check", "http", "contract", {**PROMPTS, **contract([{"name": "calm"}])}),
    Case("http-chaos-stateful", "http", "contract", {**PROMPTS, **contract()}, SILENT),
    Case("http-reset", "http", "contract", {**PROMPTS, **contract()}, {**SILENT, **RESET}),
    Case(
        "http-session-probe", "http", "contract", {**PROMPTS, **contract()}, {**SILENT, **SESSION}
    ),
    Case(
        "http-session-forward",
        "http",
        "contract",
        {**PROMPTS, **contract()},
        {**FORWARD, **SESSION},
    ),
    Case("http-reset-calm", "http", "contract", {**PROMPTS, **contract([{"name": "calm"}])}, RESET),
    Case("http-probes", "http", "contract", {**PROMPTS, **contract(invariants=PROBES)}, SESSION),
    Case(
        "http-baselines",
        "http",
        "contract",
        {**PROMPTS, **contract(invariants=BASELINE)},
        {**SILENT, **SESSION},
    ),
    Case(
        "http-conversation",
        "http",
        "contract",
        {**CONVERSATION, **contract()},
        {**SILENT, **SESSION},
    ),
    Case(
        "http-conversation-reset",
        "http",
        "contract",
        {**CONVERSATION, **contract()},
        {**SILENT, **RESET},
    ),
    Case(
        "http-repeat",
        "http",
        "contract",
        {**PROMPTS, **contract(), "advanced": {"repeat": 3}},
        {**SILENT, **SESSION},
    ),
    Case("http-sweep", "http", "contract", {**PROMPTS, **contract(SWEPT)}, {**SILENT, **SESSION}),
    Case(
        "http-schedule",
        "http",
        "contract",
        {**PROMPTS, **contract(SCHEDULED)},
        {**SILENT, **SESSION},
    ),
    Case("http-schedule-stateful", "http", "contract", {**PROMPTS, **contract(SCHEDULED)}, SILENT),
    Case(
        "http-budget",
        "http",
        "contract",
        {**PROMPTS, **contract(), "advanced": {"max_invocations": 5}},
        {**SILENT, **SESSION},
    ),
    Case("http-chaos-phase", "http", "chaos", {**PROMPTS, **CHAOS}, SILENT),
    Case("http-chaos-phase-session", "http", "chaos", {**PROMPTS, **CHAOS}, {**SILENT, **SESSION}),
    Case("http-mutation", "http", "mutation", {**PROMPTS, **MUTATIONS}),
    Case("http-mutation-session", "http", "mutation", {**PROMPTS, **MUTATIONS}, SESSION),
    Case("http-mutation-bursts", "http", "mutation", {**PROMPTS, **BURSTS}),
    Case("http-mutation-conversation", "http", "mutation", {**CONVERSATION, **MUTATIONS}, SESSION),
    Case(
        "http-replay", "http", "replay", {**PROMPTS, **contract(), **REPLAYS}, {**SILENT, **SESSION}
    ),
    Case("http-ci", "http", "ci", {**PROMPTS, **contract(), **MUTATIONS, **CHAOS}, SILENT),
    Case(
        "http-ci-session", "http", "ci", {**PROMPTS, **contract(), **CHAOS}, {**SILENT, **SESSION}
    ),
    # python agents
    Case(
        "python-stateful-check", "python", "contract", {**PROMPTS, **contract([{"name": "calm"}])}
    ),
    Case(
        "python-wrapped-tool", "python", "contract", {**PROMPTS, **contract()}, {"tools": ["TOOLS"]}
    ),
    Case(
        "python-session-id",
        "python",
        "contract",
        {**PROMPTS, **contract()},
        {"tools": ["TOOLS"]},
        params=", session_id=''",
    ),
    Case(
        "python-reset-function",
        "python",
        "contract",
        {**PROMPTS, **contract()},
        {"tools": ["TOOLS"], "reset_function": "MODULE:reset"},
    ),
    Case(
        "python-llm-wrapped",
        "python",
        "contract",
        {
            **PROMPTS,
            **contract([{"name": "slow-llm", "llm_faults": [{"mode": "timeout", "delay_ms": 1}]}]),
        },
        {"llm": "MODULE:complete"},
    ),
    Case(
        "python-decorated-session",
        "python",
        "contract",
        {**PROMPTS, **contract([{"name": "calm"}])},
        endpoint="decorated",
    ),
    Case(
        "python-undecided",
        "python",
        "contract",
        {**PROMPTS, **contract([{"name": "calm"}])},
        endpoint="undecided",
    ),
    Case(
        "python-conversation",
        "python",
        "contract",
        {**CONVERSATION, **contract()},
        {"tools": ["TOOLS"]},
        params=", session_id=''",
    ),
    Case(
        "python-probes-repeat",
        "python",
        "contract",
        {**PROMPTS, **contract(invariants=PROBES), "advanced": {"repeat": 2}},
        {"tools": ["TOOLS"]},
    ),
    Case(
        "python-baselines",
        "python",
        "contract",
        {**PROMPTS, **contract(invariants=BASELINE)},
        {"tools": ["TOOLS"]},
    ),
    Case(
        "python-sweep", "python", "contract", {**PROMPTS, **contract(SWEPT)}, {"tools": ["TOOLS"]}
    ),
    Case(
        "python-schedule",
        "python",
        "contract",
        {**PROMPTS, **contract(SCHEDULED)},
        {"tools": ["TOOLS"]},
    ),
    Case("python-chaos-phase", "python", "chaos", {**PROMPTS, **CHAOS}, {"tools": ["TOOLS"]}),
    Case("python-mutation", "python", "mutation", {**PROMPTS, **MUTATIONS}),
    Case(
        "python-mutation-wrapped",
        "python",
        "mutation",
        {**PROMPTS, **MUTATIONS},
        {"tools": ["TOOLS"], "llm": "MODULE:complete"},
    ),
    Case(
        "python-mutation-session",
        "python",
        "mutation",
        {**CONVERSATION, **MUTATIONS},
        params=", session_id=''",
    ),
    Case(
        "python-replay",
        "python",
        "replay",
        {**PROMPTS, **contract(), **REPLAYS},
        {"tools": ["TOOLS"]},
        params=", session_id=''",
    ),
    Case(
        "python-ci",
        "python",
        "ci",
        {**PROMPTS, **contract(), **MUTATIONS, **CHAOS},
        {"tools": ["TOOLS"]},
    ),
]


def test_the_corpus_covers_every_agent_kind_and_command() -> None:
    assert len(CASES) >= 30
    assert {c.kind for c in CASES} == {"http", "python"}
    for kind in ("http", "python"):
        assert {c.command for c in CASES if c.kind == kind} == set(COMMANDS)


def write_case(case: Case, directory: Path, agent_url: str, tool_url: str) -> tuple[Path, str]:
    """The case's config (and, for a python agent, its module); the module's name."""
    module = f"corpus_{uuid.uuid4().hex[:10]}"
    config: dict[str, Any] = json.loads(json.dumps(case.config))
    config["output"] = {"dir": str(directory / "reports"), "formats": ["json"]}
    config.setdefault("advanced", {}).setdefault("concurrency", 4)
    if case.kind == "http":
        agent = {"type": "http", "endpoint": f"{agent_url}/chat", **case.agent}
        config["proxy"] = {"tools": {"quotes": tool_url}}
    else:
        (directory / f"{module}.py").write_text(PYTHON_AGENT.format(params=case.params))
        agent = {"type": "python", "endpoint": f"{module}:{case.endpoint}"}
        for key, value in case.agent.items():
            if key == "tools":
                agent["tools"] = [f"{module}:get_quote"]
            else:
                agent[key] = value.replace("MODULE", module) if isinstance(value, str) else value
        # a python agent's faults name its wrapped tool
        text = json.dumps(config).replace('"tool": "quotes"', '"tool": "get_quote"')
        config = json.loads(text)
    config["agent"] = agent
    path = directory / "flakestorm.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path, module


def proxy_in(path: Path, url: str) -> None:
    """Point the http agent's request template at the proxy the run starts: unknown until it
    starts, so the agent is given the tool server's own route through a proxy service."""
    path.write_text(path.read_text().replace("PROXY", url))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_validate_counts_what_the_agent_receives(
    case: Case,
    tmp_path: Path,
    http_agent: LoopbackServer,
    tool_server: LoopbackServer,
    proxy_service: ChaosProxy,
) -> None:
    path, module = write_case(case, tmp_path, http_agent.url, tool_server.url)
    if case.kind == "http":
        config = json.loads(path.read_text())
        config["proxy"]["url"] = proxy_service.url
        path.write_text(json.dumps(config, indent=2))
        proxy_in(path, proxy_service.url)
    runner = CliRunner()
    validated = runner.invoke(main, ["validate", "--json", "-c", str(path)])
    assert validated.exit_code == 0, validated.output
    plan = json.loads(validated.stdout)
    expected = plan["ci"] if case.command == "ci" else plan["phases"][case.command]
    ran = runner.invoke(main, [*COMMANDS[case.command], "-c", str(path)])
    assert ran.exit_code != 2, ran.output  # validate accepted it: the run does not refuse it
    assert ran.exit_code in (0, 1, 3), ran.output
    if case.kind == "http":
        received = agent_requests(http_agent)
    else:
        received = len(sys.modules[module].CALLS)
        del sys.modules[module]
    assert received == expected["invocations"], (received, expected)
    # what the run reports it sent is what the agent received, too
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    if case.command != "mutation" or "bursts" not in case.id:  # a burst is one invocation
        assert results["invocations"] == received
    assert_recorded(results["plan"], plan, case.command)


def assert_recorded(
    recorded: dict[str, Any], plan: dict[str, Any], command: str, imported: bool = True
) -> None:
    """The plan the run recorded in results.json is the plan ``validate --json`` printed, field
    for field, for the phases the command ran: a phase's own command takes the channel that
    phase names when it names one; ``ci`` runs the phases one after another (only its first
    makes the stateful check), and records their total as ``ci``. An agent whose source did
    not say whether it takes ``session_id`` is planned again once the run imported it: what
    validate could not know is then known, and exact (``imported``: the run imported the
    agent)."""
    undecided = plan["sessions"] is None and imported
    if undecided:
        assert recorded["sessions"] is not None and recorded["warnings"] == []
    else:
        assert recorded["sessions"] == plan["sessions"]
        assert recorded["warnings"] == plan["warnings"]
    assert recorded["reset"] == plan["reset"]

    def known(entry: dict[str, Any]) -> dict[str, Any]:
        if not undecided:
            return entry
        return {k: v for k, v in entry.items() if k not in ("exact", "why")}

    if command == "ci":
        assert recorded["channel"] == plan["channel"]
        assert known(recorded["ci"]) == known(plan["ci"])
        assert list(recorded["phases"]) == list(plan["phases"])
        for name, entry in recorded["phases"].items():
            alone = plan["phases"][name]
            for key in ("cells", "scenarios", "flight"):
                assert entry.get(key) == alone.get(key), (name, key)
        return
    alone = dict(plan["phases"][command])
    assert recorded["channel"] == alone.pop("channel", plan["channel"])
    assert list(recorded["phases"]) == [command] and "ci" not in recorded
    assert known(recorded["phases"][command]) == known(alone)


def test_a_python_agent_with_wrapped_callables_and_only_mutations_is_planned_with_wrappers(
    tmp_path: Path,
) -> None:
    """Its mutations' calls are recorded through the wrappers: ``validate`` says so, and the
    run records the same channel."""
    case = next(c for c in CASES if c.id == "python-mutation-wrapped")
    path, module = write_case(case, tmp_path, "http://unused", "http://unused")
    runner = CliRunner()
    plan = json.loads(runner.invoke(main, ["validate", "--json", "-c", str(path)]).stdout)
    assert plan["channel"]["kind"] == "wrappers"
    ran = runner.invoke(main, [*COMMANDS["mutation"], "-c", str(path)])
    assert ran.exit_code in (0, 1), ran.output
    del sys.modules[module]
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert results["plan"]["channel"]["kind"] == "wrappers"
    assert results["plan"]["phases"]["mutation"]["invocations"] == results["invocations"]


@pytest.mark.parametrize("forward", [False, True], ids=["forwards-nothing", "forwards"])
def test_validate_says_which_scenarios_run_one_at_a_time_and_the_run_does_so(
    forward: bool,
    tmp_path: Path,
    http_agent: LoopbackServer,
    tool_server: LoopbackServer,
    proxy_service: ChaosProxy,
) -> None:
    agent = {**(FORWARD if forward else SILENT), **SESSION}
    case = Case("schedule", "http", "contract", {**PROMPTS, **contract(SCHEDULED)}, agent)
    path, _ = write_case(case, tmp_path, http_agent.url, tool_server.url)
    config = json.loads(path.read_text())
    config["proxy"]["url"] = proxy_service.url
    path.write_text(json.dumps(config, indent=2))
    proxy_in(path, proxy_service.url)
    runner = CliRunner()
    plan = json.loads(runner.invoke(main, ["validate", "--json", "-c", str(path)]).stdout)
    assert plan["channel"]["kind"] == "proxy service"
    runs = {s["name"]: s for s in plan["phases"]["contract"]["scenarios"]}
    assert runs["calm"]["runs"] == "concurrent"
    assert runs["flaky"]["runs"] == "one at a time unless attributed"
    assert "tool_faults[0]" in runs["flaky"]["why"] and "probability 0.5" in runs["flaky"]["why"]
    # the text form says it too, its long label apart from the value, every value aligned
    text = runner.invoke(main, ["validate", "-c", str(path)]).stdout.splitlines()
    unless = "flaky unless the agent forwards attribution (validate --json says why)"
    assert f"  one at a time: {unless}" in text, text
    assert len({len(line) - len(line[2:].split(":", 1)[1].lstrip()) for line in text[1:]}) == 1
    ran = runner.invoke(main, [*COMMANDS["contract"], "-c", str(path)])
    assert ran.exit_code in (0, 1), ran.output
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    serial = {s["name"]: s["serial"] for s in results["phases"]["contract"]["scenarios"]}
    # the forwarding probe decides what validate left to it: one at a time only unattributed
    assert serial == {"calm": False, "flaky": not forward}


def test_validate_json_names_the_wrappers_and_an_undecided_source(tmp_path: Path) -> None:
    case = Case("undecided", "python", "contract", {**PROMPTS, **contract()}, {"tools": ["TOOLS"]})
    path, _ = write_case(
        dataclasses.replace(case, endpoint="undecided"), tmp_path, "http://unused", "http://unused"
    )
    result = CliRunner().invoke(main, ["validate", "--json", "-c", str(path)])
    plan = json.loads(result.stdout)
    assert plan["channel"]["kind"] == "wrappers"
    assert plan["sessions"] is None
    contract_phase = plan["phases"]["contract"]
    assert contract_phase["exact"] is False
    assert "takes `session_id` is read when the run imports it" in contract_phase["why"]
    assert all(s["runs"] == "concurrent" for s in contract_phase["scenarios"])


def test_the_plan_counts_ci_in_the_order_the_registry_runs_the_phases() -> None:
    from flakestorm.engine.phases.registry import PHASES
    from flakestorm.engine.run_plan import PHASE_ORDER

    assert tuple(PHASES) == PHASE_ORDER


def test_a_reset_runs_cells_one_at_a_time_and_says_nothing_of_side_by_side(
    tmp_path: Path,
    http_agent: LoopbackServer,
    tool_server: LoopbackServer,
    proxy_service: ChaosProxy,
) -> None:
    """With ``reset_endpoint`` every call falls in the cell declared active: no forwarding probe
    is sent, and no warning says the cells "ran side by side" (they did not)."""
    case = Case("reset", "http", "contract", {**PROMPTS, **contract()}, {**SILENT, **RESET})
    path, _ = write_case(case, tmp_path, http_agent.url, tool_server.url)
    config = json.loads(path.read_text())
    config["proxy"]["url"] = proxy_service.url
    path.write_text(json.dumps(config, indent=2))
    proxy_in(path, proxy_service.url)
    plan = json.loads(CliRunner().invoke(main, ["validate", "--json", "-c", str(path)]).stdout)
    runs = {s["name"]: s["runs"] for s in plan["phases"]["contract"]["scenarios"]}
    assert set(runs.values()) == {"one at a time"}  # attributed or not: a reset is global
    text = CliRunner().invoke(main, ["validate", "-c", str(path)]).stdout.splitlines()
    assert f"  one at a time: {', '.join(runs)} (validate --json says why)" in text, text
    ran = CliRunner().invoke(main, [*COMMANDS["contract"], "-c", str(path)])
    assert ran.exit_code in (0, 1), ran.output
    assert "side by side" not in ran.output and "forwards no attribution" not in ran.output
    results = json.loads((tmp_path / "reports" / "results.json").read_text())
    assert not any("side by side" in w for w in results["warnings"])
    scenarios = results["phases"]["contract"]["scenarios"]
    assert all(s["unattributed"] == 0 and not s["serial"] for s in scenarios)
    down = next(c for c in results["phases"]["contract"]["cells"] if c["scenario"] == "down")
    assert down["faults_fired"]  # each cell's calls are its own
    # 2 prompts × 3 cells (quotes[down] is skipped by its `when`), and nothing else: no
    # stateful check, no forwarding probe
    assert agent_requests(http_agent) == 6


REPO = Path(__file__).resolve().parent.parent
REPO_CONFIGS = sorted(
    path
    for path in [
        *(REPO / "tests" / "configs").rglob("*.yaml"),
        *(REPO / "examples").rglob("*.yaml"),
    ]
    if not {"invalid", "replays"} & set(path.relative_to(REPO).parts)
)
"""Every config in the repository (not the ones kept to be refused, nor replay session files):
those ``validate`` accepts, or accepts once migrated, are planned by both."""


def own_commands(plan: dict[str, Any]) -> list[str]:
    """The commands of a config: each configured phase's own, and ``ci``."""
    return [*plan["phases"], "ci"]


@pytest.mark.parametrize("path", REPO_CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_in_the_repo_is_planned_by_its_run_as_validate_says(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command's run plans itself (each phase's work, then the run's plan, as
    ``runner.planned`` does before the agent starts) and records the plan validate printed,
    field for field. The configs' agents are not running: the runs themselves are the corpus
    above's."""
    from flakestorm.engine.runner import planned
    from flakestorm.loader import load_config

    monkeypatch.setenv("FLAKESTORM_TEST_TOKEN", "t")  # the full config reads it
    monkeypatch.chdir(path.parent)
    runner = CliRunner()
    validated = runner.invoke(main, ["validate", "--json", "-c", str(path)])
    if validated.exit_code != 0:  # a config of an earlier flakestorm: planned once migrated
        migrated = tmp_path / path.name
        moved = runner.invoke(main, ["migrate", "-c", str(path), "-o", str(migrated)])
        validated = runner.invoke(main, ["validate", "--json", "-c", str(migrated)])
        if moved.exit_code != 0 or validated.exit_code != 0:
            pytest.skip("a config of an earlier flakestorm that migrate does not bring over alone")
        path = migrated
    plan = json.loads(validated.stdout)
    loaded = load_config(path)
    config = loaded.config
    for command in own_commands(plan):
        names = list(plan["phases"]) if command == "ci" else [command]
        if config.mutations is not None and "mutation" in names and config.mutations.llm:
            continue  # its work is generated by a model: the corpus's template mutations run
        if config.replays is not None and "replay" in names and config.replays.sources:
            continue  # its sessions are imported from LangSmith
        run = planned(loaded, names, ci=command == "ci")
        warnings = tuple(str(w) for w in loaded.warnings)
        assert_recorded(run.plan.as_json(warnings), plan, command, imported=False)
