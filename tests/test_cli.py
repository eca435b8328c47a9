"""The command line: validate (and its alias), error mapping, exit codes, secrets, start-up."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from flakestorm import __version__
from flakestorm.authoring.starter import STARTER_CONFIG
from flakestorm.cli import FlakestormGroup, main
from flakestorm.cli.app import LazyGroup
from flakestorm.engine.run_plan import plan_run
from flakestorm.errors import InfrastructureError
from flakestorm.loader import load_config

FLAKESTORM = Path(sys.executable).parent / "flakestorm"

BROKEN = """\
agent:
  endpoint: http://localhost:8000/invoke
  tiemout: 3000
contract:
  name: c
  invariants:
    - id: a
      type: regex
      pattern: x
      severity: urgent
  chaos_matrix:
    - name: no-chaos
"""

COUNTED = """\
agent:
  endpoint: http://localhost:8000/invoke
  reset_endpoint: /reset
golden_prompts: [one, two, three]
contract:
  name: Counted
  invariants:
    - id: same
      type: behavior_unchanged
    - id: leak
      type: excludes_pattern
      patterns: [secret]
      probes: [p1, p2]
      when: any_chaos_active
    - id: fixed
      type: behavior_unchanged
      baseline: a fixed answer
      when: no_chaos
  chaos_matrix:
    - name: calm
    - name: down
      tool_faults:
        - {tool: search, mode: error}
    - name: poisoned
      context_attacks:
        memory_poisoning: {payload: hi}
advanced:
  repeat: 2
  max_invocations: 10
"""


def write(tmp_path: Path, text: str, name: str = "flakestorm.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_validate_summarises_the_starter(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, STARTER_CONFIG)
    result = runner.invoke(main, ["validate", "-c", str(path)], env={"AGENT_URL": None})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"ok: {path} is valid" in out
    assert "agent:       http POST http://localhost:8000/chat" in out
    assert "contract:    My Agent Contract" in out
    assert "4 invariants × 2 scenarios = 8 cells (1 skipped by `when`)" in out
    # 3 cells x 2 golden prompts + 1 probe x 2 scenarios ... see test_count_matrix for the rule
    assert "invocations: 14 per contract run" in out
    assert "phases:      contract" in out
    assert result.stderr == ""


def test_contract_validate_is_an_alias(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, STARTER_CONFIG)
    direct = runner.invoke(main, ["validate", "--config", str(path)])
    alias = runner.invoke(main, ["contract", "validate", "--config", str(path)])
    assert alias.exit_code == direct.exit_code == 0
    assert alias.output == direct.output


def test_contract_group_is_ready_for_more_commands() -> None:
    group = main.commands["contract"]
    assert isinstance(group, click.Group)
    assert group.get_command(click.Context(group), "validate") is not None


@pytest.mark.parametrize("group", [main, main.commands["contract"]], ids=["main", "contract"])
def test_the_lazy_table_names_each_commands_module_and_help(group: click.Group) -> None:
    assert isinstance(group, LazyGroup)
    for name, (module, words) in group.lazy.items():
        importlib.import_module(f"flakestorm.cli.{module}")
        command = group.commands[name]  # registered by that module
        first = inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
        assert words == first, name
    # every command a module registers is in the table (or defined with the group)
    assert set(group.commands) - set(group.lazy) <= {"contract"}


def imported_by(*args: str) -> set[str]:
    """The modules a fresh interpreter has imported once ``flakestorm ARGS`` ran."""
    code = (
        "import sys\nfrom flakestorm.cli import main\n"
        f"try:\n    main({list(args)!r})\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stderr.split())


def test_help_and_validate_import_only_what_they_need(tmp_path: Path) -> None:
    helped = imported_by("--help")
    commands = {m for m in helped if m.startswith("flakestorm.cli.") and m != "flakestorm.cli.app"}
    assert commands == set()
    assert not helped & {"pydantic", "yaml", "requests", "jinja2", "flakestorm.results.model"}
    (tmp_path / "flakestorm.yaml").write_text(STARTER_CONFIG)
    validated = imported_by("validate", "-c", str(tmp_path / "flakestorm.yaml"))
    assert "flakestorm.authoring.preview" in validated
    engine = {
        "flakestorm.engine.executor",
        "flakestorm.engine.phases.matrix",
        "flakestorm.chaos.delivery.proof",
        "flakestorm.results.model",
        "flakestorm.cli.run",
        "flakestorm.chaos.channels.channel",
        "requests",
        "jinja2",
    }
    assert not validated & engine
    # a config without a mutations section reads no mutation catalogue
    assert not {m for m in validated if m.startswith("flakestorm.mutations.")}


def test_validate_loads_no_pydantic_plugins_and_leaves_the_environment_as_it_was(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "flakestorm.yaml").write_text(STARTER_CONFIG)
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    seen: list[str | None] = []
    import flakestorm.cli.project as project

    real = project.load

    def load(path: Path) -> object:
        seen.append(os.environ.get("PYDANTIC_DISABLE_PLUGINS"))
        return real(path)

    monkeypatch.setattr(project, "load", load)
    result = runner.invoke(main, ["validate", "-c", str(tmp_path / "flakestorm.yaml")])
    assert result.exit_code == 0, result.output
    assert seen == ["__all__"]  # while the config is read
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ


def test_count_matrix(tmp_path: Path) -> None:
    loaded = load_config(write(tmp_path, COUNTED))
    count = plan_run(loaded.config, tmp_path).phases["contract"].matrix
    assert count is not None
    assert (count.invariants, count.scenarios, count.cells) == (3, 3, 9)
    # leak only under chaos (2 of 3), fixed only without (1 of 3)
    assert count.skipped == 3
    # same: 3 cells x 3 prompts; leak: 2 cells x 2 probes; fixed: 1 cell x 3 prompts
    assert count.prompt_runs == 9 + 4 + 3
    assert count.repeat == 2
    assert count.baselines == 3  # one per distinct prompt of the auto-baseline invariant
    assert count.detection == 0  # a reset is configured
    assert count.invocations == 16 * 2 + 3


def test_validate_reports_budget_and_detection(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, COUNTED.replace("  reset_endpoint: /reset\n", ""))
    result = runner.invoke(main, ["validate", "-c", str(path)])
    assert result.exit_code == 0, result.output
    assert "invocations: 37 per contract run" in result.stdout
    assert "2 stateful-detection" in result.stdout
    assert "advanced.max_invocations = 10: the run will stop early" in result.stdout


def test_validate_never_prints_secrets(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_HOST", "internal-host.example")
    monkeypatch.setenv("AGENT_TOKEN", "s3cr3t-token")
    text = (
        "agent:\n"
        "  endpoint: http://${AGENT_HOST}/invoke\n"
        "  headers:\n"
        "    Authorization: Bearer ${AGENT_TOKEN}\n"
        "    X-Plain: plain-header-value\n"
        "golden_prompts: [hi]\n"
    )
    result = runner.invoke(main, ["validate", "-c", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    assert "internal-host.example" not in result.output
    assert "s3cr3t-token" not in result.output
    assert "plain-header-value" not in result.output
    assert "http POST http://***/invoke" in result.stdout


def test_validate_prints_warnings_on_stderr(runner: CliRunner, tmp_path: Path) -> None:
    text = (
        "agent: {endpoint: http://localhost:8000/invoke}\n"
        "golden_prompts: [hi]\n"
        "scoring: {mutation: 0.2, chaos: 0.35, contract: 0.35, replay: 0.1}\n"
    )
    result = runner.invoke(main, ["validate", "-c", str(write(tmp_path, text))])
    assert result.exit_code == 0, result.output
    warnings = result.stderr.splitlines()
    assert warnings
    assert all(line.startswith(f"warning: {tmp_path / 'flakestorm.yaml'}:") for line in warnings)
    assert any(":3:" in line and "scoring" in line for line in warnings)


def test_config_errors_exit_2_with_one_line_per_problem(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    result = runner.invoke(main, ["validate", "-c", str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    problems, last = lines[:-1], lines[-1]
    assert len(problems) >= 2
    for line in problems:
        assert line.startswith(f"{path}:"), line
        _, line_no, col, rest = line.split(":", 3)
        assert line_no.isdigit() and col.isdigit() and rest.startswith(" ")
    assert any(":3:" in p and "agent.tiemout" in p and "timeout" in p for p in problems)
    assert any(":10:" in p and "severity" in p and "critical" in p for p in problems)
    assert last == f"error: {len(problems)} problems in {path}"
    assert "Traceback" not in result.output


def test_validate_json_prints_the_problems_on_stdout(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    result = runner.invoke(main, ["validate", "--json", "-c", str(path)])
    assert result.exit_code == 2
    document = json.loads(result.stdout)
    assert list(document) == ["errors"]
    tiemout, severity = document["errors"]
    assert tiemout["file"] == severity["file"] == str(path)
    assert (tiemout["line"], tiemout["column"], tiemout["path"]) == (3, 3, "agent.tiemout")
    assert tiemout["message"].startswith("unknown key 'tiemout' (did you mean 'timeout'?")
    assert severity == {
        "file": str(path),
        "line": 10,
        "column": 17,
        "path": "contract.invariants[0].severity",
        "message": "'urgent' is not valid (expected one of: critical, high, medium, low)",
    }
    # the text form stays on stderr, as without --json
    plain = runner.invoke(main, ["validate", "-c", str(path)])
    assert result.stderr == plain.stderr != ""


def test_validate_json_prints_a_yaml_error_and_a_missing_file(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = write(tmp_path, "agent:\n  endpoint: [x\ngolden_prompts: [hi]\n")
    result = runner.invoke(main, ["validate", "--json", "-c", str(path)])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "errors": [
            {
                "file": str(path),
                "line": 3,
                "column": 15,
                "path": "",
                "message": "invalid YAML: expected ',' or ']', but got ':' (while parsing a "
                "flow sequence at line 2, column 13)",
            }
        ]
    }
    assert result.stderr.startswith(f"{path}:3:15: invalid YAML")

    missing = tmp_path / "nope.yaml"
    result = runner.invoke(main, ["validate", "--json", "-c", str(missing)])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "errors": [
            {
                "file": str(missing),
                "line": 1,
                "column": 1,
                "path": "",
                "message": "no such file (create one with `flakestorm init`, or pass "
                "-c/--config FILE)",
            }
        ]
    }
    assert f"{missing}: no such file" in result.stderr
    assert "Traceback" not in result.output


def test_missing_config_suggests_init(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(main, ["validate"])
    assert result.exit_code == 2
    assert "flakestorm.yaml: no such file" in result.stderr
    assert "flakestorm init" in result.stderr
    assert "Traceback" not in result.output


def test_unexpected_exception_is_reported_as_a_bug(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> list[tuple[str, str]]:
        raise RuntimeError("boom")

    monkeypatch.setattr("flakestorm.authoring.preview.summary", broken)
    result = runner.invoke(main, ["validate", "-c", str(write(tmp_path, STARTER_CONFIG))])
    assert result.exit_code == 3
    assert "Traceback" in result.stderr
    assert "RuntimeError: boom" in result.stderr
    assert "this is a bug in flakestorm, please report it" in result.stderr


def test_flakestorm_errors_map_to_their_exit_code(runner: CliRunner) -> None:
    @click.group(cls=FlakestormGroup)
    def cli() -> None:
        pass

    @cli.command()
    def down() -> None:
        raise InfrastructureError("the agent never became ready (connection refused)")

    result = runner.invoke(cli, ["down"])
    assert result.exit_code == 3
    assert result.stderr == "error: the agent never became ready (connection refused)\n"


def test_usage_errors_keep_clicks_exit_code(runner: CliRunner) -> None:
    result = runner.invoke(main, ["validate", "--no-such-option"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"flakestorm, version {__version__}\n"


def test_cli_import_is_lazy() -> None:
    code = (
        "import sys, flakestorm.cli; "
        "print(sorted(m for m in ('pydantic', 'yaml', 'requests', 'jinja2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- real process


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_URL"}
    return subprocess.run(
        [str(FLAKESTORM), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60
    )


def test_real_process(tmp_path: Path) -> None:
    version = run("--version", cwd=tmp_path)
    assert (version.returncode, version.stdout) == (0, f"flakestorm, version {__version__}\n")

    missing = run("validate", cwd=tmp_path)
    assert missing.returncode == 2
    assert "flakestorm init" in missing.stderr

    init = run("init", "--github", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    again = run("init", cwd=tmp_path)
    assert again.returncode == 2
    assert "flakestorm.yaml already exists" in again.stderr
    forced = run("init", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr

    valid = run("validate", cwd=tmp_path)
    assert valid.returncode == 0, valid.stderr
    alias = run("contract", "validate", "-c", "flakestorm.yaml", cwd=tmp_path)
    assert (alias.returncode, alias.stdout) == (0, valid.stdout)

    write(tmp_path, BROKEN, "broken.yaml")
    broken = run("validate", "-c", "broken.yaml", cwd=tmp_path)
    assert broken.returncode == 2
    assert broken.stdout == ""
    assert broken.stderr.splitlines()[0].startswith("broken.yaml:")
    assert broken.stderr.splitlines()[-1].startswith("error: ")
    assert "Traceback" not in broken.stderr


def test_an_agent_never_ready_reads_the_same_in_progress_matrix_scores_and_gate(
    runner: CliRunner, tmp_path: Path
) -> None:
    from flakestorm.reporters import comment
    from flakestorm.results.model import from_document

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: every connect is refused
        port = sock.getsockname()[1]
        text = (
            f"agent: {{endpoint: 'http://127.0.0.1:{port}/invoke', ready_timeout: 300}}\n"
            "golden_prompts: [hi]\n"
            "contract:\n"
            "  name: c\n"
            "  invariants:\n"
            "    - {id: a, type: completes, severity: critical}\n"
            "    - {id: b, type: completes, severity: low}\n"
            "  chaos_matrix: [{name: calm}, {name: later}]\n"
        )
        out = tmp_path / "out"
        args = ["contract", "run", "-c", str(write(tmp_path, text)), "--output", str(out)]
        result = runner.invoke(main, args)
    assert result.exit_code == 3, result.output
    # progress says of the cells what the matrix says: errored, not "not_run"
    assert "scenario calm: 2 errored" in result.stderr
    assert "scenario later: 2 errored" in result.stderr
    assert "not_run" not in result.stderr
    assert "a          critical  ERROR  ERROR" in result.stdout
    # a phase in which no cell ran to a verdict scores n/a (not 0.00), and never "passed"
    assert "Contract score: n/a" in result.stdout
    assert "  - 2 critical cell(s) errored: a[calm], a[later]" in result.stdout
    assert "cell(s) failed" not in result.stdout
    summary = (out / "summary.md").read_text()
    assert "**Overall score: n/a** · contract c: n/a (no verdict: no cell ran to one)" in summary
    assert "- 2 critical cell(s) errored: a\\[calm\\], a\\[later\\]" in summary
    assert "0.00" not in summary
    assert "(passed)" not in summary
    document = json.loads((out / "results.json").read_text())
    assert document["phases"]["contract"]["score"]["score"] is None
    assert document["phases"]["contract"]["score"]["passed"] is False
    assert document["overall"]["score"] is None
    assert document["overall"]["reasons"] == ["2 critical cell(s) errored: a[calm], a[later]"]
    junit = (out / "junit.xml").read_text()
    assert '<property name="score" value="n/a" />' in junit
    assert '<property name="passed" value="false" />' in junit
    body = comment.render_first(from_document(document))
    assert "contract c: n/a" in body
    assert "0.00" not in body


def test_a_slow_agent_is_never_a_silent_wait(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flakestorm.agents import readiness

    monkeypatch.setattr(readiness, "PROGRESS_INTERVAL_S", 0.1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening: every connect is refused
        port = sock.getsockname()[1]
        text = (
            f"agent: {{endpoint: 'http://127.0.0.1:{port}/invoke', ready_timeout: 400}}\n"
            "golden_prompts: [hi]\n"
            "contract:\n"
            "  name: c\n"
            "  invariants: [{id: a, type: completes}]\n"
            "  chaos_matrix: [{name: calm}]\n"
        )
        path = write(tmp_path, text)
        args = ["contract", "run", "-c", str(path), "--output", str(tmp_path / "out")]
        result = runner.invoke(main, args)
    assert result.exit_code == 3, result.output
    waiting = [line for line in result.stderr.splitlines() if line.startswith("waiting for")]
    assert waiting, result.stderr
    for line in waiting:
        assert "of 0.4 s (agent.ready_timeout)" in line
        assert line.endswith(f"last error: TCP connect to 127.0.0.1:{port}: connection refused")
    # said once, in the run's report (not once as an error and again in the verdict)
    assert result.stdout.count("the agent was not ready after 400 ms") == 1
    assert "the agent was not ready after 400 ms" not in result.stderr
    assert "Verdict: ERROR (exit 3: 1 cell errored: not sent: the agent never became ready)" in (
        result.stdout
    )
    # and every report is written, saying why
    out = tmp_path / "out"
    assert json.loads((out / "results.json").read_text())["stop_reason"] == (
        "the agent never became ready"
    )
    assert "not sent: the agent never became ready" in (out / "junit.xml").read_text()
    assert "the agent was not ready after 400 ms" in (out / "summary.md").read_text()


def test_a_run_reads_its_config_without_pydantic_plugins_and_its_agent_has_them(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flakestorm's own models are built without pydantic's plugin scan; a python agent's
    models, built when the run calls it, get the plugins the environment has."""
    module = f"plugins_agent_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(
        "import os\nSEEN = []\n\ndef answer(prompt):\n"
        "    SEEN.append(os.environ.get('PYDANTIC_DISABLE_PLUGINS'))\n    return 'fine'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "flakestorm.yaml").write_text(
        f'agent: {{type: python, endpoint: "{module}:answer"}}\n'
        'golden_prompts: ["hello"]\n'
        "contract:\n  name: c\n  invariants: [{id: a, type: output_not_empty}]\n"
        "  chaos_matrix: [{name: calm}]\n"
        f"output: {{dir: {tmp_path / 'out'}, formats: [json]}}\n"
    )
    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    import flakestorm.cli.run as run

    seen: list[str | None] = []
    real = run.load

    def load(path: Path) -> object:
        seen.append(os.environ.get("PYDANTIC_DISABLE_PLUGINS"))
        return real(path)

    monkeypatch.setattr(run, "load", load)
    result = runner.invoke(main, ["contract", "run", "-c", str(tmp_path / "flakestorm.yaml")])
    assert result.exit_code == 0, result.output
    assert seen == ["__all__"]  # while the config is read
    assert set(sys.modules[module].SEEN) == {None}  # the agent: as the environment has it
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
    del sys.modules[module]
