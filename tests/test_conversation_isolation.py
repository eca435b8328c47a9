"""A python agent's conversation needs its own session (SPEC §12): its callable takes
``session_id`` (or ``**kwargs``), or ``agent.reset_function`` resets it. ``flakestorm validate``
finds a callable that cannot, from its source, without importing or running anything
(``agents/source.py``); what the source does not decide, the run start checks on the imported
callable, with the same located error.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from flakestorm.cli import main
from flakestorm.engine.runner import run_phases
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config
from flakestorm.results.model import Status

REFUSED = (
    "a conversation is sent in one session of its own, and this agent has no way to isolate "
    'it: give its callable ("{endpoint}") a `session_id` parameter (each conversation\'s id is '
    "passed in it), or set agent.reset_function"
)


@pytest.fixture
def module() -> Iterator[str]:
    """A fresh module name (never imported before), forgotten afterwards."""
    name = f"isolation_{uuid.uuid4().hex[:10]}"
    yield name
    for loaded in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[loaded]


CONFIG = """\
agent:
  type: python
  endpoint: {endpoint}
{extra}golden_prompts:
  - hello
  - turns: [one, two]
contract:
  name: c
  invariants:
    - {{id: all, type: output_not_empty, turn: every}}
  chaos_matrix:
    - name: calm
"""


def write_config(directory: Path, endpoint: str, reset_function: str | None = None) -> Path:
    extra = f"  reset_function: {reset_function}\n" if reset_function else ""
    path = directory / "flakestorm.yaml"
    path.write_text(CONFIG.format(endpoint=endpoint, extra=extra))
    return path


def validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["validate", "-c", str(path)])
    return result.exit_code, result.output


def at_conversation(path: Path, endpoint: str) -> str:
    line = path.read_text().splitlines().index("  - turns: [one, two]") + 1
    return f"flakestorm.yaml:{line}:5: golden_prompts[1]: " + REFUSED.format(endpoint=endpoint)


DECORATOR = (
    "import functools\n\ndef logged(fn):\n    @functools.wraps(fn)\n"
    "    def inner(*args, **kwargs):\n        return fn(*args, **kwargs)\n    return inner\n\n"
)
"""A decorator that keeps the signature of what it wraps, as most do."""

SOURCES = {
    "plain": "def answer(prompt):\n    return prompt\n",
    "decorated": DECORATOR + "@logged\ndef answer(prompt):\n    return prompt\n",
    "async": "async def answer(prompt, *, verbose=False):\n    return prompt\n",
    "positional-only": "def answer(prompt, session_id='', /):\n    return prompt\n",
}


@pytest.mark.parametrize("source", SOURCES.values(), ids=list(SOURCES))
def test_validate_refuses_a_function_without_session_id_at_the_conversation(
    source: str, module: str, tmp_path: Path
) -> None:
    (tmp_path / f"{module}.py").write_text(
        source + f"\nopen({str(tmp_path / 'imported')!r}, 'w').close()\n"
    )
    path = write_config(tmp_path, f"{module}:answer")
    code, output = validate(path)
    assert code == 2
    assert at_conversation(path, f"{module}:answer") in output
    assert module not in sys.modules and not (tmp_path / "imported").exists()  # never imported


ACCEPTED = {
    "session_id": "def answer(prompt, session_id=''):\n    return prompt\n",
    "keyword-only": "async def answer(prompt, *, session_id=''):\n    return prompt\n",
    "kwargs": "def answer(prompt, **kwargs):\n    return kwargs['session_id']\n",
    # validate read the decorated function's own parameters; the run passes session_id to the
    # wrapper functools.wraps made: no stateful check, 3 invocations either way
    "decorated": DECORATOR + "@logged\ndef answer(prompt, session_id=''):\n    return prompt\n",
}


@pytest.mark.parametrize("source", ACCEPTED.values(), ids=list(ACCEPTED))
def test_a_function_taking_session_id_or_kwargs_is_accepted_and_given_each_conversation_id(
    source: str, module: str, tmp_path: Path
) -> None:
    (tmp_path / f"{module}.py").write_text(source)
    path = write_config(tmp_path, f"{module}:answer")
    code, output = validate(path)
    assert code == 0, output
    # validate counts what the run sends: cells in sessions of their own, so no stateful check
    assert "invocations: 3 per contract run" in output and "stateful" not in output, output
    run = run_phases(load_config(path), ["contract"])
    assert run.invocations == 3
    cell = run.phases["contract"].cells[0]
    assert cell.status is Status.PASSED
    if (
        "kwargs['session_id']" in source
    ):  # **kwargs is given the conversation's id, as a named parameter is
        ids = [p.output for p in cell.prompts[1:]]
        assert len(set(ids)) == 1 and len(ids[0] or "") == 32


def test_a_reset_function_isolates_a_function_without_session_id(
    module: str, tmp_path: Path
) -> None:
    (tmp_path / f"{module}.py").write_text(SOURCES["plain"] + "\ndef reset():\n    pass\n")
    path = write_config(tmp_path, f"{module}:answer", reset_function=f"{module}:reset")
    assert validate(path)[0] == 0


def test_the_module_is_found_in_a_package_and_on_sys_path_without_importing_its_parents(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "site"
    package = elsewhere / module / "agents"
    package.mkdir(parents=True)
    # importing a parent package would write this file: find_spec would do it, validate must not
    marker = tmp_path / "parent-imported"
    (elsewhere / module / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "__init__.py").write_text("")
    (package / "chat.py").write_text(SOURCES["plain"])
    (package / "bot").mkdir()
    (package / "bot" / "__init__.py").write_text(SOURCES["plain"])
    config_dir = tmp_path / "project"
    config_dir.mkdir()
    monkeypatch.syspath_prepend(str(elsewhere))
    for dotted in (f"{module}.agents.chat", f"{module}.agents.bot"):
        path = write_config(config_dir, f"{dotted}:answer")
        code, output = validate(path)
        assert code == 2 and at_conversation(path, f"{dotted}:answer") in output
    assert not marker.exists() and module not in sys.modules
    # the config's directory comes first, as when the run imports the agent
    (config_dir / module).mkdir()
    (config_dir / module / "__init__.py").write_text("")
    (config_dir / module / "agents.py").write_text(ACCEPTED["session_id"])
    assert validate(write_config(config_dir, f"{module}.agents:answer"))[0] == 0


UNDECIDED = {
    "class": "class answer:\n    def invoke(self, prompt):\n        return prompt\n",
    "assignment": "def make():\n    return lambda prompt: prompt\n\nanswer = make()\n",
    "under if": "import os\n\nif os.sep:\n    def answer(prompt):\n        return prompt\n",
    "imported": "from os.path import basename as answer\n",
    "a method": "class Bot:\n    def answer(self, prompt):\n        return prompt\n\nbot = Bot()\n",
}


def test_a_decorator_that_drops_session_id_is_refused_at_the_run_start_not_sent_blind(
    module: str, tmp_path: Path
) -> None:
    source = (
        "def plain(fn):\n    def inner(prompt):\n        return fn(prompt)\n    return inner\n\n"
        "@plain\ndef answer(prompt, session_id=''):\n    return prompt\n"
    )
    (tmp_path / f"{module}.py").write_text(source)
    path = write_config(tmp_path, f"{module}:answer")
    assert validate(path)[0] == 0
    with pytest.raises(ConfigError, match="takes `session_id`, but the callable imported"):
        run_phases(load_config(path), ["contract"])


@pytest.mark.parametrize("source", UNDECIDED.values(), ids=list(UNDECIDED))
def test_what_the_source_does_not_decide_validate_leaves_to_the_run_start(
    source: str, module: str, tmp_path: Path
) -> None:
    (tmp_path / f"{module}.py").write_text(source)
    endpoint = f"{module}:bot.answer" if "class Bot" in source else f"{module}:answer"
    path = write_config(tmp_path, endpoint)
    code, output = validate(path)
    assert code == 0, output
    # the run start imports it, finds no session_id, and refuses with the same located error
    with pytest.raises(ConfigError) as refused:
        run_phases(load_config(path), ["contract"])
    assert [str(p) for p in refused.value.problems] == [at_conversation(path, endpoint)]


def test_a_module_with_no_source_file_is_left_to_the_run_start(module: str, tmp_path: Path) -> None:
    path = write_config(tmp_path, f"{module}:answer")
    code, output = validate(path)
    # no isolation finding: the module's absence is the run start's import error to report
    assert "session_id" not in output and code == 0, output
    with pytest.raises(ConfigError, match=f'cannot import "{module}": no such module'):
        run_phases(load_config(path), ["contract"])
