"""Turn a text file into a training-ready array of token ids, in parallel, and measure tokenizers on files.

``encode_file("train.txt", "train.bin")`` writes the ids as one flat little-endian array — ``uint16`` when every
id fits (GPT-2's 50,257), ``uint32`` otherwise — the ``.bin`` layout nanoGPT reads back with
``np.memmap(path, dtype=np.uint16, mode="r")``. Documents separated by ``<|endoftext|>`` (TinyStories, the
corpus here) keep that separator as its id by default.

How the work is split: the file is read in blocks of about ``CHUNK_BYTES``, and each block is cut back to its
last *safe cut* (:mod:`tokenizer.cuts`), so that encoding the pieces separately gives exactly the ids of
encoding the whole file: a place where the pattern splits the text before it as if the text ended there
(``"word|,"``, ``"!| x"``, never inside a character), or just before a special token that is encoded as a
special token (``encode`` splits there anyway), and never inside any special token. Minified JSON or code
without newlines is cut as well as prose.

Chunks go to worker processes (``multiprocessing``) and results are written in file order as they arrive,
with at most two chunks per worker in flight, so memory stays bounded however large the file. Workers start
the platform's default way: on Linux by fork, so they inherit the vocabulary already loaded here; on macOS
and Windows by spawn, which the code allows (workers need only a top-level function and picklable tasks; the
tests run both). The first chunk is encoded before the workers start, so forked workers also inherit a
piece cache that already knows the text's common words. Output goes to a temporary file that is renamed only
when everything succeeded: an error never leaves a partial ``.bin`` behind.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import numpy as np

from ..cuts import safe_byte_cuts
from ..encoding import Encoding
from ..registry import get_encoding
from .workers import worker_pool

CHUNK_BYTES = 1 << 20  # large enough that per-chunk overhead vanishes, small enough to spread over workers
THE_PILE_BYTES = 825e9  # CS336's question: how long would tokenizing the Pile (825 GB) take?

def id_dtype(n_vocab: int) -> np.dtype:
    """The smallest little-endian unsigned type that holds every id: uint16 up to 65,536 ids, else uint32."""
    return np.dtype("<u2") if n_vocab <= 1 << 16 else np.dtype("<u4")


def resolve_specials(enc, allowed_special) -> tuple[object, object]:
    """``allowed_special`` as the file commands take it -> ``(allowed_special, disallowed_special)`` for encode.

    ``"all"``: special tokens in the text become their ids. ``"none"``: they are encoded as plain text.
    A set (or comma-separated names): those become ids, and any other special token in the text is an error.
    """
    if allowed_special == "all":
        return "all", ()
    if allowed_special in ("none", None) or allowed_special == ():
        return set(), ()
    if isinstance(allowed_special, str):
        allowed_special = [s.strip() for s in allowed_special.split(",") if s.strip()]
    allowed = set(allowed_special)
    unknown = allowed - enc.special_tokens_set
    if unknown:
        raise ValueError(
            f"allowed_special names {sorted(unknown)}, which are not special tokens of {enc.name!r} "
            f"(its special tokens: {sorted(enc.special_tokens_set)}); use all, none or some of those"
        )
    return allowed, "all"


def iter_chunks(
    f: BinaryIO,
    special_tokens: Iterable[str] = (),
    chunk_bytes: int = CHUNK_BYTES,
    *,
    pattern: str,
    cut_before: Iterable[str] | None = None,
) -> Iterator[bytes]:
    """Read ``f`` as consecutive byte chunks of about ``chunk_bytes`` that each end at a safe cut for ``pattern``.

    ``special_tokens`` (the encoding's) are never cut in two — ``"<|endoftext|>"`` holds ``"t|"``, which
    would otherwise be a safe cut. A chunk may end just before one of ``cut_before`` (default: all of
    ``special_tokens``): pass the tokens that are encoded as special tokens. A stretch with no safe cut (one
    enormous word; all text, for a pattern that is not OpenAI's, apart from ``cut_before``) stays in one
    chunk, however long.
    """
    specials = [s.encode("utf-8") for s in special_tokens]
    split_at = specials if cut_before is None else [s.encode("utf-8") for s in cut_before]
    # Cuts rejected at the end of a block (a character or special token maybe incomplete) lie this close to it.
    recheck = max(map(len, specials + split_at), default=0) + 4
    carry = b""
    while True:
        block = f.read(chunk_bytes)
        if not block:
            break
        buf = carry + block
        # carry has no safe cut before its last few bytes: search from there
        cuts = safe_byte_cuts(
            buf, max(len(carry) - recheck, 0), pattern=pattern, reverse=True, special_tokens=specials,
            split_at=split_at,
        )
        cut = next(cuts, 0)
        if cut == 0:
            carry = buf  # nothing safe yet: read more
            continue
        yield buf[:cut]
        carry = buf[cut:]
    if carry:
        yield carry


def decode_utf8(data: bytes, offset: int, path, errors: str = "strict") -> str:
    """``data`` (the bytes at ``offset`` of the file ``path``) as text: the one UTF-8 rule of the file commands.

    ``errors="strict"`` raises ``ValueError`` naming the file and the byte offset of the first invalid byte;
    ``"replace"`` turns invalid bytes into U+FFFD. Chunks never end inside a character, so decoding them one
    by one equals decoding the whole file.
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} is not valid UTF-8: byte {offset + e.start} is {data[e.start:e.start + 1]!r} ({e.reason}); "
            "convert the file to UTF-8, or replace invalid bytes with U+FFFD (errors='replace', "
            "--errors replace on the command line)"
        ) from None


def _encode_chunk(task, enc) -> bytes:
    """One chunk of the file -> its ids as bytes."""
    data, offset, path, allowed, disallowed, dtype, errors = task
    text = decode_utf8(data, offset, path, errors)
    try:
        ids = enc.encode(text, allowed_special=allowed, disallowed_special=disallowed)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return np.asarray(ids, dtype=dtype).tobytes()


_worker_encoding = None  # the encoding a worker process encodes with, set once as the worker starts


def _start_worker(enc) -> None:
    # A named encoding arrives as its name (the worker loads it, or already has it when forked), any other as
    # its tables: once per worker, not once per chunk. Ctrl-C is the parent's to handle: it stops the pool,
    # instead of every worker printing its own traceback.
    global _worker_encoding
    _worker_encoding = enc
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _encode_chunk_in_worker(task) -> bytes:
    """Worker: :func:`_encode_chunk` with this worker's encoding (top level, so spawned workers can import it)."""
    return _encode_chunk(task, _worker_encoding)


def encode_file(
    input_path,
    out_path,
    *,
    encoding: str | Encoding = "gpt2",
    workers: int | None = None,
    allowed_special="all",
    disallowed_special=None,
    errors: str = "strict",
    progress: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    start_method: str | None = None,
) -> dict:
    """Encode the UTF-8 text file ``input_path`` into ``out_path`` (flat little-endian ids); returns statistics.

    The output equals ``encode(whole file)`` written with :func:`id_dtype`, whatever ``workers`` (default: all
    CPUs), ``chunk_bytes`` and ``start_method`` (multiprocessing's: "fork", "spawn", ...; None for the
    platform's default). ``encoding`` is a registered name or an :class:`Encoding` (e.g. a trained one).
    ``allowed_special`` is as in :func:`resolve_specials`; ``disallowed_special``, when given, replaces the
    disallowed set it implies (as in :meth:`Encoding.encode`). ``errors`` is :func:`decode_utf8`'s. Raises
    ``FileNotFoundError`` for a missing input or output folder, ``ValueError`` for text that is not UTF-8 or
    holds a disallowed special token; no output file is left in either case (nor after Ctrl-C).
    """
    progress_bar = _progress_bar_class()  # tqdm is imported only when a file is encoded
    input_path, out_path = Path(input_path), Path(out_path)
    if not input_path.is_file():
        raise FileNotFoundError(f"input file not found: {input_path}")
    if not out_path.parent.is_dir():
        raise FileNotFoundError(f"output folder does not exist: {out_path.parent} (create it first)")
    if out_path.exists() and out_path.resolve() == input_path.resolve():
        raise ValueError(f"the output {out_path} is the input file; choose another --out")
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    allowed, disallowed = resolve_specials(enc, allowed_special)
    if disallowed_special is not None:
        disallowed = disallowed_special
    dtype = id_dtype(enc.n_vocab)
    split_at = enc.special_tokens_set if allowed == "all" else allowed  # where encode() splits the text
    size = input_path.stat().st_size
    # no more processes than chunks: a small file is encoded here, without starting any
    workers = max(1, min(int(workers or os.cpu_count() or 1), -(-size // chunk_bytes)))

    tmp_path = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
    try:
        f_out = open(tmp_path, "wb")
    except OSError as e:
        raise OSError(f"cannot write the output {out_path}: {e.strerror or e}") from None
    start = time.perf_counter()
    n_bytes_out = 0
    try:
        with open(input_path, "rb") as f_in, f_out, progress_bar(
            total=round(size / 1e6, 2), unit="MB", desc=f"encoding {input_path.name}", disable=not progress,
            bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} MB [{elapsed}<{remaining}, {rate_fmt}]",
        ) as bar:
            chunks = iter_chunks(f_in, enc.special_tokens_set, chunk_bytes, pattern=enc.pat_str, cut_before=split_at)
            tasks = _tasks(chunks, input_path, allowed, disallowed, dtype, errors)
            for data_len, ids_bytes in _results(tasks, workers, enc, start_method):
                f_out.write(ids_bytes)
                n_bytes_out += len(ids_bytes)
                bar.update(data_len / 1e6)
        os.replace(tmp_path, out_path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    seconds = time.perf_counter() - start
    n_tokens = n_bytes_out // dtype.itemsize
    return {
        "input": str(input_path),
        "out": str(out_path),
        "encoding": enc.name,
        "dtype": dtype.name,
        "workers": workers,
        "bytes": size,
        "tokens": n_tokens,
        "bytes_per_token": size / n_tokens if n_tokens else 0.0,
        "seconds": seconds,
        "mb_per_s": size / 1e6 / max(seconds, 1e-9),
    }


def _tasks(chunks, path, allowed, disallowed, dtype, errors):
    offset = 0
    for data in chunks:
        yield (data, offset, str(path), allowed, disallowed, dtype, errors)
        offset += len(data)


def _results(tasks, workers: int, enc: Encoding, start_method: str | None) -> Iterator[tuple[int, bytes]]:
    """(input bytes, output bytes) per chunk, in file order, computed here or by a pool of workers."""
    tasks = iter(tasks)
    # The first chunk is always encoded here. With several workers that is not wasted time: forked workers
    # then inherit a piece cache that already holds the text's common words, instead of each one running BPE
    # on them again.
    for task in itertools.islice(tasks, 1 if workers > 1 else None):
        yield len(task[0]), _encode_chunk(task, enc)
    if workers == 1:
        return
    # Each worker loads the vocabulary as it starts (nothing to load when forked: it is loaded here already).
    context = multiprocessing.get_context(start_method)
    with worker_pool(context, workers, _start_worker, (enc,)) as pool:  # Ctrl-C stops every worker
        in_flight: deque = deque()  # (input length, AsyncResult), oldest first: written in file order
        for task in tasks:
            in_flight.append((len(task[0]), pool.apply_async(_encode_chunk_in_worker, (task,))))
            if len(in_flight) >= 2 * workers:
                n, result = in_flight.popleft()
                yield n, result.get()
        while in_flight:
            n, result = in_flight.popleft()
            yield n, result.get()


def _progress_bar_class():
    from tqdm import tqdm

    class ProgressBar(tqdm):
        # No monitor thread: worker processes may be forked while the bar is shown, and forking a process
        # that runs threads is unsafe. (The monitor only refreshes bars that stall.)
        monitor_interval = 0

    return ProgressBar


# ---- measuring tokenizers ---------------------------------------------------------------------------------


def file_stats(
    path,
    encoding: str | Encoding = "gpt2",
    *,
    allowed_special="all",
    disallowed_special=None,
    errors: str = "strict",
    progress: bool = False,
) -> dict:
    """Tokens, bytes/token and single-process throughput of one encoding on one file.

    The file is read in chunks (memory stays bounded however large it is), and the counts equal
    ``len(encode(whole file))``. ``allowed_special``, ``disallowed_special`` and ``errors`` are
    :func:`encode_file`'s; ``progress`` shows a tqdm bar in MB.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    allowed, disallowed = resolve_specials(enc, allowed_special)
    if disallowed_special is not None:
        disallowed = disallowed_special
    split_at = enc.special_tokens_set if allowed == "all" else allowed  # where encode() splits the text
    size = path.stat().st_size
    n_bytes = n_tokens = 0
    seconds = 0.0
    with open(path, "rb") as f, _progress_bar_class()(
        total=round(size / 1e6, 2), unit="MB", desc=f"{path.name} ({enc.name})", disable=not progress,
        leave=False, bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} MB [{elapsed}<{remaining}]",
    ) as bar:
        for data in iter_chunks(f, enc.special_tokens_set, pattern=enc.pat_str, cut_before=split_at):
            text = decode_utf8(data, n_bytes, path, errors)
            start = time.perf_counter()
            try:
                n_tokens += len(enc.encode(text, allowed_special=allowed, disallowed_special=disallowed))
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
            seconds += time.perf_counter() - start
            n_bytes += len(data)
            bar.update(len(data) / 1e6)
    mb_per_s = n_bytes / 1e6 / max(seconds, 1e-9)
    return {
        "file": str(path),
        "encoding": enc.name,
        "bytes": n_bytes,
        "tokens": n_tokens,
        "bytes_per_token": n_bytes / n_tokens if n_tokens else 0.0,
        "mb_per_s": mb_per_s,
        "pile_seconds": THE_PILE_BYTES / (mb_per_s * 1e6) if n_bytes else float("inf"),
    }


def format_duration(seconds: float) -> str:
    """``90061`` -> ``"1.0 days"``: the unit that keeps the number readable."""
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"
