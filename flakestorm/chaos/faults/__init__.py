"""Faults: what a fault is, and which call it acts on (SPEC §4.1, §4.2, §7, §9).

- :mod:`.modes`: the unit contract every fault mode keeps (fields, label detail, HTTP and
  python behaviour), one registered unit per mode, as each toxic is in Toxiproxy;
- :mod:`.tool_modes`: the tool fault units (:data:`~.tool_modes.TOOL_MODES`; the LLM units are
  in :mod:`flakestorm.chaos.llm`, the MCP ones in :mod:`flakestorm.chaos.mcp`);
- :mod:`.schedule`: which matching calls of an invocation a fault acts on (``calls``,
  ``every``, ``window_ms``, ``turns``);
- :mod:`.labels`: how reports name a fault, and its schedule;
- :mod:`.decisions`: :class:`~.decisions.FaultBook`, the one seeded decision both delivery
  paths ask for every call, and the scenario it decides with
  (:class:`~.decisions.ActiveScenario`);
- :mod:`.flight`: a book per scenario when several scenarios are in flight together;
- :mod:`.ordering`: whether a scenario's faults depend on which invocation made a call;
- :mod:`.recording`: what a replayed session answers in place of the tools and the LLM.
"""
