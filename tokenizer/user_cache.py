"""Where this package keeps what it downloads or builds once: vocabulary files and batch BPE's pair tables.

``$TOKENIZER_CACHE_DIR`` if set, else ``gpt2-tokenizer`` in the user's cache folder (``$XDG_CACHE_HOME`` or
``~/.cache``): never inside the checkout. This module only names the folder; it creates nothing.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The folder for downloaded vocabulary files and saved pair tables."""
    if os.environ.get("TOKENIZER_CACHE_DIR"):
        return Path(os.environ["TOKENIZER_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpt2-tokenizer"
