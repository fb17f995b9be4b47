"""Vocabulary files: GPT-2's byte<->unicode map and the readers (and writers) for GPT-2, tiktoken and HF files.

Tokens are byte strings. GPT-2's ``encoder.json`` and ``vocab.bpe`` are text files, so OpenAI wrote every byte
as one printable unicode character: printable Latin-1 bytes stand for themselves (``b"A"`` -> ``"A"``) and the
rest (space, control bytes, ...) are shifted up past 255 (``b" "`` -> ``"Ġ"``, ``b"\\n"`` -> ``"Ċ"``). That is
why GPT-2's vocabulary is full of ``Ġ``: ``"Ġworld"`` is the token ``b" world"``.

tiktoken's ``.tiktoken`` files skip the trick: one line per token, ``base64(token bytes) rank``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from functools import lru_cache
from pathlib import Path


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
    """``b" world"`` -> ``"Ġworld"``."""
    return token.decode("latin-1").translate(_TO_GPT2)


def gpt2_str_to_token(text: str, *, where: str = "") -> bytes:
    """``"Ġworld"`` -> ``b" world"``; a character outside the map raises ValueError naming ``where``."""
    bad = _NOT_GPT2_CHAR.search(text)
    if bad:
        raise ValueError(f"{where}: {bad.group()!r} is not a character of GPT-2's byte<->unicode map")
    return text.translate(_FROM_GPT2).encode("latin-1")


def read_gpt2_encoder_json(path: str | os.PathLike) -> tuple[dict[bytes, int], dict[str, int]]:
    """Read an ``encoder.json``: ``(mergeable tokens -> id, special tokens -> id)``.

    Entries written like ``<|endoftext|>`` that are not byte-level tokens are special tokens.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object mapping token strings to ids")
    ranks: dict[bytes, int] = {}
    specials: dict[str, int] = {}
    for text, idx in data.items():
        if not isinstance(idx, int):
            raise ValueError(f"{path}: token {text!r} has id {idx!r}, expected an integer")
        if _NOT_GPT2_CHAR.search(text) or (text.startswith("<|") and text.endswith("|>")):
            specials[text] = idx
        else:
            ranks[text.translate(_FROM_GPT2).encode("latin-1")] = idx
    return ranks, specials


def read_gpt2_vocab_bpe(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Read a ``vocab.bpe``: the merges in priority order, as byte pairs."""
    path = Path(path)
    merges = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if (lineno == 1 and line.startswith("#version")) or not line:
                continue
            fields = line.split(" ")
            if len(fields) != 2:
                raise ValueError(f"{path}, line {lineno}: expected two tokens separated by one space, got {line!r}")
            where = f"{path}, line {lineno}"
            merges.append((gpt2_str_to_token(fields[0], where=where), gpt2_str_to_token(fields[1], where=where)))
    return merges


def read_tiktoken_file(path: str | os.PathLike, data: bytes | None = None) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file: ``base64(token) rank`` per line -> ``{token: rank}``."""
    if data is None:
        data = Path(path).read_bytes()
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


# ---- Saving and loading whole encodings (trained tokenizers): gpt2 / tiktoken / hf formats ----------------
# (owned by the trainer work; see tokenizer/train.py)


def save_encoding(enc, path, format: str = "gpt2") -> None:  # noqa: A002 - tiktoken-like keyword
    raise NotImplementedError("saving encodings is not implemented yet")


def load_encoding(path):
    raise NotImplementedError("loading saved encodings is not implemented yet")
