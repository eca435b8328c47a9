"""Context attacks applied by the runner itself, on the agent's input.

``memory_poisoning`` rewrites the input before the invocation (``strategy``: ``prepend`` /
``append`` (default) / ``replace``). The attacks that live in tool results and LLM requests
are delivered where those travel (the proxy, the python wrappers), not here.
"""

from __future__ import annotations

from flakestorm.chaos.faults.labels import attack_label
from flakestorm.config import ContextAttackType, PoisonStrategy, Scenario


def poison_input(prompt: str, scenario: Scenario, turn: int = 1) -> tuple[str, tuple[str, ...]]:
    """The input the agent receives under ``scenario`` on turn ``turn`` of a conversation (a
    one-message prompt is turn 1), and the attacks that fired on it
    (``context_attacks[0] memory_poisoning(append)``)."""
    fired = []
    for index, attack in enumerate(scenario.context_attacks):
        if attack.type is not ContextAttackType.MEMORY_POISONING or attack.payload is None:
            continue
        if attack.turns is not None and turn not in attack.turns:
            continue
        strategy = attack.strategy or PoisonStrategy.APPEND
        if strategy is PoisonStrategy.PREPEND:
            prompt = f"{attack.payload}\n\n{prompt}"
        elif strategy is PoisonStrategy.APPEND:
            prompt = f"{prompt}\n\n{attack.payload}"
        else:
            prompt = attack.payload
        fired.append(f"{attack_label(index, attack)}({strategy.value})")
    return prompt, tuple(fired)
