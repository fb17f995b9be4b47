"""One input to a training-ready ``.bin`` of token ids (the job behind ``encode-file`` and behind each shard of
``encode-dataset``), and measuring tokenizers on inputs (``count``, ``stats``).

``encode_file("train.txt", "train.bin")`` writes the ids as one flat little-endian array — ``uint16`` when every
id fits (GPT-2's 50,257), ``uint32`` otherwise — the ``.bin`` layout nanoGPT reads back with
``np.memmap(path, dtype=np.uint16, mode="r")``. What the ids are depends on the input's format
(:mod:`tokenizer.jobs.inputs`):

* text (``.txt``, any other file, standard input): ``encode(whole text)`` with the special-token rule asked
  for (by default special tokens in the text become their ids: TinyStories' ``<|endoftext|>`` separators, the
  corpus here, keep their id).
* ``.jsonl`` / ``.jsonl.gz`` / ``.parquet``: every document is ``encode_ordinary(text) + [eot_token]``
  (nanoGPT's layout: special-token text inside a document is plain text; each document ends with
  ``<|endoftext|>``).

How the work is split: a text is read in blocks of about ``CHUNK_BYTES``, each cut back to its last *safe cut*
(:mod:`tokenizer.cuts`), so that encoding the pieces separately gives exactly the ids of encoding the whole
text: a place where the pattern splits the text before it as if the text ended there (``"word|,"``,
``"!| x"``, never inside a character), or just before a special token that is encoded as a special token
(``encode`` splits there anyway), and never inside any special token. Minified JSON or code without newlines
is cut as well as prose. Documents are handed on in batches of about as much text. The pieces go to the
workers of a local engine (:meth:`tokenizer.jobs.engines.LocalEngine.map_ordered`) and their ids are written
in input order as they arrive, so memory stays bounded however large the input. Output goes to a temporary
file renamed only when everything succeeded: an error or Ctrl-C never leaves a partial ``.bin`` behind.

What this module does not do: find inputs or parse their formats (:mod:`tokenizer.jobs.inputs`), or spread
many inputs over a cluster and record them in a manifest (:mod:`tokenizer.jobs.sharded`).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import numpy as np

from ..core import interleave
from ..cuts import safe_byte_cuts
from ..encoding import Encoding
from ..outputs import check_file, replaced_file
from ..registry import ENDOFTEXT as EOT, get_encoding
from ..special_advice import placed
from .engines import LocalEngine, ProgressBar, open_engine
from .inputs import decode_utf8, input_format, input_name, input_size, is_stdin, open_input, read_records

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


# ---- one input, in pieces ----------------------------------------------------------------------------------


def kept_whole(enc: Encoding, disallowed_special=()) -> set[str]:
    """The texts no chunk of an input may end inside: ``enc``'s special tokens, and any other text that a
    ``disallowed_special`` collection names, which ``encode`` refuses too, but only where it sees it whole."""
    named = () if isinstance(disallowed_special, str) or not disallowed_special else disallowed_special
    return set(enc.special_tokens_set) | set(named)


def input_pieces(path, enc: Encoding, split_at, *, text_field: str = "text", errors: str | None = "strict",
                 chunk_bytes: int = CHUNK_BYTES, disallowed_special=()) -> Iterator[tuple[tuple, int]]:
    """``(piece, bytes of the input read so far)`` of an input, in order: a piece is ``("text", bytes, offset)``,
    a chunk of a text cut where ``encode`` with ``split_at`` (the special tokens encoded as such) cuts anyway,
    and never inside a text that ``disallowed_special`` names (:func:`kept_whole`), or ``("documents", texts,
    replaced, inserted)``, a batch of documents of a ``.jsonl`` or ``.parquet`` input, the bytes not UTF-8 that
    their texts hold as U+FFFD (``errors="replace"``) and the U+FFFD they hold for them."""
    if input_format(path) == "text":
        offset = 0
        whole = kept_whole(enc, disallowed_special)
        with open_input(path) as f:
            for data in iter_chunks(f, whole, chunk_bytes, pattern=enc.pat_str, cut_before=split_at):
                yield ("text", data, offset), offset + len(data)
                offset += len(data)
        return
    batch: list[str] = []
    batch_chars = batch_replaced = batch_inserted = 0
    for record in read_records(path, text_field, errors=errors):
        batch.append(record.text)
        batch_chars += len(record.text)
        batch_replaced += record.replaced
        batch_inserted += record.inserted
        if batch_chars >= chunk_bytes:
            yield ("documents", batch, batch_replaced, batch_inserted), record.done
            batch, batch_chars, batch_replaced, batch_inserted = [], 0, 0, 0
    # the last batch, maybe empty: the whole file is read
    yield ("documents", batch, batch_replaced, batch_inserted), input_size(path)


def text_bytes(piece: tuple) -> int:
    """The UTF-8 bytes of the text a piece holds: what "bytes" means in every figure (bytes/token, MB/s), however
    the file held it (JSON escapes, gzip). surrogatepass: a JSON document may hold a lone surrogate, which encode
    takes as it is. Bytes not UTF-8 read as U+FFFD (``errors="replace"``) count as read, in a document as in a
    text file, so that :func:`replaced_bytes` are some of them."""
    if piece[0] == "text":
        return len(piece[1])
    _, texts, replaced, inserted = piece
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in texts) + replaced - 3 * inserted


def replaced_bytes(piece: tuple, errors: str | None) -> int:
    """The bytes of a piece's text that were not UTF-8, each stretch of them read as one U+FFFD
    (``errors="replace"``; 0 under ``"strict"``, which refuses them). Documents come counted by their reader:
    only the bytes in their text field."""
    if errors != "replace":
        return 0
    if piece[0] == "documents":
        return piece[2]
    data = piece[1]
    try:
        data.decode("utf-8")  # the common case, valid text, told at the speed of a plain decode
        return 0
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    inserted = text.count("\ufffd") - data.count("\ufffd".encode("utf-8"))  # those the file held are no error
    # every valid byte is one byte of the text again (surrogatepass: nothing else can fail), each U+FFFD three
    return len(data) - (len(text.encode("utf-8", "surrogatepass")) - 3 * inserted)


class PieceEncoder:
    """The ids of one piece of an input (:func:`input_pieces`): what a worker runs. It holds the encoding and the
    rule, so they reach each worker once."""

    def __init__(self, enc: Encoding, name: str, allowed_special="all", disallowed_special=(),
                 errors: str | None = "strict"):
        self.enc = enc
        self.name = name
        self.allowed_special, self.disallowed_special = allowed_special, disallowed_special
        self.errors = errors
        self.dtype = id_dtype(enc.n_vocab)

    def ids(self, piece: tuple) -> list[int]:
        enc = self.enc
        if piece[0] == "documents":
            documents = piece[1]
            if not documents:
                return []
            # each document's ids then <|endoftext|>, laid end to end by chain in C (not a Python loop over ids)
            eot = enc.eot_token
            ids = interleave(enc.encode_ordinary_batch(documents, num_threads=1), [eot] * (len(documents) - 1))
            ids.append(eot)
            return ids
        _, data, offset = piece
        return self.text_ids(decode_utf8(data, offset, self.name, self.errors))

    def text_ids(self, text: str) -> list[int]:
        """``encode(text)`` with the special-token rule; a refusal names the input."""
        try:
            return self.enc.encode(text, allowed_special=self.allowed_special,
                                   disallowed_special=self.disallowed_special)
        except ValueError as e:  # a refused special token stays one: a command says it in its own words
            raise placed(e, self.name) from None

    def __call__(self, piece: tuple, report=None) -> bytes:
        return np.asarray(self.ids(piece), dtype=self.dtype).tobytes()


def check_documents_can_end(enc: Encoding, path) -> None:
    """``ValueError`` when the documents of ``path`` (a .jsonl or .parquet input) cannot each end with
    ``<|endoftext|>``, because ``enc`` has no such token."""
    if input_format(path) != "text" and EOT not in enc.special_tokens_set:
        raise ValueError(f"encoding {enc.name!r} has no {EOT} token to end each document of {input_name(path)} "
                         f"with; use an encoding that has one (train it with --special_tokens '{EOT}')")


class DocumentCount:
    """The documents of an input, counted as its pieces go by: each record of a ``.jsonl`` or ``.parquet``
    input; in a text, each stretch that is not only whitespace between ``separator`` s (``<|endoftext|>``
    when it is encoded as its id; else the whole text is one document)."""

    def __init__(self, separator: str | None):
        self.separator = separator.encode("utf-8") if separator else None
        self.closed = 0
        self.open = False  # the current stretch of text holds more than whitespace

    def add(self, piece: tuple) -> None:
        if piece[0] == "documents":
            self.closed += len(piece[1])
            return
        # a piece never ends inside a special token, so a separator is never split between two pieces
        parts = piece[1].split(self.separator) if self.separator else [piece[1]]
        for k, part in enumerate(parts):
            if k:
                self.closed += self.open
                self.open = False
            self.open = self.open or bool(part.strip())

    @property
    def total(self) -> int:
        return self.closed + self.open


def encode_input(path, out_path, enc: Encoding, *, allowed_special="all", disallowed_special=(),
                 errors: str | None = "strict", text_field: str = "text", chunk_bytes: int = CHUNK_BYTES,
                 engine: LocalEngine | None = None, report=lambda done: None) -> dict:
    """Encode one input into ``out_path`` (flat little-endian ids, :func:`id_dtype`), atomically
    (:func:`tokenizer.outputs.replaced_file`: checked by the caller; ``"-"`` is standard output); returns
    ``{"dtype", "documents", "tokens", "bytes", "file_bytes", "replaced_bytes", "sha256"}`` of what was written
    (``bytes``: the UTF-8 bytes of the text encoded, as read, ``replaced_bytes`` of them not UTF-8 and read as
    U+FFFD under ``errors="replace"``; ``file_bytes``: of the input as stored, compressed or not).

    ``allowed_special`` and ``disallowed_special`` are :meth:`Encoding.encode`'s, for text inputs; ``errors``
    is :func:`tokenizer.jobs.inputs.decode_utf8`'s; ``engine`` a local engine whose workers encode the pieces
    (default: this process); ``report(bytes done)`` is called after each piece is written.
    """
    out_path = Path(out_path)
    check_documents_can_end(enc, path)
    name = input_name(path)
    encoder = PieceEncoder(enc, name, allowed_special, disallowed_special, errors)
    encoded_as_special = enc.special_tokens_set if allowed_special == "all" else set(allowed_special)
    documents = DocumentCount(EOT if EOT in encoded_as_special else None)
    done: deque[int] = deque()  # the input bytes read by each piece in flight, oldest first
    n_text_bytes = n_replaced = 0

    def pieces():
        nonlocal n_text_bytes, n_replaced
        for piece, read in input_pieces(path, enc, encoded_as_special, text_field=text_field, errors=errors,
                                        chunk_bytes=chunk_bytes, disallowed_special=disallowed_special):
            documents.add(piece)
            n_text_bytes += text_bytes(piece)
            n_replaced += replaced_bytes(piece, errors)
            done.append(read)
            yield piece

    sha, written, read = hashlib.sha256(), 0, 0
    with replaced_file(out_path) as out:
        for data in (engine or LocalEngine(1)).map_ordered(encoder, pieces()):
            out.write(data)
            sha.update(data)
            written += len(data)
            read = done.popleft()
            report(read)
    return {"dtype": encoder.dtype.name, "documents": documents.total, "tokens": written // encoder.dtype.itemsize,
            "bytes": n_text_bytes, "file_bytes": read, "replaced_bytes": n_replaced, "sha256": sha.hexdigest()}


# ---- encode-file ------------------------------------------------------------------------------------------


def encode_file(
    input_path,
    out_path,
    *,
    encoding: str | Encoding = "gpt2",
    workers: int | None = None,
    allowed_special="all",
    disallowed_special=None,
    errors: str = "strict",
    text_field: str = "text",
    progress: bool = True,
    chunk_bytes: int = CHUNK_BYTES,
    start_method: str | None = None,
    overwrite: bool = False,
    flag: str | None = None,
) -> dict:
    """Encode one input (a file, or ``"-"`` for standard input) into ``out_path`` (a file, or ``"-"`` for
    standard output); returns statistics: ``bytes`` (the UTF-8 bytes of the text encoded, as :func:`file_stats`
    counts them; bytes/token and MB/s are of those), ``replaced_bytes`` (those of them that were not UTF-8, read
    as U+FFFD under ``errors="replace"``), ``file_bytes`` (the input as stored), ``tokens``, ``documents``,
    ``seconds``, ...

    For a text, the output equals ``encode(whole text)`` written with :func:`id_dtype`, whatever ``workers``
    (default: all CPUs), ``chunk_bytes`` and ``start_method`` (multiprocessing's: "fork", "spawn", ...; None for
    the platform's default); for documents, ``encode_ordinary(text) + [eot]`` each (``text_field`` names their
    text). ``encoding`` is a registered name or an :class:`Encoding` (e.g. a trained one). ``allowed_special``
    is as in :func:`resolve_specials`; ``disallowed_special``, when given, replaces the disallowed set it
    implies (as in :meth:`Encoding.encode`). ``errors`` is :func:`tokenizer.jobs.inputs.decode_utf8`'s. Raises
    ``FileNotFoundError`` for a missing input, ``ValueError`` for bad input, and the errors of
    :func:`tokenizer.outputs.check_file` for an output that cannot be written or exists (unless ``overwrite``;
    ``flag`` names it on a command line), before any work; no output file is left in any case (nor after
    Ctrl-C).
    """
    given_out = os.fspath(out_path)
    out_path = Path(out_path)
    if not is_stdin(input_path):
        input_path = Path(input_path)
        if input_path.is_dir():
            raise IsADirectoryError(f"{input_path} is a directory; encode-file encodes one file (encode-dataset "
                                    "encodes folders)")
        if not input_path.exists():  # a pipe (<(zcat a.gz)) is no regular file, and is read once, in order
            raise FileNotFoundError(f"input file not found: {input_path}")
        if out_path.exists() and out_path.resolve() == input_path.resolve():
            raise ValueError(f"the output {out_path} is the input file; choose another --out")
    out_path = check_file(given_out, overwrite=overwrite, flag=flag, stdout_ok=True)
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    allowed, disallowed = resolve_specials(enc, allowed_special)
    if disallowed_special is not None:
        disallowed = disallowed_special
    check_documents_can_end(enc, input_path)
    size = input_size(input_path)
    workers = int(workers or os.cpu_count() or 1)
    if size is not None:  # no more processes than pieces: a small input is encoded here, without starting any
        workers = max(1, min(workers, math.ceil(size / chunk_bytes)))

    start = time.perf_counter()
    bar = ProgressBar([size], desc=f"encoding {Path(input_name(input_path)).name}", enabled=progress)
    try:
        with open_engine("local", workers=workers, start_method=start_method) as engine:
            written = encode_input(input_path, out_path, enc, allowed_special=allowed, disallowed_special=disallowed,
                                   errors=errors, text_field=text_field, chunk_bytes=chunk_bytes, engine=engine,
                                   report=lambda done: bar.set(0, done))
        workers = engine.started_workers or 1  # those that ran: standard input's length is known only now
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    n_bytes, n_tokens = written["bytes"], written["tokens"]
    return {
        "input": input_name(input_path),
        "out": "stdout" if given_out == "-" else given_out,
        "encoding": enc.name,
        "dtype": written["dtype"],
        "workers": workers,
        "bytes": n_bytes,
        "file_bytes": written["file_bytes"],
        "replaced_bytes": written["replaced_bytes"],
        "tokens": n_tokens,
        "documents": written["documents"],
        "bytes_per_token": n_bytes / n_tokens if n_tokens else 0.0,
        "seconds": seconds,
        "mb_per_s": n_bytes / 1e6 / max(seconds, 1e-9),
    }


# ---- measuring tokenizers ---------------------------------------------------------------------------------


def file_stats(
    path,
    encoding: str | Encoding = "gpt2",
    *,
    allowed_special="all",
    disallowed_special=None,
    errors: str = "strict",
    text_field: str = "text",
    progress: bool = False,
    min_seconds: float = 0.0,
) -> dict:
    """Tokens, bytes/token and single-process throughput of one encoding on one input (``"-"``: standard input).

    Every text is encoded with the special-token rule given: a text file, counted a piece at a time (memory
    stays bounded however large it is), or each document of a ``.jsonl`` or ``.parquet`` file on its own
    (without the ``<|endoftext|>`` that :func:`encode_file` ends it with); ``bytes`` are those of the texts
    encoded, ``replaced_bytes`` of them not UTF-8 and read as U+FFFD under ``errors="replace"`` (as
    :func:`encode_file` counts them). ``allowed_special``, ``disallowed_special``, ``errors`` and ``text_field``
    are :func:`encode_file`'s; ``progress`` shows a bar of the bytes read (in kB, MB).

    ``min_seconds``: 0 times the counting pass itself. More makes the speed a steady figure: the counting pass
    is then a warm-up (a process's first encode builds tables and fills caches, which on a small file can make
    the figure several times too low), and the input is encoded again, from its start and over again as often as
    needed, until the encoding timed adds up to ``min_seconds`` (``timed_bytes`` in ``timed_seconds``). The
    input is read again for that, so standard input must have been saved to a file first.
    """
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    allowed, disallowed = resolve_specials(enc, allowed_special)
    if disallowed_special is not None:
        disallowed = disallowed_special
    name = input_name(path)
    encoder = PieceEncoder(enc, name, allowed, disallowed, errors)
    split_at = enc.special_tokens_set if allowed == "all" else allowed
    n_bytes = n_tokens = n_replaced = 0
    seconds = 0.0
    bar = ProgressBar([input_size(path)], desc=f"{Path(name).name} ({enc.name})", enabled=progress)
    try:
        for piece, done in input_pieces(path, enc, split_at, text_field=text_field, errors=errors,
                                        disallowed_special=disallowed):
            piece_tokens, piece_bytes, piece_seconds = _timed_encode(encoder, piece)
            n_tokens += piece_tokens
            n_bytes += piece_bytes
            n_replaced += replaced_bytes(piece, errors)  # (not timed: encode_file's figure, not the encoding's work)
            seconds += piece_seconds
            bar.set(0, done)
    finally:
        bar.close()
    timed_bytes = n_bytes
    if min_seconds > 0 and n_bytes:
        timed_bytes, seconds = 0, 0.0
        while seconds < min_seconds:
            for piece, _ in input_pieces(path, enc, split_at, text_field=text_field, errors=errors,
                                         disallowed_special=disallowed):
                piece_bytes, piece_seconds = _timed_encode_again(encoder, piece)
                timed_bytes += piece_bytes
                seconds += piece_seconds
                if seconds >= min_seconds:  # a large input need not be read whole again
                    break
    mb_per_s = timed_bytes / 1e6 / max(seconds, 1e-9)
    return {
        "file": input_name(path),
        "encoding": enc.name,
        "bytes": n_bytes,
        "replaced_bytes": n_replaced,
        "tokens": n_tokens,
        "bytes_per_token": n_bytes / n_tokens if n_tokens else 0.0,
        "timed_bytes": timed_bytes,
        "timed_seconds": seconds,
        "mb_per_s": mb_per_s,
        "pile_seconds": THE_PILE_BYTES / (mb_per_s * 1e6) if n_bytes else float("inf"),
    }


def _timed_encode(encoder: PieceEncoder, piece: tuple) -> tuple[int, int, float]:
    """``(tokens, bytes, seconds)`` of encoding one piece of :func:`input_pieces` (only the encoding timed)."""
    start = time.perf_counter()
    if piece[0] == "text":
        n_tokens = len(encoder.ids(piece))
    else:
        n_tokens = sum(len(encoder.text_ids(text)) for text in piece[1])
    seconds = time.perf_counter() - start
    return n_tokens, text_bytes(piece), seconds


def _timed_encode_again(encoder: PieceEncoder, piece: tuple) -> tuple[int, float]:
    """``(bytes, seconds)`` of encoding a piece that was encoded before, each of its texts in two halves.

    Why halves: an encoding keeps the ids of the last long text it encoded, to reuse them for a text that begins
    with it (a conversation encoded again as it grows). The same text encoded again would time that reuse, not
    encoding; no half begins with the half encoded before it.
    """
    start = time.perf_counter()
    if piece[0] == "text":
        texts = [decode_utf8(piece[1], piece[2], encoder.name, encoder.errors)]
    else:
        texts = piece[1]
    for text in texts:
        middle = len(text) // 2
        encoder.text_ids(text[:middle])
        encoder.text_ids(text[middle:])
    seconds = time.perf_counter() - start
    return text_bytes(piece), seconds  # the bytes the counting pass counted


def format_duration(seconds: float) -> str:
    """``90061`` -> ``"1.0 days"``: the unit that keeps the number readable."""
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"
