"""``Tokenizer``: the interface of Stanford CS336's assignment 1, as a thin face over :class:`Encoding`.

The assignment has students write a class built from what a BPE trainer returns: ``vocab`` (id -> token bytes)
and ``merges`` (byte pairs in the order they were learned), plus special tokens that must never be split:

>>> from tokenizer import Tokenizer
>>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
>>> tok = Tokenizer(vocab, [(b"a", b"b")], special_tokens=["<|endoftext|>"])
>>> tok.encode("abc<|endoftext|>")
[256, 99, 258]
>>> tok.decode([256, 99, 258])
'abc<|endoftext|>'
>>> tok.vocab[258]  # a special token missing from the vocab is appended to it
b'<|endoftext|>'

One idea: CS336's rules are tiktoken's rules with two switches thrown, so this class only sets them and hands
the work to an ``Encoding`` (the same pre-tokenizer, BPE core, piece cache and streaming):

* the special tokens given are always special tokens (``allowed_special="all"``); where one is the start of
  another (``<|endoftext|>`` and ``<|endoftext|><|endoftext|>``) the longest wins;
* a pre-token is encoded by the merges alone (``whole_piece_tokens=False``). tiktoken takes a pre-token that is
  itself in the vocab whole; CS336 does not, so above ``"abc"`` is ``ab`` + ``c``, as no merge makes ``abc``.
  For a trainer's vocab the two rules agree: every token it holds is made by its merges.

Merges are ranked by the bytes they make (as everywhere in this package, see :mod:`tokenizer.bpe`), which is
applying them one after another in the order given for any merge list a trainer produces, and for GPT-2's.
A hand-written list can tell the two apart (``(b"ab", b"c")`` listed before ``(b"a", b"b")`` ranks ``abc``
ahead of ``ab``): such a list is encoded by rank.

This module does not train (:func:`tokenizer.train_bpe` does), write files (``tok.encoding.save`` does) or
offer tiktoken's options: ``tok.encoding`` is the underlying :class:`Encoding` for those.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Iterable, Iterator

from .encoding import Encoding
from .loading import load_encoding
from .vocab_files import read_gpt2_encoder_json, read_gpt2_vocab_bpe, read_json_object

# A pickle written with protocol 2 or later (pickle.dump's default) starts with this byte.
_PICKLE_MAGIC = b"\x80"
_PICKLED_VOCAB = "a pickled dict[int, bytes] (id -> token bytes)"
_PICKLED_MERGES = "a pickled list[tuple[bytes, bytes]] (the merges in order)"


class Tokenizer:
    """A byte-level BPE tokenizer with CS336's interface: ``encode``, ``encode_iterable``, ``decode``.

    Args:
        vocab: id -> token bytes. Kept as :attr:`vocab` (a copy), with the special tokens it lacks appended
            after its largest id.
        merges: the merges in the order they were learned, as ``(left bytes, right bytes)``.
        special_tokens: strings encoded as one id each, wherever they appear; kept as :attr:`special_tokens`
            (``[]`` for ``None``).
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: list[str] | None = None,
    ):
        self.special_tokens = _check_special_tokens(special_tokens)
        self._encoding = Encoding.from_vocab_merges(
            vocab, merges, self.special_tokens, name="cs336", whole_piece_tokens=False
        )
        self.vocab = dict(vocab)
        for text, idx in self._encoding.special_tokens.items():
            self.vocab.setdefault(idx, text.encode("utf-8"))
        self.merges = list(merges)

    @classmethod
    def from_files(
        cls,
        vocab_filepath: str | os.PathLike,
        merges_filepath: str | os.PathLike,
        special_tokens: list[str] | None = None,
    ) -> "Tokenizer":
        """A tokenizer from a vocab file and a merges file; what each file holds is detected from its content.

        * GPT-2's format: ``encoder.json`` (GPT-2 token string -> id, written through GPT-2's byte<->unicode
          map) and ``vocab.bpe`` / ``merges.txt`` (one merge per line). :meth:`Encoding.save` writes these.
        * Pickles (protocol 2 or later) of ``dict[int, bytes]`` and ``list[tuple[bytes, bytes]]``, as
          ``pickle.dump(vocab, f)`` writes them. Unpickling runs code: load only pickles you made.
        * Any other encoding this package saves (a ``tokenizer.json``, a ``.tiktoken`` file or a saved
          directory): pass the same path twice.

        A file of the wrong kind or a malformed one raises ``ValueError`` naming it.

        >>> import tempfile
        >>> from tokenizer import get_encoding
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     get_encoding("gpt2").save(folder)
        ...     tok = Tokenizer.from_files(f"{folder}/encoder.json", f"{folder}/vocab.bpe", ["<|endoftext|>"])
        >>> tok.encode("hello world<|endoftext|>")
        [31373, 995, 50256]
        """
        vocab = read_vocab(vocab_filepath)
        merges = read_merges(merges_filepath)
        try:
            return cls(vocab, merges, special_tokens)
        except ValueError as e:
            raise ValueError(f"{vocab_filepath} + {merges_filepath}: {e}") from None

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: special tokens as their ids, everything else by applying the merges.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode("hi")
        [104, 105]
        """
        return self._encoding.encode(text, allowed_special="all")

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily yield the ids of ``"".join(iterable)`` (e.g. an open text file, line by line) while holding
        only a bounded part of the text: see :mod:`tokenizer.streaming`."""
        return self._encoding.encode_iterable(iterable, allowed_special="all")

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).decode([104, 0xE4, 105])
        'h\\ufffdi'
        """
        return self._encoding.decode(list(ids))

    @property
    def encoding(self) -> Encoding:
        """The :class:`Encoding` doing the work (tiktoken's API: ``encode_batch``, ``decode_tokens_bytes``,
        ``save``, ...). Its ``encode`` refuses special tokens unless allowed, as tiktoken's does."""
        return self._encoding

    def __repr__(self) -> str:
        return f"<Tokenizer: {len(self.vocab)} tokens, {len(self.merges)} merges, special tokens {self.special_tokens}>"


def _check_special_tokens(special_tokens) -> list[str]:
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        raise TypeError(f"special_tokens must be a list of strings, e.g. [{special_tokens!r}], not one string")
    tokens = list(special_tokens)
    bad = next((t for t in tokens if not isinstance(t, str) or not t), None)
    if bad is not None:
        raise TypeError(f"special_tokens must be non-empty strings, got {bad!r}")
    return tokens


# ---- reading the files -------------------------------------------------------------------------------------


def read_vocab(path: str | os.PathLike) -> dict[int, bytes]:
    """id -> token bytes from an ``encoder.json``, a pickled ``dict[int, bytes]`` or a saved encoding."""
    path = Path(path)
    kind = _file_kind(path)
    if kind == "saved encoding":
        enc = load_encoding(path)
        vocab = {idx: token for token, idx in enc.token_ids.items()}
        return vocab | {idx: text.encode("utf-8") for text, idx in enc.special_tokens.items()}
    if kind == "pickle":
        vocab = _unpickle(path)
        if not isinstance(vocab, dict):
            raise ValueError(f"{path}: expected {_PICKLED_VOCAB}, got a {type(vocab).__name__}")
        bad = next(((i, t) for i, t in vocab.items() if type(i) is not int or type(t) is not bytes), None)
        if bad is not None:
            raise ValueError(f"{path}: expected {_PICKLED_VOCAB}, got the entry {bad!r:.80}")
        return vocab
    if kind == "json":
        token_ids, specials = read_gpt2_encoder_json(path)
        vocab = {idx: token for token, idx in token_ids.items()}
        return vocab | {idx: text.encode("utf-8") for text, idx in specials.items()}
    raise ValueError(
        f"{path}: not a vocab file (expected GPT-2's encoder.json, a pickled dict[int, bytes] or a saved "
        "encoding); is it the merges file?"
    )


def read_merges(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """The merges in order from a ``vocab.bpe`` / ``merges.txt``, a pickled list of byte pairs or a saved
    encoding."""
    path = Path(path)
    kind = _file_kind(path)
    if kind == "saved encoding":
        return load_encoding(path).merges
    if kind == "pickle":
        merges = _unpickle(path)
        if not isinstance(merges, (list, tuple)):
            raise ValueError(f"{path}: expected {_PICKLED_MERGES}, got a {type(merges).__name__}")
        bad = next((m for m in merges if not _is_byte_pair(m)), None)
        if bad is not None:
            raise ValueError(f"{path}: expected {_PICKLED_MERGES}, got the item {bad!r:.80}")
        return [(left, right) for left, right in merges]
    if kind == "json":
        raise ValueError(f"{path}: a JSON vocab (encoder.json), not a merges file; pass it as vocab_filepath")
    return read_gpt2_vocab_bpe(path)


def _file_kind(path: Path) -> str:
    """"saved encoding", "pickle", "json" (an encoder.json-style object) or "text"."""
    if path.is_dir() or path.suffix == ".tiktoken":
        return "saved encoding"
    with open(path, "rb") as f:
        head = f.read(1)
    if head == _PICKLE_MAGIC:
        return "pickle"
    if head == b"{":
        model = read_json_object(path, "a JSON object").get("model")
        return "saved encoding" if isinstance(model, dict) else "json"  # an HF tokenizer.json has a model
    return "text"


def _unpickle(path: Path):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception as e:  # a truncated or foreign pickle fails in many ways
        raise ValueError(f"{path}: not a readable pickle ({type(e).__name__}: {e})") from None


def _is_byte_pair(m) -> bool:
    return isinstance(m, (tuple, list)) and len(m) == 2 and type(m[0]) is bytes and type(m[1]) is bytes
