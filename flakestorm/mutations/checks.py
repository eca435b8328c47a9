"""The meaning checks of the ``mutations`` section (registered in
:mod:`flakestorm.meaning.registry` by :mod:`flakestorm.meaning.mutations`, which places
each finding in the file; they run whenever the section and the agent validated, even when
other parts of the file did not)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from flakestorm.config import AgentConfig, AgentType, MutationGenerator, Mutations, MutationType
from flakestorm.mutations.registry import types_for

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    path: Path_
    message: str
    warning: bool = False
    """A warning, not an error."""
    key: bool = False


def check_mutations(mutations: Mutations | None, agent: AgentConfig) -> Iterator[Finding]:
    """Every problem of the ``mutations`` section (run by ``agent``). (Types that ``count``
    leaves out are not a problem of the file: ``flakestorm validate`` names them,
    :func:`flakestorm.engine.run_plan.plan_run`.)"""
    if mutations is None:
        return
    at: Path_ = ("mutations",)
    explicit = "types" in mutations.model_fields_set
    if mutations.generator is MutationGenerator.LLM and mutations.llm is None:
        yield Finding(
            (*at, "generator"), "the llm generator needs mutations.llm {base_url, model, api_key}"
        )
    if explicit and MutationType.CUSTOM in mutations.types and not mutations.templates:
        yield Finding(
            (*at, "types", mutations.types.index(MutationType.CUSTOM)),
            "the 'custom' type needs mutations.templates (a list of strings, each containing "
            "{prompt})",
        )
    for i, template in enumerate(mutations.templates or ()):
        if "{prompt}" not in template:
            yield Finding((*at, "templates", i), "a mutation template must contain {prompt}")
    if explicit and agent.type is AgentType.PYTHON:
        for i, kind in enumerate(mutations.types):
            if kind.request_level:
                yield Finding(
                    (*at, "types", i),
                    f"'{kind.value}' is a request-level mutation: it changes the HTTP request, "
                    "and a python agent has none (remove it, or test the agent over HTTP; "
                    "by default python agents get the prompt-level types only)",
                )
    for i, kind in enumerate(mutations.types if explicit else ()):
        if kind in mutations.types[:i]:
            yield Finding((*at, "types", i), f"'{kind.value}' is listed twice")
    generated = set(types_for(mutations, agent))
    for kind in mutations.weights:
        if kind not in generated:
            yield Finding(
                (*at, "weights", kind.value),
                f"'{kind.value}' has a weight but is not generated (not in mutations.types"
                f"{'' if explicit else ', or left out by default'})",
                warning=True,
                key=True,
            )
    if mutations.templates and MutationType.CUSTOM not in generated:
        yield Finding(
            (*at, "templates"),
            "mutations.templates is set but 'custom' is not in mutations.types, so no template "
            "is sent (add custom to mutations.types)",
            warning=True,
            key=True,
        )
    if mutations.llm is not None and mutations.generator is MutationGenerator.TEMPLATES:
        yield Finding(
            (*at, "llm"),
            "mutations.llm is set but the generator is `templates`, which does not use it "
            "(set generator: llm to have the LLM write the prompt-level mutations)",
            warning=True,
            key=True,
        )
