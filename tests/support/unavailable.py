"""A test that needs what the machine lacks (a Docker engine, a browser): skipped on a
developer's machine, saying why; under ``CI=true`` the run fails instead, so CI never goes green
with fewer tests than it claims."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str, why: str) -> NoReturn:
    """Skip (or, under ``CI=true``, fail) the test: ``what`` is missing, because ``why``."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} is not available under CI=true (tests may not skip there): {why}")
    pytest.skip(f"{what} is not available: {why}")
