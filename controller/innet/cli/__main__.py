"""`python -m innet.cli`: the `innet` command without its console script (tests, benchmarks and
the host agents' launchers use it where the script may not be on the path)."""

import sys

from innet.cli.entry import main

sys.exit(main())
