"""The reference core: ordinary text -> ids as the algorithm reads, in a screenful of pure Python.

An :class:`~tokenizer.encoding.Encoding` is a face (tiktoken's API: special tokens, batches, errors) over a
core that does the work both ways: ordinary text, with no special tokens in it, into token ids, and token ids
back into bytes. Every core has the same small interface::

    core.encode_ordinary_texts(texts: list[str]) -> list[list[int]]
    core.encode_ordinary_joined(texts: list[str], between: list[int]) -> list[int]
    core.decode_bytes(ids: Sequence[int]) -> bytes    # TypeError or IndexError for an id that is not a token

``encode_ordinary_joined`` is what a text with special tokens becomes: the face cuts the text at them and hands
over the stretches between (``texts``) and the special tokens' ids (``between``, one fewer), and gets back
the ids of the first stretch, the first special token, the second stretch, and so on.

The face hands it everything a call holds at once (a batch, or all the stretches between special tokens), so
that a fast core can work on them together. Two cores exist:

- :class:`ReferenceCore` (here): cut each text by the pattern (:mod:`tokenizer.pretokenize`), then run
  :func:`tokenizer.bpe.merge_reference` on each piece. No cache, no NumPy: slow, and easy to check by eye.
- :class:`tokenizer.fast.core.FastCore`: the same ids with caches, batch BPE and array operations. The tests
  hold it equal to this one (and to tiktoken) on every corpus and on fuzz.

``get_encoding(name, core="reference")`` or ``Encoding(..., core="reference")`` chooses this one.

>>> token_ids = {bytes([b]): b for b in range(256)} | {b"ab": 256}
>>> core = ReferenceCore(r" ?\\w+| ", {b"ab": 0}, token_ids, bytes_by_id=[*token_ids])
>>> core.encode_ordinary_texts(["ab ab", "ba"])  # pieces "ab", " ab" (" " + "ab"), then "ba" (no merge)
[[256, 32, 256], [98, 97]]
>>> core.decode_bytes([256, 32, 256])
b'ab ab'
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Mapping, Sequence

from .bpe import merge_reference
from .pretokenize import compile_pattern, replace_surrogates

if TYPE_CHECKING:
    from .hf_steps import TextSteps


class ReferenceCore:
    """Ordinary text -> ids: the pattern's pieces, each merged by :func:`tokenizer.bpe.merge_reference`.

    ``whole_piece_tokens``: a piece that is itself a token is that token (tiktoken's rule), even where the
    merges would not build it; False runs the merges alone (CS336's rule). ``bytes_by_id``: each id's bytes
    (special tokens included), None where an id is not a token; the face makes it (see ``Encoding``).
    ``text_steps`` (:class:`tokenizer.hf_steps.TextSteps`, from a ``tokenizer.json``) replaces the pattern:
    each text is normalized and cut at its added tokens, then each stretch split into pieces by the steps.
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
        self.pretokenizer = compile_pattern(pat_str) if text_steps is None else text_steps
        self.text_steps = text_steps
        self.merge_ranks = merge_ranks
        self.token_ids = token_ids
        self.whole_piece_tokens = whole_piece_tokens
        self.bytes_by_id = bytes_by_id

    def encode_ordinary_texts(self, texts: list[str]) -> list[list[int]]:
        ids_of_texts = []
        for text in texts:
            # A lone surrogate cannot be UTF-8: like tiktoken, U+FFFD stands in for it.
            text = replace_surrogates(text)
            if self.text_steps is None:
                ids_of_texts.append(self.encode_stretch(text))
            else:  # a tokenizer.json's steps: normalized, cut at added tokens, each stretch then split
                stretches, added_ids = self.text_steps.cut(text)
                ids_of_texts.append(interleave(list(map(self.encode_stretch, stretches)), added_ids))
        return ids_of_texts

    def encode_stretch(self, text: str) -> list[int]:
        """The ids of text that holds no special or added token: its pieces, each merged."""
        ids = []
        for piece in self.pretokenizer.split(text):
            whole = self.token_ids.get(piece.encode("utf-8")) if self.whole_piece_tokens else None
            if whole is not None:
                ids.append(whole)  # a piece that is a token is that token
            else:
                for token in merge_reference(piece.encode("utf-8"), self.merge_ranks):
                    ids.append(self.token_ids[token])
        return ids

    def encode_ordinary_joined(self, texts: list[str], between: list[int]) -> list[int]:
        return interleave(self.encode_ordinary_texts(texts), between)

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        return b"".join(map(self.bytes_by_id.__getitem__, ids))


def interleave(ids_of_texts: list[list[int]], between: list[int]) -> list[int]:
    """The ids of the first text, ``between[0]``, the ids of the second text, and so on (one text more than
    ``between``).

    >>> interleave([[1, 2], [], [3]], [50256, 50257])
    [1, 2, 50256, 50257, 3]
    """
    if not between:
        return ids_of_texts[0]
    parts: list = [None] * (2 * len(between) + 1)
    parts[0::2] = ids_of_texts
    parts[1::2] = zip(between)  # (each id between as a 1-tuple)
    return list(chain.from_iterable(parts))
