"""Where GPT-2 checkpoints live: one rule, followed by every command and by the Python API.

1. ``$GPT2_MODELS_DIR``, if set;
2. else, when this package runs from a checkout of the repository (the folder above ``gpt2_numpy/``
   holds ``models/README.md``; ``pip install -e .`` counts), that checkout's ``models/`` folder, whatever
   the current folder is;
3. else (a regular install) ``gpt2-numpy/models`` in the user's cache folder, the one the tokenizer's cache
   shares (:func:`tokenizer.user_cache.user_cache_root`): ``$XDG_CACHE_HOME/gpt2-numpy/models``, or
   ``~/.cache/gpt2-numpy/models`` when ``XDG_CACHE_HOME`` is unset, empty or not an absolute path (a user with no
   home folder: ``gpt2-numpy-cache-UID/gpt2-numpy/models`` in the temporary folder).

So a download never lands in the current folder by accident: ``./models`` is used only when it is
passed by name (``--models_dir models``, ``models_dir="models"``).

It also names GPT-2's sizes (:data:`MODEL_SIZES`), the subfolders a size is looked for in.

What it does not do: create the folder, or look inside it; the checkpoint readers do that.
"""
from __future__ import annotations

import os
from pathlib import Path

from tokenizer.user_cache import expand_home, user_cache_root

# The sizes OpenAI released, each a subfolder of the models folder; every one uses the same vocabulary.
MODEL_SIZES = ("124M", "355M", "774M", "1558M")

# The repository's own models/ folder, recognised by the README.md it ships with; an installed package
# has no such folder beside it.
CHECKOUT_MODELS_DIR = Path(__file__).resolve().parents[1] / "models"


def default_models_dir() -> Path:
    """The folder that holds one subfolder per GPT-2 size (``124M/``, ...) when no folder is given."""
    if os.environ.get("GPT2_MODELS_DIR"):
        return expand_home(os.environ["GPT2_MODELS_DIR"])
    if (CHECKOUT_MODELS_DIR / "README.md").is_file():
        return CHECKOUT_MODELS_DIR
    return user_cache_root() / "gpt2-numpy" / "models"
