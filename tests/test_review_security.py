"""Security review: untrusted agent output and secrets on every path to the log, files and GitHub.

Each test pins one finding of the review (attack -> what must not happen).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import requests
from support.server import LoopbackServer, Request, Response
from test_entrypoint import SECRET, Agent, _env, entrypoint

from flakestorm.chaos.proxy.server import ChaosProxy
from flakestorm.errors import ConfigError
from flakestorm.github import GitHub
from flakestorm.loader import load_config_text
from flakestorm.reporters.terminal import safe

# --------------------------------------------------------------------------- 1. config errors

LONG_SECRET = "tok_" + "s3cr3t" * 15  # longer than the 60 characters a message quotes

LEAKY_CONFIG = """\
agent:
  endpoint: "${AGENT_URL}"
  timeout: "${TIMEOUT}"
  method: "Bearer ${TOKEN}"
golden_prompts: [hi]
contract:
  name: c
  invariants:
    - {id: a, type: contains, value: x, severity: "${SEVERITY}"}
  chaos_matrix: [{name: s}]
"""

LEAKY_ENV = {
    "AGENT_URL": "agent-host-no-scheme:8000",
    "TIMEOUT": "timeout-secret-1234",
    "TOKEN": LONG_SECRET,
    "SEVERITY": "quote'and\\backslash-secret",
}


def _problems(text: str, env: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, env=env)
    return "\n".join(str(p) for p in info.value.problems)


def test_config_errors_never_quote_values_from_the_environment() -> None:
    """A config error is printed before any ``::add-mask::`` (the config did not load), and
    the CLI prints it as it is: it must not quote the value of an environment variable."""
    shown = _problems(LEAKY_CONFIG, LEAKY_ENV)
    assert "agent.timeout" in shown and "severity" in shown and "agent.method" in shown
    for secret in LEAKY_ENV.values():
        assert secret not in shown
        assert repr(secret)[1:-1] not in shown
    assert LONG_SECRET[:30] not in shown  # not even the part a truncated quote keeps


def test_semantic_config_errors_never_quote_values_from_the_environment() -> None:
    config = LEAKY_CONFIG.replace('"${TIMEOUT}"', "1000").replace('"Bearer ${TOKEN}"', "POST")
    config = config.replace('"${SEVERITY}"', "high")
    shown = _problems(config, LEAKY_ENV)
    assert "agent.endpoint" in shown
    assert LEAKY_ENV["AGENT_URL"] not in shown


def test_the_action_never_prints_a_secret_in_a_config_error(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "flakestorm.yaml").write_text(LEAKY_CONFIG, encoding="utf-8")
    agent = Agent()
    env = {**_env(workspace, agent), **LEAKY_ENV}
    out = io.StringIO()
    code = entrypoint.main(env, GitHub(env, out=out))
    assert code == 2
    stdout = out.getvalue()
    assert "::error file=flakestorm.yaml" in stdout
    for secret in LEAKY_ENV.values():
        assert secret not in stdout


# --------------------------------------------------------------------------- 2. ##[ commands


LEGACY = [
    "x ##[error]pwned",
    "##[set-output name=passed;]true",
    "see ##[stop-commands]tok then",
    "a ##[add-mask]hello",
]


@pytest.mark.parametrize("text", LEGACY)
def test_safe_defuses_the_legacy_workflow_command_form(text: str) -> None:
    """The runner also parses ``##[command]data`` found *anywhere* in a line
    (``ActionCommand.TryParse``), ``stop-commands`` and ``set-output`` included."""
    assert "##[" not in safe(text)


def test_agent_output_cannot_issue_legacy_workflow_commands(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "flakestorm.yaml").write_text(
        """\
agent:
  endpoint: ${AGENT_URL}
  ready_timeout: 5000
golden_prompts: ["say hello"]
contract:
  name: Greeter
  invariants:
    - id: no-commands
      type: excludes_pattern
      patterns: ["#.*"]
      severity: critical
  chaos_matrix:
    - name: calm
""",
        encoding="utf-8",
    )
    agent = Agent()
    agent.answer = "##[stop-commands]agenttoken ##[error]pwned ##[set-output name=passed;]true"
    with agent.server:
        env = _env(workspace, agent)
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
    stdout = out.getvalue()
    assert code == 1, stdout
    assert "##[" not in stdout
    assert "::error file=flakestorm.yaml" in stdout  # the real annotation is still made


# --------------------------------------------------------------------------- 3. reports


class EchoAgent(Agent):
    """An agent that repeats what it was sent, request headers included."""

    def handle(self, request: Request) -> Response:
        return Response.json({"output": f"you sent {dict(request.headers.items())}"})


def test_reports_never_contain_secrets_the_agent_echoes(tmp_path: Path) -> None:
    """Reports are files, the job summary and the PR comment: ``::add-mask::`` does not reach
    them, so values from the environment must be redacted from the results themselves."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "flakestorm.yaml").write_text(
        """\
agent:
  endpoint: ${AGENT_URL}
  headers:
    Authorization: "Bearer ${AGENT_TOKEN}"
  ready_timeout: 5000
golden_prompts: ["say hello"]
contract:
  name: Greeter
  invariants:
    - id: keeps-credentials
      type: excludes_pattern
      patterns: ["Bearer"]
      severity: critical
  chaos_matrix:
    - name: calm
""",
        encoding="utf-8",
    )
    agent = EchoAgent()
    with agent.server:
        env = _env(workspace, agent)
        out = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=out))
    assert code == 1, out.getvalue()
    reports = workspace / "flakestorm-reports"
    results = (reports / "results.json").read_text(encoding="utf-8")
    assert "Bearer ***" in results  # the reply is there, redacted
    for path in [*reports.iterdir(), Path(env["GITHUB_STEP_SUMMARY"])]:
        assert SECRET not in path.read_text(encoding="utf-8"), path.name
    json.loads(results)


# --------------------------------------------------------------------------- 4. cassettes


def test_a_cassette_never_stores_credentials_from_the_query_string(tmp_path: Path) -> None:
    """Cassettes are meant to be committed: an API key in a tool's query string
    (``?apikey=...``, ``?key=...``) must not be written to it, and replay still matches."""
    cassette = tmp_path / "c.jsonl"
    key = "AKIA-query-secret-0123456789"
    with LoopbackServer(lambda r: Response.json({"quote": 42})) as tool:
        with ChaosProxy(tools={"market": tool.url}, record=cassette) as proxy:
            query = f"symbol=ACME&apikey={key}&access_token={key}x"
            recorded = requests.get(f"{proxy.url}/tools/market/quote?{query}", timeout=5)
        dead = tool.url
    assert recorded.json() == {"quote": 42}
    text = cassette.read_text(encoding="utf-8")
    assert key not in text
    assert "symbol=ACME" in text
    with ChaosProxy(llm_upstream=f"cassette:{cassette}", tools={"market": dead}) as proxy:
        replayed = requests.get(f"{proxy.url}/tools/market/quote?{query}", timeout=5)
    assert replayed.json() == {"quote": 42}
