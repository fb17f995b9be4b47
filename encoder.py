"""GPT-2's encoder, with the interface of OpenAI's ``encoder.py`` (as picoGPT uses it).

    >>> enc = get_encoder("124M", "models")
    >>> enc.encode("Not all heroes wear capes.")
    [3673, 477, 10281, 5806, 1451, 274, 13]

``encoder.json`` maps each token, written through GPT-2's byte->unicode map (``"Ġworld"`` is ``b" world"``),
to its id; ``vocab.bpe`` lists the merges in priority order. This class only reads those files and exposes
them under OpenAI's names (``encoder``, ``decoder``, ``bpe_ranks``, ``byte_encoder``, ``byte_decoder``); the
encoding itself is :class:`tokenizer.Encoding`, the same BPE core as everything else here.
"""

from __future__ import annotations

import os
from pathlib import Path

import json

from tokenizer.bpe import merge
from tokenizer.encoding import Encoding
from tokenizer.formats import bytes_to_unicode, gpt2_str_to_token, gpt2_strs_to_tokens, token_to_gpt2_str
from tokenizer.pretokenize import GPT2_PATTERN

PACKAGED = Path(__file__).resolve().parent / "tokenizer" / "data"


class Encoder:
    """GPT-2's tokenizer from its two files, with OpenAI's attribute names."""

    def __init__(self, encoder: dict[str, int], bpe_merges: list[tuple[str, str]], errors: str = "replace"):
        self.encoder = encoder  # token string (byte->unicode mapped) -> id
        self.decoder = {v: k for k, v in encoder.items()}  # id -> token string
        self.errors = errors  # how to handle bytes that are not valid UTF-8 when decoding
        self.byte_encoder = bytes_to_unicode()  # byte -> printable character
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))  # (left, right) -> priority
        specials = [s for s in encoder if not _is_byte_level(s)]
        tokens = [s for s in encoder if _is_byte_level(s)]
        vocab = dict(zip(map(encoder.__getitem__, tokens), gpt2_strs_to_tokens(tokens, where="encoder.json")))
        halves = gpt2_strs_to_tokens([s for pair in bpe_merges for s in pair], where="vocab.bpe")
        merges = list(zip(halves[::2], halves[1::2]))
        self._encoding = Encoding.from_vocab_merges(vocab, merges, specials, name="gpt2-files", pat_str=GPT2_PATTERN)

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


def _is_byte_level(token: str) -> bool:
    return not (token.startswith("<|") and token.endswith("|>"))


def get_encoder(model_name: str, models_dir: str | os.PathLike) -> Encoder:
    """The encoder stored with a model (``{models_dir}/{model_name}/encoder.json`` and ``vocab.bpe``).

    When that folder has no vocab files, GPT-2's own (shipped in ``tokenizer/data``) are used: every GPT-2
    size shares them.
    """
    folder = Path(models_dir) / model_name
    if not (folder / "encoder.json").exists() or not (folder / "vocab.bpe").exists():
        folder = PACKAGED
    with open(folder / "encoder.json", encoding="utf-8") as f:
        encoder = json.load(f)
    with open(folder / "vocab.bpe", encoding="utf-8") as f:
        bpe_data = f.read()
    # the first line is a "#version" header; the last is empty
    bpe_merges = [tuple(line.split()) for line in bpe_data.split("\n")[1:] if line]
    return Encoder(encoder=encoder, bpe_merges=bpe_merges)
