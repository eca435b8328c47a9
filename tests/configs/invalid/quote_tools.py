"""The python agent of python_tool_fault_unknown.yaml: read for its source, never imported."""


def get_quote(ticker: str) -> dict[str, str]:
    return {"ticker": ticker, "price": "123.45"}


def answer(prompt: str) -> str:
    return f"According to the feed: {get_quote('AAPL')['price']}"
