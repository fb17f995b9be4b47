"""``Encoding``: text <-> token ids, with tiktoken's API, over pre-tokenization and the BPE core.

Encoding runs three steps: special tokens are found first (only those you allow), the text between them is
cut into pieces by the pattern (:mod:`tokenizer.pretokenize`), and each piece becomes ids by BPE
(:mod:`tokenizer.bpe`). Decoding looks each id up and joins the bytes.

>>> from tokenizer import get_encoding
>>> enc = get_encoding("gpt2")
>>> enc.encode("hello world")
[31373, 995]

The work of turning ordinary text into ids is done by a core object (:mod:`tokenizer.core`), to which this
face hands every stretch of ordinary text of a call at once. ``core="reference"`` is the readable one, the
pattern's split and :func:`tokenizer.bpe.merge_reference` in a screenful of Python;``core="fast"`` (the
default) gives the same ids at tiktoken's speed (:mod:`tokenizer.fast.core`).
"""

from __future__ import annotations

import copy
import functools
import operator
import sys
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import TYPE_CHECKING, AbstractSet, Callable, Collection, Iterable, Iterator, Literal, Mapping, Sequence, TypeVar

from . import bpe, saving, streaming, unstable
from .core import ReferenceCore, interleave
from .pretokenize import GPT2_PATTERN, compile_pattern, special_token_regex, special_tokens_in
from .special_advice import SpecialTokenRefusal

if TYPE_CHECKING:
    import numpy as np

    from .hf_steps import TextSteps

# Threads run this pure-Python code in parallel only on a free-threaded build (3.13t+); with the GIL they
# only add overhead, so the batch methods use them only when this is true.
THREADS_RUN_IN_PARALLEL = not getattr(sys, "_is_gil_enabled", lambda: True)()

CORES = ("fast", "reference")

# How an encoding is found by its name (tiktoken's pickled state of a shared encoding): set by the registry,
# which imports this module, so that this one needs no import of it.
encoding_by_name: Callable[[str], "Encoding"] | None = None


class Encoding:
    """A byte-level BPE tokenizer with the API of ``tiktoken.Encoding``.

    Args:
        name: what the encoding is called (``"gpt2"``, ``"cl100k_base"``, ...).
        pat_str: the pre-tokenization regular expression.
        mergeable_ranks: token bytes -> rank. As in tiktoken, the rank is both the token's id and its merge
            priority (lower merges first).
        special_tokens: special token text -> id, e.g. ``{"<|endoftext|>": 50256}``.
        explicit_n_vocab: if given, checked against the number of tokens.
        core: what turns ordinary text into ids: ``"fast"`` (the default) or ``"reference"``, the readable
            one (:mod:`tokenizer.core`); both give the same ids.

    Use :meth:`from_vocab_merges` for a ``vocab`` + ``merges`` pair (a trained tokenizer, CS336 style). The
    tables are readable (not writable) as :attr:`token_ids`, :attr:`merge_ranks` and :attr:`merges`.
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
        core: str = "fast",
    ):
        self._setup(name, pat_str, mergeable_ranks, mergeable_ranks, special_tokens, merges=None, core=core)
        if explicit_n_vocab is not None:
            n_tokens = len(mergeable_ranks) + len(special_tokens)
            if n_tokens != explicit_n_vocab or self.max_token_value != explicit_n_vocab - 1:
                raise ValueError(
                    f"encoding {name!r}: explicit_n_vocab={explicit_n_vocab} but there are {n_tokens} tokens "
                    f"with ids up to {self.max_token_value}"
                )

    @classmethod
    def from_vocab_merges(
        cls,
        vocab: dict[int, bytes],
        merges: Sequence[tuple[bytes, bytes]],
        special_tokens: Iterable[str] = (),
        *,
        name: str = "custom",
        pat_str: str = GPT2_PATTERN,
        whole_piece_tokens: bool = True,
        core: str = "fast",
        text_steps: TextSteps | None = None,
        hf_post_processing: dict | None = None,
    ) -> "Encoding":
        """An encoding from a vocab (id -> bytes) and merges (in priority order), as a BPE trainer returns them.

        Merge priority is the position in ``merges``; a token's id is the vocab's id for its bytes (ids need
        not equal ranks: GPT-2's own vocab + merges give GPT-2's ids). Special tokens missing from the vocab
        get new ids after the largest one.

        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
        >>> Encoding.from_vocab_merges(vocab, [(b"a", b"b")]).encode("abc")
        [256, 99]

        ``whole_piece_tokens`` decides what happens to a pre-token that is itself in the vocab but that the
        merges do not build (a hand-made vocab can hold such tokens; a trainer's cannot). True (tiktoken's
        rule, the default): the pre-token is that token. False (CS336's rule): only the merges decide, applied
        in order, and the token is never produced.

        >>> vocab[257] = b"abc"  # no merge makes "abc"
        >>> Encoding.from_vocab_merges(vocab, [(b"a", b"b")]).encode("abc")
        [257]
        >>> Encoding.from_vocab_merges(vocab, [(b"a", b"b")], whole_piece_tokens=False).encode("abc")
        [256, 99]

        ``text_steps`` (a :class:`tokenizer.hf_steps.TextSteps`, as :func:`tokenizer.load` makes from a
        ``tokenizer.json``) replaces the pattern: a normalizer, several splits, added tokens that are not
        special. ``pat_str`` is then only shown, not used.

        ``hf_post_processing`` (:attr:`hf_post_processing`: a ``tokenizer.json``'s ``post_processor``,
        ``truncation`` and ``padding``) is kept as data for ``save(format="hf")``; it changes no id here.
        """
        if hf_post_processing is not None and not isinstance(hf_post_processing, dict):
            raise TypeError("hf_post_processing must be a tokenizer.json's sections as a dict ({'post_processor': "
                            f"...}}) or None, not {type(hf_post_processing).__name__}")
        if special_tokens is None:  # none, as Tokenizer and train_bpe read it
            special_tokens = ()
        if isinstance(special_tokens, (str, bytes)):  # else each of its characters would be a special token
            raise TypeError(f"special_tokens must be a list of strings, e.g. [{special_tokens!r}], not one string")
        special_tokens = list(special_tokens)
        bad_special = next((s for s in special_tokens if not isinstance(s, str) or not s), None)
        if bad_special is not None:  # (an empty one would fail only at the first encode, inside the split)
            raise TypeError(f"special_tokens must be non-empty strings, got {bad_special!r}")
        special_bytes = {s.encode("utf-8") for s in special_tokens}
        bad = next(((i, t) for i, t in vocab.items() if type(t) is not bytes or type(i) is not int), None)
        if bad:
            raise TypeError(f"vocab must map int ids to bytes, got {bad[0]!r}: {bad[1]!r}")
        # bytes -> id; where two ids hold the same bytes the first wins (reversed: earlier entries written last)
        token_ids = {t: i for i, t in reversed(vocab.items()) if t not in special_bytes}
        missing_bytes = [bytes([b]) for b in range(256) if bytes([b]) not in token_ids]
        special_byte = next((b for b in missing_bytes if b in special_bytes), None)
        if special_byte is not None:  # the vocab has it, as a special token: a mistake in special_tokens
            raise ValueError(f"special token {special_byte.decode()!r} is one byte, which ordinary text needs as its "
                             "own token (a special token's bytes are never one): use two or more characters")
        if missing_bytes:
            raise ValueError(
                f"vocab lacks {len(missing_bytes)} single-byte token{'s' * (len(missing_bytes) > 1)} (e.g. "
                f"{missing_bytes[0]!r}); byte-level BPE needs all 256 so that any text can be encoded"
            )
        merged = [left + right for left, right in merges]
        unknown = next((rank for rank, m in enumerate(merged) if m not in token_ids), None)
        if unknown is not None:
            left, right = merges[unknown]
            raise ValueError(f"merge #{unknown} {left!r} + {right!r} makes {left + right!r}, which is not in the vocab")
        # merged bytes -> priority; a second merge making the same bytes keeps the first one's priority
        merge_ranks = dict(zip(reversed(merged), range(len(merged) - 1, -1, -1)))
        by_bytes = {token: idx for idx, token in vocab.items()}
        next_id = max(vocab, default=-1) + 1
        specials: dict[str, int] = {}
        for s in special_tokens:
            idx = by_bytes.get(s.encode("utf-8"))
            if idx is None:
                idx, next_id = next_id, next_id + 1
            specials[s] = idx
        enc = cls.__new__(cls)
        enc._setup(
            name,
            pat_str,
            merge_ranks,
            token_ids,
            specials,
            merges=[(a, b) for a, b in merges],
            whole_piece_tokens=whole_piece_tokens,
            core=core,
            text_steps=text_steps,
            hf_post_processing=hf_post_processing,
        )
        return enc

    def _setup(
        self, name, pat_str, merge_ranks, token_ids, special_tokens, *, merges, whole_piece_tokens=True, core="fast",
        text_steps=None, hf_post_processing=None,
    ) -> None:
        if core not in CORES:
            raise ValueError(f"core must be one of {', '.join(map(repr, CORES))}, got {core!r}")
        self.name = name
        self._pat_str = pat_str
        self._merge_ranks = merge_ranks  # token bytes -> merge priority (lower merges first)
        self._token_ids = token_ids  # token bytes -> id; the same dict as _merge_ranks for tiktoken's files
        self._mergeable_ranks = token_ids  # tiktoken's name: what its constructor takes (a rank is an id)
        self._merges = merges  # [(left, right), ...] as given to from_vocab_merges; None: recover when asked
        self._whole_piece_tokens = whole_piece_tokens  # a piece that is a token is that token (tiktoken's rule)
        self._text_steps = text_steps  # a tokenizer.json's steps before BPE, in place of the pattern; or None
        # a tokenizer.json's sections HF runs after BPE (a BOS the post-processor adds): only kept, to be saved again
        self._hf_post_processing = copy.deepcopy(hf_post_processing)
        self._special_tokens = dict(special_tokens)
        self._decoder: dict[int, bytes] = {idx: token for token, idx in token_ids.items()}
        # reversed: where two special tokens share an id (o200k_harmony's 200018) the first listed decodes it
        for text, idx in reversed(self._special_tokens.items()):
            self._decoder[idx] = text.encode("utf-8")
        self._special_token_values = frozenset(self._special_tokens.values())
        self._refused_by_default = (frozenset(), frozenset(self._special_tokens))  # special_token_sets' default
        self._all_allowed = (frozenset(self._special_tokens), frozenset())  # and its allowed_special="all"
        self.max_token_value = max(self._decoder, default=-1)
        # The decoder again as a list by id, for the cores' decode_bytes: a list is indexed faster than a dict is
        # looked up. Its second half is None, and so is an unused id: a negative id (which a list would take from
        # its end) and any other that is not a token then fail the join, and the error is found as for the dict.
        bytes_by_id: list[bytes | None] = [None] * (2 * (self.max_token_value + 1))
        for idx, data in self._decoder.items():
            bytes_by_id[idx] = data
        self.core_name = core
        tables = dict(whole_piece_tokens=whole_piece_tokens, bytes_by_id=bytes_by_id, text_steps=text_steps)
        if core == "reference":
            self.core = ReferenceCore(pat_str, merge_ranks, token_ids, **tables)
        else:
            from .fast.core import FastCore  # only here: the reference core never loads tokenizer.fast

            self.core = FastCore(pat_str, merge_ranks, token_ids, **tables)

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    def __reduce__(self):
        # An encoding is sent as its tables; its core's caches are not sent (they are rebuilt on use). The registry's
        # encodings are sent by name instead (tokenizer.registry.RegisteredEncoding).
        state = (self.name, self._pat_str, self._merge_ranks, self._token_ids, self._special_tokens, self._merges)
        return (_rebuild, (*state, self._whole_piece_tokens, self.core_name, self._text_steps,
                           self._hf_post_processing))

    # tiktoken's pickling hooks, kept with its meaning for code that calls them (pickle itself uses __reduce__):
    # the state is the encoding's name if it is the registry's shared one, else Encoding's arguments as a dict.

    def _registry_name(self) -> str | None:
        """The name the registry shares this encoding under (None here; see RegisteredEncoding)."""
        return None

    def __getstate__(self) -> object:
        name = self._registry_name()
        if name is not None:
            return name
        state = {"name": self.name, "pat_str": self._pat_str, "mergeable_ranks": self._mergeable_ranks,
                 "special_tokens": self._special_tokens}
        if (self._merge_ranks is not self._token_ids or not self._whole_piece_tokens or self._text_steps
                or self._hf_post_processing is not None):
            # not tiktoken's kind (ids are not merge priorities): what from_vocab_merges needs instead
            state["merges"] = self.merges
            state["whole_piece_tokens"] = self._whole_piece_tokens
            if self._text_steps is not None:
                state["text_steps"] = self._text_steps
            if self._hf_post_processing is not None:
                state["hf_post_processing"] = self.hf_post_processing
        if self.core_name != "fast":
            state["core"] = self.core_name
        return state

    def __setstate__(self, value: object) -> None:
        if isinstance(value, str):  # a registered encoding, by name: share the registry's
            if encoding_by_name is None:
                raise ValueError(f"no registry to find encoding {value!r} by name: import tokenizer first")
            self.__dict__ = encoding_by_name(value).__dict__
            return
        value = dict(value)
        if "merges" in value:
            vocab = {i: t for t, i in value["mergeable_ranks"].items()}
            # the special tokens at their own ids (from_vocab_merges gives one missing from the vocab a new id)
            vocab.update((i, text.encode("utf-8")) for text, i in value["special_tokens"].items())
            other = Encoding.from_vocab_merges(
                vocab, value["merges"], value["special_tokens"], name=value["name"], pat_str=value["pat_str"],
                whole_piece_tokens=value.get("whole_piece_tokens", True), core=value.get("core", "fast"),
                text_steps=value.get("text_steps"), hf_post_processing=value.get("hf_post_processing"),
            )
            self.__dict__ = other.__dict__
            return
        self.__init__(**value)

    # ---- encoding ------------------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text``, treating special tokens as plain text.

        >>> enc.encode_ordinary("hello world<|endoftext|>")
        [31373, 995, 27, 91, 437, 1659, 5239, 91, 29]
        """
        try:
            return self.core.encode_ordinary_texts([text])[0]
        except (TypeError, AttributeError):
            check_texts([text], "encode_ordinary")
            raise

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006 - tiktoken's signature
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode ``text``. Special tokens are encoded as such only when allowed.

        By default any text that spells a special token raises ``ValueError`` (a prompt injection guard);
        pass it in ``allowed_special`` to get its id, or exclude it from ``disallowed_special`` to encode it
        as plain text.

        >>> enc.encode("hello <|endoftext|>", allowed_special="all")
        [31373, 220, 50256]
        >>> enc.encode("hello <|endoftext|>", disallowed_special=())
        [31373, 1279, 91, 437, 1659, 5239, 91, 29]
        """
        allowed, disallowed = self.special_token_sets(
            allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        try:
            self.check_disallowed_special(text, disallowed, allowed=allowed, disallowed_special=disallowed_special)
            if not allowed:
                return self.core.encode_ordinary_texts([text])[0]
            stretches, specials = self._cut_at_special_tokens(text, allowed)
        except (TypeError, AttributeError):
            check_texts([text], "encode")
            raise
        return self.core.encode_ordinary_joined(stretches, specials)

    def _cut_at_special_tokens(self, text: str, allowed: AbstractSet[str]) -> tuple[list[str], list[int]]:
        """``(stretches, specials)``: the text between the ``allowed`` special tokens (one stretch more than
        there are special tokens), and the special tokens' ids."""
        # one token allowed (gpt2's only one): no need to ask which are present first
        present = allowed if len(allowed) == 1 else special_tokens_in(text, frozenset(allowed))
        if len(present) == 1:
            # one token to find: str.split finds it left to right without overlaps, as the regex would
            (token,) = present
            stretches = text.split(token)
            return stretches, [self._special_tokens[token]] * (len(stretches) - 1)
        stretches, specials = [], []
        start = 0
        if present:
            for m in special_token_regex(present).finditer(text):
                stretches.append(text[start : m.start()])
                specials.append(self._special_tokens[m.group()])
                start = m.end()
        stretches.append(text[start:])
        return stretches, specials

    def special_token_sets(
        self,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006 - encode's signature
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[frozenset[str], frozenset[str]]:
        """``(allowed, disallowed)``: the special tokens :meth:`encode` with these arguments encodes as special
        tokens, and those whose text it refuses. For code that encodes in its own way (streaming) but must
        treat special tokens exactly as ``encode`` does.

        >>> enc.special_token_sets()
        (frozenset(), frozenset({'<|endoftext|>'}))
        >>> enc.special_token_sets(allowed_special="all")
        (frozenset({'<|endoftext|>'}), frozenset())
        """
        if disallowed_special == "all" and type(allowed_special) in (set, frozenset) and not allowed_special:
            return self._refused_by_default  # encode's default, by far the commonest call: made once
        if allowed_special == "all" and disallowed_special == "all":
            return self._all_allowed  # the next commonest (chat templates, documents joined), made once too
        if allowed_special == "all":
            allowed = frozenset(self._special_tokens)
        elif isinstance(allowed_special, str):
            raise TypeError(f'allowed_special must be "all" or a set of special tokens, got {allowed_special!r}')
        else:
            # Like tiktoken, names that are not special tokens of this encoding are ignored.
            allowed = frozenset(allowed_special).intersection(self._special_tokens)
        if disallowed_special == "all":
            disallowed = frozenset(self._special_tokens) - allowed
        elif disallowed_special is None:  # tiktoken checks nothing for a false value: code passing None relies on it
            disallowed = frozenset()
        elif isinstance(disallowed_special, str):
            raise TypeError(f'disallowed_special must be "all" or a collection of tokens, got {disallowed_special!r}')
        else:
            disallowed = frozenset(disallowed_special)
        return allowed, disallowed

    def check_disallowed_special(self, text: str, disallowed: AbstractSet[str], *,
                                 allowed: AbstractSet[str] = frozenset(),
                                 disallowed_special: Literal["all"] | Collection[str] = "all") -> None:
        """Raise :meth:`encode`'s ``ValueError``, which says what to pass instead (and holds its facts, a
        :class:`~tokenizer.special_advice.SpecialTokenRefusal`), if ``text`` contains one of the ``disallowed``
        special tokens.

        ``allowed`` and ``disallowed`` are :meth:`special_token_sets`' two sets; they and ``disallowed_special``,
        the argument the second was made from, tell which advice applies: with ``"all"`` (tiktoken's default)
        either argument alone changes the outcome, but a collection that names the token refuses it whatever
        ``allowed_special`` says."""
        present = special_tokens_in(text, frozenset(disallowed)) if disallowed else None
        if present:
            m = special_token_regex(present).search(text)
            if m:
                token = m.group()
                named = not isinstance(disallowed_special, str)  # "all", the one str special_token_sets takes
                special = token in self._special_tokens  # (disallowed_special may name any text)
                raise SpecialTokenRefusal(token, allowed=token in allowed, named=named, special=special,
                                          encoding=self.name).error()

    def encode_batch(
        self,
        text: Sequence[str],
        *,
        num_threads: int | None = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encode several texts; see :func:`map_batch` for what ``num_threads`` does.

        >>> enc.encode_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        """
        allowed, disallowed = self.special_token_sets(
            allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        if THREADS_RUN_IN_PARALLEL:
            # the sets (an iterator passed is read once), but "all" as given: it chooses a refusal's advice
            rule = disallowed_special if isinstance(disallowed_special, str) else disallowed
            encode = functools.partial(self.encode, allowed_special=allowed, disallowed_special=rule)
            return map_batch(encode, text, num_threads=num_threads)
        check_num_threads(num_threads)
        texts = list(text)
        try:
            for one in texts:
                self.check_disallowed_special(one, disallowed, allowed=allowed, disallowed_special=disallowed_special)
            if not allowed:
                return self.core.encode_ordinary_texts(texts)
            # Every stretch between special tokens, of every text, encoded together; then put back in place.
            cuts = [self._cut_at_special_tokens(one, allowed) for one in texts]
        except (TypeError, AttributeError):
            check_texts(texts, "encode_batch")
            raise
        stretch_ids = iter(self.core.encode_ordinary_texts([s for stretches, _ in cuts for s in stretches]))
        return [interleave([next(stretch_ids) for _ in stretches], specials) for stretches, specials in cuts]

    def encode_ordinary_batch(self, text: Sequence[str], *, num_threads: int | None = 8) -> list[list[int]]:
        """Encode several texts, special tokens as plain text; see :func:`map_batch` for ``num_threads``.

        >>> enc.encode_ordinary_batch(["hello world", "<|endoftext|>"])
        [[31373, 995], [27, 91, 437, 1659, 5239, 91, 29]]
        """
        if THREADS_RUN_IN_PARALLEL:
            return map_batch(self.encode_ordinary, text, num_threads=num_threads)
        check_num_threads(num_threads)
        texts = list(text)
        try:
            return self.core.encode_ordinary_texts(texts)
        except (TypeError, AttributeError):
            check_texts(texts, "encode_ordinary_batch")
            raise

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> np.ndarray:
        """:meth:`encode`'s ids as a ``uint32`` NumPy array (tiktoken's is read-only; this one is writable).

        >>> enc.encode_to_numpy("hello world")
        array([31373,   995], dtype=uint32)
        """
        import numpy as np  # only here: the tokenizer itself does not need NumPy, and importing it is slow

        ids = self.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        # After encode, which refuses a disallowed special token first, as tiktoken does; encode itself stands
        # U+FFFD in for a lone surrogate, but tiktoken hands this method's text to its Rust core, which raises.
        refuse_lone_surrogates(text)
        return np.array(ids, dtype=np.uint32)

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """``(stable ids, completions)``: the ids of ``text`` that more text cannot change, and each id sequence
        the rest may start with once more text arrives (:mod:`tokenizer.unstable`). As in tiktoken, the stable
        ids and any completion decode to bytes that start with ``text``.

        >>> stable, completions = enc.encode_with_unstable("hello fanta")
        >>> stable
        [31373]
        >>> sorted(enc.decode(c) for c in completions if len(c) == 1)[:3]
        [' fantas', ' fantasies', ' fantastic']
        >>> all(enc.decode_bytes(stable + c).startswith(b"hello fanta") for c in completions)
        True
        """
        allowed, disallowed = self.special_token_sets(
            allowed_special=allowed_special, disallowed_special=disallowed_special
        )
        self.check_disallowed_special(text, disallowed, allowed=allowed, disallowed_special=disallowed_special)
        return unstable.encode_with_unstable(self, text, allowed)

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """BPE-encode one piece as it is: no pre-tokenization, no special tokens (tiktoken's name: for code that
        cuts text itself). A piece that is a token is that token, unless :attr:`whole_piece_tokens` is False
        (then the merges alone decide, as in :meth:`encode`).

        >>> enc._encode_single_piece("helloqqqq")
        [31373, 38227, 38227]
        """
        if isinstance(text_or_bytes, str):
            data = text_or_bytes.encode("utf-8")  # as tiktoken: a lone surrogate raises UnicodeEncodeError
        else:
            data = bytes_argument(text_or_bytes, "_encode_single_piece", "text (str) or bytes")
        idx = self._token_ids.get(data) if self._whole_piece_tokens else None
        if idx is not None:
            return [idx]
        return [self._token_ids[token] for token in bpe.merge(data, self._merge_ranks)] if data else []

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """Encode ``text`` with the split done by the ``regex`` package in Python, each piece then BPE-encoded
        (tiktoken's name; special tokens are plain text). The same ids as :meth:`encode_ordinary`.

        >>> enc._encode_only_native_bpe("hello world")
        [31373, 995]
        """
        if self._text_steps is not None:  # a tokenizer.json's steps split, not pat_str (only shown for it)
            stretches, added_ids = self._text_steps.cut(text)
            ids_of_stretches = [[i for piece in self._text_steps.split(stretch)
                                 for i in self._encode_single_piece(piece.encode("utf-8"))] for stretch in stretches]
            return interleave(ids_of_stretches, added_ids)
        ids: list[int] = []
        # (the readable core's split: regex.findall would give a pattern's groups, and Unicode 17.0's classes)
        for piece in compile_pattern(self._pat_str).split(text):
            ids += self._encode_single_piece(piece.encode("utf-8"))
        return ids

    @property
    def _core_bpe(self) -> "TiktokenCoreBPE":
        """tiktoken's ``_core_bpe`` (its Rust ``CoreBPE``), for code that calls it: the same methods, with its
        arguments (``encode(text, allowed_special)`` checks no disallowed special tokens), over this encoding."""
        return TiktokenCoreBPE(self)

    def _encode_bytes(self, data: bytes) -> list[int]:
        """Encode bytes that may not be valid UTF-8 (tiktoken's name), e.g. text cut inside a character;
        special tokens are plain text. See :func:`tokenizer.unstable.encode_bytes`.

        >>> enc._encode_bytes("café".encode()[:-1])  # the last byte of "é" is missing
        [66, 1878, 127]
        """
        if isinstance(data, str):
            raise TypeError("_encode_bytes takes bytes; for text use encode_ordinary(text)")
        return unstable.encode_bytes(self, bytes_argument(data, "_encode_bytes", "bytes"))

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """The id of a text that is exactly one token (special tokens included); KeyError otherwise.

        >>> enc.encode_single_token("hello")
        31373
        """
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            data = text_or_bytes.encode("utf-8")  # as tiktoken: a lone surrogate raises UnicodeEncodeError
        else:
            data = bytes_argument(text_or_bytes, "encode_single_token", "text (str) or bytes")
        idx = self._token_ids.get(data)
        if idx is None:
            special = {t.encode("utf-8"): i for t, i in self._special_tokens.items()}.get(data)
            if special is None:
                raise KeyError(f"{text_or_bytes!r} is not a single token of {self.name!r}; use encode() for text")
            return special
        return idx

    # ---- decoding ------------------------------------------------------------------------------------------

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes of ``tokens`` joined.

        >>> enc.decode_bytes([31373, 995])
        b'hello world'
        """
        try:
            return self.core.decode_bytes(tokens)
        except (IndexError, TypeError):  # TypeError: None joined (not a token), or an item that is not an index
            for t in tokens:
                if not hasattr(t, "__index__"):
                    raise TypeError(f"token ids must be integers, got {t!r}") from None
                if t not in self._decoder:
                    raise self._unknown_token(t) from None
            raise

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """The text of ``tokens``. Bytes that are not valid UTF-8 (a token sequence may cut a character in
        two) become U+FFFD by default; pass ``errors="strict"`` to get an error instead.

        >>> enc.decode([31373, 995])
        'hello world'

        (An encoding loaded from a ``tokenizer.json`` whose ``"decoder"`` is null decodes as HF tokenizers does
        then: to the tokens' strings joined by spaces, :meth:`tokenizer.hf_steps.TextSteps.joined_token_strings`.)
        """
        if self._text_steps is not None and self._text_steps.no_decoder:
            tokens = list(tokens)
            return self._text_steps.joined_token_strings(tokens, self.decode_tokens_bytes(tokens),
                                                         self.is_special_token)
        try:
            data = self.core.decode_bytes(tokens)
        except (IndexError, TypeError):
            data = self.decode_bytes(tokens)  # raises the error that names the id
        return data.decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """The bytes of one token (special tokens included); KeyError for an unknown id."""
        try:
            return self._decoder[token]
        except (KeyError, TypeError):
            raise self._unknown_token(token) from None

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """The bytes of each token: useful to see where the boundaries fall.

        >>> enc.decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        """
        return [self.decode_single_token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """The text of ``tokens`` and, for each token, the index in that text of the character where it starts.

        A token that starts inside a character (a multibyte character split across tokens) gets the index of
        that character. As in tiktoken, bytes that are not valid UTF-8 raise ``UnicodeDecodeError``.

        >>> enc.decode_with_offsets([31373, 995])
        ('hello world', [0, 5])
        >>> enc.decode_tokens_bytes(enc.encode("a我b"))  # "我" is 3 bytes, cut across two tokens
        [b'a', b'\\xe6\\x88', b'\\x91', b'b']
        >>> enc.decode_with_offsets(enc.encode("a我b"))
        ('a我b', [0, 1, 1, 2])

        The text is always :meth:`decode`'s, so for an encoding loaded from a ``tokenizer.json`` whose
        ``"decoder"`` is null it is the tokens' strings joined by spaces, and each offset is where a token's string
        starts in it.
        """
        if self._text_steps is not None and self._text_steps.no_decoder:
            tokens = list(tokens)
            strings = self._text_steps.token_strings(tokens, self.decode_tokens_bytes(tokens), self.is_special_token)
            offsets, at = [], 0
            for string in strings:
                offsets.append(at)
                at += len(string) + 1  # and the space that joins it to the next
            return " ".join(strings), offsets
        token_bytes = self.decode_tokens_bytes(tokens)
        offsets = []
        n_chars = 0  # characters begun so far: each begins with a byte that is not a continuation byte
        for data in token_bytes:
            inside_a_character = _is_continuation_byte(data[0])
            offsets.append(max(0, n_chars - inside_a_character))
            n_chars += sum(not _is_continuation_byte(b) for b in data)
        return b"".join(token_bytes).decode("utf-8"), offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int | None = 8
    ) -> list[str]:
        """Decode several token lists; see :func:`map_batch` for ``num_threads``."""
        return map_batch(functools.partial(self.decode, errors=errors), batch, num_threads=num_threads)

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int | None = 8) -> list[bytes]:
        """The bytes of several token lists; see :func:`map_batch` for ``num_threads``.

        >>> enc.decode_bytes_batch([[31373], [995]])
        [b'hello', b' world']
        """
        return map_batch(self.decode_bytes, batch, num_threads=num_threads)

    def _unknown_token(self, token) -> KeyError:
        try:  # a NumPy id (a .bin's, read with np.memmap) as the number it is, not as np.uint16(60000)
            shown = repr(operator.index(token))
        except TypeError:
            shown = repr(token)
        except ValueError:  # a number of over 4,300 digits, which Python will not write out
            shown = f"of {operator.index(token).bit_length():,} bits"
        return KeyError(
            f"token id {shown} is not in the vocabulary of {self.name!r} (ids run from 0 to {self.max_token_value})"
        )

    # ---- streaming -----------------------------------------------------------------------------------------

    def encode_iterable(
        self,
        iterable: Iterable[str],
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> Iterator[int]:
        """Lazily encode text arriving in chunks; yields exactly ``encode("".join(chunks))``'s ids."""
        return streaming.encode_iterable(
            self, iterable, allowed_special=allowed_special, disallowed_special=disallowed_special
        )

    # ---- saving --------------------------------------------------------------------------------------------

    def save(self, path, format: str = "gpt2", *, overwrite: bool = False) -> None:  # noqa: A002
        """Write this encoding's files to the folder ``path`` in ``format`` ("gpt2", "tiktoken" or "hf"); read
        them back with :func:`tokenizer.load`. A folder that holds a saved tokenizer already is refused
        (``FileExistsError``) unless ``overwrite=True``. See :func:`tokenizer.saving.save_encoding`."""
        saving.save_encoding(self, path, format=format, overwrite=overwrite)

    # ---- about the vocabulary ------------------------------------------------------------------------------

    def token_byte_values(self) -> list[bytes]:
        """The bytes of every ordinary (non-special) token, sorted."""
        return sorted(self._token_ids)

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>``; ``KeyError`` (as tiktoken) if this encoding has none."""
        try:
            return self._special_tokens["<|endoftext|>"]
        except KeyError:
            raise KeyError(
                f"encoding {self.name!r} has no '<|endoftext|>' special token; "
                f"its special tokens are {sorted(self._special_tokens)[:8] or 'none'}"
            ) from None

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._special_tokens)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """The number of ids, ``max_token_value + 1``."""
        return self.max_token_value + 1

    @property
    def pat_str(self) -> str:
        return self._pat_str

    @property
    def special_tokens(self) -> dict[str, int]:
        return dict(self._special_tokens)

    @property
    def merge_ranks(self) -> Mapping[bytes, int]:
        """Merge priority of each token, lower merging first: what :func:`tokenizer.bpe.merge` needs. Read-only.

        Two numberings, one order. For tiktoken's files (every OpenAI encoding) it is :attr:`token_ids` itself: a
        token's rank is its id, and the 256 single bytes are in it (never made by a merge). For an encoding from
        :meth:`from_vocab_merges` it is the merge's 0-based place in ``merges`` (``vocab.bpe``'s line for GPT-2's
        files: ``b" c"`` -> 13, where its id is 269), without the single bytes."""
        return MappingProxyType(self._merge_ranks)

    @property
    def whole_piece_tokens(self) -> bool:
        """Whether a pre-token that is itself a token is encoded as that token even if the merges would not
        build it (tiktoken's rule; see :meth:`from_vocab_merges`)."""
        return self._whole_piece_tokens

    @property
    def text_steps(self) -> TextSteps | None:
        """What a ``tokenizer.json`` does to text before BPE (normalizer, splits, added tokens that are not
        special), where it is more than :attr:`pat_str`; None for an encoding that one pattern splits."""
        return self._text_steps

    @property
    def hf_post_processing(self) -> dict | None:
        """What a ``tokenizer.json`` has HF tokenizers do with the ids after BPE, as its JSON: ``{"post_processor":
        ..., "truncation": ..., "padding": ...}`` (Llama 3's post-processor adds ``<|begin_of_text|>`` in HF's
        default ``encode``); None for an encoding not read from one. Only kept, for ``save(format="hf")`` to write
        back: this encoding adds no id (tiktoken's API), as HF's ``encode(text, add_special_tokens=False)``. A copy.
        """
        return copy.deepcopy(self._hf_post_processing)

    @property
    def token_ids(self) -> Mapping[bytes, int]:
        """The id of each ordinary (non-special) token, by its bytes. Read-only.

        For tiktoken's files this is the same table as :attr:`merge_ranks` (a token's rank is its id); for an
        encoding from :meth:`from_vocab_merges` the ids are the vocab's.

        >>> enc.token_ids[b" world"]
        995
        """
        return MappingProxyType(self._token_ids)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """The merges in priority order, as byte pairs: those given to :meth:`from_vocab_merges`, or, for an
        encoding made from ranks alone (tiktoken's files), recovered from them (:func:`tokenizer.bpe.recover_merges`).

        >>> enc.merges[:2]
        [(b' ', b't'), (b' ', b'a')]
        """
        if self._merges is None:
            try:
                self._merges = bpe.recover_merges(self._merge_ranks)
            except ValueError as e:
                raise ValueError(f"{self.name!r}: {e}") from None
        return list(self._merges)


def _rebuild(
    name, pat_str, merge_ranks, token_ids, special_tokens, merges, whole_piece_tokens=True, core="fast",
    text_steps=None, hf_post_processing=None,
) -> Encoding:
    enc = Encoding.__new__(Encoding)
    enc._setup(
        name,
        pat_str,
        merge_ranks,
        token_ids,
        special_tokens,
        merges=merges,
        whole_piece_tokens=whole_piece_tokens,
        core=core,
        text_steps=text_steps,
        hf_post_processing=hf_post_processing,
    )
    return enc


class TiktokenCoreBPE:
    """The methods of tiktoken's ``CoreBPE`` (``enc._core_bpe``), answered by an :class:`Encoding`."""

    def __init__(self, enc: Encoding):
        self._enc = enc

    # tiktoken's Rust core takes its text as UTF-8: a lone surrogate raises there, where Encoding.encode (which
    # catches that error) stands U+FFFD in for it.
    def encode(self, text: str, allowed_special: AbstractSet[str]) -> list[int]:
        refuse_lone_surrogates(text)
        return self._enc.encode(text, allowed_special=allowed_special, disallowed_special=())

    def encode_ordinary(self, text: str) -> list[int]:
        refuse_lone_surrogates(text)
        return self._enc.encode_ordinary(text)

    def encode_to_tiktoken_buffer(self, text: str, allowed_special: AbstractSet[str]) -> memoryview:
        import array  # ids as uint32, as tiktoken's buffer holds them

        return memoryview(array.array("I", self.encode(text, allowed_special)))

    def encode_with_unstable(self, text: str, allowed_special: AbstractSet[str]) -> tuple[list[int], list[list[int]]]:
        return self._enc.encode_with_unstable(text, allowed_special=allowed_special, disallowed_special=())

    def encode_single_token(self, piece: bytes) -> int:
        return self._enc.encode_single_token(piece)

    def encode_single_piece(self, piece: bytes) -> list[int]:
        return self._enc._encode_single_piece(piece)

    def _encode_bytes(self, data: bytes) -> list[int]:
        return self._enc._encode_bytes(data)

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self._enc.decode_bytes(tokens)

    def decode_single_token_bytes(self, token: int) -> bytes:
        return self._enc.decode_single_token_bytes(token)

    def token_byte_values(self) -> list[bytes]:
        return self._enc.token_byte_values()


T = TypeVar("T")
R = TypeVar("R")


def map_batch(func: Callable[[T], R], items: Iterable[T], *, num_threads: int | None = 8) -> list[R]:
    """``[func(item) for item in items]``: what the ``*_batch`` methods do with ``num_threads``.

    ``num_threads`` must be a positive integer or None (as in tiktoken: the default of
    ``ThreadPoolExecutor``). tiktoken releases the GIL, so its threads encode in parallel; this package's
    encoding is Python code, which threads run one at a time under the GIL. So threads are used only on a
    free-threaded Python (``THREADS_RUN_IN_PARALLEL``); elsewhere the items are done in order in the
    calling thread, which is faster than a pool that cannot run them at once.

    >>> map_batch(len, ["a", "bb"], num_threads=2)
    [1, 2]
    """
    check_num_threads(num_threads)
    items = list(items)
    if THREADS_RUN_IN_PARALLEL and num_threads != 1 and len(items) > 1:
        with ThreadPoolExecutor(num_threads) as pool:
            return list(pool.map(func, items))
    return list(map(func, items))


def check_texts(texts: Sequence[object], method: str) -> None:
    """Raise a ``TypeError`` that names what ``method`` was given instead of text, if any of ``texts`` is not a
    ``str`` (the encoding methods call this only once a call has failed: a correct call pays nothing).

    >>> check_texts(["fine", b"raw"], "encode_batch")
    Traceback (most recent call last):
    TypeError: encode_batch takes text (str), got bytes at index 1: decode it first, e.g. data.decode("utf-8")
    """
    for at, text in enumerate(texts):
        if not isinstance(text, str):
            where = f" at index {at}" if method.endswith("_batch") else ""
            given = f"{method} takes text (str), got {type(text).__name__}{where}"
            if isinstance(text, (bytes, bytearray, memoryview)):
                given += ': decode it first, e.g. data.decode("utf-8")'
            raise TypeError(given) from None  # (not the failure it explains, from deep inside the call)


def bytes_argument(data, method: str, takes: str) -> bytes:
    """``data``, a bytes-like object (bytes, bytearray, memoryview), as bytes; anything else is the ``TypeError``
    tiktoken raises too, saying what ``method`` ``takes``: ``bytes(3)`` would be three zero bytes, encoded
    without a word.

    >>> bytes_argument(3, "_encode_bytes", "bytes")
    Traceback (most recent call last):
    TypeError: _encode_bytes takes bytes, got int
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{method} takes {takes}, got {type(data).__name__}")


def refuse_lone_surrogates(text: str) -> None:
    """Raise the ``UnicodeEncodeError`` tiktoken's Rust core raises for text holding a lone surrogate (which
    UTF-8 cannot hold): the same message, naming the surrogate's position.

    >>> refuse_lone_surrogates("a\\ud800b")
    Traceback (most recent call last):
    UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 1: surrogates not allowed
    """
    # isascii reads a flag the string keeps: ASCII text pays nothing, other text one pass of the UTF-8 encoder
    if isinstance(text, str) and not text.isascii():
        text.encode("utf-8")


def check_num_threads(num_threads) -> None:
    """Raise the error ``map_batch`` gives for a ``num_threads`` that is not a positive integer or None."""
    if num_threads is not None and type(num_threads) is not int:
        raise TypeError(f"num_threads must be a positive integer (or None), got {num_threads!r}")
    if num_threads is not None and num_threads < 1:
        raise ValueError(f"num_threads must be a positive integer (or None), got {num_threads!r}")


def _is_continuation_byte(byte: int) -> bool:
    """UTF-8 continuation bytes are 0b10xxxxxx: they never begin a character."""
    return byte & 0xC0 == 0x80
