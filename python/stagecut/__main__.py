import sys

from stagecut.cli import main

sys.exit(main())
