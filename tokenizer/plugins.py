"""Plugins: encodings defined outside this package, found the way tiktoken finds its ``tiktoken_ext`` plugins.

A plugin is a module in the ``tokenizer_ext`` namespace package: a folder named ``tokenizer_ext`` with no
``__init__.py``, anywhere on ``sys.path`` (shipped by an installed distribution, or in your own project).
The module defines ``ENCODING_CONSTRUCTORS``, encoding name -> a function that returns ``Encoding``'s
arguments as a dict::

    # my_project/tokenizer_ext/my_encodings.py
    def my_bpe():
        return {"name": "my_bpe", "pat_str": ..., "mergeable_ranks": ..., "special_tokens": {...}}

    ENCODING_CONSTRUCTORS = {"my_bpe": my_bpe}

after which ``tokenizer.get_encoding("my_bpe")`` works in every process that can import the module. This is
tiktoken's contract, so a ``tiktoken_ext`` plugin ports by moving its module. Constructors run only when
their encoding is first asked for; modules are imported when a name is looked up that is not built in.

Why a namespace package rather than entry points: it needs no installation (a folder on ``sys.path`` is
enough, which suits a checkout run in place), tiktoken users already know it, and a process that unpickles an
encoding finds the plugin the same way. For one process only, :func:`tokenizer.register_encoding` takes a
constructor directly.

This module only finds constructors; :mod:`tokenizer.registry` builds and caches the encodings. It does not
read ``tiktoken_ext`` (that would load tiktoken's own OpenAI plugin) or entry points.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from typing import Any, Callable, Mapping

PLUGIN_PACKAGE = "tokenizer_ext"

Constructor = Callable[[], Mapping[str, Any]]


def find_plugin_constructors() -> dict[str, tuple[str, Constructor]]:
    """encoding name -> (plugin module name, constructor), for every module in ``tokenizer_ext``.

    Raises ValueError for a module without ``ENCODING_CONSTRUCTORS`` or a name defined twice.
    """
    if importlib.util.find_spec(PLUGIN_PACKAGE) is None:
        return {}
    package = importlib.import_module(PLUGIN_PACKAGE)
    found: dict[str, tuple[str, Constructor]] = {}
    for module_info in pkgutil.iter_modules(package.__path__, PLUGIN_PACKAGE + "."):
        module = importlib.import_module(module_info.name)
        constructors = getattr(module, "ENCODING_CONSTRUCTORS", None)
        if not isinstance(constructors, Mapping):
            raise ValueError(
                f"tokenizer plugin {module_info.name} ({module.__file__}) does not define ENCODING_CONSTRUCTORS, "
                "a dict of encoding name -> function returning Encoding's arguments"
            )
        for name, constructor in constructors.items():
            if name in found:
                raise ValueError(
                    f"Duplicate encoding name {name!r} in tokenizer plugin {module_info.name}: "
                    f"{found[name][0]} defines it too; rename one"
                )
            found[name] = (module_info.name, constructor)
    return found
