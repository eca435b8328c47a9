"""A deterministic, offline LLM that speaks the OpenAI chat completions API (stdlib only).

    python fake_llm.py --port 8002           # prints "listening on http://127.0.0.1:8002"

Endpoints: ``POST /v1/chat/completions`` (also ``/chat/completions``), ``GET /v1/models``,
``GET /health``, and ``GET``/``DELETE /_seen`` (the last requests with their flakestorm trace
headers, as in ``fake_tool.py``).

The reply is a pure function of the request's ``messages``:

1. If a ``tool`` message (the OpenAI tool-calling protocol), or failing that any message whose
   content is a JSON object, holds a market quote (``ticker`` and a numeric ``price``), the reply
   summarises it: ``According to market data from <source>, <TICKER> is trading at $<price>
   <currency> as of <as_of>.``
2. If that JSON object holds an ``error`` instead, the reply says live data is unavailable and
   quotes no figure.
3. Otherwise the last ``user`` message is matched against a few finance topics (P/E ratio,
   diversification, dividends, bonds, ETFs, inflation, greetings) and a fixed explanation is
   returned, or a fixed note on what the assistant can do.

It never repeats the system prompt or the user's text, and a reply never contains a dollar figure
that did not come from a tool message. ``max_tokens`` is honoured: a longer reply is cut to that
many words with ``finish_reason: "length"``. With ``"stream": true`` the reply is sent as
server-sent events (``chat.completion.chunk`` objects, one per word, a final chunk carrying
``finish_reason``, then ``data: [DONE]``). If ``FAKE_LLM_API_KEY`` is set, requests must carry
it as ``Authorization: Bearer <key>`` (401 otherwise). Errors use OpenAI's error JSON shape.
``FAKE_LLM_DELAY_MS`` (default 0) makes each completion take that long, like a real model.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from service import BadRequest, JsonHandler, Recorder, arguments, serve

MODEL = "fake-finbot-1"
CREATED = 1_767_225_600  # fixed, so replies are byte-for-byte reproducible

TOPICS: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("p/e", "price-to-earnings", "price to earnings", "pe ratio"),
        "A price-to-earnings (P/E) ratio divides a company's share price by its earnings per "
        "share. It shows how much investors pay for each unit of profit: a higher ratio "
        "usually means higher growth expectations, or a more expensive stock.",
    ),
    (
        ("diversif",),
        "Diversification means spreading your money across different assets, sectors and "
        "regions, so that a loss in one holding is cushioned by the others.",
    ),
    (
        ("dividend",),
        "A dividend is a share of a company's profit paid out to its shareholders, usually "
        "every quarter. The dividend yield is the yearly dividend divided by the share price.",
    ),
    (
        ("bond",),
        "A bond is a loan to a government or a company: it pays interest at a fixed rate and "
        "returns the principal at maturity. Bond prices fall when interest rates rise.",
    ),
    (
        ("etf", "index fund"),
        "An exchange-traded fund (ETF) holds a basket of assets, often tracking an index, and "
        "trades on an exchange like a single stock, which makes diversification cheap.",
    ),
    (
        ("inflation",),
        "Inflation is the rate at which prices rise over time. It reduces the purchasing power "
        "of cash, which is why long-term savings are usually invested.",
    ),
    (
        (" hello", " hi ", " hey "),
        "Hello! I can look up stock prices and explain basic finance concepts.",
    ),
)
FALLBACK = (
    "I can look up live stock prices (for example, ask for the price of AAPL) and explain "
    "general finance concepts such as P/E ratios, diversification, dividends or bonds."
)


def _quote_in(content: Any) -> dict[str, Any] | None:
    if not isinstance(content, str):
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _tool_data(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    tool_messages = [m for m in messages if m.get("role") == "tool"]
    candidates = tool_messages or messages
    for message in reversed(candidates):
        data = _quote_in(message.get("content"))
        if data is not None and ("price" in data or "error" in data):
            return data
    return None


def reply_for(messages: list[dict[str, Any]]) -> str:
    """The assistant's reply to ``messages`` (see the module docstring)."""
    data = _tool_data(messages)
    if data is not None:
        price = data.get("price")
        if isinstance(price, (int, float)) and not isinstance(price, bool):
            source = str(data.get("source") or "the market data service")
            ticker = str(data.get("ticker") or "the stock").upper()
            currency = str(data.get("currency") or "USD")
            as_of = str(data.get("as_of") or "the latest close")
            return (
                f"According to market data from {source}, {ticker} is trading at "
                f"${price:,.2f} {currency} as of {as_of}."
            )
        return "I could not retrieve live market data right now, so I cannot give a price."
    user = [m for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    question = f" {user[-1]['content'].lower()} " if user else ""
    for keywords, answer in TOPICS:
        if any(k in question for k in keywords):
            return answer
    return FALLBACK


def _words(text: str) -> list[str]:
    """``text`` as word tokens that concatenate back to it (each but the first has its space)."""
    parts = text.split(" ")
    return [parts[0]] + [" " + p for p in parts[1:]]


def _completion_id(messages: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).hexdigest()
    return f"chatcmpl-fake{digest[:20]}"


class FakeLlmHandler(JsonHandler):
    server_version = "fake-llm/1.0"
    recorder = Recorder()

    def route(self, method: str, path: str) -> tuple[int, Any] | None:
        if method == "GET" and path == "/health":
            return 200, {"status": "ok"}
        if method == "GET" and path in ("/v1/models", "/models"):
            return 200, {
                "object": "list",
                "data": [
                    {"id": MODEL, "object": "model", "created": CREATED, "owned_by": "example"}
                ],
            }
        if path in ("/v1/chat/completions", "/chat/completions"):
            if method != "POST":
                raise BadRequest(405, "use POST")
            return self._chat()
        raise BadRequest(404, f"no route for {method} {path}")

    def _error(self, status: int, message: str, kind: str) -> tuple[int, Any]:
        self.close_connection = True
        return status, {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def _chat(self) -> tuple[int, Any] | None:
        key = os.environ.get("FAKE_LLM_API_KEY")
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error")
        request = self.read_json()
        delay_ms = float(os.environ.get("FAKE_LLM_DELAY_MS") or 0)
        if delay_ms > 0:
            time.sleep(delay_ms / 1000)  # the model's own latency
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return self._error(400, "'messages' must be a list of objects", "invalid_request_error")
        model = str(request.get("model") or MODEL)
        words = _words(reply_for(messages))
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        finish_reason = "stop"
        if isinstance(max_tokens, int) and 0 < max_tokens < len(words):
            words, finish_reason = words[:max_tokens], "length"
        completion_id = _completion_id(messages)
        if request.get("stream") is True:
            self._stream(completion_id, model, words, finish_reason)
            return None
        prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
        return 200, {
            "id": completion_id,
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(words)},
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(words),
                "total_tokens": prompt_tokens + len(words),
            },
        }

    def _stream(self, completion_id: str, model: str, words: list[str], finish: str) -> None:
        """Server-sent events over chunked transfer encoding, one flushed write per event."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": word}) for word in words]
        events.append(chunk({}, finish))
        lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
        for line in lines:
            data = line.encode("utf-8")
            self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main() -> None:
    args = arguments("A deterministic fake OpenAI-compatible LLM.", default_port=8002)
    serve(FakeLlmHandler, args.host, args.port)


if __name__ == "__main__":
    main()
