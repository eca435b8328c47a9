"""Mutation generation (SPEC §6): the 24 registered units, round-robin dealing, the seeded RNG,
custom templates, weights, and the meaning checks of the section."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.config_text import load, problems

from flakestorm.config import Config, MutationType
from flakestorm.errors import ConfigError
from flakestorm.mutations.generation import generate, left_out
from flakestorm.mutations.registry import MUTATIONS, types_of, unit
from flakestorm.mutations.request_level import trickle_ms
from flakestorm.mutations.unit import Target

PROMPTS = [
    "What is AAPL trading at today?",
    "Book a table for 2 at 7pm in Paris, and confirm by email.",
    "Cancel order #4711 before Friday",
    "x",
]


def config(mutations: dict[str, Any] | None = None, **extra: Any) -> Config:
    return Config.model_validate(
        {
            "agent": {"endpoint": "http://127.0.0.1:9/invoke"},
            "golden_prompts": PROMPTS,
            "mutations": mutations if mutations is not None else {"count": 48},
            **extra,
        }
    )


def dump(config_: Config) -> str:
    return json.dumps(
        [
            (m.id, m.transform, m.prompt, m.request.changes if m.request else None)
            for m in generate(config_)
        ],
        ensure_ascii=False,
    )


def test_every_type_but_custom_is_a_registered_unit_with_named_transforms() -> None:
    assert set(MUTATIONS) == set(MutationType) - {MutationType.CUSTOM}
    for kind, mutation_unit in MUTATIONS.items():
        names = [t.name for t in mutation_unit.transforms]
        assert len(names) >= 2 and len(set(names)) == len(names), kind
        assert all(t.example for t in mutation_unit.transforms), kind


def test_same_seed_is_byte_identical_and_another_seed_differs() -> None:
    first = dump(config())
    assert dump(config()) == first
    other = dump(config(advanced={"seed": 7}))
    assert other != first
    # the ids and transforms do not depend on the seed: only the random choices do
    ids = [(m.id, m.transform) for m in generate(config())]
    assert ids == [(m.id, m.transform) for m in generate(config(advanced={"seed": 7}))]


def test_every_variant_differs_from_its_original_and_names_its_transform() -> None:
    mutations = generate(config())
    assert len(mutations) == 48 * len(PROMPTS)
    for m in mutations:
        assert m.prompt != m.original or m.request is not None, m.id
        assert m.transform
    prompt_level = [m for m in mutations if m.request is None]
    assert all(m.prompt != m.original for m in prompt_level)


def test_types_are_dealt_round_robin_and_variants_walk_the_catalogue() -> None:
    c = config({"types": ["encoding_attacks", "noise"], "count": 5})
    got = [(m.type.value, m.variant, m.transform) for m in generate(c) if m.prompt_index == 0]
    assert got == [
        ("encoding_attacks", 0, "base64"),
        ("noise", 0, "keyboard_typos"),
        ("encoding_attacks", 1, "hex"),
        ("noise", 1, "transposed_letters"),
        ("encoding_attacks", 2, "rot13"),
    ]
    indexes = [m.index for m in generate(c)]
    assert indexes == list(range(5 * len(PROMPTS)))


def test_encodings_decode_back_to_the_prompt() -> None:
    import base64
    import codecs
    import urllib.parse

    c = config({"types": ["encoding_attacks"], "count": 4})
    by_name = {m.transform: m.prompt for m in generate(c) if m.prompt_index == 0}
    assert base64.b64decode(by_name["base64"].rsplit(" ", 1)[1]).decode() == PROMPTS[0]
    assert bytes.fromhex(by_name["hex"].rsplit(" ", 1)[1]).decode() == PROMPTS[0]
    assert codecs.decode(by_name["rot13"].split(": ", 1)[1], "rot13") == PROMPTS[0]
    assert urllib.parse.unquote(by_name["url_encoding"]) == PROMPTS[0]


def test_custom_templates_fill_the_prompt_and_weights_override_defaults() -> None:
    c = config(
        {
            "types": ["custom", "prompt_injection"],
            "count": 4,
            "templates": ["As an admin: {prompt}", "{prompt} -- reply in JSON"],
            "weights": {"custom": 3.0},
        }
    )
    first = [m for m in generate(c) if m.prompt_index == 0]
    assert [(m.transform, m.prompt) for m in first if m.type is MutationType.CUSTOM] == [
        ("template_1", f"As an admin: {PROMPTS[0]}"),
        ("template_2", f"{PROMPTS[0]} -- reply in JSON"),
    ]
    weights = {m.type.value: m.weight for m in first}
    assert weights == {"custom": 3.0, "prompt_injection": 1.5}


def test_default_types_leave_out_custom_and_request_level_for_python_agents() -> None:
    http = config({})
    assert MutationType.CUSTOM not in types_of(http)
    assert len(types_of(http)) == 23
    python = config({}, agent={"type": "python", "endpoint": "m:f"})
    assert all(not k.request_level for k in types_of(python))
    assert len(types_of(python)) == 14
    assert [k.value for k in left_out(config({"count": 21}))] == [
        "concurrent_request_pattern",
        "timeout_manipulation",
    ]


def test_another_method_always_differs_from_the_configured_one() -> None:
    c = config(
        {"types": ["request_method_attack"], "count": 4},
        agent={"endpoint": "http://127.0.0.1:9/", "method": "PUT"},
    )
    methods = [m.request.method for m in generate(c) if m.prompt_index == 0 and m.request]
    assert "PUT" not in methods and len(set(methods)) == 3


def test_a_trickle_ends_well_before_the_agent_timeout() -> None:
    assert trickle_ms(Target(timeout_ms=2500)) == 1000
    assert trickle_ms(Target(timeout_ms=120_000)) == 8000
    shaped = unit(MutationType.TIMEOUT_MANIPULATION).transform(0)
    import random

    made = shaped.apply("hi", random.Random(1), Target(timeout_ms=10_000))
    assert made.request is not None
    assert made.request.piece_pause_ms * (made.request.body_pieces - 1) <= 4000


@pytest.mark.parametrize(
    ("mutations", "agent", "expected"),
    [
        (
            {"types": ["noise", "http_header_injection"]},
            {"type": "python", "endpoint": "m:f"},
            "mutations.types[1]: 'http_header_injection' is a request-level mutation",
        ),
        ({"types": ["custom"]}, None, "mutations.types[0]: the 'custom' type needs"),
        ({"generator": "llm"}, None, "mutations.generator: the llm generator needs"),
        ({"templates": ["no placeholder"]}, None, "mutations.templates[0]: a mutation template"),
        ({"types": ["noise", "noise"]}, None, "mutations.types[1]: 'noise' is listed twice"),
        (
            {"types": ["noise"], "weights": {"paraphrase": 2}},
            None,
            "mutations.weights.paraphrase: 'paraphrase' has a weight but is not generated",
        ),
        (
            {"llm": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}},
            None,
            "mutations.llm: mutations.llm is set but the generator is `templates`",
        ),
        (
            {"types": ["noise"], "templates": ["Boss says: {prompt}"]},
            None,
            "mutations.templates: mutations.templates is set but 'custom' is not in "
            "mutations.types",
        ),
    ],
)
def test_meaning_checks_are_located(
    mutations: dict[str, Any], agent: dict[str, Any] | None, expected: str
) -> None:
    doc = {
        "agent": agent or {"endpoint": "http://127.0.0.1:9/"},
        "golden_prompts": ["hi"],
        "mutations": mutations,
    }
    try:
        found = [str(w) for w in load(json.dumps(doc)).warnings]
    except ConfigError:
        found = problems(json.dumps(doc))
    assert any(expected in p for p in found), found


def test_the_mutation_guide_lists_every_type_and_transform() -> None:
    from pathlib import Path

    guide = (Path(__file__).resolve().parent.parent / "docs" / "mutations.md").read_text()
    for kind in MutationType:
        assert f"### `{kind.value}`" in guide, kind
    for mutation_unit in MUTATIONS.values():
        for transform in mutation_unit.transforms:
            assert f"`{transform.name}`" in guide, transform.name


@pytest.mark.parametrize("weight", [".inf", "1.0e+308"])
def test_a_type_weight_is_bounded_so_the_score_stays_a_number(weight: str) -> None:
    # an infinite weight (or two that add up to one) made the score NaN, which passes any
    # min_score: 0 × inf / inf
    text = (
        "agent: {endpoint: 'http://127.0.0.1:9/'}\ngolden_prompts: [hi]\n"
        "mutations: {types: [noise, tone_shift],"
        f" weights: {{noise: {weight}, tone_shift: 1.0}}}}\n"
    )
    found = problems(text)
    assert found == [
        "flakestorm.yaml:3:58: mutations.weights.noise: must be at most 1000.0, got "
        + ("inf" if weight == ".inf" else "1e+308")
    ], found
