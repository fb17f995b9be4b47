"""How to install an optional extra, in words that work for every user: one place for the advice every message
and help line gives.

The project's name is not on PyPI, so pip install of that name with an extra in brackets fails for everyone: for
a user running a checkout without installing it, and for one who installed it from a checkout (pip then looks the
name up on the index). What works in both cases is the extra's own packages by name; a checkout can also take the
extra itself, ``pip install '.[half]'`` from its folder.

    >>> install_hint("half")
    "pip install 'numba>=0.59'"

What it does not do: install anything, or tell whether a package is there (each feature asks where it is used).
"""
from __future__ import annotations

import shlex

# The packages of each extra in pyproject.toml's [project.optional-dependencies] (tests/test_package.py checks that
# the two say the same), those a user installs for one feature.
EXTRA_PACKAGES = {
    "train": ("numba>=0.59",),
    "half": ("numba>=0.59",),
    "parity": ("tiktoken==0.14.0", "tokenizers>=0.20"),
    "distributed": ("ray>=2.9", "pyarrow>=14"),
}


def install_hint(extra: str, *, upgrade: bool = False) -> str:
    """The pip command that installs ``extra``'s packages by name (``--upgrade``: a newer one over an installed
    one that cannot be imported), quoted for a shell."""
    packages = " ".join(shlex.quote(package) for package in EXTRA_PACKAGES[extra])
    return f"pip install {'--upgrade ' * upgrade}{packages}"

