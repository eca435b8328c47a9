"""`flakestorm init`: a valid, commented starter config and an optional GitHub workflow."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from click.testing import CliRunner
from support.workflows import readme_workflow

from flakestorm.agents.readiness import resolve_url
from flakestorm.authoring.reference import EDITOR_HEADER, SCHEMA_URL
from flakestorm.authoring.starter import STARTER_CONFIG, STARTER_WORKFLOW
from flakestorm.cli import main
from flakestorm.config import Severity
from flakestorm.engine.runner import Overrides, apply_overrides
from flakestorm.loader import load_config


def test_starter_loads_without_problems_or_warnings(tmp_path: Path) -> None:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(STARTER_CONFIG, encoding="utf-8")
    loaded = load_config(path, env={})
    assert loaded.warnings == ()
    config = loaded.config
    assert config.agent.type.value == "http"
    assert config.agent.endpoint == "http://localhost:8000/chat"
    assert config.agent.health_endpoint == "http://localhost:8000/health"
    assert len(config.golden_prompts) >= 2
    assert config.contract is not None
    assert 3 <= len(config.contract.invariants) <= 4
    assert any(i.severity is Severity.CRITICAL for i in config.contract.invariants)
    scenarios = config.contract.chaos_matrix
    assert [s.name for s in scenarios] == ["no-chaos", "memory-poisoning"]
    assert not scenarios[0].has_chaos
    assert scenarios[1].context_attacks[0].type.value == "memory_poisoning"


def test_starter_reads_the_agent_url_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(STARTER_CONFIG, encoding="utf-8")
    loaded = load_config(path, env={"AGENT_URL": "http://agent:8000"})
    assert loaded.config.agent.endpoint == "http://agent:8000/chat"


def test_starter_first_line_points_editors_at_the_schema() -> None:
    first = STARTER_CONFIG.splitlines()[0]
    assert first == EDITOR_HEADER == f"# yaml-language-server: $schema={SCHEMA_URL}"
    assert SCHEMA_URL == (
        "https://raw.githubusercontent.com/flakestorm/flakestorm/main/schema/flakestorm.schema.json"
    )


def test_init_github_writes_the_readmes_workflow() -> None:
    """One workflow: what `init --github` writes is the README's copy-paste block, byte for
    byte, so the health checks, `actions: read`, the timeout, the agent-url/proxy-url inputs,
    the baseline and the artifact step a newcomer reads about are what they get."""
    assert readme_workflow() == STARTER_WORKFLOW
    workflow = yaml.safe_load(STARTER_WORKFLOW)
    assert workflow["permissions"] == {
        "contents": "read",
        "pull-requests": "write",
        "actions": "read",
    }
    job = workflow["jobs"]["flakestorm"]
    assert job["timeout-minutes"] > 0
    assert set(job["services"]) == {"agent", "flakestorm-proxy"}
    for service in job["services"].values():
        assert "--health-cmd" in service["options"]
    assert job["services"]["flakestorm-proxy"]["env"]["FLAKESTORM_MODE"] == "proxy"
    (action,) = [step for step in job["steps"] if step.get("uses") == "flakestorm/action@v2"]
    assert {"agent-url", "proxy-url", "baseline"} <= set(action["with"])
    assert any("upload-artifact" in step.get("uses", "") for step in job["steps"])


def test_the_starters_tool_fault_meets_the_workflows_proxy(tmp_path: Path) -> None:
    """Uncommenting the starter's tool-down scenario gives a fault the agent's calls meet:
    the starter routes market_data_api through the proxy the workflow runs."""
    commented = (
        "    # - name: tool-down\n"
        "    #   tool_faults:\n"
        "    #     - tool: market_data_api\n"
        "    #       mode: error\n"
        "    #       error_code: 503\n"
    )
    assert commented in STARTER_CONFIG
    text = STARTER_CONFIG.replace(commented, commented.replace("    # ", "    "))
    path = tmp_path / "flakestorm.yaml"
    path.write_text(text, encoding="utf-8")
    config = load_config(path, env={}).config
    assert config.contract is not None and config.proxy is not None
    assert "tool-down" in [s.name for s in config.contract.chaos_matrix]
    assert "market_data_api" in config.proxy.tools


def test_init_github_writes_one_agent_in_both_files(tmp_path: Path) -> None:
    """The workflow's agent (the service it health-checks, the URL the action is given) is
    the starter config's: the same endpoint path, and a health endpoint the run polls at the
    path and port the service's health check uses. The action reads the config with
    agent-url in place of agent.endpoint, as here."""
    result = CliRunner().invoke(main, ["init", "--github", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    workflow = yaml.safe_load(
        (tmp_path / ".github" / "workflows" / "flakestorm.yml").read_text(encoding="utf-8")
    )
    job = workflow["jobs"]["flakestorm"]
    (step,) = [s for s in job["steps"] if s.get("uses") == "flakestorm/action@v2"]
    agent_url = step["with"]["agent-url"]
    assert agent_url == "http://agent:8000/chat"
    check = re.search(r"curl -fsS (\S+)", job["services"]["agent"]["options"])
    assert check is not None and check[1] == "http://127.0.0.1:8000/health"

    loaded = load_config(tmp_path / "flakestorm.yaml", env={})
    agent = loaded.config.agent
    # without the action: the config's own agent has the workflow's shape
    assert urlsplit(agent.endpoint).path == urlsplit(agent_url).path == "/chat"
    assert agent.health_endpoint is not None
    assert urlsplit(agent.health_endpoint).path == urlsplit(check[1]).path == "/health"
    # in the action: agent-url replaces the endpoint; the health endpoint moves with it
    ci = apply_overrides(loaded, Overrides(agent_url=agent_url)).config.agent
    assert ci.endpoint == "http://agent:8000/chat"
    assert ci.health_endpoint is not None
    polled = resolve_url(ci.endpoint, ci.health_endpoint)
    assert polled == "http://agent:8000/health"
    assert urlsplit(polled).port == urlsplit(check[1]).port == 8000


def test_init_writes_the_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["init", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "flakestorm.yaml").read_text(encoding="utf-8") == STARTER_CONFIG
    assert not (tmp_path / ".github").exists()

    result = CliRunner().invoke(main, ["init", "--github", "--force", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    workflow = tmp_path / ".github" / "workflows" / "flakestorm.yml"
    assert workflow.read_text(encoding="utf-8") == STARTER_WORKFLOW


def test_init_github_beside_a_config_adds_only_the_workflow(tmp_path: Path) -> None:
    mine = STARTER_CONFIG + "# a line of my own\n"
    config = tmp_path / "flakestorm.yaml"
    config.write_text(mine, encoding="utf-8")
    for flags in ([], ["--force"]):
        result = CliRunner().invoke(main, ["init", "--github", *flags, "--path", str(tmp_path)])
        assert result.exit_code == 0, result.output
        assert config.read_text(encoding="utf-8") == mine  # byte-identical
        workflow = tmp_path / ".github" / "workflows" / "flakestorm.yml"
        assert workflow.read_text(encoding="utf-8") == STARTER_WORKFLOW
        assert f"kept {config}" in result.output


def test_init_refuses_to_overwrite(tmp_path: Path) -> None:
    workflow = tmp_path / ".github" / "workflows" / "flakestorm.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text("mine\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["init", "--github", "--path", str(tmp_path)])
    assert result.exit_code == 2
    assert str(workflow) in result.stderr
    assert "--force" in result.stderr
    # nothing was written: the check comes before any write
    assert not (tmp_path / "flakestorm.yaml").exists()
    assert workflow.read_text(encoding="utf-8") == "mine\n"

    result = CliRunner().invoke(main, ["init", "--github", "--force", "--path", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert workflow.read_text(encoding="utf-8") == STARTER_WORKFLOW
