"""A readable GPT-2 compatible byte-level BPE tokenizer with tiktoken's API and exact tiktoken ids.

Start with ``bpe.py`` (the algorithm), then ``pretokenize.py`` (how text is cut before BPE) and
``encoding.py`` (the ``Encoding`` class that joins them); ``training/reference.py`` is how the merges are learned.

>>> import tokenizer
>>> enc = tokenizer.get_encoding("gpt2")
>>> enc.encode("Not all heroes wear capes.")
[3673, 477, 10281, 5806, 1451, 274, 13]
>>> enc.decode([3673, 477, 10281, 5806, 1451, 274, 13])
'Not all heroes wear capes.'
"""

import importlib

from .bpe import merge, merge_reference
from .cs336 import Tokenizer
from .encoding import Encoding
from .loading import load_encoding
from .model_table import encoding_for_model, encoding_name_for_model
from .registry import get_encoding, list_encoding_names, register_encoding
from .vocab_files import bytes_to_unicode

__all__ = [
    "Encoding",
    "Tokenizer",
    "bytes_to_unicode",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "register_encoding",
    "merge",
    "merge_reference",
    "train_bpe",
    "load",
]


def __getattr__(name: str):
    """``tokenizer.train_bpe`` is :mod:`tokenizer.training`'s, which imports the trainer on first use (the rule
    is kept there, once), so that ``import tokenizer`` does not import what training needs (NumPy, workers)."""
    training = importlib.import_module(".training", __name__)  # (light: the trainer is not imported with it)
    if name in training.__all__:
        return getattr(training, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(importlib.import_module(".training", __name__).__all__))


def load(path, *, core: str = "fast"):
    """Load an encoding saved with :meth:`Encoding.save` (gpt2, tiktoken or hf format), or a Hugging Face
    byte-level BPE ``tokenizer.json``; see :func:`tokenizer.loading.load_encoding`."""
    return load_encoding(path, core=core)
