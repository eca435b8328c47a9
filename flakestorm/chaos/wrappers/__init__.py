"""Faults for python agents: their tools and LLM callable wrapped in place for a run (SPEC §4.1,
§4.2, §10), one module per concern:

- :mod:`.wrapping`: :class:`Wrapping`, the run's wrappers (enter, activate a scenario, exit);
- :mod:`.sites`: where each named tool or LLM callable is, and its slots;
- :mod:`.tool_kinds`: framework tool objects (OpenAI Agents SDK, LangChain, Strands, Pydantic
  AI), wrapped from the inside, one registered unit per framework;
- :mod:`.tool_holders`: framework objects that hold tools, named whole (a Pydantic AI, Agents
  SDK or Strands ``Agent``, a LangGraph ``ToolNode``), one registered unit per framework;
- :mod:`.calls`: one wrapped call: its decision, its plan, its result and its interaction;
- :mod:`.sdk_errors`: faults raised as the OpenAI and Anthropic SDKs' own exceptions;
- :mod:`.sdk_streams`: faults on the SDKs' streams.

What a fired fault does to the call:

==========================  ==============================================================
tool ``error``              raises :class:`~flakestorm.errors.ToolFaultError`
tool ``timeout``            waits ``delay_ms`` (default 30 s), raises ``TimeoutError``
tool ``slow``               waits ``delay_ms``, then calls the tool
tool ``malformed``          returns a string that is not valid JSON
tool ``malicious_response`` returns ``payload`` (a fresh copy)
tool-result attacks         the real result, poisoned (:mod:`flakestorm.chaos.attacks.tool_results`)
LLM ``rate_limit``          raises :class:`~flakestorm.errors.RateLimitFaultError`; on an SDK
                            method, the SDK's ``RateLimitError`` on a real 429 response
LLM ``timeout``             waits ``delay_ms`` (default 30 s), raises ``TimeoutError``; on an
                            SDK method, the SDK's ``APITimeoutError``
LLM text modes              transform the reply text: a ``str`` reply, or the texts of every
                            choice of an OpenAI chat completion (``message.content``) or
                            completion (``text``), or of every text block of an Anthropic
                            message, as a dict or an object, with the proxy's editor
                            (``truncated_response``: budget per choice, shared by a message's
                            blocks); objects and dicts are copied, never changed in place. An
                            SDK stream (``stream=True``, the stream helpers) is edited as the
                            proxy edits it, event by event
``injection_via_context``   the payload is appended to the system message of the
                            ``messages`` argument (added first when there is none; to the
                            ``system`` keyword argument, a string or text blocks, when the
                            callable takes one, as Anthropic's ``messages.create`` does);
                            messages are ``role``/``content`` dicts or objects with those
                            attributes (SDK messages, pydantic models), copied when changed
==========================  ==============================================================

A fault is listed as fired only when it reached the agent. One that fired but could not be
applied (an LLM callable without a recognisable ``messages`` argument, a reply whose text
cannot be found, a stream flakestorm cannot edit, a tool result with no text to carry an
attack) is logged as unapplied, with the reason, and is not delivered: its scenario's cells
are ERRORED (SPEC §10).
"""

from flakestorm.chaos.wrappers.wrapping import Wrapping

__all__ = ["Wrapping"]
