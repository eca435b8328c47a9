"""The command line (provisional skeleton)."""

from __future__ import annotations

import click

from flakestorm import __version__


@click.group()
@click.version_option(__version__, prog_name="flakestorm")
def main() -> None:
    """flakestorm: chaos engineering and behavioural contracts for AI agents."""
