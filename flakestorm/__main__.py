"""The ``flakestorm`` command (``python -m flakestorm``, and the console script): the signal
handling is installed first, before click and the engine are imported, so a cancel at any
moment ends the process with exit 3 (:mod:`flakestorm.stopping`, SPEC §5)."""

from __future__ import annotations

import sys


def main() -> None:
    """Run the command line; exit with its code (3 whenever a signal interrupted it)."""
    from flakestorm.stopping import Interrupted, handle_signals_from_start

    signals = handle_signals_from_start()
    try:
        from flakestorm.cli import main as cli

        cli.main(prog_name="flakestorm")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except Interrupted as exc:
        sys.stderr.write(f"error: interrupted ({exc.name}): nothing more was done\n")
        code = 3
    if signals.exit_code(code) != code:
        sys.stderr.write(f"error: {signals.interrupted()}\n")
    sys.exit(signals.exit_code(code))


if __name__ == "__main__":
    main()
