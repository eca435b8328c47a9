"""Whatever the input, the loader returns a LoadedConfig or raises a located ConfigError.

2,000 examples in all: 900 random texts, 400 random documents, 400 mutations of the full valid
config's data and 300 of its text (truncation, tabs, lost or doubled lines, inserted junk).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flakestorm.errors import ConfigError
from flakestorm.loader import LoadedConfig, load_config_text

VALID = Path(__file__).parent / "configs" / "valid"
FULL_TEXT = (VALID / "full.yaml").read_text(encoding="utf-8")
ENV = {"FLAKESTORM_TEST_TOKEN": "t"}
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=_HEALTH)


def _check(text: str) -> None:
    try:
        result = load_config_text(text, filename="fuzz.yaml", env=ENV, base_dir=VALID)
    except ConfigError as exc:
        assert exc.problems
        for problem in exc.problems:
            # or a replay session file the config names, where its own problem is
            assert problem.file == "fuzz.yaml" or "/replays/" in problem.file
            assert problem.line >= 1 and problem.column >= 1
            assert problem.message
            assert "Input should be" not in problem.message
        return
    assert isinstance(result, LoadedConfig)


def _dump(value: Any, indent: int = 0) -> str:
    """A small block-style YAML writer (JSON for scalars, which YAML reads as well)."""
    pad = " " * indent
    if isinstance(value, dict) and value:
        out = []
        for k, v in value.items():
            key = json.dumps(str(k))
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{key}:\n{_dump(v, indent + 2)}")
            else:
                out.append(f"{pad}{key}: {_scalar(v)}\n")
        return "".join(out)
    if isinstance(value, list) and value:
        out = []
        for v in value:
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}-\n{_dump(v, indent + 2)}")
            else:
                out.append(f"{pad}- {_scalar(v)}\n")
        return "".join(out)
    return f"{pad}{_scalar(value)}\n"


def _scalar(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return json.dumps(value)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12),
    st.sampled_from(["${X}", "${X:-d}", "$${", "${", "critcal", "regex", "error", "http"]),
)
keys = st.one_of(
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=8),
    st.sampled_from(
        ["agent", "endpoint", "contract", "invariants", "chaos_matrix", "type", "id", "name"]
    ),
)
nested = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=10,
)


@fuzz(900)
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    _check(text)


@fuzz(400)
@given(st.dictionaries(keys, nested, max_size=5))
def test_random_documents(data: dict[str, Any]) -> None:
    _check(_dump(data))


def _full_data() -> Any:
    # A JSON-like copy of the valid full config, built without a YAML library.
    loaded = load_config_text(FULL_TEXT, env=ENV, base_dir=VALID)
    data = loaded.config.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return json.loads(json.dumps(data).replace("${", "$${"))


FULL_DATA = _full_data()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


ALL_PATHS = [p for p in _paths(FULL_DATA) if p]


def _mutate(data: Any, path: tuple[Any, ...], op: str, new: Any) -> Any:
    copy = json.loads(json.dumps(data))
    parent = copy
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "rename" and isinstance(parent, dict):
        parent[f"{last}x"] = parent.pop(last)
    else:
        parent[last] = new
    return copy


@fuzz(400)
@given(
    st.lists(
        st.tuples(st.sampled_from(ALL_PATHS), st.sampled_from(["delete", "rename", "set"]), nested),
        min_size=1,
        max_size=3,
    )
)
def test_mutated_valid_config(ops: list[tuple[tuple[Any, ...], str, Any]]) -> None:
    data = FULL_DATA
    for path, op, new in ops:
        try:
            data = _mutate(data, path, op, new)
        except (KeyError, IndexError, TypeError):
            continue
    _check(_dump(data))


@fuzz(300)
@given(
    st.integers(min_value=0, max_value=len(FULL_TEXT)),
    st.sampled_from(["truncate", "tab", "delete_line", "duplicate_line", "insert"]),
    st.text(max_size=5),
)
def test_mutated_valid_text(at: int, op: str, junk: str) -> None:
    text = FULL_TEXT
    if op == "truncate":
        text = text[:at]
    elif op == "tab":
        text = text[:at] + "\t" + text[at:]
    elif op in ("delete_line", "duplicate_line"):
        lines = text.splitlines(keepends=True)
        i = text.count("\n", 0, at) % max(len(lines), 1)
        lines[i : i + 1] = [] if op == "delete_line" else [lines[i], lines[i]]
        text = "".join(lines)
    else:
        text = text[:at] + junk + text[at:]
    _check(text)


# --------------------------------------------------------------------------- hostile shapes
# Each is refused by `flakestorm validate` with a located exit-2 error, quickly and in little
# memory, measured in a child process after its imports (bench/loader_scaling.py times them).

BASE = "agent:\n  endpoint: http://127.0.0.1:9/chat\n"
MB = 1024 * 1024
HOSTILE = {
    "deep flow lists": BASE + "golden_prompts: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "deep flow mappings": BASE + "golden_prompts: " + "{a: " * 100_000 + "1" + "}" * 100_000,
    "deep block lists": BASE + "golden_prompts:\n" + "- " * 100_000 + "x\n",
    "deep block mappings": BASE + "golden_prompts:\n" + "- " * 100_000 + "a: 1\n",
    "10,000 unknown keys": BASE + "".join(f"key{i}: 1\n" for i in range(10_000)),
    "10,000 unknown nested keys": BASE
    + "advanced:\n"
    + "".join(f"  k{i}: 1\n" for i in range(10_000)),
    "1 MB anchor aliased 20,000 times": BASE
    + 'big: &a "'
    + "x" * MB
    + '"\nrefs: ['
    + ",".join(["*a"] * 20_000)
    + "]\n",
    "billion laughs": BASE
    + "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)),
    "3 MB file": BASE + "golden_prompts: ['" + "x" * (3 * MB) + "']\n",
    "tagged key": BASE + "!!int abc: 1\n",
    "booleans in numeric fields": """\
agent:
  endpoint: http://127.0.0.1:9/chat
  timeout: true
golden_prompts: [hi]
contract:
  name: c
  invariants:
    - {id: a, type: contains, value: x, case_sensitive: 1}
    - {id: b, type: similarity, expected: hi, threshold: yes}
    - {id: c, type: latency, max_ms: true}
  chaos_matrix: [{name: calm}]
scoring: {min_score: false}
advanced: {concurrency: yes, repeat: on}
""",
}
EXPECTED = {
    "deep flow lists": "nested more than 64 levels deep",
    "deep flow mappings": "nested more than 64 levels deep",
    "deep block lists": "nested more than 64 levels deep",
    "deep block mappings": "nested more than 64 levels deep",
    "10,000 unknown keys": "unknown key 'key9999'",
    "10,000 unknown nested keys": "advanced.k9999: unknown key 'k9999'",
    "1 MB anchor aliased 20,000 times": "with its aliases expanded the document is larger",
    "billion laughs": "with its aliases expanded the document is larger",
    "3 MB file": "the file is larger than 2 MiB",
    "tagged key": "hostile.yaml:3:1: invalid YAML key 'abc': it is not a valid !!int value",
    "booleans in numeric fields": "agent.timeout: expected an integer, got a boolean true",
}
RAISE_HINTS = {
    "nested more than": "FLAKESTORM_CONFIG_MAX_DEPTH",
    "aliases expanded": "FLAKESTORM_CONFIG_MAX_BYTES",
    "file is larger": "FLAKESTORM_CONFIG_MAX_BYTES",
}
DRIVER = """\
import json, resource, sys, time
import flakestorm.cli, flakestorm.config, flakestorm.loader, flakestorm.meaning
from flakestorm.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
try:
    main(["validate", "-c", sys.argv[1]], standalone_mode=True)
    code = 0
except SystemExit as exc:
    code = exc.code
elapsed = time.perf_counter() - started
grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"code": code, "elapsed_s": elapsed, "grown_mb": grown_mb}), file=sys.stderr)
sys.exit(code)
"""


def validate_in_child(path: Path) -> tuple[dict[str, Any], str]:
    """Run `flakestorm validate` on ``path`` in a child: its measurements and its output."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert lines, proc.stdout + proc.stderr
    measured: dict[str, Any] = json.loads(lines[-1])
    assert measured["code"] == proc.returncode
    return measured, proc.stdout + "\n".join(lines[:-1])


@pytest.mark.parametrize("shape", list(HOSTILE))
def test_a_hostile_config_is_refused_quickly_in_little_memory(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE[shape], encoding="utf-8")
    measured, output = validate_in_child(path)
    assert measured["code"] == 2, output
    assert EXPECTED[shape] in output, output
    assert re.search(r"hostile\.yaml:\d+:\d+: ", output), output
    for limit, variable in RAISE_HINTS.items():
        if limit in EXPECTED[shape]:
            assert f"raise it with {variable}=" in output
    assert "Traceback" not in output
    # generous bounds (the were minutes and a crash): the exact numbers are in
    # bench/loader_scaling.py
    assert measured["elapsed_s"] < 5, measured
    assert measured["grown_mb"] < 100, measured


def test_a_limit_can_be_raised_for_a_legitimate_config(tmp_path: Path) -> None:
    deep = BASE + "golden_prompts: [" + "[" * 70 + "x" + "]" * 70 + "]\n"
    with pytest.raises(ConfigError, match="nested more than 64 levels deep"):
        load_config_text(deep, env={})
    with pytest.raises(ConfigError) as raised:  # past the depth limit: the type is checked
        load_config_text(deep, env={"FLAKESTORM_CONFIG_MAX_DEPTH": "100"})
    assert "nested more than" not in str(raised.value)
    big = BASE + "golden_prompts: ['" + "x" * (3 * MB) + "']\n"
    with pytest.raises(ConfigError, match="larger than 2 MiB"):
        load_config_text(big, env={})
    loaded = load_config_text(
        big + "contract: {name: c, invariants: [{id: a, type: output_not_empty}], "
        "chaos_matrix: [{name: calm}]}\n",
        env={"FLAKESTORM_CONFIG_MAX_BYTES": str(4 * MB)},
    )
    assert len(loaded.config.golden_prompts[0]) == 3 * MB


def test_yaml_integers_stay_valid_for_number_fields() -> None:
    text = BASE + (
        "golden_prompts: [hi]\ncontract:\n  name: c\n  invariants:\n"
        "    - {id: s, type: similarity, expected: hi, threshold: 1}\n"
        "  chaos_matrix: [{name: calm}]\n"
        "scoring: {min_score: 80}\n"
    )
    loaded = load_config_text(text, env={})
    assert loaded.config.scoring.min_score == 80.0
    assert loaded.config.contract is not None
    assert loaded.config.contract.invariants[0].threshold == 1.0
