"""stagecut: split DNN computation graphs across devices."""
from stagecut.errors import *  # noqa: F401,F403
