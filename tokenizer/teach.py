"""Tools for seeing what a tokenizer does: ``show``, ``explain`` and ``compare``, and a character tokenizer.

    python -m tokenizer show "Not all heroes wear capes."      # token boundaries in colour, ids below
    python -m tokenizer explain "Not all heroes wear capes."   # each pre-token's merges, step by step
    python -m tokenizer compare "        return x  # indented"  # gpt2 vs GPT-4 vs GPT-4o

``explain`` replays BPE with :func:`merge_steps`: :func:`tokenizer.bpe.merge_reference` reporting every
merge as it happens (its ``on_merge`` hook), so the steps shown are the reference's own. It also
shows the shortcut :class:`tokenizer.Encoding` takes: a pre-token that is itself a token (``" heroes"``) is that
token, without running any merges.

:class:`CharTokenizer` is the other end of the design space: one id per character (as in char-level
language models), a vocabulary of a few dozen ids, and text several times longer in ids than with BPE.
"""

from __future__ import annotations

import codecs
from typing import Iterator, Mapping, NamedTuple

from .bpe import merge_reference
from .encoding import Encoding
from .pretokenize import compile_pattern, special_token_regex
from .registry import get_encoding

# Background colours that cycle over tokens (yellow, cyan, green, magenta, blue, red), black text on them.
_BACKGROUNDS = [43, 46, 42, 45, 44, 41]
_RESET = "\x1b[0m"
COMPARED = [("gpt2", "GPT-2"), ("cl100k_base", "GPT-4"), ("o200k_base", "GPT-4o")]


class MergeStep(NamedTuple):
    """One BPE merge: the pair joined, its rank (priority: lower merged first) and the parts afterwards."""

    rank: int
    left: bytes
    right: bytes
    parts: tuple[bytes, ...]


def merge_steps(piece: bytes, merge_ranks: Mapping[bytes, int]) -> list[MergeStep]:
    """Each merge :func:`tokenizer.bpe.merge_reference` makes on ``piece``, in order (its ``on_merge`` hook).

    >>> [(s.left, s.right) for s in merge_steps(b"aaab", {b"aa": 0, b"ab": 1, b"aab": 2})]
    [(b'a', b'a'), (b'a', b'b')]
    """
    steps: list[MergeStep] = []
    merge_reference(piece, merge_ranks, on_merge=lambda *step: steps.append(MergeStep(*step)))
    return steps


def show_bytes(token: bytes) -> str:
    """A token as readable text: ``' world'`` when it is whole UTF-8, else its bytes ``b'\\xe4\\xb8'``."""
    try:
        return repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        return repr(token)


def token_texts(enc, ids) -> list[str]:
    """The text each token adds. A character whose bytes are spread over several tokens appears with the
    token that completes it; the tokens before it add ``""``."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    texts = [decoder.decode(enc.decode_single_token_bytes(i)) for i in ids]
    if texts:
        texts[-1] += decoder.decode(b"", final=True)
    return texts


def _visible(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")


# ---- show -------------------------------------------------------------------------------------------------


def render_show(
    text: str, encoding: str | Encoding = "gpt2", color: bool = False, *, allowed_special="all", disallowed_special=()
) -> str:
    """The text with token boundaries marked (colours, or ``|`` without), then the ids and a count.

    ``encoding`` is a registered name or an :class:`Encoding`; ``allowed_special`` and ``disallowed_special``
    mean what they mean for :meth:`Encoding.encode` (by default special-token text shows as its token).
    """
    enc = _as_encoding(encoding)
    ids = enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    texts = token_texts(enc, ids)
    if color:
        shown, id_words = [], []
        for n, (token_text, token) in enumerate(zip(texts, ids)):
            paint = f"\x1b[30;{_BACKGROUNDS[n % len(_BACKGROUNDS)]}m"
            # a newline would carry the background to the end of the terminal line: show it as a visible mark
            marked = token_text.replace("\n", f"↵{_RESET}\n{paint}")
            shown.append(f"{paint}{marked}{_RESET}")
            id_words.append(f"{paint}{token}{_RESET}")
        body, id_line = "".join(shown), " ".join(id_words)
    else:
        body, id_line = "|".join(texts), " ".join(map(str, ids))
    n_bytes = len(text.encode("utf-8", errors="surrogatepass"))
    summary = f"{len(ids)} tokens, {len(text)} characters, {n_bytes} bytes ({enc.name})"
    return f"{body}\n{id_line}\n{summary}"


# ---- explain ----------------------------------------------------------------------------------------------


def explain_lines(
    text: str, encoding: str | Encoding = "gpt2", *, allowed_special="all", disallowed_special=()
) -> Iterator[str]:
    """What encode does to ``text``, one line per step: special tokens, pre-tokens, merges, ids.

    ``encoding``, ``allowed_special`` and ``disallowed_special`` are :func:`render_show`'s.
    """
    enc = _as_encoding(encoding)
    # encode() applies the special-token rule: it raises here for a disallowed one, before any line is shown
    enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    pretokenizer = compile_pattern(enc.pat_str)
    allowed = enc.special_tokens_set if allowed_special == "all" else set(allowed_special)
    specials = {token: i for token, i in enc.special_tokens.items() if token in allowed}
    yield f"encoding {enc.name}: special tokens first, then the pattern cuts pre-tokens, then BPE merges each"
    start = 0
    segments = []
    if specials:
        for m in special_token_regex(frozenset(specials)).finditer(text):
            segments += [(text[start : m.start()], None), (m.group(), specials[m.group()])]
            start = m.end()
    segments.append((text[start:], None))
    for segment, special_id in segments:
        if special_id is not None:
            yield f"\nspecial token {segment!r} = id {special_id}"
            continue
        for piece in pretokenizer.split(segment):
            yield from _explain_piece(enc, piece)


def _explain_piece(enc, piece: str) -> Iterator[str]:
    data = piece.encode("utf-8", errors="surrogatepass")
    yield f"\npre-token {piece!r}: {len(data)} byte{'s' if len(data) != 1 else ''} {' '.join(f'{b:02x}' for b in data)}"
    token_ids = enc.token_ids
    if data in token_ids:
        yield f"  is itself a token: encode takes it whole, no merges needed = id {token_ids[data]}"
        return
    parts: tuple[bytes, ...] = tuple(data[i : i + 1] for i in range(len(data)))
    for n, step in enumerate(merge_steps(data, enc.merge_ranks), 1):
        parts = step.parts
        yield (
            f"  merge {n:>2}: rank {step.rank:>6}  {show_bytes(step.left)} + {show_bytes(step.right)}"
            f" -> {show_bytes(step.left + step.right)}"
        )
    ids = [token_ids[p] for p in parts]
    yield f"  tokens {' '.join(show_bytes(p) for p in parts)} = ids {ids}"


# ---- compare ----------------------------------------------------------------------------------------------


def compare_lines(
    text: str, encodings=COMPARED, *, allowed_special="all", disallowed_special=()
) -> Iterator[str]:
    """Token counts and splits of ``text`` under several encodings, and the longest whitespace token each used.

    ``encodings`` holds ``(encoding, label)`` pairs, each encoding a registered name or an :class:`Encoding`;
    ``allowed_special`` and ``disallowed_special`` are :func:`render_show`'s. The closing line compares the
    counts of this text; nothing in it is canned.
    """
    encodings = [(_as_encoding(encoding), label) for encoding, label in encodings]
    width = max(len(enc.name) for enc, _ in encodings)
    counts = {}
    for enc, label in encodings:
        ids = enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
        texts = token_texts(enc, ids)
        spaces = max((len(t) for t in texts if t and t.isspace()), default=0)
        counts[enc.name] = len(ids)
        yield f"{enc.name:<{width}}  {label:<6}  {len(ids):>5} tokens  longest whitespace token: {spaces:>2} chars"
        yield f"{'':<{width}}  |{'|'.join(map(_visible, texts))}|"
    fewest = min(counts, key=counts.get)
    if len(counts) > 1 and counts[fewest]:
        others = [f"{name} {n / counts[fewest]:.2f}x" for name, n in counts.items() if name != fewest]
        yield f"\nfewest tokens: {fewest} ({counts[fewest]}); {others[0]} as many" + "".join(f", {o}" for o in others[1:])


def _as_encoding(encoding: str | Encoding) -> Encoding:
    return get_encoding(encoding) if isinstance(encoding, str) else encoding


# ---- characters -------------------------------------------------------------------------------------------


class CharTokenizer:
    """One id per distinct character of the text it is built from (ids in sorted character order).

    >>> tok = CharTokenizer("hello world")
    >>> tok.stoi
    {' ': 0, 'd': 1, 'e': 2, 'h': 3, 'l': 4, 'o': 5, 'r': 6, 'w': 7}
    >>> tok.encode("hold")
    [3, 5, 4, 1]
    >>> tok.decode([3, 5, 4, 1])
    'hold'
    """

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer is built from a str, got {type(text).__name__}")
        chars = sorted(set(text))
        if not chars:
            raise ValueError("CharTokenizer needs a non-empty text to take its characters from")
        self.stoi: dict[str, int] = {ch: i for i, ch in enumerate(chars)}  # string (character) -> id
        self.itos: dict[int, str] = {i: ch for i, ch in enumerate(chars)}  # id -> string (character)

    @property
    def vocab_size(self) -> int:
        return len(self.stoi)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[ch] for ch in text]
        except KeyError as e:
            ch = e.args[0]
            raise ValueError(
                f"character {ch!r} (U+{ord(ch):04X}) at position {text.index(ch)} is not in this CharTokenizer's "
                f"vocabulary of {self.vocab_size} characters; build the tokenizer from a text that contains it"
            ) from None

    def decode(self, ids) -> str:
        try:
            return "".join(self.itos[i] for i in ids)
        except KeyError as e:
            raise ValueError(
                f"id {e.args[0]!r} is not in this CharTokenizer's vocabulary (ids run from 0 to {self.vocab_size - 1})"
            ) from None

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
