"""Train a byte-level BPE tokenizer from a text file (CS336 assignment 1 semantics).

    >>> vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])

The result is ``(vocab, merges)``: ``vocab`` maps ids to token bytes — ids 0..255 are the single bytes, then
one id per merge in the order the merges were learned, then the special tokens — and ``merges`` lists the
learned pairs ``(left, right)`` in that same order.

What is counted, exactly:

* The text is cut at special tokens first (the longest one wins where two overlap); special tokens are hard
  boundaries and are never counted nor merged into anything.
* Each piece between special tokens is cut into pre-tokens with the regular expression ``pattern`` (GPT-2's by
  default). A pair of adjacent tokens is only ever counted inside one pre-token.
* Every step merges the most frequent pair; among pairs with the same count the lexicographically greater
  pair of byte strings wins, comparing ``(left_bytes, right_bytes)`` tuples. Inside a pre-token a merge
  replaces occurrences left to right without overlap (``a a a`` with the pair ``(a, a)`` becomes ``aa a``).
* Training stops at ``vocab_size`` entries, or earlier when no pair is left.

How it runs, in two phases:

1. Counting pre-tokens. The file is cut into chunks of about ``chunk_size`` bytes at safe cuts
   (:mod:`tokenizer.cuts`; see :func:`find_chunk_boundaries`), so no pre-token and no special token straddles
   two chunks and the counts do not depend on the chunking. ``num_workers`` processes each read one chunk at a
   time, split it and return a ``Counter`` of pre-token -> occurrences; the parent adds the counters up.
   Memory therefore grows with the number of distinct pre-tokens, not with the size of the corpus. With
   GPT-2's pattern a worker first counts coarse pieces (a word with its leading space, or whitespace) with a
   simple regex, then splits each *distinct* piece once with the real pattern (see ``_GPT2_COARSE``).
2. Merging (:func:`learn_merges`). Each distinct pre-token becomes a string of token ids (id ``t`` is the
   character ``chr(t)``) with its count. The trainer keeps the count of every adjacent pair, the list of
   pre-tokens each pair occurs in, and a heap to find the best pair without rescanning all pairs. A merge only
   revisits the pre-tokens that contain the merged pair, and ``str.partition``/``str.replace`` do the
   merging in C. :func:`learn_merges_reference` is the same algorithm written plainly (recount every pair
   for every merge); tests check the two agree.

The file is read as bytes and decoded as strict UTF-8: invalid bytes raise :class:`ValueError` naming the
file and the byte offset. Line endings are not translated (``"\\r\\n"`` stays two characters).

This module learns merges only: :meth:`Encoding.from_vocab_merges` turns them into an encoder, and
:meth:`Encoding.save` writes them out.
"""

from __future__ import annotations

import heapq
import os
import re
import signal
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import regex
from tqdm import tqdm

from .cuts import safe_byte_cuts
from .pretokenize import GPT2_PATTERN, R50K_PATTERN, compile_pattern

# Chunks handed to the workers are about this many bytes (they end at the next safe cut after it).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
# How far ahead one read looks for a safe cut; the search keeps going until it finds one.
_BOUNDARY_WINDOW = 64 * 1024

Vocab = dict[int, bytes]
Merges = list[tuple[bytes, bytes]]


def train_bpe(
    input_path: str | os.PathLike,
    vocab_size: int,
    special_tokens: Iterable[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    num_workers: int | None = None,
    progress: bool = True,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[Vocab, Merges]:
    """Learn ``vocab_size - 256 - len(special_tokens)`` merges (or fewer) from the UTF-8 text file ``input_path``.

    ``special_tokens`` are strings; each gets an id after the merges, in the order given (duplicates are
    dropped). ``pattern`` is the pre-tokenization regex (``regex`` package syntax). ``num_workers`` processes
    count pre-tokens (default: ``os.cpu_count()``); ``chunk_size`` is the target size in bytes of the pieces of
    the file they get. ``progress`` shows tqdm bars. The result does not depend on ``num_workers`` or
    ``chunk_size``.

    Raises ``ValueError`` when ``vocab_size`` is below the minimum (256 + number of special tokens), when the
    file is empty or when it is not valid UTF-8; ``FileNotFoundError`` when it does not exist.
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
    path = os.fspath(input_path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"training file not found: {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"training input is a directory, not a file: {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"training file is empty: {path!r} (nothing to learn merges from)")

    counts = count_pretokens(
        path, specials, pattern=pattern, num_workers=num_workers, progress=progress, chunk_size=chunk_size
    )
    num_merges = vocab_size - minimum
    merges = learn_merges(counts, num_merges, progress=progress)

    vocab: Vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for s in specials:
        vocab[len(vocab)] = s.encode("utf-8")
    return vocab, merges


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
    return compile_pattern(pattern).split


# Unicode White_Space, which is what \s means in the `regex` package (the standard library's \s also takes
# \x1c-\x1f). Tests check this set against `regex`.
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WHITESPACE_SET = frozenset(regex.findall(r"\s", "".join(map(chr, range(0x3001)))))
# Coarse GPT-2 pieces: an optional space + a run of non-space characters, or whitespace cut the way GPT-2's
# pattern cuts it. Every GPT-2 pre-token lies inside one coarse piece, whitespace pieces are pre-tokens
# already, and how a non-space piece splits does not depend on what is around it (no GPT-2 alternative
# reads past a non-space run into whitespace, and the lookahead only follows whitespace). So counting
# coarse pieces first and splitting each *distinct* one once gives the same counts, faster.
_GPT2_COARSE = re.compile(f"[ ]?[^{WHITESPACE}]+|[{WHITESPACE}]+(?![^{WHITESPACE}])|[{WHITESPACE}]")
_TWO_LEVEL_PATTERNS = (GPT2_PATTERN, R50K_PATTERN)


def _split_pieces(pieces: Counter, split) -> Counter:
    """Pre-token counts from coarse GPT-2 piece counts: each distinct piece is split once."""
    counts: Counter = Counter()
    ws = _WHITESPACE_SET
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
    """A function text -> list of the pieces between special tokens (longest special first where they overlap)."""
    if not specials:
        return lambda text: [text]
    alternatives = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
    return re.compile(alternatives).split


_worker_cache: dict[tuple[str, tuple[str, ...]], tuple] = {}
_report_progress = None  # in a worker process: puts the number of bytes done on the parent's queue


def _init_worker(queue) -> None:
    global _report_progress
    _report_progress = queue.put
    # Ctrl-C is the parent's to handle (it stops the pool), instead of every worker printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _read_text(path: str, start: int, end: int) -> str:
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path!r} is not valid UTF-8: {e.reason} at byte offset {start + e.start} "
            f"(byte 0x{data[e.start]:02x})"
        ) from None


def _count_ranges(
    path: str, ranges: Sequence[tuple[int, int]], pattern: str, specials: tuple[str, ...], report=None
) -> Counter:
    """Pre-token counts of the byte ranges ``start:end`` of the file (each begins and ends at a safe boundary)."""
    key = (pattern, specials)
    fns = _worker_cache.get(key)
    if fns is None:
        coarse = _GPT2_COARSE.findall if pattern in _TWO_LEVEL_PATTERNS else None
        fns = _worker_cache[key] = (_splitter(pattern), _special_splitter(specials), coarse)
    split, split_specials, coarse = fns
    report = report or _report_progress
    counts: Counter = Counter()  # coarse pieces with GPT-2's pattern, else pre-tokens
    for start, end in ranges:
        for text in split_specials(_read_text(path, start, end)):
            counts.update(coarse(text) if coarse else split(text))
        if report:
            report(end - start)
    return _split_pieces(counts, split) if coarse else counts


def _count_ranges_star(args) -> Counter:
    return _count_ranges(*args)


def count_pretokens(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    num_workers: int | None = None,
    progress: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> Counter:
    """``Counter`` of pre-token string -> occurrences over the whole file, special tokens excluded.

    The chunks are dealt round-robin to ``num_workers`` processes; each returns one ``Counter`` for all of its
    chunks (so the parent adds up ``num_workers`` counters, and a piece seen in several chunks is split once
    per worker). Workers report bytes done through a queue for the progress bar.
    """
    path = os.fspath(path)
    specials = tuple(special_tokens)
    size = os.path.getsize(path)
    workers = (os.cpu_count() or 1) if num_workers is None else num_workers
    if workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {num_workers}")
    # Give every worker something to do on files smaller than workers * chunk_size.
    target = max(1, min(chunk_size, -(-size // workers)))
    bounds = find_chunk_boundaries(path, target, [s.encode("utf-8") for s in specials], pattern=pattern)
    ranges = list(zip(bounds, bounds[1:]))
    workers = min(workers, len(ranges))
    with tqdm(total=round(size / 1e6, 2), unit="MB", desc="pre-tokenizing", disable=not progress, leave=False) as bar:
        def report(nbytes: int) -> None:
            bar.update(round(nbytes / 1e6, 2))

        if workers == 1:
            return _count_ranges(path, ranges, pattern, specials, report)
        import multiprocessing
        import queue

        ctx = multiprocessing.get_context()
        done = ctx.Queue()
        jobs = [(path, ranges[w::workers], pattern, specials) for w in range(workers)]
        with ctx.Pool(workers, initializer=_init_worker, initargs=(done,)) as pool:
            pending = pool.map_async(_count_ranges_star, jobs)
            while not pending.ready():
                try:
                    report(done.get(timeout=0.05))
                except queue.Empty:
                    pass
            results = pending.get()  # raises a worker's exception (e.g. invalid UTF-8)
            while not done.empty():
                report(done.get())
    total = results[0]
    for counts in results[1:]:
        total.update(counts)
    return total


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


def _sort_key(token: bytes) -> bytes:
    """A key whose ascending order is the *descending* lexicographic order of ``token``.

    Each byte ``c`` becomes ``00, 255 - c`` and the key ends with ``01``: at the first differing byte the
    smaller inverted byte wins, and a proper prefix (which sorts first as bytes) gets ``01`` where the longer
    token has ``00``, so it sorts last. For pairs, ``key(a) + key(b)`` orders like ``(a, b)`` reversed because
    the terminator decides before the right halves are compared.
    """
    return bytes(x for c in token for x in (0, 255 - c)) + b"\x01"


def learn_merges(counts: dict[str, int], num_merges: int, *, progress: bool = False) -> Merges:
    """Up to ``num_merges`` merges learned from pre-token counts: those of :func:`learn_merges_reference`.

    Representation: token id ``t`` is the character ``chr(t)``, so a pre-token is a ``str`` of token ids and the
    standard library does the inner loops in C: ``partition`` finds a pair and ``replace`` merges it left to
    right without overlap (exactly the BPE rule). A pair is the 2-character string of its two ids.

    ``words``/``freqs`` are the distinct pre-tokens of two bytes or more and their counts. ``pair_count`` holds
    every pair's total count and ``where`` lists the words a pair was seen in (with stale entries: a word is
    checked when visited). The heap holds ``(-count, tie-break key, pair)``; entries are not removed when a count
    changes: a popped entry whose count is out of date is queued again with the right count (counts only go
    down, except for pairs with the new token, which are queued when they appear).
    """
    if 256 + num_merges > 0x110000:
        raise ValueError("at most 0x110000 - 256 merges are supported (token ids are stored as characters)")
    tokens: list[bytes] = [bytes([i]) for i in range(256)]  # id -> bytes
    keys: list[bytes] = [_sort_key(t) for t in tokens]  # id -> heap tie-break key
    # Pre-tokens of one byte have no pairs and can never change: leave them out.
    words: list[str] = []
    freqs: list[int] = []
    for w, c in counts.items():
        b = w.encode("utf-8") if isinstance(w, str) else bytes(w)
        if len(b) > 1 and c > 0:
            words.append(b.decode("latin-1"))  # byte value = character code = token id
            freqs.append(c)

    pair_count: defaultdict[str, int] = defaultdict(int)
    where: defaultdict[str, list[int]] = defaultdict(list)
    get = pair_count.get
    for wi, w in enumerate(words):
        c = freqs[wi]
        for p in map(str.__add__, w, w[1:]):
            pair_count[p] += c
            where[p].append(wi)

    def pair_key(p: str) -> bytes:
        return keys[ord(p[0])] + keys[ord(p[1])]

    heap = [(-c, pair_key(p), p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    heappush, heappop = heapq.heappush, heapq.heappop

    merges: Merges = []
    bar = tqdm(total=num_merges, unit="merges", desc="merging", disable=not progress, leave=False)
    while len(merges) < num_merges and heap:
        negc, key, ab = heappop(heap)
        cur = get(ab, 0)  # get() does not insert
        if cur != -negc:
            if cur > 0:  # its count went down since this entry was pushed: queue it again
                heappush(heap, (-cur, key, ab))
            continue
        a, b = ord(ab[0]), ord(ab[1])
        new = len(tokens)
        tokens.append(tokens[a] + tokens[b])
        keys.append(keys[a][:-1] + keys[b])
        merges.append((tokens[a], tokens[b]))
        bar.update(1)
        a_s, b_s, n_s = ab[0], ab[1], chr(new)

        # Counts are updated in place; a pair whose count drops to 0 may stay in the dict (0 means absent).
        # Words with one occurrence of the pair (most of them) are only noted by their neighbour on each side;
        # the counts for a neighbour are summed afterwards in one go.
        left: defaultdict[str, list[int]] = defaultdict(list)  # x -> words where "x a b" became "x new"
        right: defaultdict[str, list[int]] = defaultdict(list)  # y -> words where "a b y" became "new y"
        newpairs: dict[str, list[int]] = {}  # pair with the new token -> its words (several-occurrence words)
        for wi in where.pop(ab):  # a word may be listed twice: the second visit finds nothing to do
            pre, hit, post = words[wi].partition(ab)
            if not hit:
                continue  # stale entry: an earlier merge took a or b
            if ab not in post:
                if pre:
                    left[pre[-1]].append(wi)
                if post:
                    right[post[0]].append(wi)
                words[wi] = pre + n_s + post
                continue
            # Several occurrences: merge them all. The pairs that change are the old pairs touching an
            # occurrence and the new pairs touching the new token (all other pairs are the same on both sides);
            # sets, because neighbouring occurrences share pairs. Work is per occurrence, not per character:
            # words can be long (a run of CJK letters is one pre-token).
            c = freqs[wi]
            w = pre + hit + post
            last = len(w) - 1  # pairs start at 0..last-1
            gone = set()
            i = len(pre)
            while i >= 0:
                gone.update(j for j in (i - 1, i + 1) if 0 <= j < last)
                i = w.find(ab, i + 2)
            for j in gone:
                pair_count[w[j : j + 2]] -= c
            out = w.replace(ab, n_s)
            last = len(out) - 1
            born = set()
            k = out.find(n_s)
            while k >= 0:
                born.update(j for j in (k - 1, k) if 0 <= j < last)
                k = out.find(n_s, k + 1)
            for j in born:
                p = out[j : j + 2]
                pair_count[p] += c
                if p in newpairs:
                    newpairs[p].append(wi)
                else:
                    newpairs[p] = [wi]
            words[wi] = out
        # Pairs with the new token did not exist before: count them, queue them, index their words.
        weight = freqs.__getitem__
        key_new = keys[new]
        for x, wis in left.items():
            c = sum(map(weight, wis))
            pair_count[x + a_s] -= c
            p = x + n_s
            pair_count[p] += c
            more = newpairs.pop(p, None)
            where[p] = wis + more if more else wis
            heappush(heap, (-pair_count[p], keys[ord(x)] + key_new, p))
        for y, wis in right.items():
            c = sum(map(weight, wis))
            pair_count[b_s + y] -= c
            p = n_s + y
            pair_count[p] += c
            more = newpairs.pop(p, None)
            where[p] = wis + more if more else wis
            heappush(heap, (-pair_count[p], key_new + keys[ord(y)], p))
        for p, wis in newpairs.items():
            where[p] = wis
            heappush(heap, (-pair_count[p], pair_key(p), p))
        del pair_count[ab]
    bar.close()
    return merges
