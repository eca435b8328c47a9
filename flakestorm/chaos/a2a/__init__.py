"""Downstream A2A agents as dependencies (SPEC §17): the protocol as the chaos proxy reads and
answers it (:mod:`flakestorm.chaos.a2a.protocol`); the proxy serves their calls in
:mod:`flakestorm.chaos.proxy.a2a_calls`."""
