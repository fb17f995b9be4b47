"""The fast core: ordinary text -> ids, exactly as :class:`tokenizer.core.ReferenceCore`, at tiktoken's speed.

It answers the questions the ``Encoding`` face asks a core, ``encode_ordinary_texts(texts)`` and
``encode_ordinary_joined(texts, between)``, by one of the routes named in :class:`Route`, which one method,
:meth:`FastCore.route`, chooses for every call by the call's size (the measured thresholds below), what the piece
cache holds and what the pattern has (:data:`tokenizer.patterns.KNOWN_PATTERNS`: its array rules, its safe cuts):

- **a long text** (``ARRAY_MIN_CHARS`` or more) never becomes piece strings: its pieces are found by array
  rules, grouped into distinct ones, looked up and BPE-encoded all at once in NumPy
  (:mod:`tokenizer.fast.array_encode`), unless it is under ``CACHE_PATH_MAX_CHARS`` and the piece cache already
  holds nearly all its pieces (a conversation encoded again at every turn): then the cache is faster
  (``Route.ARRAY``; ``Route.REGEX_SPLIT_ARRAY`` where the pattern has no array rules: ``re`` splits it);
- **short texts** go through a piece cache: text repeats its pieces (" the", ",", " of"), so each distinct
  piece is BPE-encoded once and later found in a dict, one lookup per piece done by ``map`` in C. The pieces
  a call lacks are collected first and, when they are many, encoded together by batch BPE
  (:mod:`tokenizer.fast.batch_bpe`, its pair table read from disk by :mod:`tokenizer.fast.table_cache`)
  (``Route.PIECE_CACHE``; a call as short as one short text takes ``Route.ONE_PASS``: each piece looked up and a
  new one encoded on the spot);
- **a few new short pieces** are merged one by one by :func:`tokenizer.bpe.merge`, whose fixed cost is lowest
  (a long non-ASCII one cut first where no merge can cross, :mod:`tokenizer.fast.uncrossable`, or started from
  its characters' own merges, :mod:`tokenizer.fast.characters_first`); once the process has the compiled kernel
  (:mod:`tokenizer.fast.compiled_bpe`, which the core tells how much it merged in Python), a call's new pieces
  are collected and all of them go to it in one call instead.

A long text alone also leaves a *checkpoint*: its part up to its last safe cut (:mod:`tokenizer.cuts`) and
that part's ids. A later text that begins with that part (a conversation, a document, encoded again as it
grows) reuses them and encodes only the rest (``PREFIX_MIN_CHARS``, ``Route.CHECKPOINT``).

An encoding read from a ``tokenizer.json`` whose normalizer and pre-tokenizer are more than one known pattern
(:mod:`tokenizer.hf_steps`: Qwen3's NFC, DeepSeek V3's three splits) takes ``Route.STEPS``: the steps cut and
split its texts, and the pieces go through the piece cache.

All the texts of one call (a batch, or the stretches between special tokens) are handled together: one
grouping, one batch of BPE. The pieces come from :func:`tokenizer.fast.stdlib_patterns.compile_fast`, the
standard library's faster ``re`` running OpenAI's patterns.

Decoding (:meth:`FastCore.decode_bytes`) is the readable join of each id's bytes, with the look-ups done by one
``itemgetter`` per few thousand ids instead of a call per id.

What this module does not do: special tokens, or any rule of its own. Where it and the reference
core could differ, the tests compare them (and tiktoken).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from enum import Enum
from itertools import chain, compress, count, filterfalse, repeat
from operator import is_not, itemgetter, not_
from typing import TYPE_CHECKING, Callable, Iterator, Literal, Mapping, Sequence

from .. import bpe
from ..core import interleave
from ..patterns import KNOWN_PATTERNS, UNKNOWN_PATTERN
from ..pretokenize import replace_surrogates
from . import compiled_bpe
from .stdlib_patterns import compile_fast

if TYPE_CHECKING:
    from ..hf_steps import TextSteps
    from .array_encode import TokenTables
    from .batch_bpe import PairTable
    from .characters_first import CharactersFirst
    from .bpe_kernel import CompiledBPE
    from .piece_arrays import PieceTable

# The cache is emptied when it reaches this many pieces: memory stays bounded on endless streams.
PIECE_CACHE_LIMIT = 1 << 19

# A text shorter than this is looked up piece by piece, a new piece encoded on the spot (one pass, whatever its
# number of pieces: measured faster, first pass and warm, on messages of up to 2,000 characters); a longer one
# on this path (no array path for its vocabulary) has its new pieces collected first (_add_missing).
BATCH_MIN_CHARS = 1 << 14

# The new pieces of one call that need BPE (not tokens themselves) go to batch BPE when they hold this many
# bytes, else to bpe.merge one by one: a batch has a fixed cost in NumPy calls (milliseconds) that only this
# much BPE work repays (measured on the corpora: a few hundred English pieces, a few dozen Japanese ones).
BATCH_MIN_BYTES = 1 << 11

# Texts at least this long are encoded by array operations from the split to the ids (array_encode): no
# Python object per piece where the pattern has an array split. Shorter ones are not worth its fixed cost in
# NumPy calls and go through the piece cache.
ARRAY_MIN_CHARS = 1 << 13

# A text of ARRAY_MIN_CHARS or more but fewer than this goes through the piece cache instead of the array path
# when the cache already holds at least CACHE_SAMPLE_HITS of the pieces of a sample of CACHE_SAMPLE_CHARS (its
# beginning and middle): measured on mid-size texts whose pieces the cache held, the array path's fixed cost
# in batch BPE rounds outweighed the cache's look-ups up to about this length; on a cold cache the array path is
# the faster one at every length.
CACHE_PATH_MAX_CHARS = 1 << 18
CACHE_SAMPLE_CHARS = 1 << 11
CACHE_SAMPLE_HITS = 0.95

# A long non-ASCII piece is cut where no merge can cross (uncrossable.py), and one that still needs BPE starts from
# its characters (characters_first.py), from the UNCROSSABLE_AFTER-th such piece on (their tables cost a scan of
# the vocabulary). The next UNCROSSABLE_TRIAL pieces decide whether cutting goes on. It stops if fewer than half
# of them fell apart: a vocabulary that knows a script well (o200k_base on Chinese) cuts few of its pieces, and
# there the cutting was measured to cost more than the cached parts save. It stops too if they are mostly of
# characters of several bytes and their parts average more than UNCROSSABLE_PART_BYTES: cl100k_base cuts Chinese
# into parts of two characters or more, which repeat less, and started from their characters those pieces were
# measured faster; gpt2 cuts it into single characters (kept), and German into short words (kept: mostly ASCII).
UNCROSSABLE_AFTER = 16
UNCROSSABLE_PART_BYTES = 4
UNCROSSABLE_TRIAL = 64

# A text of PREFIX_MIN_CHARS or more (and under PREFIX_MAX_CHARS) leaves a checkpoint: the text up to its last
# safe cut (tokenizer.cuts) and the ids of that part. A later text that begins with that part, and still has a
# safe cut there (the character after it decides), reuses those ids and encodes only the rest: a conversation
# or a document encoded again each time it grows. Shorter texts leave none (finding the cut and copying the ids
# cost more than encoding them again saves); the maximum bounds what the checkpoint holds.
PREFIX_MIN_CHARS = 1 << 13
PREFIX_MAX_CHARS = 1 << 20

# A core whose compiled kernel waits for the tables' check on disk (table_cache.read_tables_soon) looks again
# after merging this many more bytes in Python (a few milliseconds of BPE; the check takes tens).
REPORT_AGAIN_BYTES = 1 << 10

# A cache fill of this many pieces or more pauses Python's cycle collector (_garbage_collection_paused); a
# smaller one gains less than pausing costs.
GC_PAUSE_MIN_PIECES = 1 << 10

# decode_bytes looks up this many ids per itemgetter: a tuple of one call's every token would outgrow the
# processor's caches on a long list (measured several times slower per id at half a million ids).
DECODE_CHUNK_IDS = 1 << 12


class Route(Enum):
    """The ways the fast core turns a call's texts into ids: :meth:`FastCore.route` picks one for each call, and
    the core keeps the last one taken (``FastCore.last_route``). All give the same ids; they differ in speed."""

    ONE_PASS = "one pass"  # each text's pieces looked up in the piece cache, a new one encoded on the spot
    PIECE_CACHE = "piece cache"  # the call's pieces looked up; those missing collected and encoded together
    ARRAY = "array"  # the pattern's array rules split the texts, laid end to end; array BPE encodes the pieces
    REGEX_SPLIT_ARRAY = "regex split, array BPE"  # as ARRAY for a pattern without array rules: ``re`` splits
    CHECKPOINT = "checkpoint"  # one long text: the ids of the last one's part it begins with reused, then the rest
    STEPS = "tokenizer.json steps"  # normalized and split by a tokenizer.json's steps; the pieces via the cache


class _PieceCache(dict):
    """piece -> token ids (tuple); a missing piece is encoded once, on first lookup (``encode_piece``)."""

    __slots__ = ("encode_piece",)

    def __missing__(self, piece: str) -> tuple[int, ...]:
        if len(self) >= PIECE_CACHE_LIMIT:
            self.clear()
        ids = self[piece] = self.encode_piece(piece)
        return ids


class _CuttingTrial:
    """The first ``UNCROSSABLE_TRIAL`` long non-ASCII pieces cut where no merge can cross: whether cutting pays
    (see ``UNCROSSABLE_TRIAL``)."""

    __slots__ = ("pieces", "fell_apart", "parts", "bytes", "characters")

    def __init__(self) -> None:
        self.pieces = self.fell_apart = self.parts = self.bytes = self.characters = 0

    def keeps_cutting(self, parts: list[bytes], data: bytes, characters: int) -> bool:
        """Count one more piece; False once the trial is over and says cutting does not pay."""
        self.pieces += 1
        self.fell_apart += len(parts) > 1
        self.parts += len(parts)
        self.bytes += len(data)
        self.characters += characters
        if self.pieces < UNCROSSABLE_TRIAL:
            return True
        few_fell_apart = self.fell_apart < UNCROSSABLE_TRIAL // 2
        long_parts = self.bytes > UNCROSSABLE_PART_BYTES * self.parts
        long_wide_parts = long_parts and _mostly_wide(self.bytes, self.characters)
        return not (few_fell_apart or long_wide_parts)


def _mostly_wide(byte_count: int, character_count: int) -> bool:
    """Text mostly of characters of several bytes (1.5 bytes a character or more): where BPE started from the
    characters (characters_first.py) was measured faster than from the bytes, not below (an accented word)."""
    return 2 * byte_count >= 3 * character_count


class FastCore:
    """Ordinary text -> ids with caches, batch BPE and array operations; same ids as the reference core.

    ``vocabulary_source`` names the vocabulary's contents when they came from a checked file (the registry
    sets it to the file's name and sha256), so that its batch BPE tables are found on disk without hashing
    every token; None (the default) hashes them.

    ``text_steps`` (a ``tokenizer.json``'s steps, :class:`tokenizer.hf_steps.TextSteps`) replace the pattern:
    every text then takes the piece cache's route, with the steps' split (:meth:`_encode_by_steps`).
    """

    def __init__(
        self,
        pat_str: str,
        merge_ranks: Mapping[bytes, int],
        token_ids: Mapping[bytes, int],
        *,
        whole_piece_tokens: bool = True,
        bytes_by_id: Sequence[bytes | None],
        text_steps: TextSteps | None = None,
    ):
        self.pat_str = pat_str
        self.text_steps = text_steps
        self.merge_ranks = merge_ranks
        self.token_ids = token_ids
        self.whole_piece_tokens = whole_piece_tokens
        self.bytes_by_id = bytes_by_id
        self.vocabulary_source: str | None = None
        self.last_route: Route | None = None  # the route of the last call (tests read it)
        known = KNOWN_PATTERNS.get(pat_str, UNKNOWN_PATTERN)
        self._array_route = Route.ARRAY if known.array_rules else Route.REGEX_SPLIT_ARRAY
        self._has_safe_cuts = known.safe_cuts
        self._pretokenizer = compile_fast(pat_str) if text_steps is None else text_steps
        self._cache = _PieceCache()
        self._cache.encode_piece = self._encode_piece
        self._part_cache = _PieceCache()  # bytes of a part of a piece -> ids (plain BPE, no whole-piece rule)
        self._part_cache.encode_piece = self._merge_to_ids
        self._uncrossable: bytearray | None | Literal[False] = None  # built on first need; False: not worth it
        self._characters: CharactersFirst | None = None  # built with it
        self._non_ascii_met = 0  # long non-ASCII pieces met before they were built
        self._cutting_trial = _CuttingTrial()
        self._pair_table: PairTable | None | Literal[False] = None  # False: this vocabulary has none
        self._tables_soon: Callable[[], tuple[PairTable, PieceTable] | None] | None = None  # loading begun
        self._token_table: PieceTable | None = None  # every token by its bytes, loaded with the pair table
        self._token_tables: TokenTables | None | Literal[False] = None  # False: no array path here
        self._checkpoint: tuple[str, tuple[int, ...]] = ("", ())  # (a text's part, its ids): PREFIX_MIN_CHARS
        # Bytes merged in Python since the last report to compiled_bpe, and how many make the next report (none
        # for the first: a core made after the kernel was loaded takes it at its first new piece); the kernel
        # with this vocabulary's tables, once both are here: new pieces then go to it (_fill_cache).
        self._unreported_bytes = 0
        self._report_at = 0
        self._compiled: CompiledBPE | None = None

    def route(self, texts: list[str], *, checkpoint: bool = True, array: bool = True) -> Route:
        """The route a call with ``texts`` takes: the one place that decides it, for every entry point.

        One text of ``PREFIX_MIN_CHARS`` or more (and under ``PREFIX_MAX_CHARS``) takes the checkpoint where the
        pattern has safe cuts (not the checkpoint's own parts: ``checkpoint=False``). A call of
        ``ARRAY_MIN_CHARS`` or more together takes the array path, unless the piece cache already holds nearly all
        its pieces (``CACHE_PATH_MAX_CHARS``) or this vocabulary has no array path (``array=False``: the array
        path just found it cannot take these texts). The rest go through the piece cache: a call as short as one
        short text (under ``BATCH_MIN_CHARS``) in one pass, a longer one with its missing pieces collected first.

        An encoding read from a ``tokenizer.json`` whose steps are more than one known pattern (a normalizer,
        a sequence of splits: ``text_steps``) always takes ``STEPS``.

        >>> from tokenizer import get_encoding
        >>> get_encoding("gpt2").core.route(["hello world"]).value
        'one pass'
        """
        if self.text_steps is not None:
            return Route.STEPS
        if len(texts) == 1:
            total = len(texts[0])
            if checkpoint and self._has_safe_cuts and PREFIX_MIN_CHARS <= total < PREFIX_MAX_CHARS:
                return Route.CHECKPOINT
        else:
            total = sum(map(len, texts))
        if total >= ARRAY_MIN_CHARS:
            if self._cache_knows(texts, total):
                return Route.PIECE_CACHE if len(texts) > 1 or total >= BATCH_MIN_CHARS else Route.ONE_PASS
            if array and self._has_array_path():
                return self._array_route
        return Route.ONE_PASS if total < BATCH_MIN_CHARS else Route.PIECE_CACHE

    def encode_ordinary_texts(self, texts: list[str]) -> list[list[int]]:
        """The ids of each text, special tokens as plain text, by the route :meth:`route` chooses."""
        return self._encode_by(self.route(texts), texts)

    def encode_ordinary_joined(self, texts: list[str], between: list[int]) -> list[int]:
        """The ids of ``texts[0]``, ``between[0]``, ``texts[1]``... (the stretches of a text between its special
        tokens, and their ids), by the route :meth:`route` chooses for the stretches: on the array path, one run
        over all of them, the ids in between put in place in the array."""
        route = self.route(texts)
        if route is self._array_route and len(texts) > 1:
            ids = self._encode_joined(texts, between)
            if ids is not None:
                self.last_route = route
                return ids
            route = self.route(texts, array=False)
        return interleave(self._encode_by(route, texts), between)

    def _encode_by(self, route: Route, texts: list[str]) -> list[list[int]]:
        """The ids of each of ``texts`` by ``route`` (see :class:`Route`). The array path hands the call back to
        :meth:`route` when it finds it cannot take it (no tables for this vocabulary, or a pattern of one's own
        whose pieces skip text)."""
        if route is Route.ONE_PASS:
            if len(texts) == 1:
                done = [self._encode_one_pass(texts[0])]
            else:
                done = [self._encode_one_pass(text) if text else [] for text in texts]
        elif route is Route.PIECE_CACHE:
            done = self._encode_through_cache(texts) if len(texts) > 1 else [self._encode_collected(texts[0])]
        elif route is Route.CHECKPOINT:
            done = [self._encode_after_checkpoint(texts[0])]
        elif route is Route.STEPS:
            done = self._encode_by_steps(texts)
        else:
            if len(texts) != 1:
                done = self._encode_joined(texts)
            else:
                ids = self._encode_long(texts[0])
                done = None if ids is None else [ids]
            if done is None:
                return self._encode_by(self.route(texts, checkpoint=False, array=False), texts)
        self.last_route = route
        return done

    def _encode_by_steps(self, texts: list[str]) -> list[list[int]]:
        """The ids of each text by a ``tokenizer.json``'s steps: each normalized and cut at its added tokens
        (``text_steps.cut``), the stretches of all then encoded together through the piece cache, whose split
        is the steps' own (``text_steps.split``)."""
        cuts = [self.text_steps.cut(replace_surrogates(text)) for text in texts]
        stretch_ids = iter(self._encode_through_cache([s for stretches, _ in cuts for s in stretches]))
        return [interleave([next(stretch_ids) for _ in stretches], added) for stretches, added in cuts]

    def _encode_one(self, text: str) -> list[int]:
        """One text's ids by the route :meth:`route` chooses for it, the checkpoint aside (a checkpoint's parts)."""
        return self._encode_by(self.route([text], checkpoint=False), [text])[0]

    def _has_array_path(self) -> bool:
        """Whether this core may have the array path: tiktoken's whole-piece rule, and tables not found missing."""
        return self.whole_piece_tokens and self._token_tables is not False and self._pair_table is not False

    def _encode_after_checkpoint(self, text: str) -> list[int]:
        """One text's ids, those of the checkpoint's part reused where ``text`` begins with it (see
        ``PREFIX_MIN_CHARS``); the checkpoint then moves to this text's last safe cut. Exact because at a safe
        cut ``split(a + b) == split(a) + split(b)``, and BPE runs inside each piece."""
        from ..cuts import safe_cuts

        part, part_ids = self._checkpoint  # read once: another thread may move it meanwhile
        start = len(part)
        if not (part and text.startswith(part) and self._safe_cut_at(text, start)):
            start, part_ids = 0, ()
        cut = next(safe_cuts(text, start + 1, pattern=self.pat_str, reverse=True), start)
        ids = [*part_ids, *self._encode_one(text[start:cut])]
        self._checkpoint = (text[:cut], tuple(ids))
        return ids + self._encode_one(text[cut:])

    def _safe_cut_at(self, text: str, at: int) -> bool:
        """Whether ``text`` may be cut at ``at`` (0 < at <= len(text)) without changing its pieces."""
        from ..cuts import safe_cuts

        return at == len(text) or next(safe_cuts(text, at, pattern=self.pat_str), None) == at

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The bytes of ``ids`` joined, as :meth:`tokenizer.core.ReferenceCore.decode_bytes` (the same errors)."""
        try:
            count = len(ids)
        except TypeError:  # an iterator
            return b"".join(map(self.bytes_by_id.__getitem__, ids))
        if 1 < count <= DECODE_CHUNK_IDS:
            return b"".join(itemgetter(*ids)(self.bytes_by_id))
        if count > DECODE_CHUNK_IDS:
            chunks = (ids[at : at + DECODE_CHUNK_IDS] for at in range(0, count, DECODE_CHUNK_IDS))
            return b"".join([_join_bytes(self.bytes_by_id, chunk, len(chunk)) for chunk in chunks])
        return b"".join(map(self.bytes_by_id.__getitem__, ids))  # (of one id, itemgetter gives the item, not a tuple)

    # ---- short texts: the piece cache ----------------------------------------------------------------------

    def _cache_knows(self, texts: list[str], total: int) -> bool:
        """Whether the piece cache holds nearly every piece of ``texts`` (``total`` characters together, under
        ``CACHE_PATH_MAX_CHARS``), judged on a sample of the beginning and middle of them laid end to end: a
        conversation encoded again at every turn, say (its end, the newest message, is new). Such texts are
        faster through the cache than by the array path, whose batch BPE costs the same every time."""
        if not self._cache or total >= CACHE_PATH_MAX_CHARS:
            return False
        text = texts[0] if len(texts) == 1 else "".join(texts)
        width = CACHE_SAMPLE_CHARS // 2
        middle = (len(text) - width) // 2
        windows = (text[:width], text[middle : middle + width])
        sample = list(chain.from_iterable(map(self._pretokenizer.split, windows)))
        return sum(map(self._cache.__contains__, sample)) >= CACHE_SAMPLE_HITS * len(sample)

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        """One pre-token -> ids. Raises UnicodeEncodeError on a lone surrogate (handled by the callers)."""
        data = piece.encode("utf-8")
        if self.whole_piece_tokens:
            idx = self.token_ids.get(data)
            if idx is not None:
                return (idx,)  # a whole piece that is a token is that token, as in tiktoken
        self._unreported_bytes += len(data)
        if self._unreported_bytes >= self._report_at:
            self._report_python_bpe()
        if len(data) >= 8 and not piece.isascii() and self._knows_non_ascii():
            # Long non-ASCII pieces (a Chinese sentence is one piece) rarely repeat, but often fall apart
            # into short parts no merge can cross; those repeat, so cache them.
            if self._uncrossable is not False:
                parts = self._split_uncrossable(data, len(piece))
                if len(parts) > 1:
                    return tuple(chain.from_iterable(map(self._part_cache.__getitem__, parts)))
            if _mostly_wide(len(data), len(piece)):
                return self._merge_characters_first(piece)
        return self._merge_to_ids(data)

    def _report_python_bpe(self) -> None:
        """Tell :mod:`tokenizer.fast.compiled_bpe` how much this core merged in Python; take the compiled kernel
        if it is loaded, with this vocabulary's tables (without them, Python BPE stays). Tables still being
        checked on disk are not waited for: the core looks again after ``REPORT_AGAIN_BYTES``."""
        kernel = compiled_bpe.merged_in_python(self._unreported_bytes)
        self._unreported_bytes, self._report_at = 0, compiled_bpe.REPORT_BYTES
        if kernel is not None and self._compiled is None:
            if self._pair_table is None and not self._begin_loading_tables().ready():
                self._report_at = REPORT_AGAIN_BYTES
                return
            pairs = self._batch_table()
            if pairs is not None:
                self._compiled = kernel.CompiledBPE(pairs, self._token_table,
                                                    whole_piece_tokens=self.whole_piece_tokens)
                if self._token_tables:
                    self._token_tables = None  # (made again with the kernel for the array path's BPE)

    def _merge_characters_first(self, piece: str) -> tuple[int, ...]:
        """BPE of a piece mostly of characters of several bytes, started from each character's own merges
        (:mod:`tokenizer.fast.characters_first`): fewer parts than plain BPE's single bytes."""
        token_ids = self.token_ids
        return tuple([token_ids[part] for part in self._characters.merge(piece)])

    def _knows_non_ascii(self) -> bool:
        """Whether the tables for long non-ASCII pieces are built (``_uncrossable``, ``_characters``); they are
        once this core has met ``UNCROSSABLE_AFTER`` such pieces (each scans the vocabulary, which a few pieces,
        say the accented words of an English text, do not repay)."""
        if self._characters is None:
            self._non_ascii_met += 1
            if self._non_ascii_met < UNCROSSABLE_AFTER:
                return False
            from .characters_first import CharactersFirst
            from .uncrossable import pair_tables

            lowest, uncrossable = pair_tables(self.merge_ranks)
            # (the table first: another thread that sees _characters set finds it there)
            self._uncrossable = uncrossable
            self._characters = CharactersFirst(self.merge_ranks, lowest)
        return True

    def _split_uncrossable(self, data: bytes, characters: int) -> list[bytes]:
        """``data`` (``characters`` long as text) cut where no merge can cross
        (:func:`tokenizer.fast.uncrossable.split_uncrossable`); the first ``UNCROSSABLE_TRIAL`` pieces decide
        whether cutting goes on (:class:`_CuttingTrial`)."""
        from .uncrossable import split_uncrossable

        parts = split_uncrossable(data, self._uncrossable)
        trial = self._cutting_trial
        if trial.pieces < UNCROSSABLE_TRIAL and not trial.keeps_cutting(parts, data, characters):
            self._uncrossable = False  # merge the later pieces whole (from their characters, if wide)
        return parts

    def _merge_to_ids(self, data: bytes) -> tuple[int, ...]:
        token_ids = self.token_ids
        return tuple([token_ids[part] for part in bpe.merge(data, self.merge_ranks)])

    def _encode_pieces(self, pieces: list[str]) -> list[int]:
        """The ids of a long text's pre-tokens: one cache lookup each, tried first; the pieces missing are encoded
        together (:meth:`_add_missing`) and put in their places (looked up again, all of them, when they are
        most: a pass in C then beats a Python loop over them)."""
        cache = self._cache
        found = list(map(cache.get, pieces))
        if not all(found):  # a piece's ids are never empty: a falsy entry is a missing piece
            missing = list(compress(count(), map(not_, found)))
            if not self._add_missing(list(map(pieces.__getitem__, missing))):
                half = len(pieces) // 2
                return self._encode_pieces(pieces[:half]) + self._encode_pieces(pieces[half:])
            if 2 * len(missing) > len(pieces):
                found = list(map(cache.__getitem__, pieces))
            else:
                for at in missing:
                    found[at] = cache[pieces[at]]
        return list(chain.from_iterable(found))

    def _encode_through_cache(self, texts: list[str]) -> list[list[int]]:
        try:
            piece_lists = list(map(self._pretokenizer.split, texts))
            if self._add_missing(list(chain.from_iterable(piece_lists))):
                lookup = self._cache.__getitem__
                return [list(chain.from_iterable(map(lookup, pieces))) for pieces in piece_lists]
        except UnicodeEncodeError:
            pass  # a lone surrogate somewhere: each text replaces it in its own text
        return list(map(self._encode_one, texts))

    def _encode_collected(self, text: str) -> list[int]:
        """One long text's ids through the piece cache, its missing pieces collected first (:meth:`_encode_pieces`)."""
        try:
            return self._encode_pieces(self._pretokenizer.split(text))
        except UnicodeEncodeError:  # a lone surrogate: as tiktoken, U+FFFD instead
            return self._encode_collected(replace_surrogates(text))

    def _encode_one_pass(self, text: str) -> list[int]:
        """One short text's ids through the piece cache in one pass, each missing piece encoded on the spot (with
        the compiled kernel: all of them by one call to it)."""
        try:
            pieces = self._pretokenizer.split(text)
            if self._compiled is None:
                return list(chain.from_iterable(map(self._cache.__getitem__, pieces)))
            # With the compiled kernel: every piece looked up, those missing encoded by one call to it, and
            # all looked up again (both passes in C).
            found = list(map(self._cache.get, pieces))
            if not all(found):  # a piece's ids are never empty: a falsy entry is a missing piece
                self._fill_cache(list(set(compress(pieces, map(not_, found)))))
                found = map(self._cache.__getitem__, pieces)
            return list(chain.from_iterable(found))
        except UnicodeEncodeError:
            # A lone surrogate cannot be UTF-8: like tiktoken, replace it with U+FFFD and encode that.
            return self._encode_one_pass(replace_surrogates(text))

    def _add_missing(self, pieces: list[str]) -> bool:
        """Put in the cache every piece of ``pieces`` it lacks, encoded together (:meth:`_fill_cache`); False,
        doing nothing, if they are so many that the cache could not hold them."""
        # Not set(pieces).difference(cache): for a dict subclass that walks the whole cache, on every call.
        new = list(filterfalse(self._cache.__contains__, set(pieces)))
        if len(new) > PIECE_CACHE_LIMIT // 2 and len(new) > 1:
            return False
        self._fill_cache(new)
        return True

    def _fill_cache(self, pieces: list[str]) -> None:
        """Put the ids of ``pieces`` (distinct, none in the cache) in the piece cache: a piece that is a token by
        a look-up, the others by BPE: the compiled kernel's when this core has it, else in one batch
        (:func:`tokenizer.fast.batch_bpe.encode_pieces`) when they hold enough bytes to repay its fixed cost,
        else one by one."""
        cache = self._cache
        if len(cache) + len(pieces) > PIECE_CACHE_LIMIT:
            cache.clear()
        if self._compiled is None:
            self._report_python_bpe()  # (takes the kernel if this process has it by now)
        if len(pieces) < GC_PAUSE_MIN_PIECES:
            self._encode_into_cache(pieces)
            return
        with _garbage_collection_paused():
            self._encode_into_cache(pieces)

    def _encode_into_cache(self, pieces: list[str]) -> None:
        """:meth:`_fill_cache`'s work, without the cache's bound or the collector's pause."""
        cache = self._cache
        data = list(map(str.encode, pieces))  # a lone surrogate raises UnicodeEncodeError: see the callers
        if self._compiled is not None:  # (the whole-piece rule included)
            cache.update(zip(pieces, self._compiled.encode(data)))
            return
        if self.whole_piece_tokens:
            # a whole piece that is a token is that token, as in tiktoken; the others go to BPE
            whole = list(map(self.token_ids.get, data))
            is_token = list(map(is_not, whole, repeat(None)))
            cache.update(zip(compress(pieces, is_token), zip(compress(whole, is_token))))
            needs_bpe = list(map(not_, is_token))
            pieces, data = list(compress(pieces, needs_bpe)), list(compress(data, needs_bpe))
        table = self._batch_table() if sum(map(len, data)) >= BATCH_MIN_BYTES else None
        if table is None:
            for piece in pieces:
                cache[piece]  # noqa: B018 - __missing__ encodes and stores it
            return
        from .batch_bpe import encode_pieces  # NumPy is imported only once a batch is worth it

        cache.update(zip(pieces, encode_pieces(data, table, self._kernel_soon)))

    # ---- long texts: the array path ------------------------------------------------------------------------

    def _encode_long(self, text: str) -> list[int] | None:
        """The ids of ``text`` by array operations (:mod:`tokenizer.fast.array_encode`), or None where this
        vocabulary has no array path (CS336's rule, or no batch BPE tables). The pieces come from the array
        split where the pattern has one, else from the usual split (only their lengths are kept)."""
        if self._token_tables is False or self._pair_table is False or not self.whole_piece_tokens:
            return None
        if self._pair_table is None:
            self._begin_loading_tables()  # the tables' file is checked while the text is split
        import numpy as np

        from .array_split import piece_starts
        from .piece_arrays import code_points

        try:
            points = code_points(text)
        except UnicodeEncodeError:  # a lone surrogate cannot be UTF-8: like tiktoken, encode U+FFFD instead
            text = replace_surrogates(text)
            points = code_points(text)
        starts = piece_starts(points, self.pat_str)
        if starts is None:
            pieces = self._pretokenizer.split(text)
            lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
            if int(lengths.sum()) != len(text):
                # A pattern of one's own may skip text (only what it matches is encoded): its pieces then do
                # not tile the text, and their lengths cannot give where they start. The piece cache takes them.
                return self._encode_pieces(pieces)
            starts = np.cumsum(lengths) - lengths
        tables = self._array_tables()
        if tables is None:
            return None
        return self._encode_split_pieces(text, points, starts, tables)[0].tolist()

    def _encode_joined(self, texts: list[str], between: list[int] | None = None) -> list | None:
        """The ids of each of ``texts`` by one run of the array path over all of them laid end to end (the
        stretches between special tokens, a batch of messages), or None where this vocabulary has no array
        path. Each text is split as it would be alone (:func:`tokenizer.fast.array_split.piece_starts_of_texts`),
        so no piece runs across two; the pieces of all are grouped and encoded together. Given ``between``, one
        list: each text's ids with those ids between them (:meth:`encode_ordinary_joined`)."""
        if self._token_tables is False or self._pair_table is False or not self.whole_piece_tokens:
            return None
        if self._pair_table is None:
            self._begin_loading_tables()  # the tables' file is checked while the texts are split
        import numpy as np

        from .array_split import piece_starts_of_texts
        from .piece_arrays import code_points

        nonempty = list(filter(None, texts))
        if not nonempty:
            return [[] for _ in texts] if between is None else list(between)
        text = "".join(nonempty)
        try:
            points = code_points(text)
        except UnicodeEncodeError:
            # a lone surrogate cannot be UTF-8: like tiktoken, U+FFFD instead; each text alone (two texts' halves
            # of a surrogate pair are two lone surrogates, not one character)
            nonempty = list(map(replace_surrogates, nonempty))
            text = "".join(nonempty)
            points = code_points(text)
        lengths = np.fromiter(map(len, nonempty), dtype=np.int64, count=len(nonempty))
        firsts = np.cumsum(lengths) - lengths
        with _garbage_collection_paused():  # the texts' ends are split into thousands of short-lived lists
            starts = piece_starts_of_texts(text, points, firsts, self.pat_str)
        if starts is None:
            pieces = list(chain.from_iterable(map(self._pretokenizer.split, nonempty)))
            piece_lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
            if int(piece_lengths.sum()) != len(text):
                return None  # a pattern that skips text: its pieces do not tile the texts (see _encode_long)
            starts = np.cumsum(piece_lengths) - piece_lengths
        tables = self._array_tables()
        if tables is None:
            return None
        ids, sizes = self._encode_split_pieces(text, points, starts, tables)
        # where each text's ids begin: before its first piece's (an empty text's: where the next nonempty one's
        # begin), found by the number of nonempty texts before each
        nonempty_firsts = np.append((np.cumsum(sizes) - sizes)[np.searchsorted(starts, firsts)], len(ids))
        empty = np.fromiter(map(not_, texts), dtype=bool, count=len(texts))
        begins = nonempty_firsts[np.cumsum(~empty) - ~empty]
        if between is not None:
            return np.insert(ids, begins[1:], between).tolist()
        every_id = ids.tolist()
        bounds = begins.tolist() + [len(every_id)]
        return list(map(every_id.__getitem__, map(slice, bounds, bounds[1:])))

    def _encode_split_pieces(self, text: str, points, starts, tables: TokenTables):
        """:func:`tokenizer.fast.array_encode.encode_split_pieces`; without the compiled kernel, the text's
        characters are counted toward loading it (:func:`tokenizer.fast.compiled_bpe.encoded_by_arrays`: a long
        job of long texts or batches repays it; the core takes it at its next call, in :meth:`_array_tables`, or
        batch BPE in the middle of this one, through :meth:`_kernel_soon`)."""
        from .array_encode import encode_split_pieces

        if tables.merge is not None:
            return encode_split_pieces(text, points, starts, tables)
        compiled_bpe.encoded_by_arrays(len(text))
        return encode_split_pieces(text, points, starts, tables, self._kernel_soon)

    def _kernel_soon(self, parts_merged_alone: int):
        """Batch BPE's question before and while it merges a segment one merge at a time, in Python
        (:data:`tokenizer.fast.batch_bpe.KernelSoon`): the parts it merged so are counted as bytes merged by
        ``bpe.merge`` (a few µs each, not a character of the NumPy rounds, a 64th of one), and the compiled
        kernel's ``merge_from`` is the answer once this process has it (None before): it carries on from the
        parts batch BPE has reached. A text of megabytes with no safe cut is one piece and one segment: asked
        only at the start of the call, it stayed in Python throughout."""
        if self._compiled is None:  # (a report costs microseconds; a stalled segment, milliseconds or more)
            self._unreported_bytes += parts_merged_alone
            self._report_python_bpe()
        return self._compiled.merge_from if self._compiled is not None else None

    def _array_tables(self) -> TokenTables | None:
        """The tables of the array path, built on first need; None if there is none for this vocabulary."""
        if self._compiled is None and self.whole_piece_tokens and self._batch_table() is not None:
            self._report_python_bpe()  # (the tables loaded: takes the kernel for the BPE if this process has it)
        if self._token_tables is None:
            from .array_encode import TokenTables

            # Without the whole-piece rule (CS336's tokenizer) every piece would go through BPE: there the
            # piece cache, which remembers whole pieces, was measured faster; so only tiktoken's rule takes it.
            pairs = self._batch_table() if self.whole_piece_tokens else None
            merge = self._compiled.encode_blob if self._compiled is not None else None
            self._token_tables = TokenTables(self._token_table, pairs, merge) if pairs is not None else False
        return self._token_tables or None

    def _batch_table(self) -> PairTable | None:
        """The pair table of batch BPE, loaded or built on first need; None if this vocabulary cannot have one."""
        if self._pair_table is None:
            tables = self._begin_loading_tables()()
            self._pair_table, self._token_table = tables or (False, None)
            self._tables_soon = None
        return self._pair_table or None

    def _begin_loading_tables(self) -> Callable[[], tuple[PairTable, PieceTable] | None]:
        """Begin loading the tables of batch BPE (:func:`tokenizer.fast.table_cache.load_tables_soon`: their
        file is checked in a thread meanwhile), unless begun already; the function returned finishes it."""
        if self._tables_soon is None:
            from .table_cache import load_tables_soon

            self._tables_soon = load_tables_soon(self.merge_ranks, self.token_ids, source=self.vocabulary_source)
        return self._tables_soon

    @property
    def uses_compiled_bpe(self) -> bool:
        """Whether this core's new pieces go to the compiled BPE kernel (:mod:`tokenizer.fast.compiled_bpe`)."""
        return self._compiled is not None

    def batch_table(self) -> PairTable | None:
        """The pair table of batch BPE (loaded or built now if not yet), for code that runs batch BPE itself;
        None if this vocabulary cannot have one."""
        return self._batch_table()


def _join_bytes(bytes_by_id: list[bytes | None], ids: Sequence[int], count: int) -> bytes:
    """``b"".join(bytes_by_id[i] for i in ids)``, the look-ups done by one ``itemgetter`` call (a chunk of
    :meth:`FastCore.decode_bytes`)."""
    if count > 1:
        return b"".join(itemgetter(*ids)(bytes_by_id))
    return b"".join(map(bytes_by_id.__getitem__, ids))  # (of one id, itemgetter gives the item, not a tuple)


@contextmanager
def _garbage_collection_paused() -> Iterator[None]:
    """Pause Python's cycle collector, then restore it as it was. A cache fill makes tens of thousands of
    tuples, all kept (the cache holds them); each collection they set off would walk the whole cache again,
    to free nothing, since tuples of ints make no cycles. The lists of pieces a call's texts' ends are split into
    make no cycles either."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
