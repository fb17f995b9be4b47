"""Phase 1 of training: how often each pre-token occurs in the input files, counted in parallel.

Each file is cut into byte ranges (:mod:`tokenizer.training.chunks`); each range is one task of a map-reduce
on an engine (:mod:`tokenizer.jobs.engines`): its documents are cut at special tokens, then into pre-tokens,
and counted; the counters are added up. A pattern with an array split (:mod:`tokenizer.training.array_counts`)
is counted by array operations (every OpenAI pattern has one). What the arrays cannot take (a text with a lone
surrogate, from a JSON file) or another pattern is split here: with GPT-2's pattern coarse pieces first, each
distinct one split once (see ``_GPT2_COARSE``).

What is not here: the merges learned from the counts (:mod:`tokenizer.training.reference`,
:mod:`tokenizer.training.fast_merges`), and finding and reading the inputs (:mod:`tokenizer.jobs.inputs`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from .array_counts import count_texts, has_array_counts
from .chunks import find_chunk_boundaries, line_boundaries
from ..fast.stdlib_patterns import compile_fast
from ..jobs.engines import ENGINES, ProgressBar, open_engine
from ..jobs.inputs import input_format, read_records, read_text
from ..patterns import WHITESPACE, WHITESPACE_CLASS
from ..pretokenize import GPT2_PATTERN, R50K_PATTERN, special_token_regex

# Chunks handed to the workers are about this many bytes (they end at the next safe cut after it).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
# Inputs smaller than workers * chunk_size are shared out among the workers, in shares of at least this many bytes
# (unless chunk_size asks for smaller chunks): a smaller share costs a process more to start than to count.
SMALLEST_SHARE = 64 * 1024


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
    while_counting: Callable[[], None] = lambda: None,
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

    ``while_counting()`` is called once the counting has started (in a worker pool: after the workers are
    started, so that a thread it starts is not forked).
    """
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
    # Give every worker something to do on inputs smaller than workers * chunk_size, but no share smaller than
    # SMALLEST_SHARE: a huge num_workers would otherwise cut a small file into crumbs, one process each.
    target = max(1, min(chunk_size, max(-(-sum(sizes) // workers), SMALLEST_SHARE)))
    ranges = []
    for path, size in zip(paths, sizes):
        fmt = input_format(path)
        if fmt == "parquet" or path.endswith(".gz"):
            bounds = [0, size]
        elif fmt == "jsonl":
            bounds = line_boundaries(path, target)
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
