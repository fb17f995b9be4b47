"""Parity: check that this tokenizer gives exactly another one's ids, and show where and why it does not.

The other side is tiktoken (the oracle), Hugging Face ``tokenizers`` reading the same ``tokenizer.json`` (the
oracle for other families), another tokenizer (a saved folder), or a ``.bin`` file of ids made by any tool.
Both sides encode the same text; while their ids agree nothing else happens, so a check runs at the speed of the
two encoders. Where they differ, the difference is shown in the unit BPE works in: the
*pre-token*. BPE never merges across a pre-token boundary, so each of our ids lies inside one of our
pre-tokens (the pieces :func:`tokenizer.pretokenize.compile_pattern` cuts the text into), and a difference is
reported as the pre-token(s) holding it, with both sides' ids and the bytes of each id:

>>> from tokenizer import Encoding
>>> byte_vocab = {i: bytes([i]) for i in range(256)}
>>> ours = Encoding.from_vocab_merges(byte_vocab | {256: b"ab", 257: b"abc"}, [(b"a", b"b"), (b"ab", b"c")])
>>> theirs = Encoding.from_vocab_merges(byte_vocab | {256: b"ab"}, [(b"a", b"b")])
>>> report = check_texts(["abc, xyz abc"], ours, theirs, other_name="theirs")
>>> report.mismatches, report.tokens, report.other_tokens
(2, 8, 10)
>>> m = report.shown[0]
>>> m.offset, m.pretokens, m.ours, m.theirs, m.their_pieces
(0, ['abc'], [257], [256, 99], [b'ab', b'c'])

How a difference is found: the id sequences are walked together; where they part, they are back in step at the
first place where both are at an id boundary, if their ids spell the same bytes up to there (the same text
split differently: the usual case between two tokenizers); else after the few ids replaced, inserted or
dropped (a damaged ``.bin``) after which the most ids agree, each run of edits there (the fewest that explain
the ids) a difference of its own, an id equal between two edits shown equal. The difference is then widened to
whole pre-tokens of our split (edits inside one pre-token are one difference).

Inputs are found and read by :mod:`tokenizer.jobs.inputs`, as every file command finds and reads them. A text
is read in chunks cut at safe boundaries (:func:`tokenizer.jobs.dataset.iter_chunks`, the rule ``encode-file``
uses), so memory stays bounded however large a file is; a ``.bin`` is read a chunk's worth of ids at a time.
``.jsonl``, ``.jsonl.gz`` and ``.parquet`` inputs are checked record by record, each document on its own.

What this module does not do: fix anything, or judge which side is right (tiktoken is the reference by
convention only). It compares ids, not decoding. A ``.bin`` is checked against *our* encoding of the
inputs, so a difference there may be in the ``.bin`` or in us. Differences are found only where ids differ:
two tokenizers that agree on a text agree, whatever their vocabularies.
"""

from __future__ import annotations

import bisect
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from . import dataset
from .id_files import IdsFile
from ..encoding import Encoding
from ..extras import install_hint
from ..fast.stdlib_patterns import compile_fast
from ..pretokenize import special_token_regex
from ..registry import ENDOFTEXT, is_registered
from ..special_advice import placed
from ..vocab_files import gpt2_str_to_token
from .inputs import (decode_utf8, input_format, input_name, input_size, is_stdin, open_input, read_records,
                     record_place)
from .manifest import MANIFEST_NAME, another_encoding, encoding_fingerprint, written_settings

DEFAULT_ENCODINGS = ("gpt2", "cl100k_base", "o200k_base")
# encode()'s special-token arguments for a document of a .jsonl or .parquet as encode-file writes it:
# encode_ordinary(text), whose special-token text is plain text (the <|endoftext|> after it is added, not read)
DOCUMENT_SPECIALS = (frozenset(), ())
SYNC_IDS = 4  # ids that must agree after a replaced, inserted or dropped id for the sides to be back in step
LOOK_AHEAD_IDS = 64  # ids compared to choose between several ways of getting back in step
MAX_SHIFT = 8  # the most ids replaced, inserted or dropped at one place that a check steps over
BYTE_SYNC_IDS = 100_000  # how far to follow the same text split differently (a pre-token may be long)
SHOWN_IDS = 64  # per side, per mismatch: a longer difference is shown cut, marked ``truncated``
SHOWN_PRETOKENS = 16
CONTEXT_IDS = 8  # equal ids shown before a difference deep inside a long pre-token
SHOWN_CHARS = 400  # of the pre-tokens' text and of their UTF-8, per difference in the text report


@dataclass
class Mismatch:
    """One place where the two sides' ids differ: the pre-token(s) of our split that hold the difference."""

    offset: int  # byte offset in the input file (in the record's text, for a .jsonl record or a fuzz string)
    line: int  # 1-based line of that byte (within the record, for a record)
    record: int | None  # the record's line (.jsonl) or row (.parquet), or the fuzz string's number, from 1;
    # None for a text file
    pretokens: list[str]  # our pre-tokens covering the difference, usually one; for a difference deep inside a
    # long pre-token, the text of the ids shown, which start just before it (and ``truncated``)
    ours: list[int]
    theirs: list[int]
    our_pieces: list[bytes]  # the bytes of each id
    their_pieces: list[bytes | None]  # None: an id the vocabulary does not have (a .bin check)
    truncated: bool = False  # more pre-tokens or ids than are kept here (SHOWN_PRETOKENS, SHOWN_IDS)
    index: int | None = None  # a .bin check: the .bin's array index (from 0) of the first of ``theirs``

    @property
    def text(self) -> str:
        return "".join(self.pretokens)

    def to_dict(self) -> dict:
        return {
            "offset": self.offset, "line": self.line, "record": self.record,
            "pretokens": self.pretokens, "utf8": self.text.encode("utf-8").hex(" "),
            "ours": _side_dict(self.ours, self.our_pieces),
            "theirs": _side_dict(self.theirs, self.their_pieces),
            "truncated": self.truncated, "index": self.index,
        }


def _side_dict(ids: list[int], pieces: list[bytes | None]) -> dict:
    # pieces: the text of each id (U+FFFD for part of a character), pieces_hex: its exact bytes; null: no such id
    return {
        "ids": ids,
        "pieces": [None if p is None else p.decode("utf-8", errors="replace") for p in pieces],
        "pieces_hex": [None if p is None else p.hex(" ") for p in pieces],
    }


@dataclass
class ParityReport:
    """One input checked with one encoding against the other side."""

    input: str
    encoding: str
    against: str
    bytes: int = 0  # of the input read, as count and stats count them (a string's: its UTF-8)
    tokens: int = 0  # ours
    other_tokens: int = 0
    mismatches: int = 0  # places that differ
    mismatching_pretokens: int = 0
    shown: list[Mismatch] = field(default_factory=list)  # the first max_report places
    seconds: float = 0.0  # encoding time, ours
    other_seconds: float | None = 0.0  # theirs; None when the other side is a file of ids (nothing to time)
    note: str = ""  # what may explain the differences (a .bin read as the wrong id type)

    @property
    def identical(self) -> bool:
        return self.mismatches == 0 and self.tokens == self.other_tokens

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / max(self.seconds, 1e-9)

    @property
    def other_mb_per_s(self) -> float | None:
        return None if self.other_seconds is None else self.bytes / 1e6 / max(self.other_seconds, 1e-9)

    @property
    def speed_ratio(self) -> float | None:
        """Our speed over theirs (2.0: ours is twice as fast)."""
        return None if self.other_seconds is None else max(self.other_seconds, 1e-9) / max(self.seconds, 1e-9)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shown"] = [m.to_dict() for m in self.shown]
        d.update(identical=self.identical, mb_per_s=self.mb_per_s, other_mb_per_s=self.other_mb_per_s,
                 speed_ratio=self.speed_ratio)
        return d


# ---- the other side ---------------------------------------------------------------------------------------


def tiktoken_counterpart(enc: Encoding):
    """tiktoken's encoding of ``enc``'s name, for a registered encoding that tiktoken has; for a saved or trained
    tokenizer (whatever its name), or one whose files tiktoken cannot fetch (offline, nothing in its cache),
    tiktoken's BPE engine loaded with ``enc``'s tables (read from this project's checksummed files), the label
    saying so. Returns ``(encoding, label)``.

    tiktoken is optional: ``ImportError`` with what to do when it is missing. ``ValueError`` for a tokenizer.json
    that normalizes or splits text in more steps than one pattern (:attr:`Encoding.text_steps`): tiktoken's
    engine would differ wherever those steps change the text (NFC, DeepSeek V3's three splits).
    """
    try:
        import tiktoken
    except ImportError:
        raise ImportError(
            f"parity against tiktoken needs tiktoken, which is not installed: {install_hint('parity')} (the "
            "version whose ids this project matches); or compare with another saved tokenizer (--against DIR) or "
            "check a dataset of ids (--ids FILE.bin)"
        ) from None
    offline = ""
    # a saved tokenizer bears its folder's name, which may be one of tiktoken's (GPT-2's tables in cl100k_base/):
    # only the registry's own encoding of a name is checked against tiktoken's encoding of it
    if is_registered(enc) and enc.name in tiktoken.list_encoding_names():
        try:
            return tiktoken.get_encoding(enc.name), f"tiktoken {enc.name}"
        except Exception:  # no network, and tiktoken's cache lacks the file: its engine on our checksummed tables
            offline = " (tiktoken could not fetch its own files: offline?)"
    if enc.text_steps is not None:  # tiktoken's engine cuts text with one pattern and nothing else
        raise ValueError(
            f"{enc.name}: its tokenizer.json runs steps before BPE (a normalizer, several splits or added tokens) "
            "that tiktoken's engine cannot run, so the two would differ where this project does not: compare "
            "with HF tokenizers reading the same file (--against hf)"
        )
    ranks = {token: enc.encode_single_token(token) for token in enc.token_byte_values()}
    merged = list(enc.merge_ranks)
    if sorted(merged, key=ranks.__getitem__) != sorted(merged, key=enc.merge_ranks.__getitem__):
        raise ValueError(
            f"{enc.name}: token ids are not in merge order, which tiktoken's engine needs (its ids are its merge "
            "priorities); compare with another saved tokenizer instead (--against DIR)"
        )
    engine = tiktoken.Encoding(enc.name, pat_str=enc.pat_str, mergeable_ranks=ranks,
                               special_tokens=enc.special_tokens)
    return engine, f"tiktoken engine with {enc.name}'s tables{offline}"


class HFTokenizersSide:
    """Hugging Face ``tokenizers`` reading a ``tokenizer.json``, with the two methods of tiktoken's that a check
    calls, mapped as this project maps that file onto tiktoken's API:

    * ``encode(text, allowed_special="all")`` is HF's ``encode(text, add_special_tokens=False)``: every added
      token in the text is its id; with no special token allowed, HF's with ``encode_special_tokens=True``
      (special added tokens are text); with some allowed, those are cut out of the text and given their ids, the
      text between encoded as with none. ``disallowed_special`` is ours to enforce: our side encodes first.
    * ``decode_single_token_bytes(id)``: an added token's text in UTF-8, else the vocabulary entry read through
      GPT-2's byte<->unicode map (the byte-level families; a ``ValueError`` for any other).

    A lone surrogate, which a Rust string cannot hold, is read as U+FFFD, as tiktoken and this project read it.
    """

    def __init__(self, tokenizer):
        # a file's truncation and padding cut and fill HF's ids to a length; the text's ids are compared, which
        # tiktoken's API (and this project's) never cut or fill
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self.added = {token.content: idx for idx, token in tokenizer.get_added_tokens_decoder().items()}
        self.added_ids = set(self.added.values())

    def encode(self, text: str, *, allowed_special="all", disallowed_special="all") -> list[int]:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        if allowed_special == "all":
            return self._encode(text, specials_as_text=False)
        if not allowed_special:
            return self._encode(text, specials_as_text=True)
        ids, start = [], 0
        for m in special_token_regex(frozenset(allowed_special)).finditer(text):
            ids += self._encode(text[start : m.start()], specials_as_text=True)
            ids.append(self.added[m.group()])
            start = m.end()
        return ids + self._encode(text[start:], specials_as_text=True)

    def _encode(self, text: str, *, specials_as_text: bool) -> list[int]:
        self.tokenizer.encode_special_tokens = specials_as_text
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode_single_token_bytes(self, token: int) -> bytes:
        text = self.tokenizer.id_to_token(token)
        if text is None:
            raise KeyError(token)
        return text.encode("utf-8") if token in self.added_ids else gpt2_str_to_token(text)


def hf_counterpart(tokenizer_json) -> tuple[HFTokenizersSide, str]:
    """HF ``tokenizers`` reading ``tokenizer_json`` (:class:`HFTokenizersSide`), and its label.

    ``tokenizers`` is optional: ``ImportError`` with what to install when it is missing; a file it refuses is a
    ``ValueError`` naming the file.
    """
    try:
        import tokenizers
    except ImportError:
        raise ImportError("parity against Hugging Face tokenizers needs tokenizers, which is not installed: "
                          "pip install tokenizers") from None
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    except Exception as e:  # tokenizers raises its own Exception for a file it cannot read
        raise ValueError(f"{tokenizer_json}: HF tokenizers cannot read it: {e}") from None
    return HFTokenizersSide(tokenizer), f"HF tokenizers {tokenizers.__version__}"


# ---- inputs -------------------------------------------------------------------------------------------------


def _text_chunks(path, enc: Encoding, split_at, errors: str, chunk_bytes: int, disallowed_special=()):
    """(text, byte offset, line, the bytes read) of each chunk of a text input, cut where ``encode-file`` cuts
    it (never inside a text ``disallowed_special`` names)."""
    offset, line = 0, 1
    whole = dataset.kept_whole(enc, disallowed_special)
    with open_input(path) as f:
        chunks = dataset.iter_chunks(f, whole, chunk_bytes, pattern=enc.pat_str, cut_before=split_at)
        for data in chunks:
            yield decode_utf8(data, offset, path, errors), offset, line, data
            offset += len(data)
            line += data.count(b"\n")


# ---- checks -------------------------------------------------------------------------------------------------


def check_file(
    path,
    enc: Encoding,
    other,
    *,
    other_name: str = "tiktoken",
    allowed_special="all",
    disallowed_special="all",
    errors: str = "strict",
    text_field: str = "text",
    max_report: int = 10,
    chunk_bytes: int = dataset.CHUNK_BYTES,
    progress: bool = False,
    as_written: bool = False,
) -> ParityReport:
    """Encode a text input (in chunks; ``"-"``: standard input) or each record of a ``.jsonl``, ``.jsonl.gz`` or
    ``.parquet`` file (its ``text_field``) with ``enc``
    and with ``other`` (anything with tiktoken's ``encode`` and ``decode_single_token_bytes``: a
    ``tiktoken.Encoding``, an :class:`Encoding`), and report where their ids differ.

    ``allowed_special`` and ``disallowed_special`` go to both sides' ``encode``; ``errors`` is
    :func:`tokenizer.jobs.inputs.decode_utf8`'s. The first ``max_report`` differences are kept in ``shown``.
    ``as_written``: encode as ``encode-file`` does (the ids :func:`check_ids` checks): a record's text with
    ``encode_ordinary``, its special-token text plain text, whatever the rule given (which is a text file's).
    """
    if not is_stdin(path) and not Path(path).is_file():
        raise FileNotFoundError(f"input file not found: {path}")
    name = input_name(path)
    report = ParityReport(name, enc.name, other_name)
    if as_written and input_format(path) != "text":
        allowed_special, disallowed_special = DOCUMENT_SPECIALS
    rule = _Rule(enc, allowed_special, disallowed_special)
    size = input_size(path)
    with _bar(size, f"{Path(name).name} ({enc.name})", progress) as bar:
        if input_format(path) != "text":
            shown = 0
            for record in read_records(path, text_field, errors=errors):
                _check_text(report, record.text, enc, other, rule, (0, 1, record.number), max_report,
                            where=record_place(path, record.number), n_bytes=record.bytes_read)
                bar.update(record.done - shown)
                shown = record.done
        else:
            for text, offset, line, data in _text_chunks(path, enc, rule.special_ids_for, errors, chunk_bytes,
                                                         disallowed_special=rule.disallowed):
                _check_text(report, text, enc, other, rule, (offset, line, None), max_report, where=name,
                            source=data, n_bytes=len(data))
                bar.update(len(data))
    return report


def check_texts(
    texts: Iterable[str],
    enc: Encoding,
    other,
    *,
    other_name: str = "tiktoken",
    input_name: str = "texts",
    allowed_special="all",
    disallowed_special="all",
    max_report: int = 10,
    progress: bool = False,
) -> ParityReport:
    """:func:`check_file` for strings: each one is encoded on its own, and is a record (numbered from 1)."""
    report = ParityReport(input_name, enc.name, other_name)
    rule = _Rule(enc, allowed_special, disallowed_special)
    texts = list(texts) if progress else texts
    with _bar(len(texts) if progress else 0, f"{input_name} ({enc.name})", progress, unit="texts") as bar:
        for number, text in enumerate(texts, start=1):
            _check_text(report, text, enc, other, rule, (0, 1, number), max_report, where=f"{input_name} {number}")
            bar.update(1)
    return report


def check_ids(
    paths: Sequence,
    ids_path,
    enc: Encoding,
    *,
    dtype=None,
    allowed_special="all",
    disallowed_special="all",
    errors: str | None = None,
    text_field: str = "text",
    max_report: int = 10,
    chunk_bytes: int = dataset.CHUNK_BYTES,
    progress: bool = False,
) -> list[ParityReport]:
    """Check a ``.bin`` of ids (nanoGPT's layout: flat little-endian ``dtype``, by default
    :func:`tokenizer.jobs.dataset.id_dtype` of the vocabulary) against ``enc``'s encoding of the inputs
    ``paths``, one after another, as ``encode-file`` writes each: a text file encoded whole (with the special-token
    rule given), each document of a ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` file (its ``text_field``) as
    ``encode_ordinary(text) + [eot_token]`` (nanoGPT's own layout too). One report per input; ids left over at
    the end of the ``.bin`` are a mismatch in the last one. A ``.bin`` that ``encode-dataset``'s manifest lists
    is refused (``ValueError``, saying what to pass) when ``enc``, ``dtype``, ``text_field``, ``errors`` or (for a
    text) the special-token rule is not what the manifest says it was written with. ``errors`` (how invalid UTF-8
    in the inputs is read, :func:`tokenizer.jobs.inputs.decode_utf8`'s) defaults to the manifest's, else
    ``"strict"``.
    """
    ids_path = Path(ids_path)
    if ids_path.is_dir():
        raise IsADirectoryError(f"{ids_path} is a folder; name the .bin file of ids")
    if not ids_path.exists():
        raise FileNotFoundError(f"ids file not found: {ids_path}")
    if not ids_path.is_file():  # a device or a pipe (--ids <(zcat ids.bin.gz)): a window is read again after a move
        raise ValueError(f"{ids_path} is not a regular file (a device or a pipe?): the ids are read back and forth; "
                         "save them to a file and name it")
    dtype = dataset.id_dtype(enc.n_vocab) if dtype is None else np.dtype(dtype).newbyteorder("<")
    rule = _Rule(enc, allowed_special, disallowed_special)
    for path in paths:
        if not is_stdin(path) and not Path(path).is_file():
            raise FileNotFoundError(f"input file not found: {path}")
        if not is_stdin(path) and ids_path.samefile(path):  # its text read as ids: a flood of differences
            raise ValueError(f"{ids_path} is the input {input_name(path)} itself: name the .bin file of its ids "
                             "(encode-file writes INPUT.bin)")
        dataset.check_documents_can_end(enc, path)
    _check_as_written(ids_path, enc, dtype, text_field, paths, rule=(allowed_special, disallowed_special),
                      errors=errors)
    errors = errors or written_errors(written_settings(ids_path)) or "strict"
    reports = [ParityReport(input_name(path), enc.name, str(ids_path), other_seconds=None) for path in paths]
    sizes = [input_size(path) for path in paths]
    ended = False  # the .bin ended before our ids did
    ends = [(0, 1, None)] * len(paths)  # where each input ends (offset, line, record): ids left over are shown there
    pieces = ((k, piece) for k, (path, report) in enumerate(zip(paths, reports)) for piece in _ids_as_written(
        path, enc, rule, report, errors=errors, text_field=text_field, chunk_bytes=chunk_bytes))
    total = None if None in sizes else sum(sizes)
    with IdsFile(ids_path, dtype) as ids_file, _bar(total, f"{ids_path.name} ({enc.name})", progress) as bar:
        # each piece is compared with the ids that follow it in view, the next piece's: an id dropped (or one
        # inserted before it) at a piece's end is then told from one replaced, not found again in the next piece
        for (k, piece), following in _with_next(pieces):
            report, ours = piece.report, piece.ours
            ends[k] = piece.end
            report.bytes += piece.n_bytes
            report.tokens += len(ours)
            ended = ended or ids_file.left < len(ours)
            after = [] if following is None else following[1].ours[:LOOK_AHEAD_IDS]
            theirs = ids_file.peek(len(ours) + MAX_SHIFT + len(after))
            if theirs[: len(ours)] == ours:
                used = len(ours)
            else:
                used = _explain(report, enc, piece.rule, piece.text, ours, theirs, _bytes_or_none(enc),
                                complete=False, base=piece.base, max_report=max_report, ids_at=ids_file.pos,
                                after=after, source=piece.source)
            ids_file.advance(used)
            report.other_tokens += used
            bar.update(piece.n_read)
        if reports and ids_file.left:
            _extra_ids(reports[-1], ends[-1], enc, ids_file, max_report)
    if reports and not all(r.identical for r in reports):
        n_ours = sum(r.tokens for r in reports)
        reports[-1].note = (_dtype_advice(ids_path, dtype, ids_file.total, n_ours)
                            or _vocabulary_advice(ids_path, dtype, ids_file.total, enc))
        if not reports[-1].note and ended and n_ours - ids_file.total > MAX_SHIFT:  # more than a few ids dropped
            reports[-1].note = (f"{ids_path} ends at index {ids_file.total:,}, {n_ours - ids_file.total:,} ids short "
                                f"of the {n_ours:,} of the text: was it cut short (a copy or a write that did not "
                                "finish)?")
    return reports


class _Piece(NamedTuple):
    """A piece of an input as encode-file writes it, and what a difference in its ids needs."""

    report: ParityReport  # of its input
    text: str
    source: bytes | None  # the file's bytes that ``text`` was read from (a text file), where places are counted
    ours: list[int]  # its ids
    rule: _Rule  # the special-token rule they were encoded with
    base: tuple  # where it starts: (byte offset, line, record)
    end: tuple  # where it ends, the same way
    n_bytes: int  # of the input that the text was read from (the bytes figures count)
    n_read: int  # bytes of the file read


def _ids_as_written(path, enc: Encoding, rule: _Rule, report: ParityReport, *, errors, text_field, chunk_bytes):
    """Our ids of each piece of an input, laid out as encode-file writes them, with what a difference there
    needs (:class:`_Piece`)."""
    if input_format(path) == "text":
        name = input_name(path)
        for text, offset, line, data in _text_chunks(path, enc, rule.special_ids_for, errors, chunk_bytes,
                                                     disallowed_special=rule.disallowed):
            ours = rule.encode(enc, text, where=name, report=report)
            end = (offset + len(data), line + text.count("\n"), None)
            # the bytes read, as check_file (and count, stats) counts them: an invalid byte read as U+FFFD is 1
            yield _Piece(report, text, data, ours, rule, (offset, line, None), end, len(data), len(data))
        return
    # a document's special-token text is plain text (DOCUMENT_SPECIALS); the <|endoftext|> after it is the one
    # special token, split at as such where a difference is widened to pre-tokens
    documents = _Rule(enc, {ENDOFTEXT}, ())
    eot, read = enc.eot_token, 0
    for record in read_records(path, text_field, errors=errors):
        start = time.perf_counter()
        ours = enc.encode_ordinary(record.text) + [eot]
        report.seconds += time.perf_counter() - start
        # (where a difference is: a place in the text, as a record's places are counted)
        end = (len(record.text.encode("utf-8", "surrogatepass")), record.text.count("\n") + 1, record.number)
        yield _Piece(report, record.text, None, ours, documents, (0, 1, record.number), end, record.bytes_read,
                     record.done - read)
        read = record.done


def written_rule(settings: dict | None) -> tuple[object, object] | None:
    """The ``allowed_special`` and ``disallowed_special`` that the text shards of an ``encode-dataset`` manifest's
    ``settings`` (:func:`tokenizer.jobs.manifest.written_settings`) were encoded with; None without one."""
    if not settings or not isinstance(settings.get("allowed_special"), str) \
            or not isinstance(settings.get("disallowed_special"), str):
        return None

    def spelled(value: str, none):
        if value in ("all", "none"):
            return "all" if value == "all" else none
        return {token for token in value.split(",") if token}
    return spelled(settings["allowed_special"], set()), spelled(settings["disallowed_special"], ())


def written_errors(settings: dict | None) -> str | None:
    """How the inputs of an ``encode-dataset`` manifest's ``settings`` were read where they were not UTF-8
    (``"strict"`` or ``"replace"``); None without a manifest, or one that says neither."""
    errors = settings.get("errors") if settings else None
    return errors if errors in ("strict", "replace") else None


def _check_as_written(ids_path: Path, enc: Encoding, dtype: np.dtype, text_field: str, paths,
                      rule: tuple[object, object] | None = None, errors: str | None = None) -> None:
    """A ``ValueError`` saying what to pass when ``encode-dataset``'s manifest beside ``ids_path`` says it was
    written otherwise than it is about to be read: every id would differ, for a reason the check cannot see."""
    written = written_settings(ids_path)
    if written is None:
        return
    said = f"{ids_path} was written"
    where = f"(says {ids_path.parent / MANIFEST_NAME})"
    if written.get("encoding_sha256") not in (None, encoding_fingerprint(enc)):
        if written.get("encoding") == enc.name:
            raise ValueError(f"{said} with {another_encoding(enc)} {where}: pass the "
                             "tokenizer it was written with, or encode the input again with this one")
        raise ValueError(f"{said} with the encoding {written.get('encoding')!r}, not {enc.name!r} {where}: pass "
                         f"--encoding {written.get('encoding')} (or the saved tokenizer of that name)")
    if written.get("dtype") not in (None, dtype.name):
        raise ValueError(f"{said} as {written['dtype']} ids, not {dtype.name} {where}: pass --dtype {written['dtype']}")
    documents = any(input_format(path) != "text" for path in paths)
    if documents and written.get("text_field") not in (None, text_field):
        raise ValueError(f"{said} from each document's {written['text_field']!r}, not {text_field!r} {where}: pass "
                         f"--text_field {written['text_field']}")
    recorded_errors = written_errors(written)
    if errors is not None and recorded_errors not in (None, errors):  # the bytes not UTF-8 read another way
        raise ValueError(f"{said} from inputs read with --errors {recorded_errors}, not --errors {errors} "
                         f"{where}: pass --errors {recorded_errors} (or leave it out)")
    recorded = written_rule(written)
    texts = any(input_format(path) == "text" for path in paths)
    if texts and rule is not None and recorded is not None:
        given, wanted = (enc.special_token_sets(allowed_special=a, disallowed_special=d) for a, d in (rule, recorded))
        if given != wanted:  # the same special tokens made ids and refused: written as they are about to be read
            raise ValueError(f"{said} with the special-token rule --allowed_special {written['allowed_special']} "
                             f"--disallowed_special {written['disallowed_special']} {where}, which its text "
                             f"inputs are not about to be encoded with: pass those flags")


def _with_next(items: Iterable) -> Iterator[tuple]:
    """Each item with the one after it (None after the last)."""
    iterator = iter(items)
    current = next(iterator, _NOTHING)
    while current is not _NOTHING:
        following = next(iterator, _NOTHING)
        yield current, None if following is _NOTHING else following
        current = following


_NOTHING = object()


def _dtype_advice(ids_path, dtype: np.dtype, n_ids: int, n_ours: int) -> str:
    """Why every id may differ: a .bin read as the other id type holds exactly as many ids as our encoding."""
    other = np.dtype("<u4") if dtype.itemsize == 2 else np.dtype("<u2")
    if n_ours == 0 or n_ids * dtype.itemsize != n_ours * other.itemsize:
        return ""
    return (f"read as {other.name}, {ids_path} holds exactly as many ids as the text's {n_ours:,}: was it written "
            f"as {other.name}? pass --dtype {other.name}")


def _vocabulary_advice(ids_path, dtype: np.dtype, n_ids: int, enc: Encoding) -> str:
    """Why many ids may differ: ids past the end of our vocabulary, more than a damaged .bin would hold, are a
    .bin of another encoding (cl100k_base's ids checked as gpt2's)."""
    if n_ids == 0:
        return ""
    ids = np.memmap(ids_path, dtype=dtype, mode="r")
    block = 1 << 24  # ids compared at once: memory stays bounded however large the .bin
    past = sum(int((ids[start:start + block] > enc.max_token_value).sum()) for start in range(0, n_ids, block))
    if past <= MAX_SHIFT or past * 100 < n_ids:
        return ""
    return (f"{past:,} of the {n_ids:,} ids of {ids_path} are past {enc.name}'s last id, {enc.max_token_value:,}: was "
            "it written with another encoding? pass --encoding with that one")


def fuzz_texts(n: int, seed: int = 0) -> Iterator[str]:
    """``n`` strings of the kinds the parity tests use (mixed scripts, whitespace runs, contractions in any case,
    lone and paired surrogates, special tokens and their fragments, any code point), the same for the same seed.

    >>> list(fuzz_texts(3, seed=1)) == list(fuzz_texts(3, seed=1))
    True
    """
    rng = random.Random(seed)
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 25)):
            kind = rng.random()
            if kind < 0.5:
                parts.append(rng.choice(FUZZ_FRAGMENTS))
            elif kind < 0.7:
                parts.append(chr(rng.randint(0, sys.maxunicode)))  # any code point, surrogates included
            else:
                lo, hi = rng.choice(FUZZ_SCRIPTS)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 8))))
        yield "".join(parts)


# Pieces that stress the patterns: whitespace runs, \r\n, contractions in any case, special-token fragments.
FUZZ_FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u3000",
    " \n ", "\t \n", "'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'lL",
    "'d", "'D", "'", "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|", "|>", "<|endof", "text|>",
    "endoftext", "a", "Hello", "HELLO", "camelCase", "x1", "123", "12345", "١٢٣", "½", "é", "e\u0301", "中文",
    "日本語", "Привет", "😀", "\U0001f468\u200d\U0001f469", "\ud800", "\udfff", "\ud83d\ude00", "\x00", "\x1c",
    "\x7f", "...", "!!", "/", "//", "$", "_", "ſ", "K",
]
# Code point ranges for runs of one script: ASCII, Latin-1, Greek and Cyrillic, Arabic, Devanagari, CJK,
# Hangul, combining marks, spaces and separators, emoji.
FUZZ_SCRIPTS = [
    (0x20, 0x7E), (0xA0, 0xFF), (0x370, 0x4FF), (0x600, 0x6FF), (0x900, 0x97F), (0x4E00, 0x4FFF),
    (0xAC00, 0xAD00), (0x300, 0x36F), (0x2000, 0x200D), (0x1F300, 0x1F64F),
]


# ---- comparing one text -------------------------------------------------------------------------------------


class _Rule:
    """The special-token arguments of both sides' ``encode``, and what our split makes of special tokens."""

    def __init__(self, enc: Encoding, allowed_special, disallowed_special):
        self.allowed, self.disallowed = allowed_special, disallowed_special
        specials = enc.special_tokens_set
        # the special tokens encode() turns into their ids (and splits the text at)
        self.special_ids_for = specials if allowed_special == "all" else set(allowed_special) & specials

    def encode(self, encoder, text: str, *, where: str, report: ParityReport, ours: bool = True) -> list[int]:
        start = time.perf_counter()
        try:
            ids = encoder.encode(text, allowed_special=self.allowed, disallowed_special=self.disallowed)
        except ValueError as e:  # a refused special token's refusal kept on the error, said to be at where
            raise placed(e, where) from None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # the other side failing (tiktoken's Rust code panics on some inputs)
            if ours:
                raise
            raise ValueError(f"{where}: {report.against} failed: {type(e).__name__}: {e}") from None
        seconds = time.perf_counter() - start
        if ours:
            report.seconds += seconds
        else:
            report.other_seconds += seconds
        return ids


def pretokens(enc: Encoding, text: str, special_tokens: Iterable[str] = ()) -> list[str]:
    """Our split of ``text``, the pieces ``enc.encode`` encodes one by one: each of ``special_tokens`` (the ones
    encoded as their ids) whole, the text between them cut by the pattern (for a ``tokenizer.json`` with more
    steps, :attr:`Encoding.text_steps`: normalized, cut at its added tokens, which are pieces too, then split).

    >>> from tokenizer import get_encoding
    >>> pretokens(get_encoding("gpt2"), "Hi<|endoftext|>it's", {"<|endoftext|>"})
    ['Hi', '<|endoftext|>', 'it', "'s"]
    """
    split = _splitter(enc)
    if not special_tokens:
        return split(text)
    pieces, start = [], 0
    for m in special_token_regex(frozenset(special_tokens)).finditer(text):
        pieces += split(text[start : m.start()])
        pieces.append(m.group())
        start = m.end()
    return pieces + split(text[start:])


def _splitter(enc: Encoding):
    """How ``enc`` cuts text that holds no special token into pre-tokens."""
    steps = enc.text_steps
    if steps is None:
        return compile_fast(enc.pat_str).split

    def split_by_steps(text: str) -> list[str]:
        stretches, added_ids = steps.cut(text)
        pieces = []
        for k, stretch in enumerate(stretches):
            pieces += steps.split(stretch)
            if k < len(added_ids):
                pieces.append(enc.decode_single_token_bytes(added_ids[k]).decode("utf-8", errors="replace"))
        return pieces

    return split_by_steps


def _whole_characters(pieces: list[bytes]) -> list[str]:
    """Our ids' bytes, joined where an id ends inside a character: pieces that always spell the text."""
    joined, pending = [], b""
    for piece in pieces:
        pending += piece
        try:
            joined.append(pending.decode("utf-8"))
        except UnicodeDecodeError:  # part of a character: the next id holds the rest
            continue
        pending = b""
    return joined + ([pending.decode("utf-8", errors="replace")] if pending else [])


def _check_text(report, text, enc, other, rule, base, max_report, *, where, source=None, n_bytes=None) -> None:
    """Check one text; ``n_bytes``: the bytes of the input it was read from (bytes not UTF-8 read as one U+FFFD
    count as themselves, as count and stats count them), by default its UTF-8 (a string given as it is)."""
    ours = rule.encode(enc, text, where=where, report=report)
    theirs = rule.encode(other, text, where=where, report=report, ours=False)
    # (a lone surrogate, which encode() reads as U+FFFD, counts as its 3 bytes)
    report.bytes += len(text.encode("utf-8", "surrogatepass")) if n_bytes is None else n_bytes
    report.tokens += len(ours)
    report.other_tokens += len(theirs)
    if ours != theirs:
        _explain(report, enc, rule, text, ours, theirs, _bytes_or_none(other), complete=True, base=base,
                 max_report=max_report, source=source)


def _bytes_or_none(encoder):
    def token_bytes(token: int) -> bytes | None:
        try:
            return encoder.decode_single_token_bytes(token)
        except (KeyError, ValueError, OverflowError):  # tiktoken raises KeyError; some builds other errors
            return None

    return token_bytes


def _explain(report, enc, rule, text, ours, theirs, their_bytes, *, complete, base, max_report,
             ids_at=None, after=(), source=None) -> int:
    """Add the differences between ``ours`` and ``theirs`` (the ids of one text) to ``report``; returns how
    many of ``theirs`` belong to this text (all, when ``complete``; a .bin window may reach past it).
    ``text``: what ``ours`` encode, where each difference's place is counted; ``source``: the file's bytes it
    was read from, if they may differ (invalid UTF-8 read as U+FFFD), where the place is counted then.
    ``ids_at``: where ``theirs`` begins in a .bin (an array index), for each difference's own; ``after``: our ids
    that follow this text's there (:func:`diff_regions`)."""
    our_pieces = enc.decode_tokens_bytes(ours)
    their_pieces = [their_bytes(t) for t in theirs]
    regions, used = diff_regions(ours, theirs, our_pieces, their_pieces, complete=complete, after=after)
    # The text our ids stand for: the input, with lone surrogates as U+FFFD as encode() saw them.
    text_bytes = b"".join(our_pieces)
    pieces = pretokens(enc, text_bytes.decode("utf-8"), rule.special_ids_for)
    if "".join(pieces).encode("utf-8") != text_bytes:  # a split that drops or rewrites text (a Removed split, a
        pieces = _whole_characters(our_pieces)  # normalizer run twice): each id is shown as its own pre-token
    bounds = np.cumsum([0] + [len(p.encode("utf-8")) for p in pieces])  # pre-token k: bytes bounds[k]:[k+1]
    starts = np.cumsum([0] + [len(p) for p in our_pieces])  # our id t: bytes starts[t]:starts[t + 1]
    places = None  # made for the first difference shown: a normalized text is walked again
    for k_lo, k_hi, t_lo, t_hi, j_lo, j_hi, first in _widen(regions, bounds, starts):
        report.mismatches += 1
        report.mismatching_pretokens += k_hi - k_lo
        if len(report.shown) >= max_report:
            continue
        offset, line, record = base
        cut = int(bounds[k_lo])
        shown = pieces[k_lo:min(k_hi, k_lo + SHOWN_PRETOKENS)]
        if first - t_lo > SHOWN_IDS // 2:  # a long pre-token, equal for more ids than are shown: show from just
            # before its first differing id, where the ids and the text shown both start
            skip = first - t_lo - CONTEXT_IDS
            t_lo, j_lo = t_lo + skip, j_lo + skip
            cut = int(starts[t_lo])
            shown = [b"".join(our_pieces[t_lo:t_lo + SHOWN_IDS]).decode("utf-8", errors="replace")]
        shown_ids = slice(0, SHOWN_IDS)
        places = places or _TextPlaces(enc, rule.special_ids_for, text, text_bytes, source)
        into_text, lines_before = places.at(cut)
        report.shown.append(Mismatch(
            offset=offset + into_text,
            line=line + lines_before,
            record=record,
            pretokens=shown,
            ours=list(ours[t_lo:t_hi])[shown_ids],
            theirs=list(theirs[j_lo:j_hi])[shown_ids],
            our_pieces=our_pieces[t_lo:t_hi][shown_ids],
            their_pieces=their_pieces[j_lo:j_hi][shown_ids],
            truncated=(k_hi - k_lo > SHOWN_PRETOKENS or max(t_hi - t_lo, j_hi - j_lo) > SHOWN_IDS
                       or bool(cut > bounds[k_lo])),
            index=None if ids_at is None else ids_at + j_lo,
        ))
    return used


class _TextPlaces:
    """Where a byte of the text our ids spell is in the text they were encoded from: the same byte, unless a
    tokenizer.json's normalizer rewrote the text (NFC spells "e" + U+0301 as "é", a byte shorter), where a place
    in the file is found again through the normalization, stretch by stretch."""

    def __init__(self, enc: Encoding, special_tokens, text: str, text_bytes: bytes, source: bytes | None = None):
        self.text_bytes = text_bytes
        self.file_byte = _FileBytes(text, source)
        steps = enc.text_steps
        self.normalize = steps.normalize if steps is not None and steps.has_normalizer else None
        if self.normalize is None:
            return
        # the text as encode() reads it (lone surrogates as U+FFFD), cut as it cuts: special tokens and the
        # added tokens looked for before the normalizer are kept as they are; each stretch between is normalized
        self.text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        find_specials, find_added = (special_token_regex(frozenset(tokens)) if tokens else None
                                     for tokens in (special_tokens, steps.added_raw))
        # (first byte of the stretch in our ids' text, its first character in the text, the stretch as it is
        # in the text, and as encoded: normalized, or a token as it is)
        self.stretches: list[tuple[int, int, str, str]] = []
        encoded_at = 0
        for at, between, special in _cut_at_tokens(self.text, 0, find_specials):
            cut = [(at, between, True)] if special else _cut_at_tokens(between, at, find_added)
            for stretch_at, stretch, token in cut:
                encoded = stretch if token else self.normalize(stretch)
                self.stretches.append((encoded_at, stretch_at, stretch, encoded))
                encoded_at += len(encoded.encode("utf-8"))
        self.first_bytes = [stretch[0] for stretch in self.stretches]

    def at(self, encoded_byte: int) -> tuple[int, int]:
        """``(bytes of the file or text before the place, newlines before it)`` for a byte of our ids' text."""
        if self.normalize is None:
            return self.file_byte(encoded_byte), self.text_bytes.count(b"\n", 0, encoded_byte)
        k = bisect.bisect_right(self.first_bytes, encoded_byte) - 1
        if k < 0:
            return 0, 0
        first_byte, first_char, source, normalized = self.stretches[k]
        chars = len(normalized.encode("utf-8")[: encoded_byte - first_byte].decode("utf-8", errors="ignore"))
        if normalized == source:
            into = chars
        else:  # the longest start of the stretch whose normalization is no longer than the characters before
            into, longest = 0, len(source)  # the place (after a combining mark composed into the letter before)
            while into < longest:
                middle = (into + longest + 1) // 2
                if len(self.normalize(source[:middle])) <= chars:
                    into = middle
                else:
                    longest = middle - 1
        place = first_char + min(into, len(source))
        return self.file_byte(len(self.text[:place].encode("utf-8"))), self.text.count("\n", 0, place)


class _FileBytes:
    """A byte offset in a text -> the offset in the file it was decoded from, where invalid UTF-8 was read as
    U+FFFD (3 bytes of text for 1 to 3 of the file); the same offset for a text decoded as it is."""

    def __init__(self, text: str, source: bytes | None):
        # (byte in the text, byte in the file) just after each U+FFFD that stands for invalid bytes
        self.text_at, self.file_at = [0], [0]
        if source is None or len(source) == len(text.encode("utf-8", "surrogatepass")):
            return  # each U+FFFD adds bytes to what it replaced: the same length, none replaced
        text_at = file_at = 0
        for valid in text.split("\ufffd")[:-1]:  # each one is followed by a U+FFFD
            text_at, file_at = text_at + len(valid.encode("utf-8")), file_at + len(valid.encode("utf-8"))
            if source.startswith("\ufffd".encode("utf-8"), file_at):  # a U+FFFD in the file itself
                replaced = 3
            else:  # the invalid bytes the decoder replaced: it stops at the same place with errors="strict"
                try:
                    source[file_at:file_at + 4].decode("utf-8")
                    replaced = 1  # not reached: bytes that decode were not replaced
                except UnicodeDecodeError as e:
                    replaced = e.end
            text_at, file_at = text_at + 3, file_at + replaced
            self.text_at.append(text_at)
            self.file_at.append(file_at)

    def __call__(self, text_byte: int) -> int:
        k = bisect.bisect_right(self.text_at, text_byte) - 1
        return self.file_at[k] + text_byte - self.text_at[k]


def _cut_at_tokens(text: str, at: int, find) -> Iterator[tuple[int, str, bool]]:
    """``text`` (which begins at character ``at`` of a longer one) cut at each match of ``find``: ``(where a piece
    begins, the piece, whether it is a match)``."""
    start = 0
    for m in find.finditer(text) if find is not None else ():
        if m.start() > start:
            yield at + start, text[start : m.start()], False
        yield at + m.start(), m.group(), True
        start = m.end()
    if start < len(text) or not text:
        yield at + start, text[start:], False


def _widen(regions, bounds, starts):
    """Each differing region (ids ours[i1:i2] vs theirs[j1:j2]) widened to whole pre-tokens of our split,
    regions within one pre-token joined: (first pre-token, end, our ids start, end, their ids start, end, our
    first differing id)."""
    widened: list[list[int]] = []
    n_pretokens = len(bounds) - 1
    for i1, i2, j1, j2 in regions:
        lo, hi = starts[i1], starts[i2]
        k_lo = int(np.searchsorted(bounds, lo, "right")) - 1
        k_hi = int(np.searchsorted(bounds, hi, "left"))
        if k_hi <= k_lo:  # nothing of ours (ids only on their side), at a pre-token boundary: show the next one
            if k_lo < n_pretokens:
                k_hi = k_lo + 1
            elif k_lo > 0:
                k_lo -= 1
        t_lo = int(np.searchsorted(starts, bounds[k_lo], "left"))
        t_hi = int(np.searchsorted(starts, bounds[k_hi], "left"))
        # the ids added on either side are in step with theirs, one for one
        j_lo, j_hi = j1 - (i1 - t_lo), j2 + (t_hi - i2)
        if widened and k_lo < widened[-1][1]:
            widened[-1][1], widened[-1][3], widened[-1][5] = k_hi, t_hi, j_hi
        else:
            widened.append([k_lo, k_hi, t_lo, t_hi, j_lo, j_hi, i1])
    return widened


def diff_regions(ours, theirs, our_pieces, their_pieces, *, complete: bool = True, after=()):
    """Where two id sequences differ: a list of ``(i1, i2, j1, j2)`` (``ours[i1:i2]`` differs from
    ``theirs[j1:j2]``, and the ids between regions are equal one for one), and how many of ``theirs`` were
    used. ``complete``: ``theirs`` is the other side's whole encoding of the text; otherwise a window of a
    longer stream (a .bin), whose ids past ours are not a difference; ``after``: then, our ids that follow
    ours in that stream (the next text's first), which tell an id dropped at the end of ours from one replaced.

    >>> diff_regions([1, 2, 3, 4], [1, 9, 3, 4], [b"a", b"b", b"c", b"d"], [b"a", b"x", b"c", b"d"])
    ([(1, 2, 1, 2)], 4)
    """
    n, m = len(ours), len(theirs)
    text = b"".join(our_pieces)
    starts = np.cumsum([0] + [len(p) for p in our_pieces])  # our id t: bytes starts[t]:starts[t + 1]
    regions = []
    i = j = 0
    while True:
        while i < n and j < m and ours[i] == theirs[j]:
            i, j = i + 1, j + 1
        if i == n or j == m:
            break
        same_text = _same_text_end(text, starts, their_pieces, i, j)
        if same_text:
            regions.append((i, *same_text[:1], j, *same_text[1:]))
            i, j = same_text
            continue
        i2, j2 = _back_in_step(ours, theirs, i, j, complete, after)
        regions.extend(_edits(ours, theirs, i, i2, j, j2))
        i, j = i2, j2
    if i < n or (complete and j < m):
        regions.append((i, n, j, m if complete else j))
        j = m if complete else j
    return regions, j


def _same_text_end(text: bytes, starts, their_pieces, i, j) -> tuple[int, int] | None:
    """Where the sides part at ``ours[i]``, ``theirs[j]`` over the same text split differently, the first place
    after it where both are at an id boundary: (our id there, their id there). None if their ids spell
    other bytes than ours."""
    pos, y = int(starts[i]), j
    while y < min(len(their_pieces), j + BYTE_SYNC_IDS):
        piece = their_pieces[y]
        if not piece or not text.startswith(piece, pos):
            return None
        pos, y = pos + len(piece), y + 1
        x = int(np.searchsorted(starts, pos))
        if x < len(starts) and starts[x] == pos:
            return x, y
    return None


def _back_in_step(ours, theirs, i, j, complete, after=()) -> tuple[int, int]:
    """Where the sides agree again after parting at ``ours[i]``, ``theirs[j]`` over different text (ids
    replaced, inserted or dropped: a damaged .bin); ``after``: our ids that follow ours in ``theirs``' stream."""
    # The shift after which the most ids agree; in repetitive text several agree for a while, and the longest
    # agreement tells the true one. Ties go to the fewest ids skipped.
    known = list(ours) + list(after) if after else ours
    agreement = [_agreement(known, theirs, i + da, j + db, complete, len(ours)) for da, db in _SHIFTS]
    best = max(range(len(_SHIFTS)), key=lambda k: (agreement[k], -k))
    if agreement[best] >= SYNC_IDS:
        # that shift's alignment, back in step at its first place: a longer shift of the same alignment agreed
        # longer only by skipping a second difference a few ids on (ids 100 and 105 replaced were one difference,
        # reported at 100 over six pre-tokens), which the next step of the walk finds on its own
        along = _SHIFTS[best][0] - _SHIFTS[best][1]
        best = min(k for k, (da, db) in enumerate(_SHIFTS) if da - db == along and agreement[k] >= SYNC_IDS)
        return i + _SHIFTS[best][0], j + _SHIFTS[best][1]
    n, m = len(ours), len(theirs)
    return n, (m if complete else min(m, j + n - i))  # lost: the rest of this text is one difference


def _edits(ours, theirs, i1, i2, j1, j2) -> list[tuple[int, int, int, int]]:
    """``ours[i1:i2]`` and ``theirs[j1:j2]`` (ids replaced, inserted or dropped between two places where the sides
    agree) as the fewest edits that make one the other, each run of edits a region of its own: ids 100 and 102
    replaced, or an id inserted at 100 and another at 103, are two differences with the equal ids between them
    shown equal, not one difference of all the ids from the first edit to the last. Where as few edits either
    keep an id equal (one inserted before it, one dropped after) or replace it, it is kept. A stretch longer than
    MAX_SHIFT (the rest of a text, lost) is one region."""
    a, b = list(ours[i1:i2]), list(theirs[j1:j2])
    if not a or not b or len(a) > MAX_SHIFT or len(b) > MAX_SHIFT:
        return [(i1, i2, j1, j2)]
    # cost[x][y]: the fewest edits that make a[x:] into b[y:]
    cost = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for x in range(len(a), -1, -1):
        for y in range(len(b), -1, -1):
            if x == len(a) or y == len(b):
                cost[x][y] = (len(a) - x) + (len(b) - y)
            else:
                cost[x][y] = min(cost[x + 1][y + 1] + (a[x] != b[y]), cost[x + 1][y] + 1, cost[x][y + 1] + 1)
    regions, x, y, start = [], 0, 0, None
    while x < len(a) or y < len(b):
        if x < len(a) and y < len(b) and a[x] == b[y] and cost[x][y] == cost[x + 1][y + 1]:
            if start is not None:  # an equal id ends a run of edits
                regions.append((i1 + start[0], i1 + x, j1 + start[1], j1 + y))
                start = None
            x, y = x + 1, y + 1
            continue
        start = start or (x, y)
        if x < len(a) and cost[x][y] == cost[x + 1][y] + 1:
            x += 1  # dropped from theirs
        elif y < len(b) and cost[x][y] == cost[x][y + 1] + 1:
            y += 1  # inserted in theirs
        else:
            x, y = x + 1, y + 1  # replaced
    if start is not None:
        regions.append((i1 + start[0], i2, j1 + start[1], j2))
    return regions


# (ids of ours, ids of theirs) skipped to get back in step: replacements first, then insertions and drops
_SHIFTS = sorted(((a, b) for a in range(MAX_SHIFT + 1) for b in range(MAX_SHIFT + 1) if a or b),
                 key=lambda s: (max(s), abs(s[0] - s[1])))


def _agreement(ours, theirs, x, y, complete, n_text=None) -> int:
    """How many ids agree from ``ours[x]`` and ``theirs[y]``, up to LOOK_AHEAD_IDS; agreeing to the end of ours
    counts in full (in a ``complete`` comparison, only if theirs ends there too). -1: outside the ids. ``ours``
    may go on past the text's ``n_text`` ids with the ids that follow it, where no shift may start."""
    n, m = len(ours), len(theirs)
    if x > (n if n_text is None else n_text) or y > m:
        return -1
    limit = min(LOOK_AHEAD_IDS, n - x, m - y)
    k = 0
    while k < limit and ours[x + k] == theirs[y + k]:
        k += 1
    if x + k == n:
        return LOOK_AHEAD_IDS if not complete or y + k == m else -1
    return k


# ---- a .bin longer than the inputs' ids (read by tokenizer.jobs.id_files) -----------------------------------


def _extra_ids(report: ParityReport, end: tuple, enc: Encoding, ids_file: IdsFile, max_report: int) -> None:
    """Ids left in the .bin after the input's: one difference, at the ``end`` of the input (offset, line,
    record)."""
    extra = ids_file.peek(SHOWN_IDS)
    report.other_tokens += ids_file.left
    report.mismatches += 1
    if len(report.shown) < max_report:
        token_bytes = _bytes_or_none(enc)
        offset, line, record = end
        report.shown.append(Mismatch(offset, line, record, [], [], extra, [], [token_bytes(t) for t in extra],
                                     truncated=ids_file.left > SHOWN_IDS, index=ids_file.pos))


# ---- reports ------------------------------------------------------------------------------------------------


def piece_text(piece: bytes | None) -> str:
    """One id's bytes for a person: the text (in quotes, escaped) when it is whole UTF-8, else the bytes.

    >>> piece_text(b" w\\xc3\\xb6rld"), piece_text(b"\\xe4\\xb8"), piece_text(None)
    ("' wörld'", "b'\\\\xe4\\\\xb8'", '(not in the vocabulary)')
    """
    if piece is None:
        return "(not in the vocabulary)"
    try:
        return repr(piece.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(piece)


def report_lines(report: ParityReport) -> list[str]:
    """``report`` as text: a summary line, then each difference shown (where, the pre-token, both sides)."""
    speed = f"ours {report.mb_per_s:.1f} MB/s"
    if report.other_mb_per_s is not None:
        speed += f", theirs {report.other_mb_per_s:.1f} MB/s (ours {report.speed_ratio:.2f}x as fast)"
    sizes = f"{report.bytes:,} bytes, {report.tokens:,} tokens"
    if report.identical:
        return [f"{report.input}: {report.encoding} vs {report.against}: identical; {sizes}; {speed}"]
    lines = [
        f"{report.input}: {report.encoding} vs {report.against}: DIFFERENT at {plural(report.mismatches, 'place')} "
        f"({plural(report.mismatching_pretokens, 'pre-token')}); {sizes} (theirs {report.other_tokens:,}); {speed}"
    ]
    for number, m in enumerate(report.shown, start=1):
        where = f"byte {m.offset:,}, line {m.line:,}"
        if m.record is not None:
            where = f"record {m.record:,}: {where} of its text"
        if m.index is not None:  # where to look in the .bin (np.memmap(path)[index])
            where += f", .bin index {m.index:,}"
        what = _cut(" ".join(map(repr, m.pretokens)), SHOWN_CHARS) if m.pretokens else "(the end of the text)"
        utf8 = _cut(m.text.encode("utf-8", errors="surrogatepass").hex(" "), SHOWN_CHARS) or "-"
        lines.append(f"  {number}. {where}: {what}  utf-8: {utf8}")
        for side, ids, pieces in (("ours", m.ours, m.our_pieces), ("theirs", m.theirs, m.their_pieces)):
            shown = " ".join(map(str, ids)) or "(none)"
            lines.append(f"       {side:<7}{shown:<24} {' '.join(map(piece_text, pieces))}")
        if m.truncated:
            lines.append("       (cut: a longer difference)")
    hidden = report.mismatches - len(report.shown)
    if hidden:
        lines.append(f"  ... and {hidden:,} more not shown")
    if report.note:
        lines.append(f"  note: {report.note}")
    return lines


def _cut(shown: str, limit: int) -> str:
    """``shown``, or its first ``limit`` characters and how many more there are (a pre-token may be megabytes)."""
    return shown if len(shown) <= limit else f"{shown[:limit]} ... ({len(shown) - limit:,} characters more)"


def plural(count: int, noun: str) -> str:
    """``plural(1, "check")`` -> ``"1 check"``, ``plural(2, "check")`` -> ``"2 checks"``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _bar(total: int | None, desc: str, progress: bool, unit: str = "B"):
    """A bar of ``total`` bytes (shown in B, kB, MB as the figure needs: a small file read "0.0/0.0 MB" in MB), or
    of ``total`` texts with ``unit="texts"``; None: standard input, whose size is known only at its end."""
    from tqdm import tqdm  # imported only when a check runs, as in dataset.py

    in_bytes = unit == "B"
    scaled = dict(unit_scale=True, unit_divisor=1000) if in_bytes else {}
    if total is None:
        return tqdm(unit=unit, desc=desc, disable=not progress, leave=False, bar_format="{desc}: {n_fmt}B [{elapsed}]",
                    **scaled)
    fmt = "{n_fmt}B/{total_fmt}B" if in_bytes else "{n}/{total} texts"
    return tqdm(total=total, unit=unit, desc=desc, disable=not progress, leave=False,
                bar_format="{l_bar}{bar}| " + fmt + " [{elapsed}<{remaining}]", **scaled)
