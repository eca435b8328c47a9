"""``python -m flakestorm.chaos.proxy [--health [URL]]``: see :func:`.serving.main`."""

from flakestorm.chaos.proxy.serving import main

raise SystemExit(main())
