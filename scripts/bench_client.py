"""`rig bench` (loadtest/bench/client.py) under its old name, so the commands the evidence
records (`python3 scripts/bench_client.py --engine llamacpp ...`) still run as written."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from loadtest.bench.client import main  # noqa: E402

sys.exit(main())
