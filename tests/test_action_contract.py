"""The action's surfaces outside Python stay in step with the code.

action.yml inputs ↔ :class:`flakestorm.github.settings.Settings` ↔ the input table of
docs/action.md;
action.yml outputs ↔ what the action sets (:class:`flakestorm.github.outputs.StepOutputs`) ↔ the
output table; the Dockerfile's rules for container actions; requirements/docker.txt pins exactly
what the package needs at run time.
"""

from __future__ import annotations

import dataclasses
import json
import re
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from flakestorm.github.outputs import StepOutputs
from flakestorm.github.settings import INPUTS, OUTPUTS, Settings, input_var, parse_settings

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
DOCS = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


README = (ROOT / "README.md").read_text(encoding="utf-8")


def _table(heading: str, doc: str = DOCS) -> list[list[str]]:
    """The rows (cells stripped) of the first table after ``heading`` in ``doc``."""
    section = doc.split(f"\n{heading}\n", 1)[1]
    table = next(b for b in section.split("\n\n") if b.strip().startswith("|"))
    rows = []
    for line in table.strip().splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[1:]  # without the header


def _code(cell: str) -> str:
    match = re.fullmatch(r"`([^`]*)`", cell)
    assert match, f"expected a `code` cell, got {cell!r}"
    return match[1]


# --------------------------------------------------------------------------- inputs


def test_action_inputs_are_the_settings_fields_in_order() -> None:
    assert list(ACTION["inputs"]) == list(INPUTS)
    assert [f.name for f in dataclasses.fields(Settings)] == [n.replace("-", "_") for n in INPUTS]


def test_action_input_defaults_parse_to_the_settings_defaults() -> None:
    env = {}
    for name, spec in ACTION["inputs"].items():
        assert spec.get("description"), name
        assert spec.get("required") is False, name
        assert "default" in spec, name
        env[input_var(name)] = str(spec["default"])
    assert ACTION["inputs"]["github-token"]["default"] == "${{ github.token }}"
    env[input_var("github-token")] = ""  # what the expression would be without a token
    assert parse_settings(env) == Settings()


def test_docs_input_table_matches_action_yml() -> None:
    rows = _table("## Inputs")
    assert [_code(row[0]) for row in rows] == list(INPUTS)
    for row in rows:
        name, default = _code(row[0]), row[1]
        expected = str(ACTION["inputs"][name]["default"])
        assert (_code(default) if default else "") == expected, name
        assert row[2], name


def test_readme_tables_are_the_docs_tables() -> None:
    assert _table("### Inputs", README) == _table("## Inputs")
    assert _table("### Outputs", README) == _table("## Outputs")


def test_input_variables_keep_hyphens() -> None:
    assert input_var("min-score") == "INPUT_MIN-SCORE"
    assert input_var("github-token") == "INPUT_GITHUB-TOKEN"


# --------------------------------------------------------------------------- outputs


def test_outputs_match_action_yml_entrypoint_and_docs() -> None:
    assert list(ACTION["outputs"]) == list(OUTPUTS)
    assert all(spec.get("description") for spec in ACTION["outputs"].values())
    # the outputs are built as StepOutputs (a field per output); any set by name counts too
    sources = [ROOT / "entrypoint.py", *sorted((ROOT / "flakestorm" / "github").glob("*.py"))]
    by_name = {
        name
        for path in sources
        for name in re.findall(r'set_output\(\s*"([\w-]+)"', path.read_text(encoding="utf-8"))
    }
    built = {field.name.replace("_", "-") for field in dataclasses.fields(StepOutputs)}
    assert by_name | built == set(OUTPUTS)
    assert [_code(row[0]) for row in _table("## Outputs")] == list(OUTPUTS)


def test_action_metadata() -> None:
    assert ACTION["name"] and ACTION["description"] and ACTION["author"]
    assert ACTION["branding"]["icon"] and ACTION["branding"]["color"]
    assert ACTION["runs"] == {"using": "docker", "image": "Dockerfile"}


# --------------------------------------------------------------------------- Dockerfile


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_has_no_user_or_workdir() -> None:
    words = [word for word, _ in _instructions()]
    assert "USER" not in words
    assert "WORKDIR" not in words


def test_dockerfile_base_image_argument() -> None:
    instructions = _instructions()
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.12-slim")
    assert instructions[1] == ("FROM", "${BASE_IMAGE}")
    assert [w for w, _ in instructions].count("FROM") == 1


def test_dockerfile_entrypoint_is_absolute_exec_form() -> None:
    entrypoints = [args for word, args in _instructions() if word == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    argv = json.loads(entrypoints[0])
    assert argv == ["/opt/flakestorm/bin/python", "/opt/flakestorm/entrypoint.py"]
    assert all(arg.startswith("/") for arg in argv)
    assert ("COPY", "entrypoint.py /opt/flakestorm/entrypoint.py") in _instructions()
    assert "CMD" not in [word for word, _ in _instructions()]


def test_dockerfile_environment_and_health() -> None:
    env = " ".join(args for word, args in _instructions() if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    assert ("HEALTHCHECK", "NONE") in _instructions()
    runs = " ".join(args for word, args in _instructions() if word == "RUN")
    assert "-r /tmp/flakestorm/requirements.txt" in runs
    assert "--no-deps" in runs


def test_dockerignore_sends_only_what_the_dockerfile_copies() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    included = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    sources = set()
    for word, args in _instructions():
        if word == "COPY":
            sources.update(args.split()[:-1])
    assert sources <= included
    for heavy in (".venv", ".git", "tests", "flakestorm-reports", ".mypy_cache"):
        assert heavy not in included


# --------------------------------------------------------------------------- requirements


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "requirements" / "docker.txt").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"not an exact pin: {line!r}"
        name = canonicalize_name(match[1])
        assert name not in pins, f"pinned twice: {name}"
        pins[name] = Version(match[2])
    return pins


def _runtime_requirements(name: str) -> list[Requirement]:
    environment: dict[str, Any] = dict(default_environment())
    environment["extra"] = ""
    reqs = [Requirement(r) for r in distribution(name).requires or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(environment)]


def test_docker_requirements_pin_every_runtime_dependency_exactly() -> None:
    pins = _pins()
    needed: set[str] = set()
    todo = ["flakestorm"]
    while todo:
        for requirement in _runtime_requirements(todo.pop()):
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{name} (needed at run time) is not in requirements/docker.txt"
            assert requirement.specifier.contains(pins[name], prereleases=True), (
                f"{name}=={pins[name]} does not satisfy {requirement}"
            )
            if name not in needed:
                needed.add(name)
                try:
                    distribution(name)
                except PackageNotFoundError:
                    pytest.fail(f"{name} is not installed: cannot check its own requirements")
                todo.append(name)
    assert set(pins) == needed, f"pinned but not needed: {sorted(set(pins) - needed)}"


def test_pyproject_dependencies_are_all_pinned() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block
    pins = _pins()
    for spec in re.findall(r'"([^"]+)"', block[1]):
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in pins, name
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} vs {spec}"
