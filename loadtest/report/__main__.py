"""python -m loadtest.report: see loadtest/report/build.py."""

import sys

from loadtest.report.build import main

sys.exit(main())
