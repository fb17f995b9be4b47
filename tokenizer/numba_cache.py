"""Where numba keeps the machine code of this package's compiled kernels, and how a kernel is wrapped to use it.

Two parts of the package have a kernel compiled by numba (the ``train`` extra): the trainer's merge loop
(:mod:`tokenizer.training.train_kernel`) and the fast core's sequential BPE (:mod:`tokenizer.fast.bpe_kernel`).
Numba compiles a function on its first call; with ``cache=True`` it writes the machine code to disk, and later
processes load it from there instead of compiling again.

Each kernel gets a folder of its own in this package's cache folder (:func:`tokenizer.user_cache.cache_dir`, so
``$TOKENIZER_CACHE_DIR`` moves it and ``$NUMBA_CACHE_DIR`` does not): ``<kernel>/<key>``, where ``<key>`` hashes
the kernel's source files (numba itself watches only the file that holds the function, not the modules it reads
constants from) and the numba and Python versions, so a change to any of them starts an empty folder. Numba
checks the rest itself (the CPU it compiled for, the file's time stamp) and compiles again where they differ.

Compiling takes seconds to tens of seconds, so it happens once per machine in a process of its own
(:func:`start_program`, running the kernel's compile program), out of the way of the process that wants the
kernel; the program (:func:`compile_once`) marks the folder (:func:`mark`) once numba has written it, and later
processes, seeing the mark (:func:`is_marked`), only load.

What this module does not do: import numba at import time (:func:`folder` is for code that must not pay for
it), or decide when a kernel is compiled or loaded (:mod:`tokenizer.kernel_loader` brings a kernel in, when its
user asks).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    import subprocess

from .user_cache import cache_dir

_MARK = "compiled"

# A compile program's exit statuses: compiled and cached (or found so); numba is not installed; compiled, but numba
# found no folder it could write, so every process would compile it again.
COMPILED, NO_NUMBA, NOT_CACHED = 0, 3, 4

# Each kernel's name (its folder's) and the files, in this package, its machine code depends on.
KERNELS = {
    "merge_loop": ("training/train_kernel.py", "training/merge_state.py"),
    "bpe_kernel": ("fast/bpe_kernel.py",),
    "matvec": ("../gpt2_numpy/matvec_kernel.py", "../gpt2_numpy/step_kernel.py"),  # the decoder's, beside this package
}


def folder(kernel: str) -> Path:
    """The folder numba caches ``kernel``'s machine code in (a name in :data:`KERNELS`), for its sources as they
    are and these versions."""
    package = Path(__file__).parent
    return folder_for_sources(kernel, [package / source for source in KERNELS[kernel]])


def folder_for_sources(kernel: str, sources: list[Path]) -> Path:
    """The folder numba caches the machine code of a kernel named ``kernel`` in, whose code depends on the files
    ``sources`` (for a kernel of another package, which this one does not list in :data:`KERNELS`)."""
    # imported here, not with the module: the fast core imports this module, and a process that never
    # compiles a kernel should not pay for these
    import importlib.metadata
    import platform

    key = hashlib.sha256()
    for source in sources:
        key.update(Path(source).read_bytes())
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:  # not installed as a distribution, or not at all
        numba_version = "unknown"
    key.update(f"{numba_version} {sys.version} {platform.machine()}".encode())
    return cache_dir() / kernel / key.hexdigest()[:16]


def is_marked(cache_folder: Path) -> bool:
    """Whether a compile program has written its kernel's machine code into ``cache_folder``."""
    return (cache_folder / _MARK).exists()


def mark(cache_folder: Path) -> None:
    """Say that ``cache_folder`` holds its kernel's machine code (called once numba has written it)."""
    (cache_folder / _MARK).write_bytes(b"")


def log_path(cache_folder: Path) -> Path:
    """Where a compile program's stderr goes: beside the machine code."""
    return cache_folder / "compile.log"


def start_program(module: str, cache_folder: Path) -> subprocess.Popen:
    """Run ``module``'s ``main()`` (a kernel's compile program) in a new process and return it; its stderr goes
    to :func:`log_path`, its exit status is ``main()``'s.

    The new process imports this package from where this process did (put first on its path, unless it is on
    the path already, as an installed package's folder is). Nothing of the caller's is inherited that could
    keep the caller's own reader waiting: stdin and stdout are closed, stderr is the log file (a process that
    outlives the caller must not hold the caller's stderr pipe open)."""
    import subprocess  # here: see folder()'s imports

    root = str(Path(__file__).resolve().parents[1])
    program = (f"import sys; root = {root!r}\n"
               "if root not in sys.path: sys.path.insert(0, root)\n"
               f"from {module} import main; sys.exit(main())")
    log = log_path(cache_folder)
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        stderr = open(log, "wb")
    except OSError:  # a read-only cache folder: numba will look for another one; its words are lost
        stderr = open(os.devnull, "wb")
    with stderr:
        return subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)


def compile_once(kernel: str, compile_kernel: Callable[[], ModuleType | None]) -> int:
    """A compile program's work, returning its exit status: under the lock of ``kernel``'s folder, unless another
    program has marked it meanwhile, ``compile_kernel()`` (import the kernel module and run every function, so
    that numba compiles them; None, or ImportError, without numba), then mark the folder."""
    cache_folder = folder(kernel)
    with one_at_a_time(cache_folder):
        if is_marked(cache_folder):
            return COMPILED
        try:
            module = compile_kernel()
        except ImportError:
            return NO_NUMBA
        if module is None:
            return NO_NUMBA
        if not module.CACHED_ON_DISK:
            return NOT_CACHED
        with contextlib.suppress(OSError):  # written elsewhere by numba; only the next check costs more
            mark(cache_folder)
    return COMPILED


@contextlib.contextmanager
def one_at_a_time(cache_folder: Path) -> Iterator[None]:
    """Hold the compile lock of ``cache_folder`` (an exclusive ``flock``) for the block, so that a second compile
    program waits for the first and then finds the work done; without ``fcntl`` or a writable folder, nothing."""
    try:
        import fcntl

        cache_folder.mkdir(parents=True, exist_ok=True)
        f = open(cache_folder / "compiling.lock", "ab")
    except (ImportError, OSError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def compiled(function: Callable, cache_folder: Path, uncached: list[str], **options) -> Callable:
    """``function`` compiled by numba on first call (releasing the GIL while it runs), its machine code cached
    in ``cache_folder`` for later processes. ``options`` go to ``numba.njit`` (``parallel=True``, say).

    Numba picks a function's cache folder when it wraps it, from its ``config.CACHE_DIR`` (what
    ``$NUMBA_CACHE_DIR`` sets); that is pointed at ``cache_folder`` for the moment of wrapping only, so other
    numba code in the process keeps its own. Where that folder cannot be written the function is compiled anew in
    every process, and its name is added to ``uncached``: numba's own next place is beside the source file, which
    for an installed package is inside site-packages, where this package writes nothing. ``parallel`` and
    ``fastmath`` are numba's options (``prange`` loops on every thread of numba's pool; the floating-point rewrites
    allowed)."""
    import numba

    if not _can_write(cache_folder):
        uncached.append(function.__name__)
        return numba.njit(nogil=True, **options)(function)
    default = numba.config.CACHE_DIR
    numba.config.CACHE_DIR = str(cache_folder)
    try:
        return numba.njit(cache=True, nogil=True, **options)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        uncached.append(function.__name__)
        return numba.njit(nogil=True, **options)(function)
    finally:
        numba.config.CACHE_DIR = default


@functools.lru_cache(maxsize=None)  # asked once per folder, not once per compiled function
def _can_write(cache_folder: Path) -> bool:
    """Whether files can be made in ``cache_folder`` (made first if missing), tried the way numba tries it."""
    import tempfile  # here: see folder()'s imports

    try:
        cache_folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=cache_folder).close()
    except OSError:
        return False
    return True
