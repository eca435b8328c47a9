"""The words of the config reference for each enum value a field takes (``http`` and
``python`` of ``agent.type``, the fault modes, the mutation types...), keyed by the enum's
name. Data only, beside :mod:`flakestorm.authoring.descriptions` (the fields and sections):
:mod:`flakestorm.authoring.reference` renders them and :mod:`flakestorm.authoring.schema` gives
them to editors."""

from __future__ import annotations

ENUM_DESCRIPTIONS: dict[str, dict[str, str]] = {
    "AgentType": {
        "http": "An HTTP endpoint, called with `method`, `headers` and `request_template`.",
        "python": "A Python callable (`module:attr`), called in-process.",
    },
    "StreamFormat": {
        "openai": "OpenAI chunks over SSE: `choices[].delta.content` (a Responses API "
        "`response.output_text.delta`); ends with `data: [DONE]` (`response.completed`).",
        "anthropic": "Anthropic message events over SSE: `text_delta`s; ends with `message_stop`.",
        "sse": "Server-sent events: the text at `path` (or the data itself); ends with `done`.",
        "ndjson": "One JSON value a line: the text at `path`; ends with `done`.",
        "text": "Plain chunked text: each chunk is content; the end of the body is the end.",
    },
    "ToolDelivery": {
        "http": "At the tool's HTTP call, through the in-process proxy: its own error "
        "handling runs.",
        "callable": "At the wrapped callable: `flakestorm.ToolFaultError` in place of the tool.",
    },
    "Severity": {
        "critical": "Weight 3; any failed or errored critical cell fails the run.",
        "high": "Weight 2.",
        "medium": "Weight 1.",
        "low": "Weight 1.",
    },
    "When": {
        "always": "Every scenario.",
        "tool_faults_active": "Scenarios with tool faults.",
        "llm_faults_active": "Scenarios with LLM faults.",
        "any_chaos_active": "Scenarios with any fault or context attack.",
        "no_chaos": "Scenarios without any fault or context attack.",
    },
    "InvariantType": {
        "contains": "The output contains `value`.",
        "contains_any": "The output contains at least one of `values`.",
        "regex": "`pattern` matches somewhere in the output.",
        "excludes_pattern": "None of `patterns` matches.",
        "latency": "The invocation took at most `max_ms`.",
        "valid_json": "The output parses as JSON (and validates against `schema`).",
        "similarity": "similarity(output, `expected`) ≥ `threshold`.",
        "behavior_unchanged": "similarity(output, baseline) ≥ `similarity_threshold`; the "
        "`auto` baseline is the answer to the same prompt (a turn: in the same conversation) "
        "without chaos.",
        "excludes_pii": "No email, phone, SSN, credit card, IBAN or IP address in the output.",
        "refusal_check": "The output is a refusal (`expect: refuse`) or is not (`expect: comply`).",
        "completes": "The invocation returned a parseable answer before the timeout.",
        "output_not_empty": "The output has non-whitespace text.",
        "llm_judge": "A judge model answers PASS for the output against `rubric` (a judge "
        "without a verdict errors the cell; never a pass).",
        "max_calls": "Each invocation made at most `max` calls to `target` (attempts a fault "
        "answered included).",
        "max_tokens": "Each invocation's LLM calls billed at most `max` tokens (a count that "
        "is unknown errors the cell).",
        "max_cost": "Each invocation's LLM calls cost at most `max_usd` (a model without a "
        "price errors the cell).",
        "max_amplification": "Each invocation's `measure` of `target` is at most `max` times "
        "the same prompt's in the contract's scenario without faults.",
        "retry_discipline": "After a 429 or 503 with `Retry-After`, the next call to `target` "
        "waited at least that long (10% slack).",
        "no_duplicate_effects": "No two calls to `target` with the same method, path and body "
        "in an invocation, unless both carry the same `Idempotency-Key`.",
        "ttft": "A streamed reply's first content event (never a role-only or empty delta, a "
        "comment or the first byte) came within `max_ms` (`agent.stream`).",
        "max_stall": "A streamed reply's longest gap between content events, up to its end, "
        "is at most `max_ms` (`agent.stream`).",
        "stream_completes": "A streamed reply ended with its terminal event (`[DONE]`, "
        "`message_stop`, `done`); one that closes without it fails (`agent.stream`).",
    },
    "TokenKind": {
        "total": "Every token: prompt (cached ones included) and output.",
        "input": "Prompt tokens, cached reads and writes included.",
        "output": "Output tokens.",
    },
    "Measure": {
        "calls": "Calls to `target`.",
        "tokens": "Tokens its LLM calls billed.",
        "cost": "What its LLM calls cost.",
    },
    "EffectMethod": {
        "GET": "GET requests.",
        "HEAD": "HEAD requests.",
        "POST": "POST requests.",
        "PUT": "PUT requests.",
        "PATCH": "PATCH requests.",
        "DELETE": "DELETE requests.",
    },
    "JudgeVerdict": {
        "PASS": "The output satisfies the rubric.",
        "FAIL": "It does not.",
    },
    "PiiKind": {
        "email": "Email addresses.",
        "phone": "Phone numbers.",
        "ssn": "US social security numbers.",
        "credit_card": "Card numbers (Luhn-checked).",
        "iban": "IBANs.",
        "ip_address": "IPv4 and IPv6 addresses.",
    },
    "RefusalExpect": {
        "refuse": "The agent must refuse.",
        "comply": "The agent must not refuse.",
    },
    "ToolFaultMode": {
        "timeout": "Hold the call `delay_ms`, then drop the connection (python: raise "
        "`TimeoutError`).",
        "error": "Reply with status `error_code` and a JSON error body (python: raise "
        "`ToolFaultError`).",
        "malformed": "Reply 200 with a body that is not valid JSON.",
        "slow": "Wait `delay_ms`, then pass the real reply through.",
        "malicious_response": "Reply 200 with `payload` as the tool result.",
        "empty": "Reply 200 with an empty body (MCP: a result with no content; python: "
        'return `""`).',
        "tool_removed": "MCP: the tool vanishes from `tools/list` and a call gets `Unknown "
        "tool` (elsewhere: 404).",
        "session_expired": "MCP: the server answers 404 for the session, so the client must "
        "initialize again (elsewhere: 404).",
        "task_state": "A2A: the downstream agent acts on the call, then its task is given "
        "`state` (artifacts gone; FAILED with a status message), in this reply and every later "
        "call about the task in the scenario (WORKING: forever).",
        "card": "A2A: the agent's card is `missing` (404) or has the `v0_3` shape (a top-level "
        "`url`, no `supportedInterfaces`), at every fetch of it in the scenario.",
        "stream_cut": "A2A: a streamed call's (`SendStreamingMessage`, `SubscribeToTask`) "
        "first `after_events` events, then the stream ends, before a terminal state.",
        "lost_reply": "The call reaches the tool (or A2A agent, or MCP server), which acts on "
        "it; then the connection is dropped before the reply (python: `ConnectionResetError` "
        "once the tool has run).",
    },
    "A2aTaskState": {
        "FAILED": "The task failed (with a status message).",
        "REJECTED": "The agent rejected the task.",
        "CANCELED": "The task was canceled.",
        "INPUT_REQUIRED": "The agent needs more input from the caller.",
        "AUTH_REQUIRED": "The agent needs the caller to authenticate.",
        "WORKING": "Still working, at every later look: the task never finishes.",
    },
    "A2aCard": {
        "missing": "The card is not found (404).",
        "v0_3": "The card has the A2A 0.3 shape: a top-level `url`, no `supportedInterfaces`.",
    },
    "A2aMethod": {
        "SendMessage": "`SendMessage` (0.3: `message/send`; HTTP+JSON: `POST /message:send`).",
        "SendStreamingMessage": "`SendStreamingMessage` (0.3: `message/stream`).",
        "GetTask": "`GetTask` (0.3: `tasks/get`; HTTP+JSON: `GET /tasks/ID`).",
        "CancelTask": "`CancelTask` (0.3: `tasks/cancel`).",
        "SubscribeToTask": "`SubscribeToTask` (0.3: `tasks/resubscribe`).",
    },
    "McpErrorForm": {
        "result": "A tool result with `isError: true` and the error text.",
        "jsonrpc": "A JSON-RPC error response.",
    },
    "LlmFaultMode": {
        "timeout": "Hold the call `delay_ms`, then fail it (python: raise `TimeoutError`). "
        "With `after_chunks`, a streamed reply is relayed for that many content chunks, then "
        "held `delay_ms` and dropped (a stall mid-answer).",
        "rate_limit": "HTTP 429 with the provider's error JSON and `Retry-After` (python: "
        "raise `RateLimitFaultError`).",
        "truncated_response": "Cut the content to `max_tokens` tokens, with the provider's "
        "length stop reason.",
        "empty": "An empty completion.",
        "garbage": "A completion of random characters.",
        "response_drift": "Change the reply the way a new model version might (`drift_type`).",
        "cut_stream": "A streamed reply: relay `after_chunks` content chunks, then end the "
        "stream with no finish reason, no usage and no terminal event (`[DONE]`, "
        "`message_stop`); a reply that is not streamed is left alone (not applied).",
        "slow_stream": "A streamed reply: wait `first_token_ms` before its first content chunk "
        "and `chunk_delay_ms` before each later one; a reply that is not streamed is left alone "
        "(not applied).",
    },
    "DriftType": {
        "json_field_rename": "Rename fields of JSON content.",
        "format_change": "Change the format (e.g. JSON to prose, list to paragraph).",
        "verbosity_shift": "Make the answer much longer or shorter.",
        "refusal_rephrase": "Rephrase the answer as a partial refusal.",
        "tone_shift": "Change the tone.",
    },
    "ContextAttackType": {
        "memory_poisoning": "Add `payload` to the input before it is sent (`strategy`: "
        "prepend, append, replace).",
        "indirect_injection": "Insert `payloads` into tool results so they still look valid.",
        "overflow": "Add `inject_tokens` tokens of filler to tool results.",
        "conflicting_context": "Add contradictory `statements` to tool results.",
        "injection_via_context": "Place `payload` instructions in the system/context "
        "messages of LLM requests.",
    },
    "Verify": {
        "contract": "The invariants of the session's `contract` (by default the config's).",
        "invariants": "The config's top-level `invariants` (`completes` and "
        "`output_not_empty` when there are none), with the ids the phases give them.",
    },
    "OnMiss": {
        "error": "A replay miss: the session is errored, naming the call (exit 3).",
        "live": "The call goes to the real tool or LLM.",
    },
    "PoisonStrategy": {
        "prepend": "Payload before the input.",
        "append": "Payload after the input.",
        "replace": "Payload instead of the input.",
    },
    "MutationType": {
        "paraphrase": "The same request in other words.",
        "noise": "Typos and stray characters.",
        "tone_shift": "An angry, casual, stiffly formal, urgent or passive-aggressive tone.",
        "prompt_injection": "Instructions that try to override the agent's rules.",
        "encoding_attacks": "Base64, hex, ROT13, URL encoding, leetspeak, homoglyphs, "
        "zero-width characters and combining marks.",
        "context_manipulation": "Misleading or irrelevant context around the request.",
        "length_extremes": "Very short or very long inputs.",
        "custom": "User templates with `{prompt}` (`mutations.templates`).",
        "multi_turn_attack": "A fake earlier conversation that steers the agent.",
        "advanced_jailbreak": "Role-play and hypothetical-framing jailbreaks.",
        "semantic_similarity_attack": "A request that looks alike but means something else.",
        "format_poisoning": "Markup, JSON or code fences that confuse parsing.",
        "language_mixing": "Several languages mixed in one input.",
        "token_manipulation": "Unusual tokenisation: split words, special tokens.",
        "temporal_attack": "Wrong or impossible dates and times.",
        "http_header_injection": "Hostile, oversized, duplicated and spoofed headers (CR/LF "
        "attempts as literal text).",
        "payload_size_attack": "An oversized request body.",
        "content_type_confusion": "A wrong `Content-Type` for the body.",
        "query_parameter_poisoning": "Unexpected query-string parameters.",
        "request_method_attack": "A different HTTP method.",
        "protocol_level_attack": "HTTP/1.0, a chunked body, `Expect: 100-continue`, a body "
        "split across slow writes.",
        "resource_exhaustion": "Deeply nested or repetitive bodies.",
        "concurrent_request_pattern": "The same request sent concurrently.",
        "timeout_manipulation": "A slow upload of the request body.",
    },
    "MutationGenerator": {
        "templates": "Deterministic, offline, seeded transformations.",
        "llm": "An LLM writes the prompt-level mutations (`mutations.llm`).",
    },
    "LlmFallback": {
        "templates": "A variant the model would not write takes its template transform.",
    },
    "OutputFormat": {
        "junit": "JUnit XML.",
        "markdown": "A markdown summary (the GitHub job summary).",
        "json": "A JSON report (input to `flakestorm merge`).",
        "html": "A standalone HTML report.",
    },
    "SimilarityBackend": {
        "lexical": "Dependency-free and deterministic.",
        "embeddings": "Cosine similarity of embeddings from `advanced.embeddings`.",
    },
}
