"""python -m loadtest.report: see loadtest/report/cli.py."""

import sys

from loadtest.report.cli import main

sys.exit(main())
