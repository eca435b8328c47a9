"""The release workflow and the workflows we ship or document: structure, pins, tag logic, zizmor.

- Every workflow in ``.github/workflows``, in README.md and docs/action.md, and the one
  ``flakestorm init --github`` writes is valid against GitHub's workflow schema (the copy
  check-jsonschema ships); ``action.yml`` and the release-time ``action.yml`` against the
  action schema.
- Every action is pinned by a commit SHA with its release in a comment (flakestorm's own action
  in the copy-paste workflows excepted: ``@v2``, see ``.github/zizmor.yml``), and every checkout
  sets ``persist-credentials: false``.
- ``release.yml``: a tag ``v2.X.Y`` (digits only) builds linux/amd64 + linux/arm64, pushes
  ``:v2.X.Y`` and ``:v2``, rewrites action.yml to the image by digest and moves the tags; the
  trigger's filter and ``scripts/release check-tag`` accept exactly the same tags.
- ``zizmor`` finds nothing at medium or above in ``.github/`` and in the shipped workflows.
"""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support.workflows import WORKFLOWS, documented_workflows, shipped_workflows

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
SCRIPT = ROOT / "scripts" / "release"
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
DIGEST = "sha256:" + "ab" * 32


def _schema(name: str) -> dict[str, Any]:
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(vendor.joinpath(name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _load(text: str) -> Any:
    # YAML 1.1 reads the key `on` as True; GitHub reads it as "on"
    data = yaml.safe_load(text)
    if isinstance(data, dict) and True in data:
        data["on"] = data.pop(True)
    return data


def _uses_lines(text: str) -> list[str]:
    return [m[1].strip() for m in re.finditer(r"^\s*(?:- )?uses:\s*(.+)$", text, re.M)]


# --------------------------------------------------------------------------- structure


def test_the_documented_workflows_are_found() -> None:
    """The README's workflow, docs/action.md's complete one, its `workflow_run` pair and the
    sharded one (shard jobs and the merge job)."""
    workflows = documented_workflows()
    assert len(workflows) == 5, sorted(workflows)
    assert sum(name.startswith("README") for name in workflows) == 1
    assert sum("workflow_run:" in body for body in workflows.values()) == 1


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflows_match_githubs_schema(path: Path) -> None:
    jsonschema.validate(_load(path.read_text(encoding="utf-8")), _schema("github-workflows.json"))


@pytest.mark.parametrize("name", sorted(shipped_workflows()))
def test_documented_workflows_match_githubs_schema(name: str) -> None:
    jsonschema.validate(_load(shipped_workflows()[name]), _schema("github-workflows.json"))


def test_every_action_is_pinned_by_commit_and_checkouts_keep_no_credentials() -> None:
    sources = {p.name: p.read_text(encoding="utf-8") for p in WORKFLOWS}
    sources.update(shipped_workflows())
    for name, text in sources.items():
        for uses in _uses_lines(text):
            if uses.startswith("./"):
                continue
            if name in shipped_workflows() and uses.split("@")[0] == "flakestorm/action":
                assert uses == "flakestorm/action@v2", (name, uses)
                continue
            assert PINNED.match(uses), f"{name}: `uses: {uses}` is not pinned by commit SHA"
        workflow = _load(text)
        for job in workflow["jobs"].values():
            for step in job.get("steps", []):
                if str(step.get("uses", "")).startswith("actions/checkout@"):
                    assert step.get("with", {}).get("persist-credentials") is False, name


def test_no_floating_images() -> None:
    for name, text in shipped_workflows().items():
        for image in re.findall(r"^\s*image:\s*(\S+)", text, re.M):
            assert not image.endswith(":latest") and ":" in image.rsplit("/", 1)[-1], (name, image)


def test_the_release_workflow() -> None:
    workflow = _load(RELEASE.read_text(encoding="utf-8"))
    assert workflow["on"] == {"push": {"tags": ["v2.[0-9]+.[0-9]+"]}}
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "write", "packages": "write"}
    steps = job["steps"]
    uses = [str(s.get("uses", "")).split("@")[0] for s in steps]
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action"):
        assert uses.index(action) < uses.index("docker/build-push-action"), action
    build = next(s for s in steps if str(s.get("uses", "")).startswith("docker/build-push-action"))
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["push"] is True
    assert build["with"]["tags"].splitlines() == [
        "${{ env.IMAGE }}:v${{ steps.tag.outputs.version }}",
        "${{ env.IMAGE }}:v2",
    ]
    assert job["env"]["IMAGE"] == "ghcr.io/flakestorm/flakestorm"
    login = next(s for s in steps if str(s.get("uses", "")).startswith("docker/login-action"))
    assert login["with"]["registry"] == "ghcr.io"
    check = next(s for s in steps if s.get("id") == "tag")
    assert check["run"] == 'scripts/release check-tag "$TAG" >> "$GITHUB_OUTPUT"'
    assert check["env"] == {"TAG": "${{ github.ref_name }}"}
    publish = steps[-1]["run"]
    assert 'scripts/release action-yml "$IMAGE" "$DIGEST" > action.yml.release' in publish
    assert steps[-1]["env"]["DIGEST"] == "${{ steps.build.outputs.digest }}"
    assert 'push --force origin "HEAD:refs/tags/$TAG" "HEAD:refs/tags/v2"' in publish
    # expressions reach shell code only through env (no template injection)
    for step in steps:
        assert "${{" not in step.get("run", ""), step.get("name")


# --------------------------------------------------------------------------- the tag logic


def _github_filter(pattern: str) -> re.Pattern[str]:
    """GitHub's filter pattern syntax for branches and tags, as a regex: ``*`` any run of
    characters but ``/``, ``**`` any run, ``?`` and ``+`` zero-or-one and one-or-more of the
    preceding character, ``[...]`` a class; anything else literal."""
    out = ""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            continue
        if char == "*":
            out += "[^/]*"
        elif char in "?+":
            out += char
        elif char == "[":
            end = pattern.index("]", i)
            out += pattern[i : end + 1]
            i = end
        else:
            out += re.escape(char)
        i += 1
    return re.compile(out)


def _release_script() -> Any:
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("release_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader("release_script", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


TAGS = {
    "v2.0.0": True,
    "v2.13.7": True,
    "v2.1.0-rc.1": False,
    "v2.1": False,
    "v3.0.0": False,
    "2.1.0": False,
    "v2.x.y": False,
    "v20.0.0": False,
    "v2.0.0.1": False,
    "v2": False,
}


@pytest.mark.parametrize(("tag", "released"), TAGS.items())
def test_the_trigger_and_the_check_accept_the_same_tags(tag: str, released: bool) -> None:
    workflow = _load(RELEASE.read_text(encoding="utf-8"))
    (pattern,) = workflow["on"]["push"]["tags"]
    assert bool(_github_filter(pattern).fullmatch(tag)) is released
    script = _release_script()
    if released:
        pyproject = f'[project]\nname = "flakestorm"\nversion = "{tag[1:]}"\n'
        assert script.check_tag(tag, pyproject) == tag[1:]
    else:
        with pytest.raises(script.ReleaseError, match="not a release tag"):
            script.check_tag(tag, '[project]\nversion = "2.0.0"\n')


def test_the_tag_must_be_the_package_version() -> None:
    script = _release_script()
    with pytest.raises(script.ReleaseError, match=r"pyproject\.toml says version 2\.0\.0\.dev0"):
        script.check_tag("v2.0.0", '[project]\nname = "x"\nversion = "2.0.0.dev0"\n')
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check-tag", "v2.0.0"], capture_output=True, text=True
    )
    current = script.project_version((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    if current == "2.0.0":
        assert done.returncode == 0 and done.stdout == "version=2.0.0\n"
    else:
        assert done.returncode == 1 and "set it to 2.0.0" in done.stderr


def test_the_release_action_yml_runs_the_image_by_digest(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "action-yml", "ghcr.io/flakestorm/flakestorm", DIGEST],
        capture_output=True,
        text=True,
        check=True,
    )
    source = (ROOT / "action.yml").read_text(encoding="utf-8")
    released = done.stdout
    changed = [
        (a, b) for a, b in zip(source.splitlines(), released.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("  image: Dockerfile", f"  image: docker://ghcr.io/flakestorm/flakestorm@{DIGEST}")
    ]
    action = yaml.safe_load(released)
    assert action["runs"] == {
        "using": "docker",
        "image": f"docker://ghcr.io/flakestorm/flakestorm@{DIGEST}",
    }
    jsonschema.validate(action, _schema("github-actions.json"))
    jsonschema.validate(yaml.safe_load(source), _schema("github-actions.json"))


@pytest.mark.parametrize(
    ("image", "digest", "expected"),
    [
        ("ghcr.io/flakestorm/flakestorm", "sha256:abc", "not an image digest"),
        ("ghcr.io/flakestorm/flakestorm", "latest", "not an image digest"),
        ("ghcr.io/Flake Storm", DIGEST, "not an image name"),
    ],
)
def test_the_release_action_yml_refuses_bad_values(image: str, digest: str, expected: str) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "action-yml", image, digest], capture_output=True, text=True
    )
    assert done.returncode == 1 and expected in done.stderr and not done.stdout


# --------------------------------------------------------------------------- zizmor


def _zizmor(*args: str) -> subprocess.CompletedProcess[str]:
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).parent / "zizmor")
    assert Path(zizmor).exists(), "zizmor is not installed (pip install -e '.[dev]')"
    return subprocess.run(
        [zizmor, "--offline", "--min-severity", "medium", "--format", "plain", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_zizmor_finds_nothing_in_the_repository_workflows() -> None:
    done = _zizmor(".github/")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr


def test_zizmor_finds_nothing_in_the_documented_workflows(tmp_path: Path) -> None:
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    for name, body in shipped_workflows().items():
        (workflows / f"{name.replace('.', '-')}.yml").write_text(body, encoding="utf-8")
    done = _zizmor("--config", str(ROOT / ".github" / "zizmor.yml"), str(workflows))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr


def test_zizmor_would_catch_an_unpinned_action(tmp_path: Path) -> None:
    """The check can fail: the README's workflow as it was (tags, credentials kept)."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    body = next(iter(documented_workflows().values()))
    body = re.sub(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", "actions/checkout@v4", body)
    (workflows / "old.yml").write_text(body, encoding="utf-8")
    done = _zizmor("--config", str(ROOT / ".github" / "zizmor.yml"), str(workflows))
    assert done.returncode != 0 and "unpinned-uses" in done.stdout + done.stderr
