"""Every ``${{ }}`` in action.yml, and in the workflows we ship or document, is one GitHub can
evaluate where it stands.

GitHub evaluates every expression of an action's metadata when it loads the action, descriptions
included; a context it does not offer there fails every workflow that uses the action before its
first step. flakestorm 2.0.0.dev0 shipped ``${{ matrix.shard }}`` in the ``shard`` input's
description (``tests/action/broken-action.yml``): a runner refused it with "Line: 97 Column 18:
expressions are not allowed here" (the description's scalar starts there; the expression is on
line 98). The runner-level proof is ``tests/test_action_runner.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.expressions import ACTION_PLACES, WORKFLOW_PLACES, contexts, misplaced
from support.workflows import WORKFLOWS, shipped_workflows

ROOT = Path(__file__).resolve().parent.parent
BROKEN = Path(__file__).resolve().parent / "action" / "broken-action.yml"


def _report(name: str, found: list[object]) -> str:
    return "\n".join(f"{name}:{item}" for item in found)


def test_action_yml_has_no_expression_github_would_refuse_at_load() -> None:
    found = misplaced((ROOT / "action.yml").read_text(encoding="utf-8"), ACTION_PLACES)
    assert not found, _report("action.yml", found)


def test_the_check_finds_the_expression_that_broke_the_action() -> None:
    """The check fails on the action.yml that did not load, naming the line of the expression."""
    (found,) = misplaced(BROKEN.read_text(encoding="utf-8"), ACTION_PLACES)
    assert (found.line, found.column) == (98, 43)
    assert found.path == "inputs.shard.description"
    assert found.expression.strip() == "matrix.shard"
    assert str(found).startswith("98:43: inputs.shard.description: ${{ matrix.shard }}: ")
    assert "no expression is evaluated here" in str(found)


def test_an_input_default_may_read_github_but_not_secrets() -> None:
    text = (
        "inputs:\n"
        "  token:\n"
        "    default: ${{ github.token }}\n"
        "  other:\n"
        "    default: ${{ secrets.TOKEN }}\n"
        "runs:\n"
        "  using: docker\n"
        "  image: Dockerfile\n"
        "  args: ['${{ inputs.token }}']\n"
    )
    (found,) = misplaced(text, ACTION_PLACES)
    assert (found.line, found.path, found.contexts) == (5, "inputs.other.default", ("secrets",))
    assert "available: github, inputs" in str(found)


@pytest.mark.parametrize(
    "name", [*sorted(shipped_workflows()), *(p.name for p in WORKFLOWS)], ids=str
)
def test_workflows_use_only_contexts_github_offers_where_they_stand(name: str) -> None:
    texts = {**shipped_workflows(), **{p.name: p.read_text(encoding="utf-8") for p in WORKFLOWS}}
    found = misplaced(texts[name], WORKFLOW_PLACES)
    assert not found, _report(name, found)


def test_the_workflow_check_can_fail() -> None:
    text = (
        "on: push\n"
        "jobs:\n"
        "  a:\n"
        "    name: shard ${{ matrix.shard }}\n"
        "    runs-on: ${{ secrets.RUNNER }}\n"
        "    strategy:\n"
        "      matrix:\n"
        "        shard: [1, 2]\n"
        "    steps:\n"
        "      - run: echo ${{ matrix.shard }} ${{ steps.x.outputs.y }}\n"
        "      - uses: ${{ env.ACTION }}\n"
    )
    found = [(f.line, f.path, f.contexts) for f in misplaced(text, WORKFLOW_PLACES)]
    assert found == [(5, "jobs.a.runs-on", ("secrets",)), (11, "jobs.a.steps.1.uses", ("env",))]


def test_contexts_of_an_expression() -> None:
    assert contexts(" matrix.shard ") == ("matrix",)
    assert contexts(" steps.flakestorm.outputs.report-dir || 'flakestorm-reports' ") == ("steps",)
    assert contexts(" always() && github.event.pull_request.number ") == ("github",)
    assert contexts(" format('{0}', inputs.x) == 'secrets.x' ") == ("inputs",)
    assert contexts(" true ") == ()
