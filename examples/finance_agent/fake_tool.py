"""A local, deterministic market data service: the example agent's tool (``market_data_api``).

    python fake_tool.py --port 8001          # prints "listening on http://127.0.0.1:8001"

Endpoints:

- ``GET /quote/<TICKER>`` -> ``{"ticker", "price", "currency", "as_of", "source"}``. Prices are
  fixed for a few well-known tickers and derived from a hash of the symbol for any other valid
  symbol (1-10 letters, digits, ``.`` or ``-``), so every run sees the same numbers. An invalid
  symbol answers 404 ``{"error": ...}``.
- ``GET /health`` -> 200 ``{"status": "ok"}``.
- ``GET /_seen`` -> the last requests received, with their ``X-Flakestorm-Cell``,
  ``X-Flakestorm-Scenario``, ``baggage`` and ``traceparent`` headers (``DELETE /_seen`` clears
  them): this makes the agent's header forwarding observable.

Faults are not this service's business: the flakestorm chaos proxy sits between the agent and
this service and injects them.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from service import BadRequest, JsonHandler, Recorder, arguments, serve

AS_OF = "2026-01-02T16:00:00Z"
SOURCE = "Example Exchange delayed quotes"
KNOWN_PRICES = {
    "AAPL": 189.84,
    "MSFT": 415.32,
    "NVDA": 121.44,
    "GOOGL": 172.63,
    "AMZN": 186.51,
    "TSLA": 248.98,
}
TICKER = re.compile(r"^[A-Z0-9][A-Z0-9.\-]{0,9}$")


def price_of(ticker: str) -> float:
    """The deterministic price of ``ticker`` (USD)."""
    if ticker in KNOWN_PRICES:
        return KNOWN_PRICES[ticker]
    digest = int.from_bytes(hashlib.sha256(ticker.encode("ascii")).digest()[:4], "big")
    return round(10 + (digest % 49_000) / 100, 2)


def quote(ticker: str) -> dict[str, Any]:
    return {
        "ticker": ticker,
        "price": price_of(ticker),
        "currency": "USD",
        "as_of": AS_OF,
        "source": SOURCE,
    }


class MarketDataHandler(JsonHandler):
    server_version = "fake-market-data/1.0"
    recorder = Recorder()

    def route(self, method: str, path: str) -> tuple[int, Any] | None:
        if method == "GET" and path == "/health":
            return 200, {"status": "ok"}
        if path.startswith("/quote/"):
            if method != "GET":
                raise BadRequest(405, "use GET")
            ticker = path.removeprefix("/quote/").upper()
            if not TICKER.match(ticker):
                raise BadRequest(404, f"unknown ticker {ticker[:20]!r}")
            return 200, quote(ticker)
        raise BadRequest(404, f"no route for {method} {path}")


def main() -> None:
    args = arguments("A deterministic fake market data service.", default_port=8001)
    serve(MarketDataHandler, args.host, args.port)


if __name__ == "__main__":
    main()
