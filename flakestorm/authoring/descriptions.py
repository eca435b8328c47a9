"""The words of the config reference: a description of every field, section and enum value,
keyed by the dotted path a user writes in ``flakestorm.yaml`` (``agent.timeout``,
``contract.invariants[].when``). Data only: :mod:`flakestorm.authoring.reference` renders the page
from
these and the model, and :mod:`flakestorm.authoring.schema` gives them to editors."""

from __future__ import annotations

from flakestorm.config import DEFAULT_SEED

INTERNAL_FIELDS = frozenset({"Scoring.legacy_form"})
"""``Model.field`` pairs that exist in the model but are not part of the file format."""

SECTIONS: dict[str, str] = {
    # model name -> the dotted path its fields are described under
    "Config": "",
    "AgentConfig": "agent",
    "AgentStart": "agent.start",
    "AgentSession": "agent.session",
    "AgentStream": "agent.stream",
    "Conversation": "golden_prompts[]",
    "Invariant": "invariants[]",
    "ContractInvariant": "invariants[]",
    "Contract": "contract",
    "Scenario": "contract.chaos_matrix[]",
    "Sweep": "contract.chaos_matrix[].sweep",
    "Chaos": "chaos",
    "ToolFault": "tool_faults[]",
    "LlmFault": "llm_faults[]",
    "ContextAttack": "context_attacks[]",
    "Proxy": "proxy",
    "ToolRoute": "proxy.tools.*",
    "Mutations": "mutations",
    "LlmEndpoint": "mutations.llm",
    "MutationLlm": "mutations.llm",
    "Replays": "replays",
    "Session": "replays.sessions[]",
    "SessionFile": "replays.sessions[]",
    "SessionTurn": "replays.sessions[].turns[]",
    "ToolResponse": "replays.sessions[].tool_responses[]",
    "LlmReply": "replays.sessions[].llm_responses[]",
    "LangsmithSource": "replays.sources[]",
    "Scoring": "scoring",
    "Weights": "scoring.weights",
    "Output": "output",
    "Advanced": "advanced",
    "Accepted": "accepted[]",
    "Price": "prices.MODEL",
    "JudgeEndpoint": "advanced.judge",
    "JudgeExample": "invariants[].examples[]",
}

SECTION_NOTES: dict[str, str] = {
    "": "The root of `flakestorm.yaml`. A phase runs when its section is present: `contract`, "
    "`chaos`, `mutations`, `replays`.",
    "agent": "The system under test: an HTTP endpoint or a Python callable.",
    "golden_prompts[]": "A golden prompt that is a conversation (SPEC §12): its turns are "
    "sent in order in one session; invariants check the last turn's reply unless `turn` says "
    "otherwise, and faults may be scoped to turns with `turns`.",
    "agent.start": "Local runs only: flakestorm starts the agent, waits until it is ready, "
    "passes the proxy environment variables to it and stops it at the end.",
    "agent.session": "Http agents: each cell gets its own conversation, a session id derived "
    "from the seed and the cell (one per repeat), so cells are isolated without a reset and "
    "run concurrently; the stateful-agent check does not apply. Give exactly one of `header` "
    "and `template`.",
    "agent.stream": "Http agents whose reply streams (SPEC §16): the reply is read as it "
    "arrives, each event with its arrival time; the assembled text is the output every "
    "invariant checks, and `ttft`, `max_stall` and `stream_completes` judge how it arrived. A "
    "stream that closes without its terminal event is still an answer; no connection, a "
    "non-2xx status or `agent.timeout` errors the invocation. See docs/streaming.md.",
    "invariants[]": "One rule the agent must obey. The same fields are used in the top-level "
    "`invariants` list (mutation and chaos-only phases; `id` optional) and in "
    "`contract.invariants` (`id` required and unique). Type fields belong to one type only: "
    "see [invariant types](#invariant-types).",
    "contract": "A named set of invariants plus a chaos matrix. Every invariant is checked "
    "under every scenario: each (invariant × scenario) pair is a cell.",
    "contract.chaos_matrix[]": "A scenario: a name plus the faults active while its cells "
    "run. `context_attacks` takes the list form or the dict form "
    "(`context_attacks: {memory_poisoning: {payload: ...}}`).",
    "contract.chaos_matrix[].sweep": 'A sweep (docs/chaos.md, "Sweeps"): the scenario runs '
    "once per value as `NAME[VALUE]`, each like any other scenario (shards and the baseline "
    "delta included), and every report gives, per invariant, the breaking point: the first "
    "value at which it fails and stays failed.",
    "chaos": "Faults for the chaos-only phase and `flakestorm run --chaos`; never applied "
    "implicitly to anything else.",
    "tool_faults[]": "A fault injected into the agent's tool calls. Used in `chaos.tool_faults` "
    "and in each scenario's `tool_faults`. See [fault modes](#fault-modes).",
    "llm_faults[]": "A fault injected into the agent's LLM calls. Used in `chaos.llm_faults` "
    "and in each scenario's `llm_faults`. See [fault modes](#fault-modes).",
    "context_attacks[]": "An attack on what the agent reads: its input, tool results or LLM "
    "context. Used in `chaos.context_attacks` and in each scenario's `context_attacks`. "
    "See [context attack types](#context-attack-types).",
    "proxy": "The chaos proxy that delivers faults to an HTTP agent's LLM and tool traffic.",
    "proxy.tools.*": "A tool route in its long form: the calls the agent's code makes to "
    "`match` are this tool's, and go to `forward` (SPEC §2.5).",
    "mutations": "The mutation phase: variants of each golden prompt are sent to the agent "
    "and checked against the top-level `invariants`.",
    "mutations.llm": "An OpenAI-compatible API: `mutations.llm` (the `llm` mutation "
    "generator, chat completions) and `advanced.embeddings` (the `embeddings` similarity "
    "backend, `/v1/embeddings`).",
    "advanced.judge": "The judge of `llm_judge` invariants: `mock` (built in, deterministic: "
    "PASS when the output contains a phrase the rubric quotes) or an OpenAI-compatible chat "
    "completions API, called directly (never through the chaos proxy). An invariant's own "
    "`judge` wins; without either, `proxy.llm_upstream: mock` makes the mock the judge. See "
    "[the judge guide](judge.md).",
    "invariants[].examples[]": "An output and the verdict the judge must give it: before the "
    "agent is called, each example is judged, and a judge that disagrees stops the run "
    "(exit 3).",
    "replays": "The replay phase: recorded sessions are played back against the agent.",
    "replays.sessions[]": "A recorded session, inline, or `{file: PATH}` to read sessions from "
    "YAML or JSON files (a path or a glob such as `sessions/*.yaml`). See "
    "[the replay guide](replay.md).",
    "replays.sessions[].turns[]": "One turn of a recorded conversation: its input, and the "
    "tool replies and LLM replies recorded while it ran, served to that turn only.",
    "replays.sessions[].tool_responses[]": "A recorded tool reply. Per tool, the n-th call "
    "the agent makes gets the n-th recorded reply, with its status and latency; a call with "
    "nothing recorded is a replay miss (`replays.on_miss`).",
    "replays.sessions[].llm_responses[]": "A recorded LLM reply, served in order to the "
    "agent's LLM calls (OpenAI or Anthropic shape, streamed when the agent streams). Without "
    "any, LLM calls go to the configured LLM.",
    "replays.sources[]": "Sessions imported from LangSmith when the replay phase starts "
    "(credentials from `LANGSMITH_API_KEY` / `LANGSMITH_ENDPOINT`; needs "
    "`flakestorm[langsmith]`), replayed after the listed sessions.",
    "scoring": "How phase scores combine into the overall score, and the gate. The flat "
    "legacy form (`scoring: {mutation: 0.2, chaos: 0.35, ...}`) is still accepted with a "
    "deprecation warning; it cannot be mixed with `scoring.weights`.",
    "scoring.weights": "Weight of each phase in the overall score. Each is 0–1 and together "
    "they must sum to 1.0; phases that did not run are left out and the rest re-normalised.",
    "output": "Where reports are written, and in which formats.",
    "advanced": "Reproducibility, concurrency, repeats and budgets.",
    "prices.MODEL": "One model's prices, in USD per million tokens (`MODEL`: the model as the "
    "LLM's replies name it, e.g. `gpt-4o-mini-2024-07-18`; a price for the name without its "
    "date suffix, `gpt-4o-mini`, serves it too).",
    "accepted[]": "An accepted failure (SPEC §14): the cell (or the failing mutations of a "
    "type) does not fail the gate until `until`; every report shows it as accepted with the "
    "reason and the date, and the score still counts it as failed. Give exactly one of "
    "`cell` and `mutation`.",
}

FIELD_DESCRIPTIONS: dict[str, str] = {
    # top level
    "version": 'Config format version. A missing version means "2.0"; "1.0" is accepted '
    "with a warning.",
    "agent": "The agent under test.",
    "golden_prompts": "Normal user inputs: a string (one message) or `{turns: [...]}` (a "
    "conversation, its turns sent in order in one session). Required for the contract, chaos "
    "and mutation phases unless every invariant has `probes`.",
    "golden_prompts[].turns": "A conversation's messages, sent in order in one session (http "
    "agents: `agent.session` or a reset before it; python agents: a `session_id` parameter or "
    "`reset_function`). Each turn is one invocation.",
    "invariants": "Invariants for the mutation and chaos-only phases.",
    "contract": "The behavioural contract (contract phase).",
    "chaos": "Faults for the chaos-only phase (chaos phase).",
    "proxy": "The chaos proxy, for HTTP agents.",
    "mutations": "Prompt and request mutations (mutation phase).",
    "replays": "Recorded sessions to replay (replay phase).",
    "scoring": "Phase weights and the minimum overall score.",
    "output": "Report directory and formats.",
    "advanced": "Seed, concurrency, repeats and budgets.",
    "accepted": "Known failures that do not fail the gate until a date.",
    "prices": "What each model's tokens cost, by the model name the LLM's replies give, for "
    "`max_cost` and `max_amplification` by cost ([spend.md](spend.md)). A model not named here "
    "is priced from the pinned price table (`genai-prices`, offline); a model in neither "
    "errors a cost cell, naming it.",
    "prices.MODEL.input_per_mtok": "Prompt tokens neither read from nor written to a cache.",
    "prices.MODEL.output_per_mtok": "Output tokens.",
    "prices.MODEL.cached_input_per_mtok": "Prompt tokens read from a cache (default "
    "`input_per_mtok`).",
    "prices.MODEL.cache_write_per_mtok": "Prompt tokens written to a cache (default "
    "`input_per_mtok`).",
    # agent
    "agent.type": "`http` (an HTTP endpoint) or `python` (a callable).",
    "agent.endpoint": "URL of the agent (http) or `module:attr` of the callable (python).",
    "agent.method": "HTTP method of each invocation.",
    "agent.headers": "Request headers. Values are `${VAR}`-expanded; values from the "
    "environment are secrets and never printed.",
    "agent.request_template": "The request body. `{prompt}` is replaced by the prompt, as a "
    "correctly escaped JSON string value.",
    "agent.response_path": "Dotted path to the answer in the JSON reply (`output`, "
    "`data.answer`, `choices.0.text`). If given and missing, the invocation errors. Auto: the "
    "first of `output`, `response`, `answer`, `result`, `text`, `content`, `message`, else the "
    "whole body as text.",
    "agent.timeout": "Per-invocation timeout, in milliseconds: a wall-clock deadline on the "
    "whole invocation (connect, headers and the body however slowly it arrives); also the "
    "timeout of `reset_endpoint` and `reset_function`.",
    "agent.max_response_bytes": "Largest reply body accepted (and a python agent's streamed "
    "text); a larger reply fails the invocation.",
    "agent.health_endpoint": "URL polled with GET (2xx = ready) before the run. Without it, "
    "the agent is ready when its endpoint accepts a TCP connection.",
    "agent.ready_timeout": "How long to wait for the agent to be ready, in milliseconds; then "
    "the run stops with exit code 3. Every 10 s of waiting prints what was tried and the last "
    "error.",
    "agent.start": "A command that starts the agent (local runs only; ignored when the agent "
    "is already reachable).",
    "agent.reset_endpoint": "URL (or path relative to `endpoint`) POSTed before each cell to "
    "reset the agent's state. A failed reset makes that cell errored.",
    "agent.reset_function": "Python `module:attr` called (sync or async) before each cell to "
    "reset the agent's state.",
    "agent.session": "Isolate each cell in its own conversation instead of resetting the "
    "agent: `{header: NAME}` or `{template: true}`.",
    "agent.stream": "Read the reply as a stream: `{format: openai}` (or `anthropic`, `text`), "
    "`{format: sse | ndjson, path, done}`.",
    "agent.stream.format": "How the reply is framed and where its text is: `openai` and "
    "`anthropic` chunk shapes over SSE, generic `sse` or `ndjson` events, or plain chunked "
    "`text`.",
    "agent.stream.path": "`sse` and `ndjson` only: the dotted path to the text delta in each "
    "event's JSON (`delta.text`, `message.content`); `sse` without it takes each event's data "
    "as text. Required for `ndjson`.",
    "agent.stream.done": "`sse` and `ndjson` only, required: the terminal event: an SSE event "
    "name (`end`), a whole data payload or line (`[DONE]`), or `PATH=VALUE` on the event's "
    "JSON (`type=done`, `done=true`).",
    "agent.tools": "Python agents: `module:attr` of each tool to wrap with faults: a callable, "
    "or a framework's tool object (an OpenAI Agents SDK `FunctionTool`, a LangChain `BaseTool`, "
    "a Strands `@tool`, a Pydantic AI `Tool`), whose function is wrapped inside it; or a "
    "framework object that holds tools, named whole (a Pydantic AI, OpenAI Agents SDK or "
    "Strands `Agent`, a LangGraph `ToolNode`): each tool it holds, by its own name. A tool's "
    "name in `tool_faults[].tool` is its attribute name. A tool also in `proxy.tools` takes "
    "its faults at the HTTP level.",
    "agent.tool_delivery": "Python agents: where the faults of a tool named both in "
    "`agent.tools` (or the registry) and in `proxy.tools` act: `http` (default: at its HTTP "
    "call, through the in-process proxy, so the tool's own error handling runs) or `callable` "
    "(at the wrapped callable; its URL is then not routed).",
    "agent.tool_registry": "Python agents: `module:attr` of an object with `names()`, "
    "`get(name)` and `set(name, callable)` whose tools are wrapped with faults.",
    "agent.llm": "Python agents: `module:attr` of the callable the agent uses to call its "
    "LLM; LLM faults apply to it. On an OpenAI or Anthropic SDK method "
    "(`openai.resources.chat.completions:AsyncCompletions.create`) they raise the SDK's own "
    "exceptions and act on its streams.",
    "agent.session.header": "The request header that carries the session id, e.g. `X-Session-Id`.",
    "agent.session.template": "`true`: the session id fills `{session_id}` in "
    '`request_template` (e.g. `{"input": "{prompt}", "session": "{session_id}"}`).',
    "agent.start.command": "Shell command that starts the agent.",
    "agent.start.cwd": "Working directory of the command (relative to the config file).",
    "agent.start.env": "Extra environment variables for the command.",
    # invariants
    "invariants[].id": "Identifier, unique within the list. Required in a contract.",
    "invariants[].type": "What is checked: see [invariant types](#invariant-types).",
    "invariants[].severity": "Weight in the resilience score (critical 3, high 2, medium 1, "
    "low 1). A failed critical cell fails the run whatever the score.",
    "invariants[].when": "In which scenarios the invariant is checked; elsewhere its cells "
    "are skipped.",
    "invariants[].negate": "Invert the verdict: the cell passes when the check fails.",
    "invariants[].description": "Human-readable description, shown in reports.",
    "invariants[].probes": "Prompts sent instead of the golden prompts for this invariant "
    "(e.g. system-prompt leak probes).",
    "invariants[].turn": "Which reply of a conversation is checked: `last` (default), `every` "
    "(each turn; a failure names the turn) or a turn number N.",
    "invariants[].value": "`contains`: the text the output must contain.",
    "invariants[].values": "`contains_any`: texts of which the output must contain at least one.",
    "invariants[].case_sensitive": "`contains`, `contains_any`: compare case-sensitively "
    "(default false).",
    "invariants[].pattern": "`regex`: a Python regular expression searched in the output.",
    "invariants[].patterns": "`excludes_pattern`: Python regular expressions none of which "
    "may match.",
    "invariants[].max_ms": "`latency`: the largest accepted invocation latency; `ttft`: the "
    "latest accepted first content event; `max_stall`: the longest accepted gap between "
    "content events; in milliseconds.",
    "invariants[].schema": "`valid_json`: a JSON Schema the parsed output must validate against.",
    "invariants[].expected": "`similarity`: the text the output is compared with.",
    "invariants[].threshold": "`similarity`: the lowest accepted similarity, 0–1 (default 0.75).",
    "invariants[].baseline": "`behavior_unchanged`: `auto` (the agent's answer to the same "
    "prompt without chaos, taken once per prompt; for a turn of a conversation, that turn's "
    "answer in the same conversation sent without chaos) or a fixed text.",
    "invariants[].similarity_threshold": "`behavior_unchanged`: the lowest accepted "
    "similarity to the baseline, 0–1 (default 0.75).",
    "invariants[].kinds": "`excludes_pii`: the kinds of personal data to look for (default all).",
    "invariants[].expect": "`refusal_check`: whether the agent must `refuse` (default) or "
    "`comply`.",
    "invariants[].rubric": "`llm_judge`: what a passing output does, in words the judge reads "
    "(for `mock`: quote the phrases a passing output contains).",
    "invariants[].examples": "`llm_judge`: outputs with the verdict the judge must give them, "
    "checked before the run (calibration).",
    "invariants[].judge": "`llm_judge`: this invariant's judge (`mock` or `{base_url, model, "
    "api_key, timeout_s}`); default `advanced.judge`.",
    "invariants[].target": "`max_calls`, `max_amplification`, `retry_discipline`, "
    "`no_duplicate_effects`: whose calls are counted: `llm`, a tool's name (a `proxy.tools` "
    "route, a tool the agent wraps, an MCP tool as `SERVER.TOOL`) or `*` (every call); default "
    "`llm`, and required for `max_calls` and `no_duplicate_effects`.",
    "invariants[].max": "`max_calls`: the most calls per invocation (faulted ones included); "
    "`max_tokens`: the most tokens per invocation; `max_amplification`: the largest accepted "
    "ratio to the same prompt without chaos.",
    "invariants[].kind": "`max_tokens`: which tokens count: `total` (default), `input` (every "
    "prompt token, cached ones included) or `output`.",
    "invariants[].max_usd": "`max_cost`: the most an invocation's LLM calls may cost, in USD "
    "(at the prices of `prices:`, else of the pinned price table).",
    "invariants[].measure": "`max_amplification`: what is compared: `calls` (default), "
    "`tokens` or `cost`.",
    "invariants[].methods": "`no_duplicate_effects`: the HTTP methods whose repeats count "
    "(default `POST`, `PUT`, `PATCH`, `DELETE`); a python tool's calls always count.",
    "invariants[].examples[].output": "An output as the agent could give it.",
    "invariants[].examples[].verdict": "`PASS` or `FAIL`: what the judge must answer for it.",
    "advanced.judge.base_url": "The API root, like `https://api.openai.com/v1` (`/chat/"
    "completions` is added). Default: the proxy's `llm_upstream` URL with `/v1`.",
    "advanced.judge.model": "The judge model; part of every cached verdict's key.",
    "advanced.judge.api_key": "Sent as `Authorization: Bearer`; write it as `${VAR}`.",
    "advanced.judge.timeout_s": "How long one judge answer may take, seconds; a slower one "
    "counts as no verdict and is asked again.",
    # contract
    "contract.name": "Name of the contract (the JUnit suite and class name).",
    "contract.description": "Human-readable description.",
    "contract.invariants": "The invariants, each with a unique `id`.",
    "contract.chaos_matrix": "The scenarios, each with a unique `name`.",
    "contract.chaos_matrix[].name": "Scenario name, unique within the matrix.",
    "contract.chaos_matrix[].sweep": "Run the scenario at several values of one fault field: "
    "one scenario per value, named `NAME[VALUE]`; reports give each invariant's breaking "
    "point.",
    "contract.chaos_matrix[].sweep.field": "The field: `tool_faults[N].delay_ms`, "
    "`.probability` or `.calls` (its upper bound); `llm_faults[N].` the same, "
    "`max_tokens`, `after_chunks`, `first_token_ms` and `chunk_delay_ms`; "
    "`context_attacks[N].inject_tokens` or `.calls`.",
    "contract.chaos_matrix[].sweep.values": "Two or more values, in the order reports show "
    "them (e.g. `[250, 500, 1000, 2000]`).",
    "contract.chaos_matrix[].tool_faults": "Tool faults active in this scenario.",
    "contract.chaos_matrix[].llm_faults": "LLM faults active in this scenario.",
    "contract.chaos_matrix[].context_attacks": "Context attacks active in this scenario "
    "(list form or dict form).",
    # chaos
    "chaos.tool_faults": "Tool faults of the chaos-only phase.",
    "chaos.llm_faults": "LLM faults of the chaos-only phase.",
    "chaos.context_attacks": "Context attacks of the chaos-only phase (list form or dict form).",
    # faults
    "tool_faults[].tool": "Name of the tool the fault applies to (a proxy route name, a "
    "python tool's attribute name, or an MCP tool: `get_quote`, or `SERVER.get_quote` when "
    "two servers of `proxy.mcp` share the name).",
    "tool_faults[].mode": "What the fault does: see [fault modes](#fault-modes).",
    "tool_faults[].probability": "Chance that a matching call gets the fault, 0–1, decided by "
    "a seeded RNG (reproducible).",
    "tool_faults[].after_calls": "The first N matching calls of each invocation succeed; the "
    'fault fires from call N+1 (a shorthand for `calls: "N+1-"`).',
    "tool_faults[].calls": "Which matching calls of each invocation the fault acts on, "
    "numbered from 1: "
    '`"1-2"` (the first two: a retry that makes a third call succeeds), `"3-"`, `"2,4"`, '
    '`"1-2,5"`. Unset: every call.',
    "tool_faults[].every": "Only every K-th matching call of each invocation (the K-th, the "
    "2K-th, …): an intermittent dependency.",
    "tool_faults[].window_ms": "`[FROM, TO]`: only calls made from FROM to TO ms after the "
    "invocation started: an outage that heals.",
    "tool_faults[].turns": "Active only while these turns of a conversation run (numbered from "
    "1; a one-message prompt is turn 1). Unset: every turn.",
    "tool_faults[].delay_ms": "`timeout`: how long to hold the call before dropping it; "
    "`slow`: the delay before the real reply. Milliseconds.",
    "tool_faults[].error_code": "`error`: HTTP status of the error reply (or the "
    "`error_code` of the raised `ToolFaultError`).",
    "tool_faults[].message": "`error`: the error message.",
    "tool_faults[].as": "`error` on an MCP tool: `result` (default) answers with a tool result "
    "whose `isError` is true; `jsonrpc` with a JSON-RPC error response.",
    "tool_faults[].payload": "`malicious_response`: the tool result returned instead of the "
    "real one.",
    "tool_faults[].state": "`task_state`: the state the downstream A2A agent's task is given "
    "(case and `-` as written in either protocol version are accepted).",
    "tool_faults[].method": "On a downstream A2A agent: the one method whose calls the fault "
    "acts on (a 0.3 name is read as its 1.0 method). Unset: every call of the agent.",
    "tool_faults[].after_events": "`stream_cut`: how many events of the A2A stream are relayed "
    "before it is closed.",
    "tool_faults[].card": "`card`: what the downstream A2A agent's card becomes.",
    "tool_faults[].match_url": "Match calls by URL instead of by tool name: a glob when it "
    "contains `*`, else a URL prefix; applies to `/tools/` routes, forward-proxy requests, "
    "`CONNECT` tunnels (`host:port`) and, for python tools, `python:module:attr`.",
    "llm_faults[].mode": "What the fault does: see [fault modes](#fault-modes).",
    "llm_faults[].probability": "Chance that a matching call gets the fault, 0–1, decided by "
    "a seeded RNG (reproducible).",
    "llm_faults[].after_calls": "The first N LLM calls of each invocation succeed; the fault "
    'fires from call N+1 (a shorthand for `calls: "N+1-"`).',
    "llm_faults[].calls": "Which matching calls of each invocation the fault acts on, "
    "numbered from 1: "
    '`"1-2"` (the first two: a retry that makes a third call succeeds), `"3-"`, `"2,4"`, '
    '`"1-2,5"`. Unset: every call.',
    "llm_faults[].every": "Only every K-th matching call of each invocation (the K-th, the "
    "2K-th, …): an intermittent dependency.",
    "llm_faults[].window_ms": "`[FROM, TO]`: only calls made from FROM to TO ms after the "
    "invocation started: an outage that heals.",
    "llm_faults[].turns": "Active only while these turns of a conversation run (numbered from "
    "1; a one-message prompt is turn 1). Unset: every turn.",
    "llm_faults[].delay_ms": "`timeout`: how long to hold the call (or, with `after_chunks`, "
    "the stream) before failing it. Milliseconds.",
    "llm_faults[].max_tokens": "`truncated_response`: how many tokens of the content are kept.",
    "llm_faults[].drift_type": "`response_drift`: which kind of drift.",
    "llm_faults[].after_chunks": "`cut_stream`: how many content chunks are relayed before the "
    "stream is cut (0: none); `timeout` on a streamed reply: how many are relayed before it "
    "stalls for `delay_ms` and is dropped.",
    "llm_faults[].first_token_ms": "`slow_stream`: the wait before the stream's first content "
    "chunk (a role-only chunk or a ping still comes at once). Milliseconds.",
    "llm_faults[].chunk_delay_ms": "`slow_stream`: the wait before each later content chunk. "
    "Milliseconds.",
    "context_attacks[].type": "The attack: see [context attack types](#context-attack-types).",
    "context_attacks[].payload": "`memory_poisoning`: the text added to the input; "
    "`injection_via_context`: the instructions placed in the LLM's context messages.",
    "context_attacks[].strategy": "`memory_poisoning`: how the payload is combined with the input.",
    "context_attacks[].payloads": "`indirect_injection`: texts inserted into tool results.",
    "context_attacks[].trigger_probability": "`indirect_injection`: chance that a tool result "
    "gets a payload, 0–1.",
    "context_attacks[].inject_tokens": "`overflow`: how many tokens of filler are added to "
    "tool results.",
    "context_attacks[].statements": "`conflicting_context`: contradictory statements added "
    "to tool results (default: built-in ones).",
    "context_attacks[].tool": "Only attack the results of this tool (default: every tool).",
    "context_attacks[].calls": "Tool results and LLM requests: which matching calls of each "
    "invocation the attack acts on, numbered from 1: "
    '`"1-2"` (the first two: a retry that makes a third call succeeds), `"3-"`, `"2,4"`, '
    '`"1-2,5"`. Unset: every call.',
    "context_attacks[].every": "Only every K-th matching call of each invocation (the K-th, the "
    "2K-th, …): an intermittent dependency.",
    "context_attacks[].window_ms": "`[FROM, TO]`: only calls made from FROM to TO ms after the "
    "invocation started: an outage that heals.",
    "context_attacks[].turns": "Active only while these turns of a conversation run "
    "(numbered from 1; a one-message prompt is turn 1). Unset: every turn.",
    # proxy
    "proxy.url": "Where the chaos proxy runs (e.g. `http://flakestorm-proxy:8080` in "
    "GitHub). Omitted: flakestorm starts one in-process on 127.0.0.1.",
    "proxy.llm_upstream": "Where proxied LLM calls go: a base URL, `mock` (a built-in "
    "deterministic LLM) or `cassette:PATH` (replay a recording).",
    "proxy.tools": "Reverse-proxy routes: `/tools/<name>/...` on the proxy is forwarded to "
    "the URL given for `<name>`. For a python agent, its HTTP clients (requests, httpx, "
    "urllib) are routed through an in-process proxy for these URLs, so tool faults act on the "
    "tool's HTTP call. A route may be `{match: URL, forward: URL}`: calls to `match` (an API "
    "the agent's code hard-codes) are sent to `forward` (a staging server, a local stub); "
    "a plain URL is both.",
    "proxy.mcp": "MCP servers over streamable HTTP: `/mcp/<name>` on the proxy is forwarded "
    "to the URL given for `<name>` (and, in forward mode, a request under that URL is that "
    "server's). A `tools/call` is a call of the MCP tool it names; every other method passes "
    "through untouched. The value `stdio` names a stdio server relayed by `flakestorm mcp-stdio "
    "--name <name>` instead. See [docs/mcp.md](mcp.md).",
    "proxy.a2a": "Downstream A2A agents: `/a2a/<name>` on the proxy is forwarded to the base "
    "URL given for `<name>`; point the agent's A2A client at it (the card's interface URLs "
    "are rewritten to keep the client on that route). Each call (`SendMessage`, `GetTask`, "
    "...) is a call of `<name>`. See [docs/a2a.md](a2a.md).",
    "proxy.tools.*.match": "The URL the agent's code calls: a request under it is a call of "
    "this tool (https too for a python agent, whose clients are routed before TLS; an http "
    "agent's https calls are tunnels the proxy cannot redirect).",
    "proxy.tools.*.forward": "Where the tool's calls go instead: its path and query follow.",
    "proxy.token": "Shared secret for the proxy's control API (`/_flakestorm/`), when the "
    "proxy requires one (the action's `proxy-token` input sets it).",
    "proxy.port": "The port of the proxy flakestorm starts itself on 127.0.0.1 (for an http "
    "agent without `proxy.url`, or a python agent's routed HTTP calls); default: a free port. "
    "A port in use is an error (exit 2). Ignored with `proxy.url`.",
    # mutations
    "mutations.count": "Mutations per golden prompt (1–50).",
    "mutations.types": "Mutation types to generate (default: all 24); see [mutation "
    "types](#mutation-types).",
    "mutations.weights": "Weight of each mutation type in the mutation score; types not "
    "listed keep their default weight.",
    "mutations.generator": "`templates` (deterministic, offline) or `llm` (prompt-level "
    "mutations written by an LLM).",
    "mutations.llm": "The LLM used by the `llm` generator.",
    "mutations.templates": "`custom` type: templates, each containing `{prompt}`.",
    "mutations.llm.base_url": "Base URL of the OpenAI-compatible API (e.g. "
    "`http://localhost:11434/v1`).",
    "mutations.llm.model": "Model name.",
    "mutations.llm.api_key": "API key; use `${VAR}` so it stays out of the file.",
    "mutations.llm.temperature": "Sampling temperature of the chat completions (the "
    "endpoint's default when unset).",
    "mutations.llm.fallback": "What to do with a variant the model would not write (it "
    "refused, echoed the prompt or left the attack out, after retries): unset stops the run "
    "(exit 3) naming the endpoint, the mutation and why; `templates` uses that variant's "
    "template transform instead, and every report says so.",
    "mutations.cache_dir": "Where the `llm` generator caches its mutations, relative to the "
    "config file (delete it to have them written again).",
    # replays
    "replays.sessions": "Sessions, inline or `{file: PATH}`.",
    "replays.sources": "External sources of sessions.",
    "replays.on_miss": "What a call with nothing recorded for it gets: `error` (a replay "
    "miss, the session is errored naming the call) or `live` (the call goes to the real "
    "tool or LLM).",
    "replays.sessions[].id": "Session identifier (unique).",
    "replays.sessions[].name": "Human-readable name.",
    "replays.sessions[].input": "The input sent to the agent (a one-turn session).",
    "replays.sessions[].turns": "A recorded conversation instead of `input`: its turns, "
    "replayed in order in one session, each with its own recorded responses; invariants check "
    "the turns their `turn` selects.",
    "replays.sessions[].turns[].input": "The turn's message.",
    "replays.sessions[].turns[].tool_responses": "The tool replies recorded during this turn, "
    "in call order per tool.",
    "replays.sessions[].turns[].llm_responses": "The LLM replies recorded during this turn, "
    "served in order; empty: live.",
    "replays.sessions[].context": "Extra context: filled in for `{context}` in "
    "`agent.request_template` (a python agent gets it as its `context` argument); without "
    "`{context}`, prepended to the input as `Context:` text and a blank line.",
    "replays.sessions[].tool_responses": "Recorded tool replies served to the agent, in call "
    "order per tool.",
    "replays.sessions[].llm_responses": "Recorded LLM replies, served in order; empty: LLM "
    "calls are live.",
    "replays.sessions[].expected_output": "The recorded good answer: `behavior_unchanged` "
    "invariants compare with it (without it they are skipped).",
    "replays.sessions[].expected_failure": "What went wrong in the recorded incident "
    "(informational).",
    "replays.sessions[].contract": "The contract to verify the reply against: a contract "
    "name in this config, or the path of a YAML file with a `contract` section (relative "
    "to the config). Default: the config's contract. Not with `verify: invariants`.",
    "replays.sessions[].source": "Where the session came from (`manual`, a tool): "
    "metadata a flakestorm 2.0.0 session carries; accepted and not read.",
    "replays.sessions[].verify": "What the reply is checked against: `contract` (the "
    "session's `contract`) or `invariants` (the config's top-level `invariants`, as the "
    "mutation and chaos phases check a reply: what `replay export` writes for a failed "
    "mutation or chaos cell).",
    "replays.sessions[].file": "File form, instead of the fields above: path of a YAML or "
    "JSON session file, or a glob (relative to the config file). A file holds one session, "
    "or `sessions:` with a list.",
    "replays.sessions[].tool_responses[].tool": "The tool name (as `proxy.tools` or "
    "`agent.tools` name it).",
    "replays.sessions[].tool_responses[].response": "The recorded result: JSON, or text.",
    "replays.sessions[].tool_responses[].status": "The recorded HTTP status; not 2xx "
    "counts as a tool fault for `when`.",
    "replays.sessions[].tool_responses[].latency_ms": "The recorded latency, in "
    "milliseconds: the reply is held that long.",
    "replays.sessions[].tool_responses[].arguments": "What the agent sent the tool (the "
    "request body or query, or the python call's arguments); compared with what it sends "
    "now in the divergence report.",
    "replays.sessions[].tool_responses[].fault": "The response was an injected fault (a "
    "`malformed` 200, say): counts as a tool fault for `when` whatever its status. "
    "`replay export` sets it.",
    "replays.sessions[].llm_responses[].content": "The reply text.",
    "replays.sessions[].llm_responses[].status": "The recorded HTTP status; not 2xx is "
    "served as the provider's error and counts as an LLM fault for `when`.",
    "replays.sessions[].llm_responses[].latency_ms": "The recorded latency, in milliseconds.",
    "replays.sessions[].llm_responses[].fault": "The reply was an injected fault (a "
    "truncated reply, say): counts as an LLM fault for `when` whatever its status.",
    "replays.sources[].type": "The source kind.",
    "replays.sources[].project": "LangSmith project.",
    "replays.sources[].run_id": "LangSmith run id.",
    "replays.sources[].contract": "The contract imported sessions are verified against.",
    # scoring
    "scoring.weights": "Weight of each phase in the overall score.",
    "scoring.min_score": "The gate fails when the overall score is below this (0–100).",
    "scoring.weights.mutation": "Weight of the mutation phase.",
    "scoring.weights.chaos": "Weight of the chaos phase.",
    "scoring.weights.contract": "Weight of the contract phase.",
    "scoring.weights.replay": "Weight of the replay phase.",
    # output
    "output.dir": "Directory the reports are written to (relative to the working directory).",
    "output.formats": "Report formats to write.",
    # advanced
    "advanced.seed": "Seed of every random decision (fault probabilities, mutations), so a "
    "run is reproducible.",
    "advanced.concurrency": "How many invocations run at once.",
    "advanced.repeat": "Runs per cell.",
    "advanced.min_pass": "How many of the `repeat` runs must pass for the cell to pass "
    "(default: all). Cells whose runs disagree are marked flaky.",
    "advanced.max_invocations": "Budget of agent invocations; the run stops cleanly when it "
    "is spent and reports what it did.",
    "advanced.similarity": "Similarity backend for `similarity` and `behavior_unchanged`.",
    "advanced.embeddings": "The embeddings API used by the `embeddings` backend.",
    "advanced.judge": "The judge of the `llm_judge` invariants without a `judge` of their own.",
    # accepted
    "accepted[].cell": "The contract cell, `INVARIANT[SCENARIO]` (as the matrix names it); "
    "one the config does not have is an error, and so is a second entry for the same cell "
    "(or mutation type).",
    "accepted[].mutation": "A mutation type the config runs: its failing mutations are accepted.",
    "accepted[].reason": "Why the failure is accepted, shown in every report; not blank.",
    "accepted[].until": "The last day it is accepted, written `YYYY-MM-DD` (UTC), e.g. "
    "`2026-12-31`, quoted or not; any other form (`31.12.2026`, a number such as `20261231`) is "
    'an error. After it the failure fails the gate again ("acceptance expired on DATE"); a '
    "date already past is a warning, and so is one more than 90 days ahead.",
    "accepted[].issue": "A link to the issue that tracks the fix, shown beside the reason.",
}

DEFAULT_NOTES: dict[str, str] = {
    # the default where the model's own default (often null) does not say it
    "agent.response_path": "auto",
    "invariants[].case_sensitive": "`false`",
    "invariants[].threshold": "`0.75`",
    "invariants[].baseline": "`auto`",
    "invariants[].similarity_threshold": "`0.75`",
    "invariants[].kinds": "all",
    "invariants[].expect": "`refuse`",
    "proxy.url": "in-process",
    "mutations.types": "all",
    "output.formats": "all",
    "advanced.seed": f"`{DEFAULT_SEED}`",
    "advanced.min_pass": "= `repeat`",
}
