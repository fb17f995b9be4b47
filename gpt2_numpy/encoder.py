"""GPT-2's text <-> ids as OpenAI's ``encoder.py`` does it (the file picoGPT uses), and runs here.

    >>> enc = get_encoder("124M", "models")
    >>> enc.encode("Not all heroes wear capes.")
    [3673, 477, 10281, 5806, 1451, 274, 13]
    >>> enc.bpe("Ġcapes")
    'Ġcap es'

``encoder.json`` maps each token, written through GPT-2's byte->unicode map (``"Ġworld"`` is ``b" world"``),
to its id; ``vocab.bpe`` lists the merges in the order they were learned. OpenAI's algorithm works on those
strings directly:

1. ``pat`` cuts the text into pre-tokens (``" heroes"``), each written with ``byte_encoder`` (``"Ġheroes"``);
2. :meth:`Encoder.bpe` splits the word into its characters and, again and again, joins the adjacent pair
   (:func:`get_pairs`) that comes first in ``vocab.bpe`` (``bpe_ranks``: pair -> 0-based line among the
   merges), until no pair is a merge; the answer, parts joined by spaces, is kept in ``cache``;
3. ``encoder`` gives each part's id.

That loop is the same algorithm as :func:`tokenizer.bpe.merge_reference` (which ranks the merged bytes,
``b" c"`` -> token id 269, rather than the pair ``("Ġ", "c")`` -> merge #13) and gives the same ids as the
fast core: tests check both, and ``docs/04-three-spellings-of-bpe.md`` sets them side by side.

What this module is not: fast. Python string work over every pre-token (saved only by ``cache`` for repeated
words) runs an order of magnitude slower than :class:`tokenizer.Encoding`, the same vocabulary through the fast
core (docs/performance-notes.md has the figures). Long texts and the product's hot paths (``gpt2 --score``, the
playground, the tokenizer's commands) use that ``Encoding``, exposed here as :attr:`Encoder.encoding`; a prompt
(``gpt2 "prompt"``, picoGPT's ``main``) goes through :meth:`Encoder.encode`, as in picoGPT.

The files are read (and checked) by :mod:`tokenizer.vocab_files`; the checkout's ``encoder.py`` (picoGPT's
file) re-exports this module.
"""

from __future__ import annotations

import os
from pathlib import Path

import regex

import tokenizer
from tokenizer import Encoding, get_encoding
from tokenizer.download import sha256_file
from tokenizer.pretokenize import GPT2_PATTERN, replace_surrogates
from tokenizer.registry import GPT2_ENCODER_JSON, GPT2_VOCAB_BPE
from tokenizer.vocab_files import (bytes_to_unicode, gpt2_merges, gpt2_vocab, is_gpt2_special_token,
                                   read_encoder_json, read_vocab_bpe)

from .models_dir import MODEL_SIZES

PACKAGED = Path(tokenizer.__file__).resolve().parent / "data"  # GPT-2's encoder.json and vocab.bpe, shipped
GPT2_MODEL_NAMES = MODEL_SIZES  # every size uses the same vocabulary: the packaged files


def get_pairs(word: tuple[str, ...]) -> set[tuple[str, str]]:
    """The adjacent pairs of symbols in ``word`` (a tuple of strings), as a set.

    >>> sorted(get_pairs(("Ġ", "c", "a", "p")))
    [('a', 'p'), ('c', 'a'), ('Ġ', 'c')]
    """
    return set(zip(word, word[1:]))


class Encoder:
    """GPT-2's tokenizer from its two files, as OpenAI's ``encoder.py`` holds and runs it.

    ``encoder`` is ``encoder.json`` (token string -> id), ``bpe_merges`` the pairs of ``vocab.bpe`` in order,
    ``errors`` how :meth:`decode` handles bytes that are not UTF-8 (``"replace"``: U+FFFD).
    """

    def __init__(self, encoder: dict[str, int], bpe_merges: list[tuple[str, str]], errors: str = "replace", *,
                 encoding: Encoding | None = None):
        """``encoding``: the :class:`tokenizer.Encoding` of these very files, if the caller has it (GPT-2's
        shared one, say, or :func:`encoding_of` them); else one is built from them when :attr:`encoding` is
        first asked for. OpenAI's ``Encoder`` takes any table, a toy one of a few strings too, and so does this
        one: ``bpe()``, ``encode()`` and ``decode()`` need no ``Encoding``."""
        self.encoder = encoder  # token string (byte->unicode mapped) -> id
        self.decoder = {v: k for k, v in encoder.items()}  # id -> token string
        self.errors = errors  # how to handle bytes that are not valid UTF-8 when decoding
        self.byte_encoder = bytes_to_unicode()  # byte -> printable character
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))  # (left, right) -> 0-based merge index
        merged = {left + right for left, right in self.bpe_ranks}  # the token strings the merges make
        self.cache: dict[str, str] = {}  # pre-token string -> bpe()'s answer, filled as words are met
        self.pat = regex.compile(GPT2_PATTERN)  # GPT-2's pre-tokenizer, as OpenAI wrote it
        # ids whose string is special-token text, not mapped bytes (one a merge makes, as <|>, is BPE's own)
        self.special_ids = {i for text, i in encoder.items() if is_gpt2_special_token(text) and text not in merged}
        self._encoding = encoding  # None: built on first use (the fast core refuses a table that is no byte-level BPE)

    def bpe(self, token: str) -> str:
        """One pre-token (byte->unicode mapped, ``"Ġcapes"``) -> its tokens, joined by spaces (``"Ġcap es"``).

        Start from the characters; while some adjacent pair is a merge, join every occurrence of the pair
        learned first (lowest ``bpe_ranks``), left to right. ``cache`` remembers each word's answer.

        >>> enc = get_encoder("124M", "models")
        >>> enc.bpe("Ġheroes"), enc.bpe("Ġcapes")
        ('Ġheroes', 'Ġcap es')
        """
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)
        while pairs:
            # the pair learned first; a pair that is no merge ranks after every merge
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            pairs = get_pairs(word)
        joined = " ".join(word)
        self.cache[token] = joined
        return joined

    def encode(self, text: str) -> list[int]:
        """Text -> ids, by OpenAI's algorithm: ``pat``, ``byte_encoder``, :meth:`bpe`, ``encoder``.

        ``<|endoftext|>`` in the text is plain text here, as in OpenAI's encoder. A lone surrogate (which UTF-8
        cannot hold; OpenAI's raised) becomes U+FFFD, as in tiktoken. For long texts use :attr:`encoding`
        (``enc.encoding.encode_ordinary(text)``): the same ids, many times faster.
        """
        bpe_tokens: list[int] = []
        for piece in self.pat.findall(replace_surrogates(text)):
            word = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            bpe_tokens.extend(self.encoder[part] for part in self.bpe(word).split(" "))
        return bpe_tokens

    def decode(self, tokens) -> str:
        """Ids -> text: each id's string back to its bytes through ``byte_decoder``, then UTF-8 (invalid bytes
        handled by ``errors``). A special token's string is its own text (OpenAI's files hold only
        ``<|endoftext|>``, whose characters the byte map leaves alone)."""
        data = bytearray()
        for token in tokens:
            if token not in self.decoder:
                raise KeyError(f"token id {token!r} is not in this vocabulary (ids 0 to {len(self.decoder) - 1})")
            text = self.decoder[token]
            data += text.encode("utf-8") if token in self.special_ids else bytes(self.byte_decoder[c] for c in text)
        return data.decode("utf-8", errors=self.errors)

    @property
    def encoding(self) -> Encoding:
        """The same vocabulary as a :class:`tokenizer.Encoding` (tiktoken's API, the fast core): what long texts
        and hot paths use. ``enc.encoding.encode_ordinary(text) == enc.encode(text)``."""
        if self._encoding is None:
            # the merges in bpe()'s order: bpe_ranks is what bpe() applies
            self._encoding = encoding_of(self.encoder, sorted(self.bpe_ranks, key=self.bpe_ranks.__getitem__))
        return self._encoding


def encoding_of(encoder: dict[str, int], bpe_merges: list[tuple[str, str]]) -> Encoding:
    """A new :class:`tokenizer.Encoding` of an ``encoder.json`` table and ``vocab.bpe`` merges."""
    token_ids, specials = gpt2_vocab(encoder, merged={left + right for left, right in bpe_merges})
    vocab = {i: t for t, i in token_ids.items()} | {i: s.encode("utf-8") for s, i in specials.items()}
    # merges only, as bpe() applies them: a piece that is itself a token but no merge makes it (a hand-made
    # vocabulary) keeps bpe()'s ids; for vocabularies BPE trained, the two rules agree (walkthrough 04)
    return Encoding.from_vocab_merges(vocab, gpt2_merges(bpe_merges), specials, name="gpt2-files",
                                      pat_str=GPT2_PATTERN, whole_piece_tokens=False)


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
    table, merges = read_encoder_json(folder / "encoder.json"), read_vocab_bpe(folder / "vocab.bpe")
    # GPT-2's own files (any size's) get the process's shared GPT-2 Encoding; other files, one of their own, built
    # now so that files the fast core refuses stop here rather than at a later encode
    shared = get_encoding("gpt2") if folder == PACKAGED or holds_gpt2_vocabulary(folder) else None
    return Encoder(encoder=table, bpe_merges=merges, encoding=shared or encoding_of(table, merges))
