"""Tools for seeing what a tokenizer does: ``show``, ``explain`` and ``compare``, and a character tokenizer.

    python -m tokenizer show "Not all heroes wear capes."      # token boundaries in colour, ids below
    python -m tokenizer explain "Not all heroes wear capes."   # each pre-token's merges, step by step
    python -m tokenizer compare "        return x  # indented"  # gpt2 vs GPT-4 vs GPT-4o

``explain`` replays BPE with :func:`merge_steps`: :func:`tokenizer.bpe.merge_reference` reporting every
merge as it happens (its ``on_merge`` hook), so the steps shown are the reference's own. Each merge is named
twice, never by a bare "rank": ``merge #13`` is its place among the encoding's merges (0-based; for gpt2 its
place in ``vocab.bpe`` after the header line, so merge #r is line r + 2 of the file, and the ``bpe_ranks`` of
OpenAI's ``encoder.py``) and ``token id 269`` the token it makes (for tiktoken's encodings also the rank BPE
orders merges by, their ``merge_ranks``). A pre-token that is
itself a token (``" heroes"``) shows both views, which agree: tiktoken's shortcut takes it whole, and the
merges OpenAI's ``bpe()`` makes end at the same token, because each token of OpenAI's files is made by exactly
one merge of two tokens made before it.

Special tokens: these tools (the functions here, the ``explain`` command and the playground) show special-token
text as its one id unless told otherwise (:data:`TEACHING_SPECIAL_RULE`), where tiktoken's ``encode`` refuses it.

:class:`CharTokenizer` is the other end of the design space: one id per character (as in char-level
language models), a vocabulary of a few dozen ids, and text several times longer in ids than with BPE.
"""

from __future__ import annotations

import codecs
import html
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import accumulate
from typing import Iterator, Mapping, NamedTuple

from .bpe import merge_reference
from .encoding import Encoding
from .patterns import WHITESPACE
from .pretokenize import compile_pattern, special_token_regex
from .registry import get_encoding, is_registered
from .special_advice import rule_for

# Background colours that cycle over tokens (yellow, cyan, green, magenta, blue, red), black text on them.
_BACKGROUNDS = [43, 46, 42, 45, 44, 41]
_RESET = "\x1b[0m"
COMPARED = [("gpt2", "GPT-2"), ("cl100k_base", "GPT-4"), ("o200k_base", "GPT-4o")]

# A special-token rule, by the name the playground gives it, -> the arguments of Encoding.encode.
SPECIAL_RULES = {
    "allowed": dict(allowed_special="all", disallowed_special=()),  # special-token text becomes its id
    "disallowed": dict(allowed_special=frozenset(), disallowed_special="all"),  # it is an error: tiktoken's encode
    "text": dict(allowed_special=frozenset(), disallowed_special=()),  # it is encoded as plain text
}
TEACHING_SPECIAL_RULE = "allowed"
"""The one default special-token rule of the teaching tools: :func:`show`, :func:`explain`, :func:`compare` (and the
functions they print with), the ``explain`` command and the playground.

``allowed``: ``<|endoftext|>`` in the text is shown as the one token it is, id 50256. tiktoken's ``encode``
refuses such text by default, because text from a user that holds a special token's spelling could otherwise
pose as that token to a model (end a document, or a chat turn, where the user chose). A teaching tool shows what
the text becomes, on the learner's own text, for no model: hiding the token behind an error would hide the
lesson, and ``explain`` says on the token's line that ``encode`` refuses it unless allowed. Pass
``allowed_special``/``disallowed_special`` (``--allowed_special``, ``--disallowed_special``; the playground's
selector) for the other rules."""
TEACHING_ALLOWED = SPECIAL_RULES[TEACHING_SPECIAL_RULE]["allowed_special"]
TEACHING_DISALLOWED = SPECIAL_RULES[TEACHING_SPECIAL_RULE]["disallowed_special"]

# The longest pre-token explain replays merge by merge (the explain command, explain() and the playground):
# merge_steps keeps every step's parts, so its time and memory grow with the square of the pre-token's length
# (4,000 bytes of one letter take over a second; 100,000 would take minutes and gigabytes). A word, a number or a
# run of spaces is far shorter; what is longer (a pasted line of one character) has nothing more to teach.
MAX_EXPLAIN_BYTES = 500


class MergeStep(NamedTuple):
    """One BPE merge: the pair joined, its rank and the parts afterwards. ``rank`` is the encoding's
    ``merge_ranks`` value, the order of merges (lower first): for tiktoken's encodings the token id of
    ``left + right``, for a trained one its merge number. Show it as :func:`merge_number` and the token id."""

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


def merge_number(enc: Encoding, token: bytes) -> int:
    """The place (0-based) among ``enc``'s merges of the merge that makes ``token``: for gpt2 its place in
    ``vocab.bpe`` after the header line (OpenAI's ``bpe_ranks``; merge r is line r + 2 of the file), for a trained
    encoding its place in the trainer's list.

    >>> gpt2 = get_encoding("gpt2")
    >>> merge_number(gpt2, b" c"), gpt2.token_ids[b" c"]
    (13, 269)
    """
    if isinstance(token, str):
        raise TypeError(f"merge_number takes a token's bytes, not str: pass {token[:20]!r}.encode('utf-8') (or b'...')")
    if len(token) == 1:  # gpt2's table ranks the 256 bytes too: its single bytes would count as merge #0
        raise ValueError(f"{token!r} is a single byte, one of the 256 tokens BPE starts from: no merge makes it")
    if token not in enc.merge_ranks:
        raise ValueError(f"{token!r} is not a token of {enc.name}: no merge makes it")
    rank = enc.merge_ranks[token]
    single_byte_ranks, merged_ranks = _rank_order(enc)
    if not single_byte_ranks:  # the ranks are merge numbers already (Encoding.from_vocab_merges)
        return rank
    return bisect_left(merged_ranks, rank)  # tiktoken's ranks: count the merged tokens that come before


@lru_cache(maxsize=8)
def _rank_order(enc: Encoding) -> tuple[list[int], list[int]]:
    """The sorted ranks of ``enc``'s single bytes and of its merged tokens."""
    single, merged = [], []
    for token, rank in enc.merge_ranks.items():
        (single if len(token) == 1 else merged).append(rank)
    return sorted(single), sorted(merged)


def merge_names(enc: Encoding, step: MergeStep) -> str:
    """A merge under its two numbers, each saying what it is: ``"merge #13, token id 269"``."""
    return f"merge #{merge_number(enc, step.left + step.right)}, token id {enc.token_ids[step.left + step.right]}"


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


def token_pieces(enc, ids) -> list[str]:
    """What ``show`` and ``compare`` print for each token: its text, and where a token holds only part of a
    character (its bytes are spread over several tokens), those bytes as ``\\xNN``, so that no token shows as
    nothing.

    >>> enc = get_encoding("gpt2")
    >>> print("|".join(token_pieces(enc, enc.encode("a我b"))))
    a|\\xe6\\x88|\\x91|b
    """
    return [enc.decode_single_token_bytes(i).decode("utf-8", errors="backslashreplace") for i in ids]


# Control characters but the line break and the tab, written out as Python writes them ("\\r", "\\x1b"): on a
# terminal a carriage return moves the cursor back over what show printed, an escape sequence recolours it.
_CONTROL_ESCAPES = {code: repr(chr(code))[1:-1] for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]
                    if chr(code) not in "\n\t"}


def _visible(text: str) -> str:
    return text.translate(_CONTROL_ESCAPES).replace("\n", "\\n").replace("\t", "\\t")


# ---- show -------------------------------------------------------------------------------------------------


def render_show(
    text: str, encoding: str | Encoding = "gpt2", color: bool = False, *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED, shown_as: str | None = None,
) -> str:
    """The text with token boundaries marked (colours, or ``|`` without), then the ids and a count. A token
    that holds part of a character shows its bytes (:func:`token_pieces`).

    ``encoding`` is a registered name or an :class:`Encoding`; ``allowed_special`` and ``disallowed_special``
    mean what they mean for :meth:`Encoding.encode`; by default special-token text shows as its token
    (:data:`TEACHING_SPECIAL_RULE` says why). ``shown_as``: the name the count gives the encoding (default its
    own; the command line's, for a saved tokenizer named like a registered encoding, says so).
    """
    enc = _as_encoding(encoding)
    ids = enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    texts = [piece.translate(_CONTROL_ESCAPES) for piece in token_pieces(enc, ids)]
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
    return f"{body}\n{id_line}\n{show_summary(text, ids, shown_as or enc.name)}"


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun singular where the count is 1: "1 token", "2 tokens", "0 bytes"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def show_summary(text: str, ids: list[int], name: str) -> str:
    """show's last line: how many tokens, characters and bytes ``text`` is, each word singular where the count
    is 1 ("1 token, 2 characters, 2 bytes (gpt2)")."""
    n_bytes = len(text.encode("utf-8", errors="surrogatepass"))
    counts = (counted(count, noun)
              for count, noun in ((len(ids), "token"), (len(text), "character"), (n_bytes, "byte")))
    return f"{', '.join(counts)} ({name})"


# ---- explain ----------------------------------------------------------------------------------------------


class PreToken(NamedTuple):
    """A piece of the text as encode handles it: a special token, or a pre-token, with the ids encode gives it."""

    text: str
    ids: tuple[int, ...]
    special: bool


def pre_tokens(
    text: str, encoding: str | Encoding = "gpt2", *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED,
) -> list[PreToken]:
    """``text`` cut as encode cuts it: allowed special tokens first, then the pattern's pre-tokens, each with its
    ids (so the ids of all of them, in order, are ``encode``'s). Raises encode's error for a disallowed special
    token. ``encoding``, ``allowed_special`` and ``disallowed_special`` are :func:`render_show`'s.

    >>> [(p.text, p.ids) for p in pre_tokens("Hi<|endoftext|> there")]
    [('Hi', (17250,)), ('<|endoftext|>', (50256,)), (' there', (612,))]
    """
    enc = _as_encoding(encoding)
    # encode() applies the special-token rule: it raises here for a disallowed one, before any work
    enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)
    pretokenizer = compile_pattern(enc.pat_str)
    allowed = enc.special_tokens_set if allowed_special == "all" else set(allowed_special)
    specials = {token: i for token, i in enc.special_tokens.items() if token in allowed}
    start = 0
    segments = []
    if specials:
        for m in special_token_regex(frozenset(specials)).finditer(text):
            segments += [(text[start : m.start()], None), (m.group(), specials[m.group()])]
            start = m.end()
    segments.append((text[start:], None))
    pieces = []
    for segment, special_id in segments:
        if special_id is not None:
            pieces.append(PreToken(segment, (special_id,), True))
        elif enc.text_steps is not None:  # a tokenizer.json's steps cut the text, not pat_str (only shown for it)
            pieces += _pre_tokens_of_steps(enc, segment)
        else:
            # one pre-token encoded alone is the same pre-token again: the pattern cuts it nowhere
            pieces += [PreToken(piece, tuple(enc.encode_ordinary(piece)), False)
                       for piece in pretokenizer.split(segment)]
    return pieces


def _pre_tokens_of_steps(enc: Encoding, text: str) -> list[PreToken]:
    """``text`` (holding no allowed special token) cut as a tokenizer.json's steps cut it: its added tokens that
    are not special (Qwen3's ``<think>``) taken whole, as special tokens are, then each normalized stretch between
    them cut by the pre-tokenizer; each piece's ids are its merges', as encode's are."""
    stretches, added_ids = enc.text_steps.cut(text)
    pieces = []
    for k, stretch in enumerate(stretches):
        for piece in enc.text_steps.split(stretch):
            pieces.append(PreToken(piece, tuple(enc.token_ids[t] for t in merge_story(piece, enc).tokens), False))
        if k < len(added_ids):
            added_text = enc.decode_single_token_bytes(added_ids[k]).decode("utf-8")
            pieces.append(PreToken(added_text, (added_ids[k],), True))
    return pieces


class MergeStory(NamedTuple):
    """How BPE turns one pre-token into tokens: its bytes, each merge in order, and which token each merge built.

    ``whole`` says encode took the pre-token whole, as it is itself a token (tiktoken's shortcut). ``steps`` are
    the merges all the same: those OpenAI's ``bpe()`` makes, which end at that same token for every encoding
    whose tokens are each made by one merge (OpenAI's, and any the trainer makes). ``builds[n]`` is the index,
    among ``tokens``, of the token that ``steps[n]`` made part of (or all of).
    """

    data: bytes
    whole: bool
    steps: list[MergeStep]
    builds: list[int]
    tokens: list[bytes]


def merge_story(piece: str, encoding: str | Encoding = "gpt2") -> MergeStory:
    """The merges :func:`tokenizer.bpe.merge_reference` makes on one pre-token, and the token each one built.

    >>> story = merge_story(" capes")
    >>> [(s.left + s.right, story.tokens[t]) for s, t in zip(story.steps, story.builds)]
    [(b' c', b' cap'), (b'es', b'es'), (b'ap', b' cap'), (b' cap', b' cap')]
    """
    enc = _as_encoding(encoding)
    data = piece.encode("utf-8", errors="surrogatepass")
    whole = enc.whole_piece_tokens and data in enc.token_ids
    steps = merge_steps(data, enc.merge_ranks)
    tokens = [data] if whole else list(steps[-1].parts if steps else [data[i : i + 1] for i in range(len(data))])
    token_ends = list(accumulate(map(len, tokens)))
    builds, parts = [], [data[i : i + 1] for i in range(len(data))]
    for step in steps:
        at = next(i for i, (before, after) in enumerate(zip(parts, step.parts)) if before != after)
        offset = sum(map(len, parts[:at]))  # where the merged pair starts in the pre-token's bytes
        builds.append(bisect_right(token_ends, offset))
        parts = list(step.parts)
    return MergeStory(data, whole, steps, builds, tokens)


def explain_limit(piece: str) -> str | None:
    """Why ``piece``, a pre-token, is too long to explain (over :data:`MAX_EXPLAIN_BYTES`); None when it is not."""
    n_bytes = len(piece.encode("utf-8", errors="surrogatepass"))
    if n_bytes <= MAX_EXPLAIN_BYTES:
        return None
    shown = repr(piece[:20]) + ("..." if len(piece) > 20 else "")
    return (f"the pre-token {shown} is {n_bytes:,} bytes; the merge trace replays BPE step by step for pre-tokens "
            f"up to {MAX_EXPLAIN_BYTES:,} bytes (its work grows with the square of the length)")


def check_explainable(pieces: list[PreToken]) -> None:
    """``ValueError`` when one of ``pieces`` is a pre-token too long to explain (:func:`explain_limit`), before
    anything is shown of the others."""
    for piece in pieces:
        why = None if piece.special else explain_limit(piece.text)
        if why:
            raise ValueError(f"{why}: explain a shorter text, or see its tokens with show")


# What the numbers of a merge step mean, below explain's first line and above its notebook table alike (a learner
# meets the "merge #" and "token id" columns in both). The rank that is the token id is tiktoken's, not OpenAI's:
# OpenAI's encoder.py ranks a merge by its merge number (bpe_ranks), as 03 teaches. One counting rule for every
# teaching view: what a learner counts on the page (step n, the playground's token n) starts at 1; the tokenizer's
# own numbers (merge #, token id, a Python index: token n is ids[n - 1]) start at 0.
EXPLAIN_LEGEND = (
    "(step n: the pre-token's n-th merge, counted from 1 as the playground counts a text's tokens; merge #N: the",
    " merge's place among the encoding's merges, from 0; token id: the id of the token it makes, which is also the",
    " merge's rank in tiktoken's encodings: merges apply in that order)",
)


def explain_lines(
    text: str, encoding: str | Encoding = "gpt2", *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED, shown_as: str | None = None,
) -> Iterator[str]:
    """What encode does to ``text``, one line per step: special tokens, pre-tokens, merges, ids.

    ``encoding``, ``allowed_special``, ``disallowed_special`` and ``shown_as`` are :func:`render_show`'s. Raises
    ``ValueError`` (before the first line) for a disallowed special token, or for a pre-token over
    :data:`MAX_EXPLAIN_BYTES`.
    """
    enc = _as_encoding(encoding)
    pieces = pre_tokens(text, enc, allowed_special=allowed_special, disallowed_special=disallowed_special)
    check_explainable(pieces)
    yield (f"encoding {shown_as or enc.name}: special tokens first, then the pattern cuts pre-tokens, then BPE "
           "merges each")
    yield from EXPLAIN_LEGEND
    for piece in pieces:
        if piece.special:
            if piece.text in enc.special_tokens:
                yield f"\nspecial token {piece.text!r} = id {piece.ids[0]}"
                yield "  (allowed here; encode() refuses special-token text unless allowed_special names it)"
            else:
                yield f"\nadded token {piece.text!r} = id {piece.ids[0]}"
                yield "  (the tokenizer.json's added token that is not special: always taken whole, never merged)"
        else:
            yield from _explain_piece(enc, piece.text)


def _explain_piece(enc, piece: str) -> Iterator[str]:
    story = merge_story(piece, enc)
    data = story.data
    yield f"\npre-token {piece!r}: {counted(len(data), 'byte')} {' '.join(f'{b:02x}' for b in data)}"
    token_ids = enc.token_ids
    if story.whole and len(data) > 1:
        merged = story.steps[-1].parts if story.steps else tuple(bytes([b]) for b in data)  # no merge: its bytes
        yield f"  is itself a token (id {token_ids[data]}): encode takes it whole, without merging"
        yield ("  and the merges reach it too, as OpenAI's bpe() makes them:" if merged == (data,) else
               f"  (the merges alone end at {' '.join(map(show_bytes, merged))}: no merge builds this token)")
    for n, step in enumerate(story.steps, 1):
        yield (
            f"  step {n:>2}: {show_bytes(step.left)} + {show_bytes(step.right)} -> {show_bytes(step.left + step.right)}"
            f"  ({merge_names(enc, step)})"
        )
    ids = [token_ids[p] for p in story.tokens]
    yield f"  tokens {' '.join(show_bytes(p) for p in story.tokens)} = ids {ids}"


# ---- compare ----------------------------------------------------------------------------------------------


def compare_lines(
    text: str, encodings=COMPARED, *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED,
) -> Iterator[str]:
    """Token counts and splits of ``text`` under several encodings, and the longest whitespace token each used.

    ``encodings`` holds ``(encoding, label)`` pairs, each encoding a registered name or an :class:`Encoding`;
    ``allowed_special`` and ``disallowed_special`` are :func:`render_show`'s. The closing line compares the
    counts of this text; nothing in it is canned.
    """
    encodings = [(_as_encoding(encoding), label) for encoding, label in encodings]
    allowed_special, disallowed_special = _frozen(allowed_special), _frozen(disallowed_special)
    width = max(len(enc.name) for enc, _ in encodings)
    # the closing line's name for each row and its count of tokens: its name and label (where it has one) in every
    # comparison, so an encoding is called the same whatever it is compared with; a list, as two rows may be alike
    counts = []
    # every encoding's ids before the first line: one that refuses the text (a special token it disallows, which
    # another encoding may not have) leaves no half comparison printed above its error
    rows = [enc.encode(text, **own_rule(enc, allowed_special, disallowed_special)) for enc, _ in encodings]
    for (enc, label), ids in zip(encodings, rows):
        texts = token_pieces(enc, ids)
        spaces = max((len(t) for t in texts if t and WHITESPACE.issuperset(t)), default=0)
        counts.append((f"{enc.name} ({label})" if label else enc.name, len(ids)))
        tokens, chars = ("token " if len(ids) == 1 else "tokens"), ("char" if spaces == 1 else "chars")
        yield f"{enc.name:<{width}}  {label:<6}  {len(ids):>5} {tokens}  longest whitespace token: {spaces:>2} {chars}"
        yield f"{'':<{width}}  |{'|'.join(map(_visible, texts))}|"
    fewest = min(range(len(counts)), key=lambda row: counts[row][1])
    (fewest_name, least), others = counts[fewest], counts[:fewest] + counts[fewest + 1:]
    if others and least:
        ratios = [f"{name} {n / least:.2f}x" for name, n in others]
        yield f"\nfewest tokens: {fewest_name} ({least}); {ratios[0]} as many" + "".join(f", {r}" for r in ratios[1:])


def own_rule(enc: Encoding, allowed_special, disallowed_special) -> dict:
    """The ``encode`` arguments of ``enc``, one of several encodings compared under one rule: a token only another
    of them has is plain text to it, never refused (:func:`tokenizer.special_advice.rule_for`)."""
    allowed, disallowed = rule_for(enc.special_tokens_set, allowed_special, disallowed_special)
    return dict(allowed_special=allowed, disallowed_special=disallowed)


def _frozen(tokens):
    """A collection of special tokens as a frozenset, which every encoding compared reads (an iterator is read
    once); "all" and None as they are."""
    return tokens if isinstance(tokens, str) or tokens is None else frozenset(tokens)


def _as_encoding(encoding) -> Encoding:
    """A registered name, an Encoding, or what holds one as ``.encoding`` (CS336's Tokenizer, built in walkthrough
    01; OpenAI's Encoder of gpt2_numpy/encoder.py, in 03 and 04): the Encoding that does the work."""
    if isinstance(getattr(encoding, "encoding", None), Encoding):
        return encoding.encoding
    return get_encoding(encoding) if isinstance(encoding, str) else encoding


# ---- notebooks -------------------------------------------------------------------------------------------
#
# show(), explain() and compare() return objects that print as the commands do (``__repr__``) and render in
# Jupyter as HTML (``_repr_html_``): coloured tokens with their ids on hover, differing splits outlined.

# Light backgrounds that cycle over tokens, readable with black text (the web page uses the same ones).
HTML_BACKGROUNDS = ["#fde68a", "#a5f3fc", "#bbf7d0", "#f5d0fe", "#bfdbfe", "#fecaca"]


def token_spans(enc: Encoding, ids) -> list[tuple[int, int]]:
    """Where each token lies in the UTF-8 bytes of the text: ``(start, end)`` byte offsets.

    >>> token_spans(get_encoding("gpt2"), [31373, 995])
    [(0, 5), (5, 11)]
    """
    ends = list(accumulate(len(enc.decode_single_token_bytes(i)) for i in ids))
    return list(zip([0, *ends[:-1]], ends))


def split_differences(splits: list[list[tuple[int, int]]]) -> list[list[bool]]:
    """For each encoding's token spans (:func:`token_spans`), whether each token is split differently by some
    other encoding: its exact byte span is not a token there.

    >>> split_differences([[(0, 5), (5, 11)], [(0, 2), (2, 5), (5, 11)]])
    [[True, False], [True, True, False]]
    """
    sets = [set(spans) for spans in splits]
    # a span every other encoding has too is split the same; so one set per encoding, not one lookup per pair
    shared = [set.intersection(*[other for j, other in enumerate(sets) if j != n] or [own])
              for n, own in enumerate(sets)]
    return [[span not in shared[n] for span in spans] for n, spans in enumerate(splits)]


def visible_whitespace(text: str) -> str:
    """Spaces as ``·``, tabs as ``→``, line breaks as ``↵`` (a line break follows it), for showing tokens.

    >>> visible_whitespace(" a\\tb\\n")
    '·a→b↵\\n'
    """
    return text.replace(" ", "·").replace("\t", "→").replace("\r", "␍").replace("\n", "↵\n")


def _html_tokens(enc: Encoding, ids, texts, differs=None) -> str:
    spans = []
    for n, (token, token_text) in enumerate(zip(ids, texts)):
        style = f"background:{HTML_BACKGROUNDS[n % len(HTML_BACKGROUNDS)]};border-radius:3px;padding:1px 0"
        if enc.is_special_token(token):
            style = "background:#1f2937;color:#fff;border-radius:3px;padding:1px 2px"
        if differs is not None and differs[n]:
            style += ";outline:2px solid #dc2626"
        shown = html.escape(visible_whitespace(token_text)) if token_text else "&#8203;"
        spans.append(f'<span data-token-id="{token}" title="id {token}" style="{style}">{shown}</span>')
    return "".join(spans)


def _html_block(body: str) -> str:
    return f'<div style="font-family:monospace;white-space:pre-wrap;line-height:1.9;color:#000">{body}</div>'


class Shown:
    """What :func:`show` returns: the tokens of a text (``ids``, ``texts``), printable and rendered in notebooks."""

    def __init__(self, text: str, enc: Encoding, *, allowed_special, disallowed_special):
        self.text, self.encoding = text, enc
        self._rule = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
        self.ids = enc.encode(text, **self._rule)
        self.texts = token_texts(enc, self.ids)

    def __repr__(self) -> str:
        return render_show(self.text, self.encoding, False, **self._rule)

    def _repr_html_(self) -> str:
        summary = show_summary(self.text, self.ids, self.encoding.name)
        tokens = _html_tokens(self.encoding, self.ids, self.texts)
        return _html_block(f"{tokens}\n<small>{html.escape(summary)}</small>")


class Explained:
    """What :func:`explain` returns: each pre-token and its merges (``pieces``: :class:`PreToken` s)."""

    def __init__(self, text: str, enc: Encoding, *, allowed_special, disallowed_special):
        self.text, self.encoding = text, enc
        self._rule = dict(allowed_special=allowed_special, disallowed_special=disallowed_special)
        self.pieces = pre_tokens(text, enc, **self._rule)
        check_explainable(self.pieces)  # here, not in the notebook's rendering of it

    def __repr__(self) -> str:
        return "\n".join(explain_lines(self.text, self.encoding, **self._rule))

    def _repr_html_(self) -> str:
        rows = []
        for piece in self.pieces:
            head = html.escape(visible_whitespace(piece.text))
            if piece.special:  # as explain_lines names them: a tokenizer.json's added token is not a special one
                kind = ("special token" if piece.text in self.encoding.special_tokens
                        else "added token (not special: always taken whole, never merged)")
                rows.append(f"<p>{kind} <b>{head}</b> = id {piece.ids[0]}</p>")
                continue
            story = merge_story(piece.text, self.encoding)
            merges = "".join(
                f"<tr><td>{n}</td><td>{html.escape(show_bytes(s.left))} + {html.escape(show_bytes(s.right))}</td>"
                f"<td>{html.escape(show_bytes(s.left + s.right))}</td>"
                f"<td>{merge_number(self.encoding, s.left + s.right)}</td>"
                f"<td>{self.encoding.token_ids[s.left + s.right]}</td></tr>"
                for n, s in enumerate(story.steps, 1)
            )
            note = ""
            if story.whole and len(story.data) > 1:  # a single byte is one of the tokens BPE starts from
                # as explain_lines says it: a hand-made vocabulary may hold a token that no merge builds
                merged = story.steps[-1].parts if story.steps else tuple(bytes([b]) for b in story.data)
                note = (" (itself a token: encode takes it whole; the merges lead to it too)" if merged == (story.data,)
                        else f" (itself a token: encode takes it whole; the merges alone end at "
                        f"{html.escape(' '.join(map(show_bytes, merged)))}: no merge builds this token)")
            table = ("<table><tr><th>step</th><th>pair</th><th>result</th><th>merge #</th><th>token id</th></tr>"
                     f"{merges}</table>") if story.steps else ""
            said = f"{counted(len(story.data), 'byte')}, ids {list(piece.ids)}{note}"
            rows.append(f"<p>pre-token <b>{head}</b>: {said}</p>{table}")
        legend = f"<p><small>{html.escape(''.join(EXPLAIN_LEGEND))}</small></p>"  # as the printed form's
        return f'<div style="font-family:monospace">{legend}{"".join(rows)}</div>'


def _label(encoding: str | Encoding) -> str:
    """GPT-2, GPT-4 or GPT-4o for those encodings; "saved" for a tokenizer of files whose folder bears one of
    their names (get_encoding's own is another object); else nothing."""
    labels = dict(COMPARED)
    if isinstance(encoding, str) or encoding.name not in labels:
        return labels.get(getattr(encoding, "name", encoding), "")
    return labels[encoding.name] if is_registered(encoding) else "saved"


class Compared:
    """What :func:`compare` returns: the ids of one text under several encodings (``ids``: name -> ids), tokens
    that another encoding splits differently outlined in notebooks."""

    def __init__(self, text: str, encodings, *, allowed_special, disallowed_special):
        self.text = text
        self.encodings = [(_as_encoding(encoding), label) for encoding, label in encodings]
        self._rule = dict(allowed_special=_frozen(allowed_special), disallowed_special=_frozen(disallowed_special))
        self._row_ids = [enc.encode(text, **own_rule(enc, **self._rule))  # two rows may share a name
                         for enc, _ in self.encodings]
        self.ids = {enc.name: ids for (enc, _), ids in zip(self.encodings, self._row_ids)}

    def __repr__(self) -> str:
        return "\n".join(compare_lines(self.text, self.encodings, **self._rule))

    def _repr_html_(self) -> str:
        encs = [enc for enc, _ in self.encodings]
        differs = split_differences([token_spans(enc, ids) for enc, ids in zip(encs, self._row_ids)])
        rows = []
        for (enc, label), marks, ids in zip(self.encodings, differs, self._row_ids):
            tokens = _html_tokens(enc, ids, token_texts(enc, ids), marks)
            count = counted(len(ids), "token")
            rows.append(f"<b>{html.escape(enc.name)}</b> {html.escape(label)}: {count}\n{tokens}\n")
        return _html_block("\n".join(rows))


def show(
    text: str, encoding: str | Encoding = "gpt2", *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED,
) -> Shown:
    """The tokens of ``text``, for a notebook or the REPL (arguments as :func:`render_show`'s).

    >>> show("hello world").ids
    [31373, 995]
    """
    enc = _as_encoding(encoding)
    return Shown(text, enc, allowed_special=allowed_special, disallowed_special=disallowed_special)


def explain(
    text: str, encoding: str | Encoding = "gpt2", *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED,
) -> Explained:
    """Each pre-token of ``text`` and its merges, for a notebook or the REPL (arguments as :func:`render_show`'s)."""
    enc = _as_encoding(encoding)
    return Explained(text, enc, allowed_special=allowed_special, disallowed_special=disallowed_special)


def compare(
    text: str, encodings=COMPARED, *,
    allowed_special=TEACHING_ALLOWED, disallowed_special=TEACHING_DISALLOWED,
) -> Compared:
    """``text`` under several encodings, for a notebook or the REPL (arguments as :func:`compare_lines`'s;
    ``encodings`` may also be plain names)."""
    if isinstance(encodings, str) or isinstance(_as_encoding(encodings), Encoding):  # one: a name went by letter
        raise TypeError("compare takes a list of encodings to set side by side, e.g. ['gpt2', 'cl100k_base'], "
                        "not one encoding; show(text, encoding) shows one")
    encodings = [item if isinstance(item, (str, tuple)) else _as_encoding(item) for item in encodings]
    labelled = [item if isinstance(item, tuple) else (item, _label(item)) for item in encodings]
    if not labelled:  # else the first print fails inside (max() of nothing)
        raise ValueError("compare needs at least one encoding, e.g. ['gpt2', 'cl100k_base']")
    return Compared(text, labelled, allowed_special=allowed_special, disallowed_special=disallowed_special)


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
        if isinstance(text, (bytes, bytearray)):  # its items are ints, which no character table holds
            raise TypeError(f'CharTokenizer encodes a str, got {type(text).__name__}: decode it first, e.g. '
                            'data.decode("utf-8")')
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
