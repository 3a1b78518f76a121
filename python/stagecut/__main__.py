import sys

from stagecut.cli.main import main

sys.exit(main())
