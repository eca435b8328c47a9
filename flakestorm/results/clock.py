"""The date accepted failures and blessed baselines are judged on (SPEC §14): one clock, UTC,
which tests replace."""

from __future__ import annotations

import datetime


def today() -> datetime.date:
    """Today's date in UTC."""
    return datetime.datetime.now(datetime.timezone.utc).date()
