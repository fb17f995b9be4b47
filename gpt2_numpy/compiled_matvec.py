"""The compiled matrix-vector kernel on its way into a decoding process, never making it wait.

:mod:`gpt2_numpy.matvec_kernel` multiplies the one row of a decoding step by each weight matrix on both cores,
reading the weights as they lie in memory. It is compiled by numba (installed with the ``train`` extra), once
per machine, in a process of its own (:mod:`tokenizer.kernel_loader`, as the tokenizer's kernels are); later
processes load its machine code from disk in a thread. A :class:`gpt2_numpy.kvcache.DecodingWeights` asks for it
when a long run is prepared (:func:`start_loading`) and uses it from the first run that finds it loaded
(:func:`kernel`); until then, and always without numba, decoding runs on NumPy's products, giving the same tokens.

Whether a model's runs then take the kernel is measured once per :class:`~gpt2_numpy.kvcache.DecodingWeights`,
on its own weights (kvcache decides): on some machines OpenBLAS streams the weights faster (a large CPU cache
holding part of them, say). ``$GPT2_COMPILED_MATVEC=0`` (or ``off``) keeps decoding on NumPy; ``1`` (or ``on``)
takes the kernel whenever it is loaded, unmeasured (the tests use it).

What this module does not do: multiply (the kernel does), or decide which products go to it (kvcache does).
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

from tokenizer import numba_cache
from tokenizer.kernel_loader import KernelLoader


def _setting() -> str:
    return os.environ.get("GPT2_COMPILED_MATVEC", "").strip().lower()


def is_wanted() -> bool:
    """False when ``$GPT2_COMPILED_MATVEC`` says 0, off, false or no."""
    return _setting() not in ("0", "off", "false", "no")


def is_forced() -> bool:
    """True when ``$GPT2_COMPILED_MATVEC`` says 1, on, true or yes: the kernel without measuring it first."""
    return _setting() in ("1", "on", "true", "yes")


def start_loading() -> None:
    """Start getting the kernel (compile program, then loading thread) unless it is here, coming, or unwanted."""
    if is_wanted():
        LOADER.start_compiling()
        LOADER.start_loading()


def kernel() -> ModuleType | None:
    """The kernel module if it is loaded in this process (at once, never waiting), else None."""
    return LOADER.kernel() if is_wanted() else None


def wait_if_loading() -> ModuleType | None:
    """The kernel, waiting for it only if it is being loaded from disk (under a second), never for a compile."""
    return LOADER.wait_for_loading() if is_wanted() else None


def wait_until_loaded() -> ModuleType | None:
    """The kernel, waiting for it (compiling it if need be); None without numba. For benchmarks and tests."""
    return LOADER.wait() if is_wanted() else None


def status() -> str:
    return LOADER.status()


def _load() -> ModuleType:
    from . import matvec_kernel, step_kernel  # importing matvec_kernel runs both its loops once

    step_kernel.warm_up(np.float32)  # numba loads or compiles them (and this) now
    return matvec_kernel


def main() -> int:
    """The compile program: compile the kernel into its cache folder and mark the folder."""
    return numba_cache.compile_once("matvec", _load)


LOADER = KernelLoader("matvec", title="the decoder's matrix-vector kernel", program=__name__, load=_load,
                      without="decoding goes on with NumPy's matrix products (same tokens, slower)")
