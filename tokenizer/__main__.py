"""``python -m tokenizer``: see :mod:`tokenizer.cli`."""

import sys

from .cli import main

sys.exit(main(prog="python -m tokenizer"))
