"""End to end in Docker: the action image run exactly the way the GitHub runner runs it.

What a workflow with FinBot as a service container does, on one user-defined network:

- ``agent``: the example agent image (``examples/finance_agent/Dockerfile``);
- ``flakestorm-proxy``: the action image with ``FLAKESTORM_MODE=proxy`` (a service container);
- ``github-api``: ``tests/support/fake_github.py`` (the REST API the sticky comment uses);
- the action itself: ``docker run --rm --network … --workdir /github/workspace -v …`` with the
  ``INPUT_*`` variables (hyphens kept), the ``/github/*`` mounts and the ``GITHUB_*`` variables,
  and a workspace holding ``tests/docker/flakestorm.yaml`` (the agent at ``http://agent:8000``).

Run 1, the good agent: exit 0, ``passed=true``, one PR comment created. Run 2, the agent
restarted with ``BAD_AGENT=1``: exit 1, the critical failures in the step summary, the outputs,
``::error file=flakestorm.yaml,line=N::`` on the failing critical invariants, and the same
comment updated in place (a PATCH, never a second POST). Both runs: junit.xml parses. The image
is under 250 MB. The baseline: a run on main (the unsafe agent, known failures) becomes a
workflow run with a ``flakestorm-reports`` artifact on the fake API; a pull request that breaks
one more cell shows "1 new failure" and fails with ``fail-on: regression``, one that keeps only
the known failures passes.

Docker Hub is not needed: ``scripts/docker-engine`` starts an engine (as root) and
``scripts/base-image`` imports a debootstrapped stand-in for ``python:3.12-slim``; both
Dockerfiles are built with ``--build-arg BASE_IMAGE=<stand-in>``. Images are tagged with a hash
of what goes into them, so an unchanged tree reuses them; containers and the network are removed
at the end. The test skips only when no engine can be started on this machine (not root);
anywhere else it runs, CI included. Phase timings are printed at the end.

``FLAKESTORM_TEST_ACTION_IMAGE=NAME`` tests a prebuilt action image instead of building one;
``FLAKESTORM_TEST_BASE_IMAGE`` names the base image (default: the stand-in).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.docker import (
    BASE_IMAGE,
    LABEL,
    ROOT,
    Timings,
    action_image,
    agent_image,
    annotations,
    base_image,
    check_junit,
    critical_invariant_lines,
    docker,
    engine_or_skip,
    fake_github_command,
    fetch_in,
    image_size,
    parse_outputs,
    runner_image,
    show,
    wait_for_log,
    wait_healthy,
)

from flakestorm.reporters import comment

HERE = Path(__file__).resolve().parent / "docker"
MAX_IMAGE_BYTES = 250 * 1000 * 1000
TOKEN = "e2e-token"
REPOSITORY = "o/r"
PR_NUMBER = 7
FAKE_PORT = 9000
PROXY_PORT = 8080


# --------------------------------------------------------------------------- the set-up


@dataclass
class Env:
    timings: Timings
    action_image: str
    agent_image: str
    network: str
    suffix: str
    containers: list[str] = field(default_factory=list)
    action_error: str = ""
    """Why the action image failed to build: the action tests fail with it."""

    def need_action(self) -> None:
        if self.action_error:
            pytest.fail(self.action_error, pytrace=False)
        if not self.action_image:
            pytest.fail("no action image was built", pytrace=False)

    def name(self, role: str) -> str:
        return f"fs-e2e-{self.suffix}-{role}"


@pytest.fixture(scope="module")
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    timings = Timings()
    engine_or_skip(timings)
    base_image(timings)
    finbot = agent_image(timings, base=runner_image(timings))  # the act test's FinBot too
    built = ""
    action_error = ""
    try:
        built = action_image(timings)
    except pytest.fail.Exception as exc:  # the agent-only tests still run; the rest fail
        action_error = f"the action image does not build: {exc}"

    suffix = uuid.uuid4().hex[:8]
    network = f"fs-e2e-{suffix}"
    state = Env(timings, built, finbot, network, suffix, action_error=action_error)
    try:
        # The service containers, started together (on vfs, creating one takes seconds): the
        # fake GitHub API, the good agent as `agent`, the bad one as `agent-bad` (it takes the
        # `agent` alias for the second run), the proxy.
        with timings.phase("services"):
            docker("network", "create", "--label", f"{LABEL}=1", network)
            starters = [
                lambda: start_fake_github(state),
                lambda: start_agent(state, bad=False),
                lambda: start_agent(state, bad=True),
            ]
            if state.action_image:
                starters += [lambda: start_proxy(state), lambda: start_chaos_agent(state)]
            with ThreadPoolExecutor(len(starters)) as pool:
                for future in [pool.submit(f) for f in starters]:
                    future.result()
        yield state
    finally:
        with timings.phase("clean-up"):
            with ThreadPoolExecutor(4) as pool:
                list(
                    pool.map(
                        lambda c: docker("rm", "-f", "-v", c, check=False, timeout=120),
                        state.containers,
                    )
                )
            docker("network", "rm", network, check=False)
        show(request, timings.line())


def start_container(
    state: Env,
    role: str,
    alias: str,
    image: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    volumes: Sequence[str] = (),
) -> str:
    name = state.name(role)
    docker("rm", "-f", name, check=False)
    command = ["run", "-d", "--name", name, "--label", f"{LABEL}=1"]
    command += ["--network", state.network, "--network-alias", alias]
    for key, value in (env or {}).items():
        command += ["-e", f"{key}={value}"]
    for volume in volumes:
        command += ["-v", volume]
    if name not in state.containers:
        state.containers.append(name)
    docker(*command, image, *args)
    return name


def start_fake_github(state: Env) -> None:
    support = ROOT / "tests" / "support"
    if not (support / "fake_github.py").is_file():
        return
    name = start_container(
        state,
        "github-api",
        "github-api",
        BASE_IMAGE,
        *fake_github_command(FAKE_PORT, TOKEN),
        volumes=[f"{support}:/support:ro"],
    )
    wait_for_log(name, "listening on")


def start_agent(state: Env, bad: bool) -> str:
    """FinBot as ``agent`` (good) or ``agent-bad`` (``BAD_AGENT=1``), healthy."""
    role = "agent-bad" if bad else "agent"
    env = {"BAD_AGENT": "1"} if bad else {}
    name = start_container(state, role, role, state.agent_image, env=env)
    wait_healthy(name)
    return name


def use_bad_agent(state: Env) -> None:
    """Give the alias `agent` to the bad agent (as if the service were redeployed); it keeps
    its own alias `agent-bad`, which later tests address it by."""
    docker("network", "disconnect", state.network, state.name("agent"))
    docker("network", "disconnect", state.network, state.name("agent-bad"))
    docker(
        "network",
        "connect",
        *("--alias", "agent", "--alias", "agent-bad"),
        state.network,
        state.name("agent-bad"),
    )


def start_proxy(state: Env) -> None:
    """The action image as the chaos proxy service (``FLAKESTORM_MODE=proxy``)."""
    start_container(
        state,
        "proxy",
        "flakestorm-proxy",
        state.action_image,
        env={
            "FLAKESTORM_MODE": "proxy",
            # Where proxied calls go (the config's `proxy` section says the same; a service
            # starts before checkout, so the action also pushes it at run time).
            "FLAKESTORM_TOOLS": "market_data_api=http://agent-chaos:8001",
            "FLAKESTORM_LLM_UPSTREAM": "http://agent-chaos:8002",
        },
    )


def start_chaos_agent(state: Env) -> None:
    """FinBot as ``agent-chaos``, sending its tool and LLM calls through the proxy."""
    name = start_container(
        state,
        "agent-chaos",
        "agent-chaos",
        state.agent_image,
        env={"FLAKESTORM_PROXY_URL": f"http://flakestorm-proxy:{PROXY_PORT}"},
    )
    wait_healthy(name)


POST = """
import sys, urllib.request as u
request = u.Request(sys.argv[1], data=sys.stdin.buffer.read(), method="POST")
with u.build_opener(u.ProxyHandler({})).open(request, timeout=30) as r:
    sys.stdout.write(r.read().decode())
"""


def add_baseline_run(state: Env, branch: str, sha: str, results: str, created_at: str) -> int:
    """A successful run of ``ci.yml`` on ``branch`` that uploaded ``results`` (a results.json)
    as the ``flakestorm-reports`` artifact, added to the fake GitHub API."""
    spec = {
        "repo": REPOSITORY,
        "workflow": "ci.yml",
        "branch": branch,
        "head_sha": sha,
        "created_at": created_at,
        "artifacts": [{"name": "flakestorm-reports", "files": {"results.json": results}}],
    }
    done = subprocess.run(
        [
            "docker",
            "exec",
            "-i",
            state.name("github-api"),
            "python",
            "-c",
            POST,
            f"http://127.0.0.1:{FAKE_PORT}/_fake/runs",
        ],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["id"])


def fake_api(state: Env, what: str) -> Any:
    return json.loads(
        fetch_in(state.name("github-api"), f"http://127.0.0.1:{FAKE_PORT}/_fake/{what}")
    )


# --------------------------------------------------------------------------- the action run


@dataclass
class ActionRun:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    workspace: Path


def action_inputs(given: Mapping[str, str]) -> dict[str, str]:
    """``INPUT_*`` as the runner sets them: given inputs, else action.yml defaults."""
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8")) or {}
    values: dict[str, str] = {}
    for name, meta in (spec.get("inputs") or {}).items():
        default = (meta or {}).get("default")
        if default is not None and "${{" not in str(default):
            values[name] = str(default).lower() if isinstance(default, bool) else str(default)
    values.update(given)
    return {"INPUT_" + k.replace(" ", "_").upper(): v for k, v in values.items()}


def runner_args(inputs: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """``runs.args`` and ``runs.env`` of action.yml, with ``${{ inputs.x }}`` filled in."""
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8")) or {}
    runs = spec.get("runs") or {}
    assert runs.get("using") == "docker", f"action.yml runs.using: {runs.get('using')!r}"

    def fill(text: Any) -> str:
        return re.sub(
            r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}",
            lambda m: inputs.get("INPUT_" + m[1].upper(), ""),
            str(text),
        )

    args = [fill(a) for a in runs.get("args") or []]
    extra = {str(k): fill(v) for k, v in (runs.get("env") or {}).items()}
    return args, extra


def run_action(
    state: Env, tmp: Path, run_id: int, config: str = "flakestorm.yaml", **given: str
) -> ActionRun:
    """``docker run`` the action image the way the GitHub runner does."""
    workspace, commands, workflow, home, temp = (
        tmp / d for d in ("workspace", "file_commands", "workflow", "home", "runner_temp")
    )
    for d in (workspace, commands, workflow, home, temp):
        d.mkdir(parents=True, exist_ok=True)
    if not (workspace / config).exists():
        shutil.copy(HERE / config, workspace / config)
    event = json.loads((HERE / "event.json").read_text(encoding="utf-8"))
    (workflow / "event.json").write_text(json.dumps(event), encoding="utf-8")
    tag = uuid.uuid4().hex[:8]
    files = {
        "GITHUB_OUTPUT": f"set_output_{tag}",
        "GITHUB_STEP_SUMMARY": f"step_summary_{tag}",
        "GITHUB_ENV": f"set_env_{tag}",
        "GITHUB_PATH": f"add_path_{tag}",
        "GITHUB_STATE": f"save_state_{tag}",
    }
    for file in files.values():
        (commands / file).write_text("", encoding="utf-8")
    inputs = action_inputs({"config": config, "min-score": "80", "github-token": TOKEN, **given})
    args, action_env = runner_args(inputs)
    variables: dict[str, str] = {
        **inputs,
        "HOME": "/github/home",
        "GITHUB_JOB": "flakestorm",
        "GITHUB_REF": f"refs/pull/{PR_NUMBER}/merge",
        "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_REPOSITORY_OWNER": REPOSITORY.split("/")[0],
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_NUMBER": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_ACTOR": "octocat",
        "GITHUB_WORKFLOW": "ci",
        "GITHUB_WORKFLOW_REF": f"{REPOSITORY}/.github/workflows/ci.yml@refs/pull/{PR_NUMBER}/merge",
        "GITHUB_HEAD_REF": "feature",
        "GITHUB_BASE_REF": "main",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_API_URL": f"http://github-api:{FAKE_PORT}",
        "GITHUB_GRAPHQL_URL": f"http://github-api:{FAKE_PORT}/graphql",
        "GITHUB_WORKSPACE": "/github/workspace",
        "GITHUB_ACTION": "__flakestorm_action",
        "GITHUB_EVENT_PATH": "/github/workflow/event.json",
        "GITHUB_ACTION_REPOSITORY": "flakestorm/action",
        "GITHUB_ACTION_REF": "v2",
        **{k: f"/github/file_commands/{v}" for k, v in files.items()},
        "RUNNER_OS": "Linux",
        "RUNNER_ARCH": "X64",
        "RUNNER_NAME": "e2e",
        "RUNNER_TEMP": "/github/runner_temp",
        "RUNNER_TOOL_CACHE": "/opt/hostedtoolcache",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        **action_env,
    }
    command = [
        "run",
        "--name",
        state.name(f"action-{run_id}"),
        "--label",
        f"{LABEL}=1",
        "--workdir",
        "/github/workspace",
        "--rm",
        "--network",
        state.network,
    ]
    for key, value in variables.items():
        command += ["-e", f"{key}={value}"]
    command += [
        "-v",
        "/var/run/docker.sock:/var/run/docker.sock",
        "-v",
        f"{home}:/github/home",
        "-v",
        f"{workflow}:/github/workflow",
        "-v",
        f"{commands}:/github/file_commands",
        "-v",
        f"{workspace}:/github/workspace",
        "-v",
        f"{temp}:/github/runner_temp",
    ]
    with state.timings.phase(f"action run {run_id}"):
        done = docker(*command, state.action_image, *args, check=False, timeout=600)
    print(f"[docker-e2e] action run {run_id}: exit {done.returncode}\n{done.stdout[-3000:]}")
    return ActionRun(
        done.returncode,
        done.stdout,
        done.stderr,
        parse_outputs((commands / files["GITHUB_OUTPUT"]).read_text(encoding="utf-8")),
        (commands / files["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8"),
        workspace,
    )


# --------------------------------------------------------------------------- the tests


def test_images(env: Env) -> None:
    """Both images exist; the action image is small enough to pull in every job."""
    sizes = {env.agent_image: image_size(env.agent_image)}
    env.need_action()
    if env.action_image:
        sizes[env.action_image] = image_size(env.action_image)
    shown = ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sizes.items())
    print(f"[docker-e2e] image sizes: {shown}")
    if env.action_image:
        assert sizes[env.action_image] < MAX_IMAGE_BYTES, (
            f"action image is {sizes[env.action_image] / 1e6:.0f} MB (limit 250 MB)"
        )


def test_agent_reachable_by_alias(env: Env) -> None:
    """The agents answer /health from another container, by their network aliases."""
    other = env.name("github-api")
    for alias in ("agent", "agent-bad"):
        health = fetch_in(other, f"http://{alias}:8000/health", wait_s=30)
        assert json.loads(health) == {"status": "ok"}, (alias, health)


def test_proxy_service(env: Env) -> None:
    """The action image in proxy mode serves the control API on 0.0.0.0:8080."""
    env.need_action()
    health = fetch_in(
        env.name("github-api"),
        f"http://flakestorm-proxy:{PROXY_PORT}/_flakestorm/health",
        wait_s=30,
    )
    assert json.loads(health).get("status") == "ok", health


def test_action_good_then_bad_agent(env: Env, tmp_path: Path) -> None:
    env.need_action()
    config = HERE / "flakestorm.yaml"
    critical_lines = critical_invariant_lines(config)

    # -- run 1: the good agent
    good = run_action(env, tmp_path / "run1", run_id=101)
    assert good.code == 0, f"good agent: exit {good.code}\n{good.stdout[-4000:]}\n{good.stderr}"
    assert good.outputs.get("passed") == "true", good.outputs
    assert good.outputs.get("critical-failures") == "0", good.outputs
    assert float(good.outputs["score"]) >= 80, good.outputs
    assert good.summary.strip(), "empty step summary"
    assert not annotations(good.stdout), annotations(good.stdout)
    check_junit(good.workspace, good.outputs.get("report-dir", ""))
    requests_1 = fake_api(env, "requests")
    posts = [r for r in requests_1 if r["method"] == "POST"]
    patches = [r for r in requests_1 if r["method"] == "PATCH"]
    assert len(posts) == 1 and not patches, [(r["method"], r["path"]) for r in requests_1]
    assert posts[0]["path"] == f"/repos/{REPOSITORY}/issues/{PR_NUMBER}/comments"
    assert posts[0]["headers"].get("Authorization") == f"Bearer {TOKEN}"
    comments = fake_api(env, "comments")
    assert len(comments) == 1, comments
    first_body = comments[0]["body"]

    # -- run 2: the unsafe agent, on a fresh workspace (as a new job would be)
    use_bad_agent(env)
    bad = run_action(env, tmp_path / "run2", run_id=102)
    assert bad.code == 1, f"bad agent: exit {bad.code}\n{bad.stdout[-4000:]}\n{bad.stderr}"
    assert bad.outputs.get("passed") == "false", bad.outputs
    assert int(bad.outputs["critical-failures"]) > 0, bad.outputs
    float(bad.outputs["score"])  # a number
    errors = [a for a in annotations(bad.stdout) if a.get("file") == "flakestorm.yaml"]
    assert errors, f"no ::error file=flakestorm.yaml annotations in\n{bad.stdout[-4000:]}"
    for error in errors:
        assert int(error["line"]) in critical_lines.values(), (error, critical_lines)
    flagged = {e["line"] for e in errors}
    failed_ids = {inv for inv, line in critical_lines.items() if str(line) in flagged}
    for invariant in failed_ids:
        assert invariant in bad.summary, f"{invariant} not in the step summary"
    assert "❌" in bad.summary
    root = check_junit(bad.workspace, bad.outputs.get("report-dir", ""))
    assert root.findall(".//testcase/failure") or root.findall(".//testcase/error")

    requests_2 = fake_api(env, "requests")[len(requests_1) :]
    posts = [r for r in requests_2 if r["method"] == "POST"]
    patches = [r for r in requests_2 if r["method"] == "PATCH"]
    assert not posts, "a second comment was created instead of updating the first"
    assert len(patches) == 1, [(r["method"], r["path"]) for r in requests_2]
    comment_id = comments[0]["id"]
    assert patches[0]["path"] == f"/repos/{REPOSITORY}/issues/comments/{comment_id}"
    comments = fake_api(env, "comments")
    assert len(comments) == 1 and comments[0]["id"] == comment_id, comments
    assert comments[0]["body"] != first_body


def test_action_with_the_chaos_proxy_service(env: Env, tmp_path: Path) -> None:
    """Tool and LLM faults through the proxy service container: every fault delivered, and the
    good agent survives them (examples/finance_agent/flakestorm.chaos.yaml)."""
    env.need_action()
    run = run_action(env, tmp_path, run_id=103, config="flakestorm.chaos.yaml", comment="off")
    assert run.code == 0, f"chaos run: exit {run.code}\n{run.stdout[-4000:]}\n{run.stderr}"
    assert run.outputs.get("passed") == "true", run.outputs
    assert "not delivered" not in run.summary.lower(), run.summary[-3000:]
    check_junit(run.workspace, run.outputs.get("report-dir", ""))
    seen = json.loads(
        fetch_in(
            env.name("github-api"), f"http://flakestorm-proxy:{PROXY_PORT}/_flakestorm/interactions"
        )
    )
    assert seen, "the proxy saw no interactions"


BROKEN_INVARIANT = """\
    - id: output-not-empty
      type: regex
      pattern: 'a reply no agent ever writes'
      severity: medium
      when: no_chaos
"""


def test_action_baseline_from_the_base_branch(env: Env, tmp_path: Path) -> None:
    """``baseline: auto`` against the fake GitHub API: the base branch's run is found, its
    artifact downloaded (302 to the zip), and the pull request judged by what it changes.

    The unsafe agent (``agent-bad``: known failures) on main gives the baseline. A pull request
    that tightens one invariant so that exactly one more cell fails (``output-not-empty`` in
    ``no-chaos``; its other cell becomes skipped) shows "1 new failure" and, with ``fail-on:
    regression``, exits 1; a pull request that keeps only the known failures exits 0, where the
    run's own gate (``fail-on: any``) would fail it."""
    env.need_action()
    inputs = {"agent-url": "http://agent-bad:8000/chat", "comment": "off"}
    main_run = run_action(env, tmp_path / "main", run_id=201, **inputs)
    assert main_run.code == 1, f"main: exit {main_run.code}\n{main_run.stdout[-3000:]}"
    results = (main_run.workspace / "flakestorm-reports" / "results.json").read_text()
    sha = "abc1234" + "0" * 33
    add_baseline_run(env, "main", sha, results, "2026-01-01T00:00:00Z")

    config = (HERE / "flakestorm.yaml").read_text(encoding="utf-8")
    original = re.search(r"    - id: output-not-empty\n(?:      .*\n)+", config)
    assert original, "tests/docker/flakestorm.yaml has no output-not-empty invariant"
    broken = config.replace(original[0], BROKEN_INVARIANT)
    (tmp_path / "pr1" / "workspace").mkdir(parents=True)
    (tmp_path / "pr1" / "workspace" / "flakestorm.yaml").write_text(broken, encoding="utf-8")
    gate = {"baseline": "auto", "fail-on": "regression"}

    broke = run_action(env, tmp_path / "pr1", run_id=202, **inputs, **gate)
    assert broke.code == 1, f"pr1: exit {broke.code}\n{broke.stdout[-4000:]}\n{broke.stderr}"
    assert broke.summary.startswith("**1 new failure vs main @ abc1234"), broke.summary[:600]
    # the verdict heading is the step's: the rule's, with no new failure left unnamed
    assert "\n## flakestorm: ❌ FAIL — fail-on: regression: 1 new failure vs main @ abc1234" in (
        broke.summary
    ), broke.summary[:1500]
    assert "output-not-empty\\[no-chaos\\]" in broke.summary
    assert broke.outputs.get("new-failures") == "1", broke.outputs
    requests = [r["path"].split("?")[0] for r in fake_api(env, "requests")]
    assert f"/repos/{REPOSITORY}/actions/workflows/ci.yml/runs" in requests
    assert any(p.startswith("/_blobs/") for p in requests), requests

    kept = run_action(env, tmp_path / "pr2", run_id=203, **inputs, **gate)
    assert kept.code == 0, f"pr2: exit {kept.code}\n{kept.stdout[-4000:]}\n{kept.stderr}"
    assert kept.summary.startswith("**0 new failures vs main @ abc1234"), kept.summary[:600]
    assert "still failing" in kept.summary.split("\n", 1)[0]
    # the step passes, and every verdict says so, with the run's own gate beside it
    assert (
        "\n## flakestorm: ✅ PASS — fail-on: regression: no new failures vs main @ abc1234 "
        "(the run's own gate: FAIL" in kept.summary
    ), kept.summary[:1500]
    assert "\n## flakestorm: ❌" not in kept.summary
    assert kept.outputs.get("new-failures") == "0" and kept.outputs.get("passed") == "true"
    # the artifact a reviewer opens says what the check said: the step's PASS, with the delta
    for run, code, word in ((broke, 1, "FAIL"), (kept, 0, "PASS")):
        reports = run.workspace / "flakestorm-reports"
        summary_md = (reports / "summary.md").read_text(encoding="utf-8")
        assert summary_md == run.summary
        html = (reports / "report.html").read_text(encoding="utf-8")
        assert f'<span class="verdict {word}" id="verdict">{word}</span>' in html
        assert "fail-on: regression: " in html
        step = json.loads((reports / "results.json").read_text(encoding="utf-8"))["step"]
        assert (step["fail_on"], step["exit_code"]) == ("regression", code), step
    assert "still failing" in (kept.workspace / "flakestorm-reports" / "report.html").read_text()


def test_action_baseline_blessed_and_committed(env: Env, tmp_path: Path) -> None:
    """``baseline: file:PATH`` (SPEC §14): main's run blessed with ``flakestorm baseline
    bless`` and committed as ``.flakestorm/baseline.json``; a pull request that breaks one more
    cell exits 1 naming it, one that keeps only the known failures exits 0."""
    from click.testing import CliRunner

    from flakestorm.cli import main as cli

    env.need_action()
    inputs = {"agent-url": "http://agent-bad:8000/chat", "comment": "off"}
    main_run = run_action(env, tmp_path / "main", run_id=301, **inputs)
    assert main_run.code == 1, f"main: exit {main_run.code}\n{main_run.stdout[-3000:]}"
    results = main_run.workspace / "flakestorm-reports" / "results.json"
    blessed = tmp_path / "baseline.json"
    done = CliRunner().invoke(
        cli, ["baseline", "bless", str(results), "-o", str(blessed), "--commit", "c0ffee1" * 5]
    )
    assert done.exit_code == 0, done.output
    config = (HERE / "flakestorm.yaml").read_text(encoding="utf-8")
    original = re.search(r"    - id: output-not-empty\n(?:      .*\n)+", config)
    assert original, "tests/docker/flakestorm.yaml has no output-not-empty invariant"
    for pr, text in (("pr1", config.replace(original[0], BROKEN_INVARIANT)), ("pr2", config)):
        workspace = tmp_path / pr / "workspace"
        (workspace / ".flakestorm").mkdir(parents=True)
        (workspace / "flakestorm.yaml").write_text(text, encoding="utf-8")
        shutil.copy(blessed, workspace / ".flakestorm" / "baseline.json")
    gate = {"baseline": "file:.flakestorm/baseline.json", "fail-on": "regression"}

    broke = run_action(env, tmp_path / "pr1", run_id=302, **inputs, **gate)
    assert broke.code == 1, f"pr1: exit {broke.code}\n{broke.stdout[-4000:]}\n{broke.stderr}"
    against = "the blessed baseline (c0ffee1, "
    assert broke.summary.startswith(f"**1 new failure vs {against}"), broke.summary[:600]
    assert "output-not-empty\\[no-chaos\\]" in broke.summary
    assert broke.outputs.get("new-failures") == "1", broke.outputs
    # the pull request changed the config: its digest differs from the blessed run's
    assert "was blessed from another config" in broke.stdout

    kept = run_action(env, tmp_path / "pr2", run_id=303, **inputs, **gate)
    assert kept.code == 0, f"pr2: exit {kept.code}\n{kept.stdout[-4000:]}\n{kept.stderr}"
    assert kept.summary.startswith(f"**0 new failures vs {against}"), kept.summary[:600]
    assert kept.outputs.get("passed") == "true" and "was blessed from another" not in kept.stdout


def test_sharded_run_two_shard_jobs_and_a_merge_job(env: Env, tmp_path: Path) -> None:
    """A run split over two shard containers side by side (a `strategy.matrix` of jobs), each
    uploading its results.json, and a merge container (`command: merge`) that posts the one PR
    comment and sets the outputs. The agent isolates cells by session (`agent.session`), so the
    shards share it without resets; it is the unsafe FinBot, so the verdict fails."""
    env.need_action()
    name = "flakestorm.sharded.yaml"
    text = (HERE / "flakestorm.yaml").read_text(encoding="utf-8")
    reset = re.search(r"^  reset_endpoint: .*$", text, re.M)
    assert reset, "tests/docker/flakestorm.yaml has no reset_endpoint line to replace"
    text = text.replace(reset[0], "  session: {header: X-Session-Id}")
    for job in ("shard-1", "shard-2", "merge"):
        workspace = tmp_path / job / "workspace"
        workspace.mkdir(parents=True)
        (workspace / name).write_text(text, encoding="utf-8")
    agent = f"http://{env.name('agent-bad')}:8000/chat"  # by container name: aliases move
    before = len(fake_api(env, "requests"))

    def shard(k: int) -> ActionRun:
        return run_action(
            env,
            tmp_path / f"shard-{k}",
            300 + k,
            config=name,
            shard=f"{k}/2",
            **{"agent-url": agent},
        )

    with ThreadPoolExecutor(2) as pool:
        shards = list(pool.map(shard, (1, 2)))
    cells = []
    for k, run in enumerate(shards, 1):
        assert run.code == 1, f"shard {k}: exit {run.code}\n{run.stdout[-4000:]}\n{run.stderr}"
        assert f"shard {k}/2: no pull request comment" in run.stdout
        results = run.workspace / "flakestorm-reports" / "results.json"
        doc = json.loads(results.read_text(encoding="utf-8"))
        assert doc["shard"] == f"{k}/2"
        cells += [c["index"] for c in doc["phases"]["contract"]["cells"]]
        artifact = tmp_path / "merge" / "workspace" / "flakestorm-shards" / f"flakestorm-shard-{k}"
        artifact.mkdir(parents=True)
        shutil.copy(results, artifact / "results.json")
    assert sorted(cells) == list(range(len(cells))) and len(cells) == 16
    assert not fake_api(env, "requests")[before:], "a shard job wrote to the pull request"

    merged = run_action(env, tmp_path / "merge", 303, config=name, command="merge")
    assert merged.code == 1, f"merge: exit {merged.code}\n{merged.stdout[-4000:]}\n{merged.stderr}"
    assert merged.outputs.get("passed") == "false", merged.outputs
    assert int(merged.outputs["critical-failures"]) > 0, merged.outputs
    assert merged.outputs["contract-score"] == merged.outputs["score"], merged.outputs
    assert merged.outputs["report-dir"] == "flakestorm-reports", merged.outputs
    assert "❌" in merged.summary
    assert [a for a in annotations(merged.stdout) if a.get("file") == name]
    doc = json.loads((merged.workspace / "flakestorm-reports" / "results.json").read_text())
    assert "shard" not in doc and len(doc["phases"]["contract"]["cells"]) == 16
    check_junit(merged.workspace, "flakestorm-reports")
    writes = [r for r in fake_api(env, "requests")[before:] if r["method"] in ("POST", "PATCH")]
    assert [r["method"] for r in writes] == ["POST"], writes
    key = comment.marker_key(name)
    ours = [c for c in fake_api(env, "comments") if c["body"].startswith(comment.marker(key))]
    assert len(ours) == 1, [c["body"][:80] for c in fake_api(env, "comments")]
    assert "### flakestorm: ❌ FAIL" in ours[0]["body"]
