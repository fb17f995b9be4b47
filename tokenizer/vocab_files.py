"""Vocabulary files: GPT-2's byte<->unicode map, and readers for ``encoder.json``, ``vocab.bpe`` and ``.tiktoken``.

Tokens are byte strings. GPT-2's ``encoder.json`` and ``vocab.bpe`` are text files, so OpenAI wrote every byte
as one printable unicode character: printable Latin-1 bytes stand for themselves (``b"A"`` -> ``"A"``) and the
rest (space, control bytes, ...) are shifted up past 255 (``b" "`` -> ``"Ġ"``, ``b"\\n"`` -> ``"Ċ"``). That is
why GPT-2's vocabulary is full of ``Ġ``: ``"Ġworld"`` is the token ``b" world"``.

tiktoken's ``.tiktoken`` files skip the trick: one line per token, ``base64(token bytes) rank``.

Each reader returns plain tables (token bytes -> id, merges as byte pairs) and refuses a malformed file with a
``ValueError`` naming the file and, where there are lines, the line. This module does not build encodings
(:mod:`tokenizer.registry` and :mod:`tokenizer.loading` do) and does not write them (:mod:`tokenizer.saving`).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from functools import lru_cache
from itertools import accumulate
from pathlib import Path
from typing import AbstractSet

from .text_input import read_utf8_file


@lru_cache(maxsize=None)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte (0..255) to a printable character.

    >>> m = bytes_to_unicode(); m[ord("A")], m[ord(" ")], m[ord("\\n")]
    ('A', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)  # the first unused code points above Latin-1, in byte order
            shifted += 1
    return mapping


@lru_cache(maxsize=None)
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`."""
    return {c: b for b, c in bytes_to_unicode().items()}


# str.translate tables, so converting a whole vocabulary runs in C: byte b <-> the character GPT-2 uses for it.
_TO_GPT2 = {b: c for b, c in bytes_to_unicode().items()}
_FROM_GPT2 = {ord(c): b for b, c in bytes_to_unicode().items()}
_NOT_GPT2_CHAR = re.compile("[^" + re.escape("".join(bytes_to_unicode().values())) + "]")


def token_to_gpt2_str(token: bytes) -> str:
    """``b" world"`` -> ``"Ġworld"``.

    >>> token_to_gpt2_str(b" world")
    'Ġworld'
    """
    return token.decode("latin-1").translate(_TO_GPT2)


def gpt2_str_to_token(text: str, *, where: str = "") -> bytes:
    """``"Ġworld"`` -> ``b" world"``; a character outside the map raises ValueError naming ``where``.

    >>> gpt2_str_to_token("Ġworld")
    b' world'
    """
    return gpt2_strs_to_tokens([text], where=where)[0]


def gpt2_strs_to_tokens(texts: list[str], *, where: str = "") -> list[bytes]:
    """:func:`gpt2_str_to_token` for many strings at once (one C-level pass: loading a vocabulary is fast)."""
    joined = "".join(texts)
    _check_gpt2_chars(joined, where=where)
    data = joined.translate(_FROM_GPT2).encode("latin-1")  # one character is one byte
    ends = list(accumulate(map(len, texts)))
    return [data[a:b] for a, b in zip([0, *ends], ends)]


def _check_gpt2_chars(text: str, *, where: str) -> None:
    bad = _NOT_GPT2_CHAR.search(text)
    if bad:
        raise ValueError(f"{where}: {bad.group()!r} is not a character of GPT-2's byte<->unicode map")


def is_gpt2_special_token(text: str) -> bool:
    """Whether an ``encoder.json`` entry is a special token rather than byte-level token text: written like
    ``<|endoftext|>``, or using a character GPT-2's byte map never produces.

    >>> is_gpt2_special_token("<|endoftext|>"), is_gpt2_special_token("Ġworld")
    (True, False)
    """
    return bool(_NOT_GPT2_CHAR.search(text)) or (text.startswith("<|") and text.endswith("|>"))


def gpt2_vocab(encoder: dict[str, int], *, where: str = "encoder.json",
               merged: AbstractSet[str] = frozenset()) -> tuple[dict[bytes, int], dict[str, int]]:
    """Split ``encoder.json``'s table into ``(token bytes -> id, special token -> id)``.

    ``merged``: the token strings ``vocab.bpe``'s merges make (``left + right``). An entry written like a special
    token that a merge makes is an ordinary token, which BPE learned from text holding it (Haskell's ``<|>``).

    >>> gpt2_vocab({"a": 64, "Ġa": 257, "<|endoftext|>": 50256})
    ({b'a': 64, b' a': 257}, {'<|endoftext|>': 50256})
    >>> gpt2_vocab({"<": 27, "|>": 91, "<|>": 257}, merged={"<|>"})
    ({b'<': 27, b'|>': 91, b'<|>': 257}, {})
    """
    specials = {text: idx for text, idx in encoder.items() if is_gpt2_special_token(text) and text not in merged}
    texts = [text for text in encoder if text not in specials]
    tokens = gpt2_strs_to_tokens(texts, where=where)
    token_ids = dict(zip(tokens, map(encoder.__getitem__, texts)))
    return token_ids, specials


def gpt2_merges(pairs: list[tuple[str, str]], *, where: str = "vocab.bpe") -> list[tuple[bytes, bytes]]:
    """``vocab.bpe``'s merges (pairs of GPT-2 token strings) as pairs of token bytes.

    >>> gpt2_merges([("Ġ", "t"), ("h", "e")])
    [(b' ', b't'), (b'h', b'e')]
    """
    halves = gpt2_strs_to_tokens([text for pair in pairs for text in pair], where=where)
    return list(zip(halves[::2], halves[1::2]))


def read_json_object(path: str | os.PathLike, what: str) -> dict:
    """A JSON file's top-level object; ValueError naming the file (and the line and column) otherwise."""
    path = Path(path)
    try:
        data = json.loads(_read_utf8(path))
    except json.JSONDecodeError as e:
        # e.msg alone can end mid-sentence ("Unterminated string starting at"): the place is in lineno and colno
        raise ValueError(f"{path}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}; the file is "
                         f"damaged or cut short: replace it with a good copy") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {what}")
    return data


def _read_utf8(path: Path) -> str:
    text = read_utf8_file(path, advice="a vocabulary file is UTF-8 text: is this the right file?")
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it: a vocab.bpe saved on Windows


def read_encoder_json(path: str | os.PathLike) -> dict[str, int]:
    """An ``encoder.json`` as it is written: GPT-2 token string -> id (special tokens included)."""
    data = read_json_object(path, "a JSON object mapping token strings to ids")
    for text, idx in data.items():
        if type(idx) is not int:
            raise ValueError(f"{path}: token {text!r} has id {idx!r}, expected an integer")
    return data


def read_vocab_bpe(path: str | os.PathLike) -> list[tuple[str, str]]:
    """A ``vocab.bpe`` as it is written: the merges in priority order, as pairs of GPT-2 token strings.

    The first line may be a ``#version`` header. A file without a single merge is refused: it is truncated or
    not a ``vocab.bpe`` (every multi-byte token of a byte-level vocabulary is made by a merge).
    """
    path = Path(path)
    pairs = []
    for lineno, line in enumerate(_read_utf8(path).split("\n"), 1):
        if (lineno == 1 and line.startswith("#version")) or not line:
            continue
        fields = line.split(" ")
        if len(fields) != 2 or not all(fields):
            raise ValueError(f"{path}, line {lineno}: expected two tokens separated by one space, got {line!r}")
        pairs.append((fields[0], fields[1]))
        _check_gpt2_chars(fields[0] + fields[1], where=f"{path}, line {lineno}")
    if not pairs:
        raise ValueError(f"{path}: no merges (the file is empty or holds only its #version line); "
                         "a vocab.bpe lists one merge per line, two token strings separated by a space")
    return pairs


def read_gpt2_encoder_json(path: str | os.PathLike,
                           merged: AbstractSet[str] = frozenset()) -> tuple[dict[bytes, int], dict[str, int]]:
    """Read an ``encoder.json``: ``(token bytes -> id, special token -> id)`` (see :func:`gpt2_vocab`)."""
    return gpt2_vocab(read_encoder_json(path), where=str(path), merged=merged)


def read_gpt2_vocab_bpe(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Read a ``vocab.bpe``: the merges in priority order, as pairs of token bytes."""
    return gpt2_merges(read_vocab_bpe(path), where=str(path))


def read_tiktoken_file(path: str | os.PathLike, data: bytes | None = None) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file: ``base64(token) rank`` per line -> ``{token: rank}``."""
    if data is None:
        data = Path(path).read_bytes()
    # binascii's strict decoder is what base64.b64decode(validate=True) calls, without its per-call Python
    # wrapper: 200,000 lines read in one comprehension. Any fault, and the loop below finds the line to name.
    try:
        return {binascii.a2b_base64(token, strict_mode=True): int(rank)
                for token, rank in map(bytes.split, filter(None, data.splitlines()))}
    except ValueError:  # binascii.Error is one
        pass
    ranks = {}
    b64decode = base64.b64decode
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[b64decode(token, validate=True)] = int(rank)
        except ValueError:  # wrong field count, bad base64 (binascii.Error) or a bad integer
            raise ValueError(f"{path}, line {lineno}: expected 'base64-token rank', got {line[:80]!r}") from None
    return ranks
