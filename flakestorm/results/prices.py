"""What a call's tokens cost (SPEC §15), from the config's ``prices:``: a model's own price, else
the price of its name without a date suffix (``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``,
``claude-3-5-haiku-20241022`` → ``claude-3-5-haiku``), as providers name a snapshot of a
model. A model with neither has no price: the caller says so (a cost cell errors)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from flakestorm.config import Price
from flakestorm.results.spend import Pricer
from flakestorm.results.usage import Usage

_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def price_of(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``: its own, else its undated name's; None without either."""
    found = prices.get(model)
    if found is None and _DATED.search(model):
        found = prices.get(_DATED.sub("", model))
    return found


def cost(usage: Usage, price: Price) -> float:
    """The USD cost of ``usage`` at ``price``."""
    cached = (
        price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    )
    written = (
        price.input_per_mtok if price.cache_write_per_mtok is None else price.cache_write_per_mtok
    )
    return (
        usage.input * price.input_per_mtok
        + usage.cache_read * cached
        + usage.cache_write * written
        + usage.output * price.output_per_mtok
    ) / 1_000_000


def pricer(prices: Mapping[str, Price]) -> Pricer:
    """The prices of a run as a function of what a call billed (None: its model has none)."""

    def price(usage: Usage) -> float | None:
        found = price_of(usage.model, prices)
        return None if found is None else cost(usage, found)

    return price
