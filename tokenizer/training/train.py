"""Train a byte-level BPE tokenizer from text files (CS336 assignment 1 semantics).

    vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
    vocab, merges = train_bpe(["data/*.txt", "more.jsonl.gz"], 32_000, checkpoint="run.state")

The result is ``(vocab, merges)``: ``vocab`` maps ids to token bytes — ids 0..255 are the single bytes, then
one id per merge in the order the merges were learned, then the special tokens — and ``merges`` lists the
learned pairs ``(left, right)`` in that same order.

What is counted, exactly:

* Every input file is separate, and so is every document of a ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` file
  (one record each, the text in its ``text_field``): nothing is counted across two of them.
* The text is cut at special tokens first (the longest one wins where two overlap); special tokens are hard
  boundaries and are never counted nor merged into anything.
* Each piece between special tokens is cut into pre-tokens with the regular expression ``pattern`` (GPT-2's by
  default). A pair of adjacent tokens is only ever counted inside one pre-token.
* Every step merges the most frequent pair; among pairs with the same count the lexicographically greater
  pair of byte strings wins, comparing ``(left_bytes, right_bytes)`` tuples. Inside a pre-token a merge
  replaces occurrences left to right without overlap (``a a a`` with the pair ``(a, a)`` becomes ``aa a``).
* Training stops at ``vocab_size`` entries, or earlier when no pair is left.

How it runs, in two phases:

1. Counting pre-tokens. Each file is cut into chunks of about ``chunk_size`` bytes at safe cuts
   (:mod:`tokenizer.cuts`; see :func:`find_chunk_boundaries`), so no pre-token and no special token straddles
   two chunks and the counts do not depend on the chunking. The chunks are the tasks of a map-reduce on an
   engine (:mod:`tokenizer.jobs.engines`): ``num_workers`` processes each read one chunk at a time, split it
   and add to a ``Counter`` of pre-token -> occurrences; the counters are added up.
   Memory therefore grows with the number of distinct pre-tokens, not with the size of the corpus. A pattern
   with an array split (:mod:`tokenizer.training.array_counts`) is counted by array operations, the texts of a range
   together, only the distinct pre-tokens becoming strings. Otherwise, with GPT-2's pattern a worker first
   counts coarse pieces (a word with its leading space, or whitespace) with a simple regex, then splits each
   *distinct* piece once with the real pattern (see ``_GPT2_COARSE``).
2. Merging (:func:`learn_merges`). The distinct pre-tokens are laid end to end in flat arrays of token ids
   with their counts; every adjacent pair gets an id, a count and the list of places it occurs, and a merge
   rewrites the occurrences of the best pair and recounts the pairs around them. A small job runs a few NumPy
   operations per merge (``_PairTable``); a large one the same loop compiled with numba
   (:mod:`tokenizer.training.train_kernel`, the ``train`` extra), which comes from numba's disk cache, compiled
   there in the background the first time on a machine, while the NumPy loop runs meanwhile
   (:mod:`tokenizer.training.compiled_loop_loader`). :func:`learn_merges_reference` is the same algorithm written
   plainly (recount every pair for every merge); tests check all three agree.

With ``checkpoint=FOLDER`` the counts and the merges so far are kept in a folder, so that a run that was
stopped can go on with ``resume=True`` (``python -m tokenizer train --resume``) and end with the same merges.

Inputs are found and read by :mod:`tokenizer.jobs.inputs`, as every file command finds and reads them. Text is
decoded as strict UTF-8 (training should not learn U+FFFD): invalid bytes raise :class:`ValueError` naming the
file and the byte offset. Line endings are not translated (``"\\r\\n"`` stays two characters).

This module learns merges only: :meth:`Encoding.from_vocab_merges` turns them into an encoder, and
:meth:`Encoding.save` writes them out.
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import pickle
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from tqdm import tqdm

from . import compiled_merges
from .compiled_loop_loader import LOADER, CompiledLoopLoader
from .array_counts import count_texts, has_array_counts
from ..cuts import safe_byte_cuts
from ..jobs.engines import ENGINES, ProgressBar, open_engine
from ..jobs.inputs import find_inputs, input_format, read_records, read_text, refuse_stdin
from ..fast.stdlib_patterns import compile_fast
from ..patterns import WHITESPACE, WHITESPACE_CLASS
from ..pretokenize import GPT2_PATTERN, R50K_PATTERN, special_token_regex

# Chunks handed to the workers are about this many bytes (they end at the next safe cut after it).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
# How far ahead one read looks for a safe cut; the search keeps going until it finds one.
_BOUNDARY_WINDOW = 64 * 1024

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def train_bpe(
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    vocab_size: int,
    special_tokens: Iterable[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    text_field: str = "text",
    num_workers: int | None = None,
    progress: bool = True,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    checkpoint_every: float = 60.0,
    engine: str = "local",
    address: str | None = None,
) -> tuple[Vocab, Merges]:
    """Learn ``vocab_size - 256 - len(special_tokens)`` merges (or fewer) from UTF-8 text files.

    ``inputs`` names files, folders and globs (``"data/*.txt"``), or a list of them, found and read by
    :mod:`tokenizer.jobs.inputs` as every file command finds and reads them: a ``.jsonl``, ``.jsonl.gz`` or
    ``.parquet`` file holds one document per record (its ``text_field``); any other file is plain text, strict
    UTF-8 (training should not learn U+FFFD). Each file and each document is separate,
    as if a special token stood between them: no pair is counted across two of them. Standard input is not
    read here (the inputs are read in parallel, and again to resume): copy it to a file first.

    ``special_tokens`` are strings; each gets an id after the merges, in the order given (duplicates are
    dropped). ``pattern`` is the pre-tokenization regex (``regex`` package syntax). ``num_workers`` processes
    count pre-tokens (default: ``os.cpu_count()``); ``chunk_size`` is the target size in bytes of the pieces of
    the files they get. ``progress`` shows tqdm bars. The result does not depend on ``num_workers`` or
    ``chunk_size``.

    ``checkpoint`` is a folder where the training state is kept: the pre-token counts once counted, and the
    merges so far every ``checkpoint_every`` seconds, each file replaced atomically. With ``resume=True`` a run
    starts from that state (same inputs, sizes, pattern, special tokens and text field, or ``ValueError``) and
    ends with the merges an uninterrupted run gives.

    ``engine="ray"`` counts the pre-tokens as tasks on a Ray cluster (``address``, or a local one started for
    the count), see :func:`count_pretokens`; the merges are learned here either way, and are the same.

    Raises ``ValueError`` when ``vocab_size`` is below the minimum (256 + number of special tokens), when the
    input is empty, not valid UTF-8 or a bad record (the message names the file and line);
    ``FileNotFoundError`` when a file does not exist or a glob matches nothing.
    """
    specials = _check_special_tokens(special_tokens)
    minimum = 256 + len(specials)
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the minimum is {minimum} "
            f"(256 single bytes + {len(specials)} special token(s))"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    found = find_inputs(inputs)
    refuse_stdin(found, "training reads its inputs in parallel, and again to resume")
    paths = [os.fspath(p) for p in found]
    if not any(os.path.getsize(p) for p in paths):
        which = repr(paths[0]) if len(paths) == 1 else f"all {len(paths)} inputs"
        raise ValueError(f"training file is empty: {which} (nothing to learn merges from)")

    num_merges = vocab_size - minimum
    # A file's size bounds the bytes of its distinct pre-tokens (a compressed file's need not: learn_merges
    # starts the compiled loop's way in for it once the counts say so).
    large = sum(map(os.path.getsize, paths)) * num_merges >= COMPILED_LOOP_MIN_WORK
    if large:
        LOADER.start_compiling()  # before the workers are forked; a process of its own, if it has to compile
    settings = _checkpoint_settings(paths, specials, pattern, text_field)
    if resume:
        if checkpoint is None:
            raise ValueError("resume=True needs the checkpoint folder of the run to resume")
        counts, replay = _load_checkpoint(os.fspath(checkpoint), settings)
    else:
        counts = _count_pretokens(
            paths, specials, pattern=pattern, text_field=text_field, num_workers=num_workers, progress=progress,
            chunk_size=chunk_size, engine=engine, address=address,
            while_counting=LOADER.start_loading if large else lambda: None,  # after the workers are forked
        )
        replay = []
        if checkpoint is not None:
            _start_checkpoint(os.fspath(checkpoint), settings, counts)
    save = None
    if checkpoint is not None:
        merges_file = os.path.join(os.fspath(checkpoint), "merges.json")

        def save(merge_ids: list[tuple[int, int]]) -> None:
            _write_atomically(merges_file, json.dumps(merge_ids).encode())

    merges = learn_merges(counts, num_merges, progress=progress, replay=replay, save=save,
                          save_every=checkpoint_every)

    vocab: Vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for s in specials:
        vocab[len(vocab)] = s.encode("utf-8")
    return vocab, merges


def _checkpoint_settings(paths: list[str], specials: list[str], pattern: str, text_field: str) -> dict:
    """What a checkpoint must have been made with to be resumed."""
    return {
        "inputs": [[os.path.abspath(p), os.path.getsize(p)] for p in paths],
        "special_tokens": specials,
        "pattern": pattern,
        "text_field": text_field,
    }


def _write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old content or the new one, never a part."""
    partial = path + ".partial"
    with open(partial, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def _start_checkpoint(folder: str, settings: dict, counts: Counter) -> None:
    os.makedirs(folder, exist_ok=True)
    for name in ("merges.json", "settings.json"):  # a previous run's state no longer applies
        if os.path.exists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))
    _write_atomically(os.path.join(folder, "counts.pickle"), pickle.dumps(dict(counts), pickle.HIGHEST_PROTOCOL))
    _write_atomically(os.path.join(folder, "merges.json"), b"[]")
    _write_atomically(os.path.join(folder, "settings.json"), json.dumps(settings).encode())  # last: complete


def _load_checkpoint(folder: str, settings: dict) -> tuple[dict, list[tuple[int, int]]]:
    """(pre-token counts, merge ids so far) from a checkpoint folder made with the same ``settings``."""
    try:
        with open(os.path.join(folder, "settings.json"), "rb") as f:
            saved = json.load(f)
        with open(os.path.join(folder, "merges.json"), "rb") as f:
            replay = [tuple(pair) for pair in json.load(f)]
        with open(os.path.join(folder, "counts.pickle"), "rb") as f:
            counts = pickle.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"no training state to resume in {folder!r}: start without resume") from None
    changed = [key for key in settings if saved.get(key) != settings[key]]
    if changed:
        raise ValueError(f"the training state in {folder!r} was made with other {', '.join(changed)}: "
                         "start without resume, or resume with the same ones")
    return counts, replay


def _check_special_tokens(special_tokens: Iterable[str]) -> list[str]:
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError("special_tokens must be a list of strings, not a single string")
    out: list[str] = []
    for s in special_tokens:
        if not isinstance(s, str):
            raise TypeError(f"special tokens must be str, got {type(s).__name__}: {s!r}")
        if not s:
            raise ValueError("a special token cannot be the empty string")
        if s not in out:
            out.append(s)
    return out


# ---------------------------------------------------------------------------------------------------------
# Phase 1: counting pre-tokens


def _splitter(pattern: str):
    """The pre-tokenizer: a function text -> list of pre-token strings (same as ``regex.findall``)."""
    return compile_fast(pattern).split


# Coarse GPT-2 pieces: an optional space + a run of non-space characters, or whitespace cut the way GPT-2's
# pattern cuts it. Every GPT-2 pre-token lies inside one coarse piece, whitespace pieces are pre-tokens
# already, and how a non-space piece splits does not depend on what is around it (no GPT-2 alternative
# reads past a non-space run into whitespace, and the lookahead only follows whitespace). So counting
# coarse pieces first and splitting each *distinct* one once gives the same counts, faster.
_GPT2_COARSE = re.compile("[ ]?[^{0}]+|[{0}]+(?![^{0}])|[{0}]".format(WHITESPACE_CLASS))
_TWO_LEVEL_PATTERNS = (GPT2_PATTERN, R50K_PATTERN)


def _split_pieces(pieces: Counter, split) -> Counter:
    """Pre-token counts from coarse GPT-2 piece counts: each distinct piece is split once."""
    counts: Counter = Counter()
    ws = WHITESPACE
    for piece, c in pieces.items():
        if piece[-1] in ws:  # whitespace pieces are pre-tokens already
            counts[piece] += c
            continue
        parts = split(piece)
        if len(parts) == 1:
            counts[piece] += c
        else:
            for t in parts:
                counts[t] += c
    return counts


def _special_splitter(specials: Sequence[str]):
    """A function text -> list of the pieces between special tokens, found as encoding finds them."""
    if not specials:
        return lambda text: [text]
    return special_token_regex(frozenset(specials)).split


_worker_cache: dict[tuple[str, tuple[str, ...]], tuple] = {}


def _range_documents(path: str, start: int, end: int, text_field: str) -> Iterable[str]:
    """The documents in bytes ``start:end`` of an input: the text itself for a text file, each record's text
    for a file of records (read whole when it is compressed or parquet: it is then one range). Invalid UTF-8
    stops the count (errors=None: training offers no replacing, it should not learn U+FFFD)."""
    if input_format(path) == "text":
        return [read_text(path, start, end, errors=None)]
    return (record.text for record in read_records(path, text_field, errors=None, start=start, end=end))


def _count_ranges(
    ranges: Sequence[tuple[str, int, int]], pattern: str, specials: tuple[str, ...], text_field: str,
    report=lambda nbytes: None,
) -> Counter:
    """Pre-token counts of the byte ranges ``(path, start, end)`` (each begins and ends at a safe boundary).

    With a pattern that has array counts (:mod:`tokenizer.training.array_counts`) the texts of each range are counted
    together by array operations; with another pattern, or texts with a lone surrogate, every text is split here.
    ``report(bytes)`` is called after each range."""
    key = (pattern, specials)
    fns = _worker_cache.get(key)
    if fns is None:
        coarse = _GPT2_COARSE.findall if pattern in _TWO_LEVEL_PATTERNS else None
        fns = _worker_cache[key] = (_splitter(pattern), _special_splitter(specials), coarse)
    split, split_specials, coarse = fns
    by_arrays = has_array_counts(pattern)
    counts: Counter = Counter()  # coarse pieces with GPT-2's pattern, else pre-tokens
    exact: Counter = Counter()  # pre-tokens counted by arrays
    done = 0
    for path, start, end in ranges:
        documents = _range_documents(path, start, end, text_field)
        for texts in _batches(text for document in documents for text in split_specials(document)):
            if by_arrays:
                array_counts = count_texts(texts, pattern)
                if array_counts is not None:
                    exact.update(array_counts)
                    continue
            for text, n in Counter(texts).items():  # texts repeat ("\n\n" between two special tokens)
                pieces = coarse(text) if coarse else split(text)
                if n == 1:
                    counts.update(pieces)
                else:
                    for piece in pieces:
                        counts[piece] += n
        done += end - start
        report(done)
    if coarse:
        counts = _split_pieces(counts, split)
    return _add_up([exact, counts] if len(exact) >= len(counts) else [counts, exact])


# Texts are counted together in batches of about this many characters (a .jsonl.gz file is one range).
_BATCH_CHARS = 1 << 22


def _batches(texts: Iterable[str]) -> Iterable[list[str]]:
    """``texts`` in lists of about :data:`_BATCH_CHARS` characters (a longer text alone)."""
    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= _BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _add_up(counters: list[Counter]) -> Counter:
    total = counters[0]
    for counts in counters[1:]:
        total.update(counts)
    return total


def count_pretokens(
    paths: str | os.PathLike | Sequence[str | os.PathLike],
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    text_field: str = "text",
    num_workers: int | None = None,
    progress: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    engine: str = "local",
    address: str | None = None,
) -> Counter:
    """``Counter`` of pre-token string -> occurrences over the input files (read by :mod:`tokenizer.jobs.inputs`:
    a text is one document, a ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` file one per record), special tokens
    excluded.

    Each file is cut into byte ranges (plain text at safe cuts, see :func:`find_chunk_boundaries`; ``.jsonl``
    at line ends; a compressed or parquet file is one range), and each range is one task of a map-reduce on
    ``engine`` (:mod:`tokenizer.jobs.engines`): its counts, added up. ``local`` deals the ranges round-robin to
    ``num_workers`` processes, each adding up its own before sending one ``Counter`` back (a piece seen by
    several workers is split by each: dealing the distinct pieces out again so that each is split once was
    measured slower, the dealing costing more than the splitting it saves). ``ray`` runs each range as a Ray
    task (on the cluster at ``address``, or on a local one started for the count with ``num_workers`` CPUs)
    and adds the counters two at a time in a tree of Ray tasks, so this process receives only the total. The
    counts are the same whichever engine. Bad input in several places: the earliest is reported (locally).
    """
    return _count_pretokens(paths, special_tokens, pattern=pattern, text_field=text_field, num_workers=num_workers,
                            progress=progress, chunk_size=chunk_size, engine=engine, address=address)


def _count_pretokens(paths, special_tokens, *, pattern, text_field, num_workers, progress, chunk_size,
                     engine="local", address=None, while_counting: Callable[[], None] = lambda: None) -> Counter:
    """:func:`count_pretokens`; ``while_counting()`` is called once the counting has started (in a worker pool:
    after the workers are started, so that a thread it starts is not forked)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: pass one of {', '.join(ENGINES)}")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    specials = tuple(special_tokens)
    sizes = [os.path.getsize(p) for p in paths]
    workers = (os.cpu_count() or 1) if num_workers is None else num_workers
    if workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    # Give every worker something to do on inputs smaller than workers * chunk_size.
    target = max(1, min(chunk_size, -(-sum(sizes) // workers)))
    ranges = []
    for path, size in zip(paths, sizes):
        fmt = input_format(path)
        if fmt == "parquet" or path.endswith(".gz"):
            bounds = [0, size]
        elif fmt == "jsonl":
            bounds = _line_boundaries(path, target)
        else:
            bounds = find_chunk_boundaries(path, target, [s.encode("utf-8") for s in specials], pattern=pattern)
        ranges += [(path, start, end) for start, end in zip(bounds, bounds[1:]) if end > start]
    tasks = [(byte_range, pattern, specials, text_field) for byte_range in ranges]
    bar = ProgressBar([end - start for _, start, end in ranges], desc="pre-tokenizing", enabled=progress)
    try:
        with open_engine(engine, address=address, workers=num_workers) as runner:
            counts = runner.map_reduce(_count_range_task, tasks, _add_counts, bar, name="count_pretokens",
                                       started=while_counting)
    finally:
        bar.close()
    return counts if counts is not None else Counter()


def _count_range_task(task, report) -> Counter:
    """An engine's task: the pre-token counts of one byte range."""
    byte_range, pattern, specials, text_field = task
    return _count_ranges([byte_range], pattern, specials, text_field, report)


def _add_counts(left: Counter, right: Counter) -> Counter:
    left.update(right)
    return left


def _line_boundaries(path: str, chunk_size: int) -> list[int]:
    """Byte offsets ``[0, b1, ..., file_size]``: each inner one just after the first newline at or after the
    previous one + ``chunk_size``."""
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as f:
        pos = chunk_size
        while pos < size:
            f.seek(pos - 1)
            while True:
                block = f.read(_BOUNDARY_WINDOW)
                k = block.find(b"\n")
                if k >= 0 or not block:
                    break
                pos += len(block)
            if not block or pos + k >= size:
                break
            pos += k  # the newline is at pos - 1 + k
            bounds.append(pos)
            pos += chunk_size
    bounds.append(size)
    return bounds


def find_chunk_boundaries(
    path: str | os.PathLike, chunk_size: int, special_tokens: Sequence[bytes] = (), *, pattern: str
) -> list[int]:
    """Byte offsets ``[0, b1, ..., file_size]`` cutting the file into chunks of about ``chunk_size`` bytes.

    Each inner boundary is the first safe cut (:func:`tokenizer.cuts.safe_byte_cuts`) at or after the
    previous boundary + ``chunk_size``: a place where ``pattern`` splits the text before it as if the text
    ended there, or the start of a special token; never inside a character or a special token. The trainer
    cuts the text at every special token anyway, so counting the chunks separately gives the counts of the
    whole file. For a pattern that is not OpenAI's only the special tokens are cut at. When no safe cut
    exists the chunk grows until one is found (or the file ends).
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    specials = [s for s in special_tokens if s]
    bounds = [0]
    with open(path, "rb") as f:
        pos = chunk_size
        while pos < size:
            b = _next_safe_cut(f, pos, size, specials, pattern)
            if b >= size:
                break
            bounds.append(b)
            pos = b + chunk_size
    bounds.append(size)
    return bounds


def _next_safe_cut(f, pos: int, size: int, specials: Sequence[bytes], pattern: str) -> int:
    """The first safe cut at ``pos`` or later (``size`` if there is none), reading a window at a time."""
    margin = max(map(len, specials), default=0) + 4  # a special token or character across the window's edge
    lo = pos
    while lo < size:
        start = max(0, lo - margin)
        f.seek(start)
        window = f.read(min(size, lo + _BOUNDARY_WINDOW + margin) - start)
        cuts = safe_byte_cuts(
            window, lo - start, pattern=pattern, special_tokens=specials, split_at=specials,
            starts_whole=start == 0, ends_whole=start + len(window) == size,
        )
        cut = next(cuts, None)
        if cut is not None:
            return start + cut
        lo += _BOUNDARY_WINDOW
    return size


# ---------------------------------------------------------------------------------------------------------
# Phase 2: merging


def learn_merges_reference(counts: dict[str, int], num_merges: int) -> Merges:
    """Up to ``num_merges`` merges from pre-token counts, written plainly: count every pair, merge the most
    frequent one everywhere, repeat. :func:`learn_merges` gives the same merges, faster; tests check it."""
    words: Counter = Counter()  # each pre-token as a tuple of tokens (bytes) -> how often it occurs
    for pretoken, n in counts.items():
        data = pretoken.encode("utf-8") if isinstance(pretoken, str) else bytes(pretoken)
        words[tuple(bytes([b]) for b in data)] += n
    merges: Merges = []
    while len(merges) < num_merges:
        pairs: Counter = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))  # most frequent; a tie goes to the greater pair
        merges.append(best)
        merged: Counter = Counter()
        for word, n in words.items():  # replace best left to right, without overlap: (a, a, a) -> (aa, a)
            out, i = [], 0
            while i < len(word):
                if word[i : i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


# Below this much work (bytes of distinct pre-tokens x merges) a job merges with NumPy and never touches numba.
# Measured on English text (one core, loaded): 130 KB and 243 merges is 1.2e7 and NumPy merges it in 0.14 s;
# 1e8 takes 0.4-0.8 s and 4e8 1.5 s. Merely importing numba and loading the compiled loop from its disk cache
# takes 1.5-2.5 s (compiling it the first time, 20-40 s), so below about 2e8 the compiled loop could not pay
# for itself even when it is compiled already.
COMPILED_LOOP_MIN_WORK = 200_000_000


def learn_merges(
    counts: dict[str, int],
    num_merges: int,
    *,
    progress: bool = False,
    replay: Sequence[tuple[int, int]] = (),
    save: Callable[[list[tuple[int, int]]], None] | None = None,
    save_every: float = 60.0,
    compiled: bool | None = None,
    loader: CompiledLoopLoader | None = None,
) -> Merges:
    """Up to ``num_merges`` merges learned from pre-token counts: those of :func:`learn_merges_reference`.

    The distinct pre-tokens (of two bytes or more) are laid end to end in flat arrays, one slot per byte
    (:class:`_FlatWords`): the token starting at the slot, the next/previous live slot of the same pre-token
    (a merge unlinks its right half) and the pre-token's count. Every adjacent pair gets an id, a count and
    the list of its slots, and a merge rewrites the slots of the best pair and recounts the pairs around them.

    Two merge loops do this, with the same results: one of a few NumPy operations per merge
    (:class:`_PairTable`), and a compiled one (:mod:`tokenizer.training.train_kernel`, with numba, the ``train``
    extra). ``compiled`` picks one:

    * ``None`` (the default): NumPy for a job under :data:`COMPILED_LOOP_MIN_WORK`. A larger one asks
      ``loader`` (default: this process's) for the compiled loop (:mod:`tokenizer.training.compiled_loop_loader`: compiled in the
      background the first time on a machine, loaded in a thread later), merges with NumPy until it comes,
      then goes on with it; without numba, with NumPy to the end. It never waits for it.
    * ``True``: the compiled loop from the start, loaded (or compiled) in this thread first;
      ``ImportError`` without numba.
    * ``False``: NumPy.

    Why the bookkeeping stays small: a pair ``(x, y)`` can only come into being when the younger of ``x`` and
    ``y`` is made (slots only ever get younger tokens), so every pair gets its id and its full list of slots
    once, in the merge that creates it; afterwards its count only goes down and its slots only drop out. The
    best pair is found among the *candidates* (every pair whose count is at least a threshold), rebuilt
    with a full scan only when they run out.

    Resuming: ``replay`` lists merges already learned from the same counts as pairs of token ids; they are
    redone without searching for the best pair, then learning goes on. ``save(merge_ids)`` is called with the
    ids of every merge so far at most every ``save_every`` seconds and at the end (a checkpoint).
    """
    loader = LOADER if loader is None else loader
    words = _FlatWords(counts)
    bar = tqdm(total=num_merges, unit="merges", desc="merging", disable=not progress, leave=False)
    if compiled:
        kernel = compiled_merges.load_kernel()
        if kernel is None:
            bar.close()
            raise ImportError("compiled=True needs numba: pip install 'gpt2-numpy[train]', or pass compiled=False")
        bar.set_description_str("merging (loading the fast merge loop; compiling it takes 20-40 s the first "
                                 "time on a machine)", refresh=True)
        compiled_merges.warm_up(kernel, (words.weight.dtype.name,))
        bar.set_description_str("merging", refresh=False)
        step = _compiled_steps(kernel, words, num_merges, replay)
    elif compiled is None and len(words.tok) * num_merges >= COMPILED_LOOP_MIN_WORK:
        loader.start_compiling()
        loader.start_loading()
        step = _numpy_then_compiled_steps(counts, words, num_merges, replay, loader, bar)
    else:
        step = _numpy_steps(words, num_merges, replay)
    del words  # the steps hold them, and may let them go
    merge_ids: list[tuple[int, int]] = []
    saved = time.monotonic()
    tokens: list[bytes] = [bytes([i]) for i in range(256)]  # id -> bytes
    for batch in step:
        for a, b in batch:
            merge_ids.append((a, b))
            tokens.append(tokens[a] + tokens[b])
        bar.update(len(batch))
        if progress and batch:
            a, b = batch[-1]
            bar.set_postfix_str(f"{tokens[a]!r} + {tokens[b]!r}", refresh=False)
        if save and time.monotonic() - saved >= save_every:
            save(merge_ids)
            saved = time.monotonic()
    bar.close()
    if save:
        save(merge_ids)
    pid = loader.compiling_pid() if progress else None
    if pid is not None:
        print(f"The fast merge loop goes on compiling in the background (process {pid}), once for this machine; "
              "later large jobs use it.", file=sys.stderr)
    return [(tokens[a], tokens[b]) for a, b in merge_ids]


# How often the NumPy loop asks whether the compiled one has come (seconds).
_POLL_EVERY = 0.1


def _numpy_then_compiled_steps(counts, words: "_FlatWords", num_merges: int, replay: Sequence[tuple[int, int]],
                               loader: CompiledLoopLoader, bar):
    """Batches of merges from the NumPy loop until ``loader`` has the compiled loop, then from that loop (which
    redoes the merges made so far first, on fresh arrays, without yielding them again). The bar's description
    says what the loader is doing meanwhile."""
    done: list[tuple[int, int]] = []
    kernel = loader.kernel()
    if kernel is None:
        numpy_steps = _numpy_steps(words, num_merges, replay)
        polled = 0.0
        for batch in numpy_steps:
            done += batch
            yield batch
            if time.monotonic() - polled >= _POLL_EVERY:
                polled = time.monotonic()
                kernel = loader.kernel()
                activity = loader.activity()
                bar.set_description_str(f"merging ({activity})" if activity else "merging", refresh=False)
                if kernel is not None and len(done) < num_merges:
                    break
        else:
            return  # the NumPy loop finished first
        numpy_steps.close()
        del numpy_steps
        bar.set_description_str("merging", refresh=False)
        words = _FlatWords(counts)  # the NumPy loop rewrote its arrays
    yield from _compiled_steps(kernel, words, num_merges, done + list(replay[len(done):]), skip=len(done))


def _replay_error(k: int, pair: tuple[int, int]) -> ValueError:
    return ValueError(f"merge {k} of the checkpoint, ids {tuple(pair)}, is not a pair of these counts: the "
                      "checkpoint is from another corpus or other settings")


# Merges learned between two progress updates / checkpoint checks with the compiled loop.
_BATCH = 64


def _compiled_steps(kernel, words: "_FlatWords", num_merges: int, replay: Sequence[tuple[int, int]], skip: int = 0):
    """Batches of merges (lists of token id pairs) from the compiled merge loop; the first ``skip`` merges
    (replayed) are made but not yielded."""
    merger = compiled_merges.CompiledMerger(kernel, words.tok, words.nxt, words.prv, words.weight, 256 + num_merges)
    forced = np.array(replay, np.int32).reshape(-1, 2)[:num_merges]

    def merge_until(until: int) -> int:
        try:
            return merger.merge(until, forced)
        except LookupError as e:
            raise _replay_error(e.args[0], replay[e.args[0]]) from None

    done = merge_until(skip) if skip else 0
    if done < skip:  # no pair left
        return
    while done < num_merges:
        until = min(num_merges, done + _BATCH)
        now = merge_until(until)
        yield merger.merges[done:now].tolist()
        if now < until:  # no pair left
            return
        done = now


def _numpy_steps(words: "_FlatWords", num_merges: int, replay: Sequence[tuple[int, int]]):
    """Merges one at a time (lists of one token id pair) from the NumPy merge loop."""
    table = _PairTable(words, 256 + num_merges)
    tokens: list[bytes] = [bytes([i]) for i in range(256)]  # id -> bytes, for the tie-break
    for k in range(num_merges):
        if k < len(replay):
            best = table.find(*replay[k])
            if best < 0:
                raise _replay_error(k, replay[k])
        else:
            best = table.best(lambda ties: max(ties, key=lambda q: (tokens[table.left[q]], tokens[table.right[q]])))
            if best < 0:
                return
        a, b = int(table.left[best]), int(table.right[best])
        tokens.append(tokens[a] + tokens[b])
        table.merge(best, len(tokens) - 1)
        yield [(a, b)]


class _FlatWords:
    """The distinct pre-tokens of two bytes or more, end to end, one slot per byte: ``tok`` (the byte, as a
    token id), ``nxt``/``prv`` (the next/previous slot of the same pre-token, -1 at its ends) and ``weight``
    (the pre-token's count). Pre-tokens of one byte have no pair and never change, so they are left out."""

    def __init__(self, counts: dict[str, int]):
        words = [w.encode("utf-8") if isinstance(w, str) else bytes(w) for w in counts]
        lengths = np.fromiter(map(len, words), np.int64, len(words))
        freqs = np.fromiter(map(int, counts.values()), np.int64, len(words))  # beyond int64: OverflowError
        kept = (lengths > 1) & (freqs > 0)
        words = list(itertools.compress(words, kept))
        lengths, freqs = lengths[kept], freqs[kept]
        n = int(lengths.sum())
        if n >= 2**31 - 1:
            raise ValueError("too many bytes of distinct pre-tokens for one training run (at most 2**31 - 2)")
        ends = np.cumsum(lengths)
        self.tok = np.frombuffer(b"".join(words), np.uint8).astype(np.int32)  # (n,)
        weight_type = np.int32 if freqs.max(initial=0) < 2**31 else np.int64  # half the memory when it fits
        self.weight = np.repeat(freqs.astype(weight_type), lengths)  # (n,)
        self.nxt = np.arange(1, n + 1, dtype=np.int32)  # (n,)
        self.nxt[ends - 1] = -1
        self.prv = np.arange(-1, n - 1, dtype=np.int32)  # (n,)
        self.prv[ends - lengths] = -1


# How many pairs the best one is looked for among (see _PairTable.best).
_CANDIDATES = 512


class _PairTable:
    """Every adjacent pair of the pre-tokens: its count, its slots, and the merge that rewrites them.

    Pair ids are given out in blocks, one per merge (block 0 holds the pairs of the raw bytes); ``slots[k]``
    holds the slots of block ``k``'s pairs grouped by id, ascending within an id, and ``starts[k]`` where each
    id's group begins. A slot listed for a pair it no longer holds (``pid`` differs) is skipped when read.
    """

    def __init__(self, words: "_FlatWords", num_ids: int):
        self.tok, self.nxt, self.prv, self.weight = words.tok, words.nxt, words.prv, words.weight
        self.pid = np.full(len(self.tok), -1, np.int32)  # (n,)
        self.num_ids = num_ids  # token ids are below this: a pair's code is left * num_ids + right
        self.size = 0  # pair ids given out so far
        self.count = np.zeros(0, np.int64)
        self.left = np.zeros(0, np.int32)
        self.right = np.zeros(0, np.int32)
        self.first_ids: list[int] = []  # block k's ids are first_ids[k] .. first_ids[k+1] - 1
        self.slots: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.block_of: dict[int, int] = {}  # token id -> the block of the pairs born with it
        self.threshold = 0  # every pair with a count >= threshold (>= 1) is among the candidates
        self.candidates = np.zeros(0, np.int64)
        self._add_pairs(np.flatnonzero(self.nxt >= 0).astype(np.int32))

    def find(self, a: int, b: int) -> int:
        """The id of the pair ``(a, b)`` if it occurs now, else -1."""
        block = self.block_of.get(max(a, b), -1) if max(a, b) > 255 else 0
        if block < 0 or not self.first_ids:
            return -1
        first, end = self.first_ids[block], self.first_ids[block] + len(self.starts[block]) - 1
        codes = self.left[first:end].astype(np.int64) * self.num_ids + self.right[first:end]  # ascending
        k = int(np.searchsorted(codes, a * self.num_ids + b))
        found = k < len(codes) and codes[k] == a * self.num_ids + b and self.count[first + k] > 0
        return first + k if found else -1

    def _add_pairs(self, at: np.ndarray, made_by: int | None = None) -> None:
        """Give ids to the pairs starting at slots ``at`` (ascending; all of them pairs never seen before)."""
        if not len(at):
            return
        left, right = self.tok[at], self.tok[self.nxt[at]]  # (m,), (m,)
        codes = left.astype(np.int64) * self.num_ids + right  # (m,)
        # Stable, so slots stay ascending within a pair. The pairs of two bytes (the first call, the one with
        # the most slots) are sorted on a 16-bit key ordered like their codes: a radix sort in NumPy.
        key = (left << 8 | right).astype(np.uint16) if made_by is None and not self.size else codes
        order = np.argsort(key, kind="stable")
        codes = codes[order]
        starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))  # (k,) first of each pair
        first, k = self.size, len(starts)
        if first + k > len(self.count):  # grow geometrically
            cap = max(2 * len(self.count), first + k, 1024)
            self.count = np.resize(self.count, cap)
            self.left = np.resize(self.left, cap)
            self.right = np.resize(self.right, cap)
        at = at[order]
        ids = np.arange(first, first + k)
        self.count[first : first + k] = np.add.reduceat(self.weight[at], starts, dtype=np.int64)
        self.left[first : first + k] = codes[starts] // self.num_ids
        self.right[first : first + k] = codes[starts] % self.num_ids
        starts = np.append(starts, len(at))
        self.pid[at] = np.repeat(ids, starts[1:] - starts[:-1])
        if made_by is not None:
            self.block_of[made_by] = len(self.first_ids)
        self.first_ids.append(first)
        self.slots.append(at)
        self.starts.append(starts)
        self.size = first + k
        if self.threshold:
            new = ids[self.count[first : first + k] >= self.threshold]
            if len(new):
                self.candidates = np.concatenate((self.candidates, new))

    def best(self, tie_break) -> int:
        """The id of the most frequent pair (``tie_break(ids)`` picks among equal counts), -1 if none is left."""
        counts = self.count[self.candidates]
        keep = counts >= self.threshold
        if not keep.all():
            self.candidates, counts = self.candidates[keep], counts[keep]
        if len(counts) > 4 * _CANDIDATES:  # raise the threshold: fewer candidates to look at every merge
            self._choose_candidates(self.candidates)
            counts = self.count[self.candidates]
        elif not len(counts):
            self._choose_candidates(np.arange(self.size))
            counts = self.count[self.candidates]
            if not len(counts):
                return -1
        top = counts.max()
        ties = self.candidates[counts == top]
        return int(ties[0]) if len(ties) == 1 else tie_break(ties.tolist())

    def _choose_candidates(self, among: np.ndarray) -> None:
        """Candidates: the pairs ``among`` (a superset of those >= the threshold) with a count of at least the
        ``_CANDIDATES``-th largest (and at least 1)."""
        counts = self.count[among]
        n = len(counts)
        top = np.partition(counts, n - _CANDIDATES)[n - _CANDIDATES] if n > _CANDIDATES else 1
        self.threshold = max(int(top), 1)
        self.candidates = among[counts >= self.threshold]

    def merge(self, q: int, new: int) -> None:
        """Replace every occurrence of pair ``q`` by token ``new``, left to right without overlap."""
        block = bisect.bisect_right(self.first_ids, q) - 1
        i = q - self.first_ids[block]
        at = self.slots[block][self.starts[block][i] : self.starts[block][i + 1]]
        at = at[self.pid[at] == q]  # (m,) ascending
        if self.left[q] == self.right[q]:
            at = _every_other_in_runs(at, self.prv)
        tok, nxt, prv, pid = self.tok, self.nxt, self.prv, self.pid
        right_half = nxt[at]  # (m,)
        before, after = prv[at], nxt[right_half]  # (m,), -1 at the ends of a word
        # The pairs that change start before, at and at the right half of each occurrence; a slot before one
        # occurrence may be the right half of the previous one ("a b a b"), and is taken once.
        own = (before >= 0) & (before != _shifted(right_half))
        gone = np.concatenate((before[own], at, right_half[after >= 0]))
        np.subtract.at(self.count, pid[gone], self.weight[gone])
        pid[gone] = -1
        tok[at] = new
        nxt[at] = after
        linked = after >= 0
        prv[after[linked]] = at[linked]
        tok[right_half] = -1
        # The new pairs start before and at each merged token; "before" may be the previous occurrence.
        before = prv[at]
        own = (before >= 0) & (before != _shifted(at))
        self._add_pairs(np.sort(np.concatenate((before[own], at[linked]))), made_by=new)


def _shifted(a: np.ndarray) -> np.ndarray:
    """``a`` moved one place right, -2 (no slot) in front: entry k is a[k-1]."""
    out = np.empty_like(a)
    out[:1] = -2
    out[1:] = a[:-1]
    return out


def _every_other_in_runs(at: np.ndarray, prv: np.ndarray) -> np.ndarray:
    """Of the slots ``at`` of a pair ``(a, a)``, those merged left to right: in a run of consecutive ones
    (``a a a a`` has pairs at 0, 1, 2) the 1st, 3rd, ... (``aa aa``)."""
    if len(at) < 2:
        return at
    follows = np.zeros(len(at), bool)
    follows[1:] = prv[at[1:]] == at[:-1]
    index = np.arange(len(at))
    run_start = np.maximum.accumulate(np.where(follows, 0, index))
    return at[(index - run_start) % 2 == 0]
