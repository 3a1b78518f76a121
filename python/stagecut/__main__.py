"""``python -m stagecut``: the command line (see :mod:`stagecut.cli`)."""

import sys

from stagecut.cli.main import main

sys.exit(main())
