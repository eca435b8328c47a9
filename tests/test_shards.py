"""Shards (`--shard K/N`) and the config digest the shards of one run share."""

from __future__ import annotations

import pytest

from flakestorm.loader import load_config_text
from flakestorm.results.shards import Shard, ShardError, config_digest, config_document, deal

CONFIG = """
agent:
  endpoint: http://127.0.0.1:9/chat
  headers: {Authorization: "Bearer ${TOKEN}"}
golden_prompts: [hi]  # a comment
contract:
  name: c
  invariants: [{id: a, type: output_not_empty}]
  chaos_matrix: [{name: calm}]
"""


def test_a_shard_is_written_k_of_n() -> None:
    assert Shard.parse(" 2/4 ") == Shard(2, 4)
    assert str(Shard(3, 4)) == "3/4"
    for bad in ("0/4", "5/4", "two", "1/0", "-1/2"):
        with pytest.raises(ShardError):
            Shard.parse(bad)


def test_items_are_dealt_round_robin_each_to_exactly_one_shard() -> None:
    items = list(range(10))
    parts = [Shard(k, 3).deal(items) for k in (1, 2, 3)]
    assert parts == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert deal(None, items) == items
    assert Shard(1, 1).deal(items) == items


def test_the_digest_is_of_the_resolved_config_without_its_secrets() -> None:
    one = load_config_text(CONFIG, env={"TOKEN": "secret-one"})
    two = load_config_text(CONFIG.replace("# a comment", ""), env={"TOKEN": "secret-two"})
    assert config_digest(one.config, one.secrets) == config_digest(two.config, two.secrets)
    document = config_document(one.config, one.secrets)
    assert document["agent"]["headers"] == {"Authorization": "Bearer ***"}
    assert "secret-one" not in str(document)
    assert document["advanced"]["seed"] == one.config.advanced.seed  # defaults filled in
    changed = load_config_text(CONFIG.replace("name: c", "name: d"), env={"TOKEN": "x" * 8})
    assert config_digest(changed.config, changed.secrets) != config_digest(one.config, one.secrets)
