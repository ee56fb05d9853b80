"""``python -m aiayn``: the command line (aiayn.cli)."""

import sys

from aiayn.cli import main

sys.exit(main())
