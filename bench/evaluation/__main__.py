from __future__ import annotations

import sys

from bench.evaluation.runner import main

raise SystemExit(main(sys.argv[1:]))
