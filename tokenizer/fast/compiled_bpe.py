"""The compiled BPE kernel on its way into a process that needs it, never making it wait.

The fast core merges a piece it has never seen with :func:`tokenizer.bpe.merge`, in Python: about 10 µs for
an English word, several times that for a long piece of Chinese. The same merges compiled by numba
(:mod:`tokenizer.fast.bpe_kernel`) take about a tenth of that, but getting the kernel costs once per process
what a few hundred thousand bytes of Python BPE cost: importing numba and loading the kernel's machine code
from disk (or, the first time on a machine, compiling it). So the kernel comes only to a process that has
shown it needs it, and never makes anything wait:

1. each core tells :func:`merged_in_python` how many bytes it merged in Python, every ``REPORT_BYTES``, and
   :func:`encoded_by_arrays` how many characters its array path (long texts, batches) encoded with batch BPE's
   NumPy rounds, which the kernel also beats, by less; the parts batch BPE finished one merge at a time, in
   Python (long segments its rounds hardly shorten), it reports to :func:`merged_in_python` as bytes;
2. once the process has merged ``LOAD_AFTER_BYTES`` (about what loading costs), or their worth, a thread
   imports the kernel and runs it once, so that numba loads its machine code from disk (:func:`start_loading`,
   through the process's :class:`tokenizer.kernel_loader.KernelLoader` of it). The first time on a machine (per
   kernel source, numba and Python version: :mod:`tokenizer.numba_cache`) there is none: the compile program
   (:func:`main`) first compiles it in a process of its own (several seconds), which takes nothing from this
   process's GIL;
3. :func:`merged_in_python` answers at once with the kernel once it is loaded, else None; the core then sends
   its new pieces to the kernel's :class:`tokenizer.fast.bpe_kernel.CompiledBPE` instead of ``bpe.merge``. Batch
   BPE asks (through the core) before and while it merges a long segment one merge at a time, so a kernel that
   arrives in the middle of a long call (megabytes with no safe cut) takes over the rest of it.

``$TOKENIZER_COMPILED_BPE`` changes step 2: ``0`` (or ``off``) never loads the kernel and keeps every core in
Python; ``1`` (or ``on``) loads it at the first new piece, for a program that knows it will meet a lot of new
text; unset (or ``auto``) is as above. Without numba (it comes with the ``train`` extra) nothing is loaded and
the cores keep merging in Python. A process that forks while the thread is importing waits for it first (the
loader's fork guard): a child must not inherit an import half done.

What this module does not do: encode (the kernel, :mod:`tokenizer.fast.bpe_kernel`, does), cache, choose between
the kernel and ``bpe.merge`` (the fast core, :mod:`tokenizer.fast.core`, does), or run the compile program and the
loading thread itself (:mod:`tokenizer.kernel_loader` does, for both compiled kernels). It imports neither numba nor
NumPy until it loads, nor anything slow to import: the fast core imports it.
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

from .. import numba_cache
from ..kernel_loader import KernelLoader

# A core reports the bytes it merged in Python at its first new piece, then every this many bytes (a report
# costs a function call; this many bytes of Python BPE cost tens of milliseconds).
REPORT_BYTES = 1 << 14

# The process starts loading the kernel once its cores have merged this many bytes in Python: about what
# importing numba and loading the machine code cost (measured: a few tenths of a second, against 1-3 µs a byte
# of Python BPE), so a process never spends much more on loading than it spent without the kernel.
LOAD_AFTER_BYTES = 1 << 18

# A character the array path encoded with NumPy's rounds counts as this fraction of a byte of Python BPE: on a job
# of documents the kernel saves 25-50 ns a character there (against 1-3 µs a byte in Python), so loading repays
# itself after some 16 million characters (LOAD_AFTER_BYTES times this): seconds of work, which a one-off script
# of a few megabytes does not reach.
ARRAY_CHARACTERS_PER_BYTE = 64

_merged_bytes = 0  # bytes merged in Python by every core of this process (or their worth), as reported


def merged_in_python(byte_count: int) -> ModuleType | None:
    """Note that a core merged ``byte_count`` more bytes in Python; return the kernel if it is loaded (at once,
    never waiting), starting to load it once the process has merged ``LOAD_AFTER_BYTES`` (see the module's
    docstring for ``$TOKENIZER_COMPILED_BPE``)."""
    global _merged_bytes
    _merged_bytes += byte_count
    mode = mode_asked()
    if mode == "off":
        return None
    if mode == "on" or _merged_bytes >= LOAD_AFTER_BYTES:
        start_loading()
    return LOADER.kernel()


def encoded_by_arrays(character_count: int) -> ModuleType | None:
    """Note that a core's array path encoded ``character_count`` characters with batch BPE's NumPy rounds (each
    worth ``1 / ARRAY_CHARACTERS_PER_BYTE`` of a byte merged in Python); as :func:`merged_in_python`."""
    return merged_in_python(character_count // ARRAY_CHARACTERS_PER_BYTE)


def status() -> str:
    """Where the kernel stands in this process: "loaded", "loading", "compiling", "not asked for" (the process has
    not merged enough in Python, or ``$TOKENIZER_COMPILED_BPE`` is 0), or why it will not come."""
    return LOADER.status()


def mode_asked() -> str:
    """What ``$TOKENIZER_COMPILED_BPE`` asks: "off" (0, off, false, no), "on" (1, on, true, yes) or "auto" (unset,
    empty or auto). Any other value counts as auto, with a warning that names the variable (once per value)."""
    asked = os.environ.get("TOKENIZER_COMPILED_BPE", "").strip().lower()
    mode = _MODES.get(asked)
    if mode is None:
        mode = _MODES[asked] = "auto"
        warnings.warn(f"TOKENIZER_COMPILED_BPE={asked!r} is not one of 0, 1, off, on, auto (or false, true, no, "
                      "yes): taken as auto", RuntimeWarning, stacklevel=3)
    return mode


_MODES = {"": "auto", "auto": "auto", **dict.fromkeys(("0", "off", "false", "no"), "off"),
          **dict.fromkeys(("1", "on", "true", "yes"), "on")}


def start_loading() -> None:
    """Start getting the kernel, unless it is loaded, on its way, or cannot come: the thread that loads it if
    its machine code is on disk, else the compile program (:func:`main`) in a process of its own, after which
    the thread loads it (:func:`merged_in_python` looks)."""
    LOADER.start_compiling()
    LOADER.start_loading()


def wait_until_loaded() -> ModuleType | None:
    """Get the kernel now if it is not here (waiting for it, compiling it if need be); None if it cannot come.
    For benchmarks and tests, and for a program that knows it will meet a lot of new text."""
    return LOADER.wait()


def _load() -> ModuleType:
    """Import the kernel and run it once (in the loading thread, or the compile program)."""
    from . import bpe_kernel

    _warm_up(bpe_kernel)
    return bpe_kernel


def _warm_up(kernel: ModuleType) -> None:
    """Call the kernel once on a tiny table, so that numba loads (or compiles) its machine code now."""
    from .batch_bpe import build_pair_table
    from .piece_arrays import PieceTable

    vocabulary = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abababababababababab": 257}
    tables = build_pair_table({b"ab": 0}, vocabulary), PieceTable(vocabulary)
    for whole_piece_tokens, last in ((True, (257,)), (False, (256,) * 10)):
        compiled = kernel.CompiledBPE(*tables, whole_piece_tokens=whole_piece_tokens)
        assert compiled.encode([b"abab", b"x", b"ab" * 10]) == [(256, 256), (120,), last]
        assert compiled.merge_from([97, 98, 256, 97, 98]).tolist() == [256, 256, 256]


def main() -> int:
    """The compile program (:func:`tokenizer.numba_cache.start_program` runs it in a process of its own):
    compile the kernel into its cache folder and mark the folder."""
    return numba_cache.compile_once("bpe_kernel", _load)


# The loader of this process.
LOADER = KernelLoader("bpe_kernel", title="the BPE kernel", program=__name__, load=_load,
                       without="encoding goes on with BPE in Python (same ids, slower)")
