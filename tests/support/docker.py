"""Docker for the end-to-end tests: an engine, images tagged by a hash of what goes into them,
containers, and reading what a run left behind.

``scripts/docker-engine`` starts an engine (as root) and ``scripts/base-image`` imports a
debootstrapped stand-in for ``python:3.12-slim`` (Docker Hub is out of reach); the Dockerfiles
are built with ``--build-arg BASE_IMAGE=<stand-in>``. An image is tagged with a hash of its
inputs, so an unchanged tree reuses it; older tags of the same repository are pruned.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from support.unavailable import unavailable

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("FLAKESTORM_TEST_BASE_IMAGE", "flakestorm-test/python:3.12-slim")
LABEL = "flakestorm-e2e"
ACTION_REPO = "flakestorm-test/action"
SHOWN = "flakestorm_shown"
"""The key of the lines :func:`show` hands from an xdist worker to the controller."""
# Paths that never go into the action image (for its content hash).
NOT_IN_ACTION_IMAGE = ("tests/", "docs/", "bench/", "examples/", "scripts/", ".ci/", ".github/")


@dataclass
class Timings:
    label: str = "docker-e2e"
    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - start
            self.phases[name] = self.phases.get(name, 0.0) + took
            print(f"[{self.label}] {name}: {took:.1f}s", flush=True)

    def line(self) -> str:
        return f"{self.label} timings: " + ", ".join(
            f"{k} {v:.1f}s" for k, v in self.phases.items()
        )


def run(
    args: Sequence[str],
    *,
    check: bool = True,
    timeout: float = 600,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing its output; on failure (with ``check``) fail with its output."""
    try:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out after {timeout:.0f}s: {' '.join(args)}\n{exc.stdout}\n{exc.stderr}")
    if check and done.returncode != 0:
        pytest.fail(
            f"exit {done.returncode}: {' '.join(args)}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )
    return done


def docker(
    *args: str, check: bool = True, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return run(["docker", *args], check=check, timeout=timeout)


def image_exists(name: str) -> bool:
    return docker("image", "inspect", name, check=False).returncode == 0


def image_id(name: str) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", name).stdout.strip()


def image_size(name: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", name).stdout.strip())


def tree_files(root: Path, under: str = "") -> list[str]:
    """The files git would put in a commit under ``under`` (tracked or new, not ignored)."""
    done = run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", under or "."],
        check=False,
        cwd=root,
    )
    if done.returncode == 0:
        names = done.stdout.splitlines()
    else:  # not a git checkout: walk, skipping the usual caches
        skip = {".git", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        base = root / under if under else root
        names = [
            p.relative_to(root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not skip.intersection(p.relative_to(root).parts)
        ]
    return sorted(n for n in names if (root / n).is_file())


def content_hash(root: Path, names: Sequence[str], *extra: str) -> str:
    digest = hashlib.sha256()
    for part in extra:
        digest.update(part.encode() + b"\0")
    for name in names:
        digest.update(name.encode() + b"\0")
        digest.update(hashlib.sha256((root / name).read_bytes()).digest())
    return digest.hexdigest()[:16]


def proxy_build_args() -> list[str]:
    """How this machine's pip reaches its index, for builds (read now, never committed).

    The proxy variables are predefined build args (every RUN sees them); ``PIP_*`` reach pip
    only if the Dockerfile declares them with ``ARG``.
    """
    args: list[str] = []
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_TRUSTED_HOST",
    ):
        value = os.environ.get(name, "")
        if name.startswith("PIP_") and "INDEX" in name:
            # local file:// indexes of this machine mean nothing inside a build
            value = " ".join(v for v in value.split() if v.startswith(("http://", "https://")))
        if value:
            args += ["--build-arg", f"{name}={value}"]
    return args


def build(
    tag: str,
    context: Path,
    dockerfile: Path,
    timings: Timings,
    what: str,
    base: str = BASE_IMAGE,
) -> None:
    """Build ``tag`` unless it exists (the tag is a content hash: same tag, same image). One
    build of a tag at a time: the Docker test and the runner test, on two workers, build the
    same images, and the second reuses what the first built."""
    with one_at_a_time(f"build-{tag}"):
        if image_exists(tag):
            print(f"[docker-e2e] {what}: reusing {tag}", flush=True)
            return
        with timings.phase(f"build {what}"):
            docker(
                "build",
                "--network",
                "host",
                "--build-arg",
                f"BASE_IMAGE={base}",
                *proxy_build_args(),
                "--label",
                f"{LABEL}=1",
                "-f",
                str(dockerfile),
                "-t",
                tag,
                str(context),
                timeout=1200,
            )
    prune_old_tags(tag)


@contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Hold a lock named ``name`` shared by every process on this machine (a file lock)."""
    import fcntl  # POSIX: the Docker tests run where an engine can be started

    key = hashlib.sha256(name.encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"flakestorm-test-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def prune_old_tags(keep: str, max_age_s: float = 3600) -> None:
    """Remove this repository's other hash tags older than an hour (vfs keeps full copies of
    every layer: edits would otherwise fill the disk). In use by a container: kept."""
    repo = keep.rsplit(":", 1)[0]
    listed = docker(
        "image", "ls", repo, "--format", "{{.Repository}}:{{.Tag}} {{.ID}}", check=False
    )
    keep_id = image_id(keep)
    for line in listed.stdout.splitlines():
        name, _, iid = line.partition(" ")
        if name == keep or keep_id.endswith(iid) or name.endswith(":<none>"):
            continue
        created = docker("image", "inspect", "--format", "{{.Created}}", name, check=False)
        stamp = created.stdout.strip()[:19]
        try:
            age = time.time() - time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            continue
        if age - time.timezone > max_age_s:
            docker("rmi", name, check=False)


def wait_healthy(container: str, timeout_s: float = 90) -> None:
    """Wait for the container's HEALTHCHECK (or, without one, for it to be running)."""
    deadline = time.monotonic() + timeout_s
    status = ""
    while time.monotonic() < deadline:
        state = docker(
            "inspect",
            "--format",
            "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
            container,
            check=False,
        ).stdout.split()
        if state and state[0] in ("exited", "dead"):
            break
        status = state[1] if len(state) > 1 else (state[0] if state else "")
        if status in ("healthy", "running"):
            return
        time.sleep(0.3)
    logs = docker("logs", "--tail", "50", container, check=False)
    pytest.fail(f"{container} not healthy ({status})\n{logs.stdout}\n{logs.stderr}")


def wait_for_log(container: str, needle: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = docker("logs", container, check=False)
        if needle in logs.stdout + logs.stderr:
            return logs.stdout
        if docker("inspect", "--format", "{{.State.Running}}", container).stdout.strip() != "true":
            break
        time.sleep(0.2)
    logs = docker("logs", "--tail", "50", container, check=False)
    pytest.fail(f"{container} never printed {needle!r}\n{logs.stdout}\n{logs.stderr}")


FETCH = """
import json, sys, time, urllib.request as u
url, deadline = sys.argv[1], time.monotonic() + float(sys.argv[2])
while True:
    try:
        with u.build_opener(u.ProxyHandler({})).open(url, timeout=5) as r:
            sys.stdout.write(r.read().decode()); break
    except Exception as e:
        if time.monotonic() > deadline: sys.exit(f"{url}: {e}")
        time.sleep(0.3)
"""


def fetch_in(container: str, url: str, wait_s: float = 0) -> str:
    """GET ``url`` from inside ``container`` (so through the network's DNS aliases)."""
    return docker("exec", container, "python", "-c", FETCH, url, str(wait_s), timeout=120).stdout


def show(request: pytest.FixtureRequest, line: str) -> None:
    """Print ``line`` past pytest's output capture (the timings are worth seeing every run).
    On a worker of pytest-xdist, whose output no one sees, ``line`` goes to the controller,
    which prints it when the worker is done (tests/conftest.py)."""
    shown_by_controller = getattr(request.config, "workeroutput", None)
    if shown_by_controller is not None:
        shown_by_controller.setdefault(SHOWN, []).append(line)
        return
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if capture is None or reporter is None:
        print(line, file=sys.stderr)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line(line)


def engine_or_skip(timings: Timings) -> None:
    with timings.phase("engine"):
        done = run([str(ROOT / "scripts" / "docker-engine")], check=False, timeout=600)
    if done.returncode == 77:
        unavailable("a Docker engine", done.stderr.strip())
    if done.returncode != 0:
        pytest.fail(f"scripts/docker-engine failed (exit {done.returncode}):\n{done.stderr}")


def critical_invariant_lines(config: Path) -> dict[str, int]:
    """``{invariant id: line}`` of the critical invariants' ``- id:`` lines in the config."""
    lines = config.read_text(encoding="utf-8").splitlines()
    spec = yaml.safe_load("\n".join(lines))
    critical = {i["id"] for i in spec["contract"]["invariants"] if i.get("severity") == "critical"}
    where = {}
    for number, line in enumerate(lines, start=1):
        match = re.match(r"^\s*-\s*id:\s*['\"]?([\w.-]+)", line)
        if match and match[1] in critical:
            where[match[1]] = number
    return where


def check_junit(workspace: Path, report_dir: str) -> ET.Element:
    junit = workspace / (report_dir or "flakestorm-reports") / "junit.xml"
    assert junit.is_file(), f"no {junit.relative_to(workspace)}: {sorted(workspace.rglob('*'))}"
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert cases, "junit.xml has no test cases"
    return root


def parse_outputs(text: str) -> dict[str, str]:
    """A ``GITHUB_OUTPUT`` file: ``name=value`` lines and ``name<<DELIM`` … ``DELIM`` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body: list[str] = []
            for item in lines:
                if item == delimiter:
                    break
                body.append(item)
            else:
                raise AssertionError(f"output {name}: no closing {delimiter!r}")
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def annotations(stdout: str, level: str = "error") -> list[dict[str, str]]:
    """The ``::error props::message`` workflow commands in a log, properties parsed."""
    found = []
    for line in stdout.splitlines():
        match = re.match(rf"^::{level}(?: (?P<props>[^:]*))?::(?P<message>.*)$", line)
        if match:
            props = dict(p.split("=", 1) for p in (match["props"] or "").split(",") if "=" in p)
            found.append({**props, "message": match["message"]})
    return found


def fake_github_command(port: int, token: str) -> list[str]:
    """The fake GitHub API (``tests/support`` mounted at ``/support``) on ``0.0.0.0:port``,
    accepting ``token`` with write access: the arguments after the image."""
    command = ["python", "/support/fake_github.py", "--host", "0.0.0.0", "--port", str(port)]
    return [*command, "--token", f"{token}:write"]


AGENT_DIR = ROOT / "examples" / "finance_agent"
AGENT_REPO = "flakestorm-test/finbot"


def base_image(timings: Timings) -> str:
    """The stand-in for ``python:3.12-slim`` (imported once, then reused)."""
    with timings.phase("base image"):
        run([str(ROOT / "scripts" / "base-image"), BASE_IMAGE], timeout=1200)
    return BASE_IMAGE


def runner_image(timings: Timings) -> str:
    """The base image plus curl (``tests/action/runner.Dockerfile``): act's job image, and the
    base of FinBot's image, whose README health check runs curl."""
    dockerfile = ROOT / "tests" / "action" / "runner.Dockerfile"
    tag = "flakestorm-test/act-runner:" + content_hash(
        ROOT, [dockerfile.relative_to(ROOT).as_posix()], image_id(BASE_IMAGE)
    )
    build(tag, dockerfile.parent, dockerfile, timings, "job image")
    return tag


def agent_image(timings: Timings, base: str = BASE_IMAGE) -> str:
    """FinBot's image (``examples/finance_agent/Dockerfile``) on ``base``."""
    prefix = AGENT_DIR.relative_to(ROOT).as_posix() + "/"
    names = [n[len(prefix) :] for n in tree_files(ROOT, prefix.rstrip("/"))]
    tag = f"{AGENT_REPO}:{content_hash(AGENT_DIR, names, image_id(base), 'agent')}"
    build(tag, AGENT_DIR, AGENT_DIR / "Dockerfile", timings, "agent image", base=base)
    return tag


def action_image(timings: Timings) -> str:
    """The action's image from this tree's Dockerfile, or ``FLAKESTORM_TEST_ACTION_IMAGE`` (a
    prebuilt one, a release say). Fails the calling test when it does not build."""
    if os.environ.get("FLAKESTORM_TEST_ACTION_IMAGE"):
        return os.environ["FLAKESTORM_TEST_ACTION_IMAGE"]
    files = [n for n in tree_files(ROOT) if not n.startswith(NOT_IN_ACTION_IMAGE)]
    tag = f"{ACTION_REPO}:{content_hash(ROOT, files, image_id(BASE_IMAGE), 'action')}"
    build(tag, ROOT, ROOT / "Dockerfile", timings, "action image")
    return tag
