"""Whatever the input, the loader returns a LoadedConfig or raises a located ConfigError.

2,000 examples in all: 900 random texts, 400 random documents, 400 mutations of the full valid
config's data and 300 of its text (truncation, tabs, lost or doubled lines, inserted junk).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
