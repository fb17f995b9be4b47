"""``python -m gpt2_numpy PROMPT [options]``: the ``gpt2`` command (see :mod:`gpt2_numpy.cli`)."""
import sys

from .cli import main

sys.exit(main(prog="python -m gpt2_numpy"))
