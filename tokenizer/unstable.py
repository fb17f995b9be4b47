"""The unstable end of a text: which tokens could a continuation of it start with?

A model that completes ``"hello fanta"`` must not be forced to keep the token ``" fanta"``: the user may
mean ``" fantastic"``, which is one token that starts earlier. Tokens are *stable* only up to the last
piece (pre-tokenization never merges across a piece boundary, so what comes later cannot change them);
the last piece's bytes are *unstable*.

``encode_with_unstable`` returns the stable ids and every token sequence a longer text could begin its
unstable part with, found as tiktoken finds them:

1. each single token that starts with the unstable bytes;
2. for every way to cut those bytes in two, each token that starts with the second half, put after the
   first half and encoded again (the result cut to just cover the unstable bytes);
3. the unstable bytes encoded as two parts, split before a trailing whitespace character (``"\\n\\n"``
   becomes ``"\\n"`` + ``"\\n"`` when a letter follows).

If the last piece starts with a token of only spaces, newlines or tabs, the whitespace tokens before it join
the unstable part (cl100k's ``\\s*[\\r\\n]+`` can merge them into one piece). Like tiktoken's this is a
heuristic, not a proof, and it is tiktoken's exactly (tested equal on every prefix of sample texts). It does
not look further back than that, and does not rank the completions: they come sorted (tiktoken's come in a
random order, a different one on each call). Step 2 encodes one candidate per
token that starts with each tail: for a short tail such as ``" "`` that is most of the vocabulary, which
is slow in pure Python (the README has the figures).

``encode_bytes`` (tiktoken's ``_encode_bytes``) uses the same idea for bytes that are not valid UTF-8:
the valid part is encoded as text, then its last piece and the invalid rest are BPE-encoded together.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left

from . import bpe
from .patterns import WHITESPACE
from .pretokenize import compile_pattern, special_token_regex

# `enc` below is always a tokenizer.encoding.Encoding, which calls in here; it is not imported (annotations are
# never evaluated here), so the import graph keeps one direction: encoding -> unstable.

# Per encoding: its ordinary tokens sorted by bytes, and their ids in the same order (built on first use).
_sorted_tokens: "weakref.WeakKeyDictionary[Encoding, tuple[list[bytes], list[int]]]" = weakref.WeakKeyDictionary()


def encode_with_unstable(enc: Encoding, text: str, allowed: frozenset[str]) -> tuple[list[int], list[list[int]]]:
    """``(stable ids, completions)`` for ``text``; ``allowed``: the special tokens to encode as such.

    The completions are sorted (as lists of ids). tiktoken's come in the order of a Rust ``HashSet``, which
    is seeded at random: two calls with the same text give the same completions in different orders, so no
    order can equal tiktoken's every time; ``sorted(theirs) == ours`` always holds.
    """
    text.encode("utf-8")  # as tiktoken: a lone surrogate raises UnicodeEncodeError (encode would replace it)
    tokens = enc.encode(text, allowed_special=allowed, disallowed_special=())
    n_last = _last_piece_length(enc, text, allowed)
    if n_last == 0:  # empty text, or it ends with a special token: nothing to complete
        return tokens, []
    n_last = _widen_over_whitespace(enc, tokens, n_last)
    unstable = enc.decode_bytes(tokens[-n_last:])
    stable = tokens[:-n_last]

    completions: dict[tuple[int, ...], None] = {}  # an ordered set
    tokens_sorted, ids_sorted = _sorted_token_table(enc)
    lo, hi = _prefix_range(tokens_sorted, unstable)
    completions.update(dict.fromkeys(zip(ids_sorted[lo:hi])))  # each token that starts with all of it
    for i in range(1, len(unstable)):
        head, tail = unstable[:i], unstable[i:]
        lo, hi = _prefix_range(tokens_sorted, tail)
        for token in tokens_sorted[lo:hi]:
            candidate = head + token
            try:
                ids = enc.encode_ordinary(candidate.decode("utf-8"))  # may introduce a piece boundary
            except UnicodeDecodeError:
                ids = _bpe_ids(enc, candidate)
            completions[_covering(enc, ids, len(unstable))] = None
    # "\n\n" followed by a letter splits as "\n" + "\n" + letter: a trailing whitespace character may
    # become its own piece.
    size = _last_char_size(unstable)
    if 0 < size < len(unstable) and unstable[-size:].decode("utf-8") in WHITESPACE:
        completions[tuple(_bpe_ids(enc, unstable[:-size]) + _bpe_ids(enc, unstable[-size:]))] = None
    return stable, sorted(map(list, completions))


def encode_bytes(enc: Encoding, data: bytes) -> list[int]:
    """Ids for ``data``, which may not be valid UTF-8 (e.g. text cut inside a character)."""
    try:
        return enc.encode_ordinary(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        valid = e.start  # the first byte that is not part of a valid character
    text = data[:valid].decode("utf-8")
    tokens = enc.encode_ordinary(text)
    n_last = _last_piece_length(enc, text, frozenset())
    if n_last:
        n_last = _widen_over_whitespace(enc, tokens, n_last)
        rest = enc.decode_bytes(tokens[-n_last:]) + data[valid:]
        tokens = tokens[:-n_last]
    else:
        rest = data[valid:]
    # All the rest is one piece: where pre-tokenization would cut bytes that are not text is unknowable.
    return tokens + enc._encode_single_piece(rest)  # tiktoken's API name, not a private detail


def _last_piece_length(enc: Encoding, text: str, allowed: frozenset[str]) -> int:
    """How many of ``encode``'s ids come from the last piece BPE ran on (0 if text ends in a special token)."""
    start = 0
    if allowed:
        for m in special_token_regex(allowed).finditer(text):
            start = m.end()
    steps = enc.text_steps
    if steps is None:
        pieces = compile_pattern(enc.pat_str).split(text[start:])
    else:  # a tokenizer.json's steps split, not pat_str; its added tokens end a piece as special tokens do
        stretches, _ = steps.cut(text[start:])
        pieces = steps.split(stretches[-1])
    return len(enc._encode_single_piece(pieces[-1])) if pieces else 0


def _widen_over_whitespace(enc: Encoding, tokens: list[int], n_last: int) -> int:
    """``n_last``, grown over the whitespace tokens before the last piece if that piece starts with one:
    a piece boundary inside a run of whitespace can disappear when more text arrives."""
    if _is_whitespace_token(enc, tokens[-n_last]):
        while n_last < len(tokens) and _is_whitespace_token(enc, tokens[-n_last - 1]):
            n_last += 1
    return n_last


def _is_whitespace_token(enc: Encoding, token: int) -> bool:
    return not enc.is_special_token(token) and not enc.decode_single_token_bytes(token).strip(b" \n\t")


def _sorted_token_table(enc: Encoding) -> tuple[list[bytes], list[int]]:
    """``enc``'s ordinary tokens sorted by bytes, and their ids in that order."""
    table = _sorted_tokens.get(enc)
    if table is None:
        tokens = enc.token_byte_values()
        token_ids = enc.token_ids
        table = _sorted_tokens[enc] = (tokens, [token_ids[t] for t in tokens])
    return table


def _prefix_range(sorted_bytes: list[bytes], prefix: bytes) -> tuple[int, int]:
    """``(lo, hi)``: ``sorted_bytes[lo:hi]`` are the items that start with ``prefix``."""
    lo = bisect_left(sorted_bytes, prefix)
    # Items starting with prefix sort before the prefix with its last non-0xff byte increased.
    stem = prefix.rstrip(b"\xff")
    if not stem:
        return lo, len(sorted_bytes)
    return lo, bisect_left(sorted_bytes, stem[:-1] + bytes([stem[-1] + 1]), lo)


def _covering(enc: Encoding, ids: list[int], n_bytes: int) -> tuple[int, ...]:
    """The shortest start of ``ids`` whose bytes cover ``n_bytes``."""
    covered = 0
    for k, token in enumerate(ids, 1):
        covered += len(enc.decode_single_token_bytes(token))
        if covered >= n_bytes:
            return tuple(ids[:k])
    return tuple(ids)


def _bpe_ids(enc: Encoding, data: bytes) -> list[int]:
    """Plain BPE of ``data``, without the whole-piece rule (tiktoken's ``byte_pair_encode``)."""
    token_ids = enc.token_ids
    return [token_ids[part] for part in bpe.merge(data, enc.merge_ranks)]


def _last_char_size(data: bytes) -> int:
    """The length in bytes of the UTF-8 character that ends ``data``; 0 if ``data`` does not end in one."""
    start = len(data) - 1
    while start > max(len(data) - 4, 0) and data[start] & 0xC0 == 0x80:  # continuation byte: step back
        start -= 1
    try:
        last = data[start:].decode("utf-8")
    except UnicodeDecodeError:
        return 0
    return len(data) - start if len(last) == 1 else 0
