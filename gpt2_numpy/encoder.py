"""GPT-2's text <-> ids, with the interface of OpenAI's ``encoder.py`` (as picoGPT uses it).

    >>> enc = get_encoder("124M", "models")
    >>> enc.encode("Not all heroes wear capes.")
    [3673, 477, 10281, 5806, 1451, 274, 13]

``encoder.json`` maps each token, written through GPT-2's byte->unicode map (``"Ġworld"`` is ``b" world"``),
to its id; ``vocab.bpe`` lists the merges in priority order. The files are read (and checked) by
:mod:`tokenizer.vocab_files`; this module only exposes them under OpenAI's names (``encoder``, ``decoder``,
``bpe_ranks``, ``byte_encoder``, ``byte_decoder``). The encoding itself is :class:`tokenizer.Encoding`, the
same BPE core as everything else here.

What it does not do: tokenize by itself, or know about the model. The checkout's ``encoder.py`` (picoGPT's
file) re-exports this module.
"""

from __future__ import annotations

import os
from pathlib import Path

import tokenizer
from tokenizer import Encoding, get_encoding, merge
from tokenizer.download import sha256_file
from tokenizer.pretokenize import GPT2_PATTERN
from tokenizer.registry import GPT2_ENCODER_JSON, GPT2_VOCAB_BPE
from tokenizer.vocab_files import (
    bytes_to_unicode,
    gpt2_merges,
    gpt2_str_to_token,
    gpt2_vocab,
    read_encoder_json,
    read_vocab_bpe,
    token_to_gpt2_str,
)

from .models_dir import MODEL_SIZES

PACKAGED = Path(tokenizer.__file__).resolve().parent / "data"  # GPT-2's encoder.json and vocab.bpe, shipped
GPT2_MODEL_NAMES = MODEL_SIZES  # every size uses the same vocabulary: the packaged files


class Encoder:
    """GPT-2's tokenizer from its two files, with OpenAI's attribute names."""

    def __init__(self, encoder: dict[str, int], bpe_merges: list[tuple[str, str]], errors: str = "replace", *,
                 encoding: Encoding | None = None):
        """``encoding``: the :class:`tokenizer.Encoding` of these very files, if the caller has it (GPT-2's
        shared one, say); else one is built from them."""
        self.encoder = encoder  # token string (byte->unicode mapped) -> id
        self.decoder = {v: k for k, v in encoder.items()}  # id -> token string
        self.errors = errors  # how to handle bytes that are not valid UTF-8 when decoding
        self.byte_encoder = bytes_to_unicode()  # byte -> printable character
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))  # (left, right) -> priority
        self._encoding = encoding or _encoding_of(encoder, bpe_merges)

    def bpe(self, token: str) -> str:
        """OpenAI's ``bpe``: a byte->unicode mapped pre-token split into tokens, joined by spaces."""
        data = gpt2_str_to_token(token)
        return " ".join(token_to_gpt2_str(part) for part in merge(data, self._encoding.merge_ranks))

    def encode(self, text: str) -> list[int]:
        """Text -> ids. Like OpenAI's encoder, ``<|endoftext|>`` in the text is plain text here."""
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens) -> str:
        """Ids -> text (invalid UTF-8 handled by ``errors``, ``"replace"`` by default)."""
        return self._encoding.decode(tokens, errors=self.errors)

    @property
    def encoding(self) -> Encoding:
        """The :class:`tokenizer.Encoding` doing the work (tiktoken's API)."""
        return self._encoding


def _encoding_of(encoder: dict[str, int], bpe_merges: list[tuple[str, str]]) -> Encoding:
    """A new :class:`tokenizer.Encoding` of an ``encoder.json`` table and ``vocab.bpe`` merges."""
    token_ids, specials = gpt2_vocab(encoder)
    vocab = {i: t for t, i in token_ids.items()} | {i: s.encode("utf-8") for s, i in specials.items()}
    return Encoding.from_vocab_merges(vocab, gpt2_merges(bpe_merges), specials, name="gpt2-files",
                                      pat_str=GPT2_PATTERN)


def holds_gpt2_vocabulary(folder: str | os.PathLike) -> bool:
    """Are ``folder``'s ``encoder.json`` and ``vocab.bpe`` GPT-2's own, byte for byte (their sha256 are those of
    the files OpenAI published, which this package ships)?"""
    folder = Path(folder)
    return (sha256_file(folder / "encoder.json") == GPT2_ENCODER_JSON.sha256
            and sha256_file(folder / "vocab.bpe") == GPT2_VOCAB_BPE.sha256)


def get_encoder(model_name: str, models_dir: str | os.PathLike) -> Encoder:
    """The encoder stored with a model (``{models_dir}/{model_name}/encoder.json`` and ``vocab.bpe``).

    For GPT-2's own model names (124M, 355M, 774M, 1558M) a folder without the files falls back to GPT-2's
    vocabulary shipped in ``tokenizer/data``: every size shares it. Any other name must be a folder holding both
    files; FileNotFoundError says which is missing (a typo in the name is not silently GPT-2). Files that are
    GPT-2's own (:func:`holds_gpt2_vocabulary`) encode with ``get_encoding("gpt2")``, shared with the rest of the
    process; any other vocabulary gets an Encoding of its own.
    """
    folder = Path(models_dir) / model_name
    missing = [name for name in ("encoder.json", "vocab.bpe") if not (folder / name).is_file()]
    if missing and model_name in GPT2_MODEL_NAMES:
        folder = PACKAGED
    elif missing:
        what = "folder does not exist" if not folder.is_dir() else f"folder has no {' and no '.join(missing)}"
        raise FileNotFoundError(
            f"{folder}: no tokenizer files there (the {what}). Pass the folder that holds encoder.json and "
            f"vocab.bpe, or one of GPT-2's model names {', '.join(GPT2_MODEL_NAMES)} for GPT-2's own vocabulary"
        )
    # GPT-2's own files (any size's) get the process's shared GPT-2 Encoding; other files, one of their own
    shared = get_encoding("gpt2") if folder == PACKAGED or holds_gpt2_vocabulary(folder) else None
    return Encoder(encoder=read_encoder_json(folder / "encoder.json"), bpe_merges=read_vocab_bpe(folder / "vocab.bpe"),
                   encoding=shared)
