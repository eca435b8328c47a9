"""Context attacks: what flakestorm writes into what the agent reads (SPEC §4.1).

- :mod:`.memory`: ``memory_poisoning``, the agent's input rewritten before the invocation;
- :mod:`.tool_results`: ``indirect_injection``, ``overflow`` and ``conflicting_context``, real
  tool results poisoned so that they stay valid for their format (HTTP bodies and python
  values alike).

``injection_via_context`` travels in LLM requests, so it is in the LLM package
(:mod:`flakestorm.chaos.llm.injection`). Which attack fires on which call is the fault book's
decision (:mod:`flakestorm.chaos.faults.decisions`).
"""
