"""Test support shared by the test modules: loopback servers (see :mod:`support.server`)."""
