"""``python -m quasar.perf ...`` is ``quasar perf ...``."""

import sys

from quasar.perf.main import main

raise SystemExit(main(sys.argv[1:]))
