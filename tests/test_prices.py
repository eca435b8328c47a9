"""What a call's tokens cost: the config's `prices:` first (the model's own name, then its name
without a date suffix), else the pinned price table (genai-prices, offline); a model with
neither has no price. `prices:` errors are located."""

from __future__ import annotations

import pytest

from flakestorm.config import Price
from flakestorm.errors import ConfigError
from flakestorm.loader import load_config_text
from flakestorm.results.prices import pricer
from flakestorm.results.usage import Usage

TEST_PRICE = {"gpt-test": Price(input_per_mtok=1, output_per_mtok=2)}


def test_the_configs_price_per_million_tokens() -> None:
    # 100 prompt tokens at $1/M + 20 completion tokens at $2/M = $0.00014
    price = pricer(TEST_PRICE)
    assert price(Usage(input=100, output=20, model="gpt-test")) == pytest.approx(0.00014)


@pytest.mark.parametrize("model", ["gpt-test-2024-08-06", "gpt-test-20241022"])
def test_a_dated_model_takes_its_undated_names_price(model: str) -> None:
    price = pricer(TEST_PRICE, table=False)
    assert price(Usage(input=100, output=20, model=model)) == pytest.approx(0.00014)


def test_cache_reads_and_writes_have_their_own_prices_or_the_inputs() -> None:
    cached = {"m": Price(input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3)}
    usage = Usage(input=1000, cache_read=2000, cache_write=500, output=100, model="m")
    # 1000×3 + 2000×0.3 + 500×3 (no write price: the input's) + 100×15 = 6600 per million
    assert pricer(cached)(usage) == pytest.approx(0.0066)


def test_the_pinned_table_prices_what_the_config_does_not() -> None:
    pytest.importorskip("genai_prices")  # Python 3.11 and later
    price = pricer({})
    # gpt-4o: $2.50/M input, $1.25/M cached input, $10/M output
    gpt = Usage(input=1_000_000, cache_read=1_000_000, output=100_000, model="gpt-4o-2024-08-06")
    assert price(gpt) == pytest.approx(2.5 + 1.25 + 1.0)
    # claude-3-5-sonnet: $3/M input, $3.75/M cache writes, $0.30/M cache reads, $15/M output
    claude = Usage(
        input=1_000_000,
        cache_write=1_000_000,
        cache_read=1_000_000,
        output=1_000_000,
        model="claude-3-5-sonnet-20241022",
    )
    assert price(claude) == pytest.approx(3 + 3.75 + 0.3 + 15)


def test_the_config_wins_over_the_table_and_an_unknown_model_has_no_price() -> None:
    pytest.importorskip("genai_prices")  # Python 3.11 and later
    price = pricer({"gpt-4o": Price(input_per_mtok=1, output_per_mtok=1)})
    assert price(Usage(input=1_000_000, model="gpt-4o")) == pytest.approx(1.0)
    assert price(Usage(input=10, model="gpt-test")) is None
    assert price(Usage(input=10, model="")) is None
    assert pricer({}, table=False)(Usage(input=10, model="gpt-4o")) is None


def test_prices_errors_are_located() -> None:
    text = (
        "agent: {type: http, endpoint: 'http://127.0.0.1:1/x'}\n"
        "golden_prompts: [hi]\n"
        "prices:\n"
        "  gpt-test: {input_per_mtok: -1, output_per_mtok: 2}\n"
        "  other: {input_per_mtok: 1, output_per_mtok: 2, cache_read_per_mtok: 3}\n"
        "  third: {input_per_mtok: 1}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    message = str(caught.value)
    assert "flakestorm.yaml:4:30: prices.gpt-test.input_per_mtok: must be at least 0" in message
    assert "flakestorm.yaml:5:50: prices.other.cache_read_per_mtok: unknown key" in message
    assert "did you mean 'cache_write_per_mtok'" in message
    assert "flakestorm.yaml:6:10: prices.third: missing required field 'output_per_mtok'" in message
