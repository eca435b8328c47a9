"""What a call's tokens cost (SPEC §15), from the config's ``prices:``: a model's own price, else
the price of its name without a date suffix (``gpt-4o-mini-2024-07-18`` → ``gpt-4o-mini``,
``claude-3-5-haiku-20241022`` → ``claude-3-5-haiku``), as providers name a snapshot of a
model; else the price table pinned as a dependency (``genai-prices``: its snapshot ships in
the package, and nothing is fetched at run time). A model with none has no price: the caller
says so (a cost cell errors).

The pinned table is imported when a model the config does not price is first met (reading it
takes a quarter of a second), and asked at the time of the run.
"""

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


def table_cost(usage: Usage) -> float | None:
    """The USD cost of ``usage`` in the pinned price table; None for a model it has not."""
    if not usage.model:
        return None
    try:
        import genai_prices  # the table's snapshot: read once, when first needed
    except ImportError:  # an installation without it: only the config's prices
        return None
    billed = genai_prices.Usage(
        input_tokens=usage.prompt,  # the table's input counts cache reads and writes too
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        output_tokens=usage.output,
    )
    try:
        found = genai_prices.calc_price(billed, usage.model)
    except LookupError:
        return None
    return float(found.total_price)


def pricer(prices: Mapping[str, Price], table: bool = True) -> Pricer:
    """The prices of a run as a function of what a call billed (None: its model has none):
    the config's first, then (``table``) the pinned table's."""

    def price(usage: Usage) -> float | None:
        found = price_of(usage.model, prices)
        if found is not None:
            return cost(usage, found)
        return table_cost(usage) if table else None

    return price
