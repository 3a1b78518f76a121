"""The ``stagecut`` command line: one module per subcommand over one shared grammar."""

from stagecut.cli.main import main

__all__ = ["main"]
