"""Encode text that arrives in chunks (a file read line by line, a network stream) without holding all of it.

``encode_iterable(enc, chunks)`` yields exactly the ids of ``enc.encode("".join(chunks))`` however the text is
cut into chunks, while keeping in memory only the text that could still change its tokens. Two things can
change when more text arrives:

1. **Special tokens.** The end of the text so far may be the start of one (``"<|endof"``). The last
   ``longest special token - 1`` characters are held back until the next chunk shows whether they are.
2. **Pre-tokens.** The pattern's last piece may grow (``" hel"`` + ``"lo"`` is one piece ``" hello"``), and
   whitespace is split differently depending on what follows it. So ordinary text is only encoded up to a
   *safe cut* (:mod:`tokenizer.cuts`: a place where the pattern splits the text before it exactly as it
   would split that text alone, whatever follows), e.g. ``"word|,"`` or ``"!| x"``.

Text with no safe cut (a long run of one kind, such as a line of dashes) is held until one comes or the
stream ends, so memory is bounded by the longest such run plus the encoding's piece cache, not by the input.
An encoding with a pattern of its own (not one of OpenAI's) has no proven safe cuts: its text is held until a
special token or the end of the stream.

This module does not decide what a special token is or when one is allowed (:class:`Encoding` does), nor
where text may be cut (:mod:`tokenizer.cuts` does).
"""

from __future__ import annotations

from typing import AbstractSet, Collection, Iterable, Iterator, Literal

from .cuts import safe_cuts
from .pretokenize import special_token_regex

# Ordinary text is encoded once at least this much is pending: a few large encode calls instead of one per
# short chunk, at a memory cost that does not grow with the input.
EMIT_MIN_CHARS = 4096


def encode_iterable(
    enc,
    chunks: Iterable[str],
    *,
    allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006 - tiktoken's signature
    disallowed_special: Literal["all"] | Collection[str] = "all",
    emit_min_chars: int = EMIT_MIN_CHARS,
) -> Iterator[int]:
    """Lazily yield the ids of ``enc.encode("".join(chunks), ...)``, reading ``chunks`` one at a time.

    ``chunks`` is any iterable of ``str`` (an open text file yields lines). ``allowed_special`` and
    ``disallowed_special`` mean what they mean for :meth:`Encoding.encode`; a disallowed special token raises
    the same ``ValueError`` (even when it is split across chunks), before any id of the text from that token on
    has been yielded.

    ``emit_min_chars``: pending ordinary text is encoded once at least this many characters are waiting (up to
    the last safe cut). It trades calls for memory and never changes the ids; 0 encodes at every safe cut as
    soon as it is seen, which lets short test strings exercise the cutting as much as megabytes would.

    >>> from tokenizer import get_encoding
    >>> list(encode_iterable(get_encoding("gpt2"), ["hel", "lo wor", "ld"]))
    [31373, 995]
    """
    # Checked now, not on the first next(): a bad argument should fail where it is passed.
    allowed, disallowed = enc.special_token_sets(allowed_special=allowed_special, disallowed_special=disallowed_special)
    if isinstance(chunks, str):
        chunks = (chunks,)  # one string is one chunk, not a chunk per character
    if emit_min_chars < 0:
        raise ValueError(f"emit_min_chars must be 0 or more, got {emit_min_chars}")
    return _encode_chunks(enc, chunks, allowed, disallowed, emit_min_chars, disallowed_special)


def _encode_chunks(
    enc, chunks: Iterable[str], allowed: frozenset, disallowed: frozenset, emit_min_chars: int,
    disallowed_special: Literal["all"] | Collection[str],
) -> Iterator[int]:
    special_ids = enc.special_tokens
    # A tokenizer.json's steps (a normalizer, several splits) have no cut known to be safe: none is tried.
    pattern = enc.pat_str if getattr(enc, "text_steps", None) is None else ""
    encode_ordinary = enc.encode_ordinary
    allowed_regex = special_token_regex(allowed) if allowed else None
    checker = _DisallowedChecker(enc, allowed, disallowed, disallowed_special)
    # Characters held back as a possible start of a special token (allowed, or disallowed and not yet seen whole).
    hold = max(map(len, allowed | disallowed), default=1) - 1

    raw = ""  # received text not yet known to be ordinary text or a special token
    text = ""  # ordinary text not yet encoded; a special token or the end of the stream ends it
    searched = 0  # text has no safe cut before this position
    for chunk in chunks:
        if not isinstance(chunk, str):
            raise TypeError(f"encode_iterable needs chunks of str, got {type(chunk).__name__}: {chunk!r:.60}")
        if not chunk:
            continue
        raw += chunk
        checker.check(raw, final=False)
        # Special tokens whose whole alternatives are visible (start + longest <= len) are certain.
        settled = 0
        if allowed_regex is not None:
            for m in allowed_regex.finditer(raw):
                if m.start() + hold + 1 > len(raw):
                    break
                yield from encode_ordinary(text + raw[settled : m.start()])
                yield special_ids[m.group()]
                text, searched, settled = "", 0, m.end()
        # Before len(raw) - hold no special token can start any more; keep the rest back.
        keep_from = max(settled, len(raw) - hold)
        text += raw[settled:keep_from]
        raw = raw[keep_from:]
        checker.forget(keep_from)

        if len(text) < emit_min_chars:
            continue
        cut = next(safe_cuts(text, searched, pattern=pattern, reverse=True), None)
        if cut is not None:
            yield from encode_ordinary(text[:cut])
            text = text[cut:]
        searched = len(text)

    checker.check(raw, final=True)
    settled = 0
    if allowed_regex is not None:
        for m in allowed_regex.finditer(raw):
            yield from encode_ordinary(text + raw[settled : m.start()])
            yield special_ids[m.group()]
            text, settled = "", m.end()
    yield from encode_ordinary(text + raw[settled:])


class _DisallowedChecker:
    """Looks for disallowed special tokens in the stream, including ones cut across chunks.

    ``window`` is the tail of the received text in which a disallowed token could still start: a token that
    fits wholly in the text seen so far has been looked for already.
    """

    def __init__(self, enc, allowed: frozenset, disallowed: frozenset, disallowed_special="all"):
        self.enc = enc
        self.allowed = allowed
        self.disallowed = disallowed
        self.disallowed_special = disallowed_special  # as given: it chooses the advice of a refusal
        self.regex = special_token_regex(disallowed) if disallowed else None
        self.longest = max(map(len, disallowed), default=0)
        self.window = ""
        self.window_end = 0  # how much of raw (in the caller) the window already covers

    def check(self, raw: str, *, final: bool) -> None:
        if self.regex is None:
            return
        self.window += raw[self.window_end :]
        self.window_end = len(raw)
        m = self.regex.search(self.window)
        # Only a match with room for the longest token after its start is certain to be the token encode()
        # would report (a longer one might start at the same place).
        if m is not None and (final or m.start() + self.longest <= len(self.window)):
            self.enc.check_disallowed_special(self.window[m.start() :], self.disallowed, allowed=self.allowed,
                                              disallowed_special=self.disallowed_special)
        self.window = self.window[max(len(self.window) - self.longest + 1, 0) :]

    def forget(self, n: int) -> None:
        """The caller dropped the first ``n`` characters of its ``raw``."""
        self.window_end -= n
