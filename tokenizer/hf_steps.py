"""What a Hugging Face ``tokenizer.json`` does to text before BPE, as Python: :class:`TextSteps`.

tiktoken's encodings cut text with one regular expression. A ``tokenizer.json`` spells the same job as a
pipeline of named steps, each a small JSON object, run in this order on the text between special tokens:

1. **added tokens** that are not special (Qwen3's ``<think>``): found in the text and taken out whole, as
   their own ids, before anything else touches it. Those marked ``"normalized": true`` are looked for after
   step 2, the others before it.
2. **the normalizer** rewrites each stretch of text: ``NFC`` (Qwen3: "e" + combining acute becomes "é", so
   the same word gets the same ids however it was typed), ``NFKC``, ``Lowercase``, ``Replace``, ``Prepend``,
   ``Strip``, or a ``Sequence`` of them.
3. **the pre-tokenizer** cuts each stretch into pieces, a list of strings passed from step to step:

   - ``Split`` cuts every piece with a pattern (a regex or a plain string). What happens to the matches
     and to the stretches between them is the ``behavior``: ``Isolated`` keeps both as pieces (tiktoken's
     ``findall`` keeps only the matches: here the text between them is encoded too), ``Removed`` drops the
     matches, ``MergedWithPrevious`` / ``MergedWithNext`` glue each match to the piece before / after it,
     ``Contiguous`` glues runs of matches into one piece. ``invert`` swaps what counts as a match.
     DeepSeek V3 runs three: numbers, then CJK runs, then words and punctuation, each inside the last's pieces.
   - ``Digits`` cuts out runs of numbers (or each alone): any ``\\p{N}``, "²" and "½" as well as "1".
   - ``ByteLevel`` (last): optionally adds a space in front of each piece and cuts it with GPT-2's pattern;
     then each piece is BPE-encoded as its UTF-8 bytes. (In the file, it also writes bytes as printable
     characters, ``" "`` as ``"Ġ"``; here pieces simply become bytes.)

>>> steps = TextSteps.from_json({"type": "NFC"}, {"type": "Sequence", "pretokenizers": [
...     {"type": "Split", "pattern": {"Regex": "\\\\d{1,3}"}, "behavior": "Isolated", "invert": False},
...     {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})
>>> steps.normalize("cafe\\u0301 1234") == "caf\\u00e9 1234"
True
>>> steps.split("café 1234")
['café ', '123', '4']

Character classes mean what Unicode 16.0 says, as in HF ``tokenizers``: its Oniguruma has 16.0's tables, and
the ``regex`` package here 17.0's, so the splits look at the text with 17.0's new characters masked
(:func:`tokenizer.patterns.mask_any_newer`: a CJK ideograph of Extension J is no letter to HF yet).

What this module does not do: BPE itself (:mod:`tokenizer.bpe`), special tokens (the ``Encoding`` face
handles those), the post-processor (a BOS token: tiktoken's API adds nothing), offsets, or files that are not
byte-level (SentencePiece's ``Metaspace`` + byte fallback, Unigram, WordPiece): :func:`from_json` refuses
any step it does not know with a ``ValueError`` naming it.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Callable, Iterator

import regex

from .patterns import GPT2_PATTERN, WHITESPACE_CLASS, has_any_newer, mask_any_newer, unmask
from .unicode9 import ASSIGNED
from .vocab_files import token_to_gpt2_str

# What each Split ``behavior`` is called in a tokenizer.json (and in HF's Python API, in snake case).
BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")

Normalizer = Callable[[str], str]
# How a pattern sees a piece: None, as it is; else a function giving the copy it is matched on (the same length,
# Unicode 17.0's new characters masked), while the pieces cut are taken from the text itself.
SeenAs = Callable[[str], str] | None
PreTokenizer = Callable[[list[str], SeenAs], list[str]]


def seen_as_for(text: str) -> SeenAs:
    """How the patterns must see ``text`` (and the pieces cut from it): masked if it holds a character that
    Unicode 17.0 added, which HF's Unicode 16.0 tables do not know."""
    return mask_any_newer if has_any_newer(text) else None


class UnsupportedStep(ValueError):
    """A step of a tokenizer.json this package cannot run exactly (the message names it)."""


# ---- normalizers ---------------------------------------------------------------------------------------------


def normalizer_from_json(spec: dict | None) -> Normalizer | None:
    """The normalizer a ``tokenizer.json``'s ``"normalizer"`` describes, as a function of text; None for none."""
    if spec is None:
        return None
    kind = spec.get("type")
    if kind == "Sequence":
        steps = [step for step in map(normalizer_from_json, spec.get("normalizers", [])) if step is not None]
        if not steps:
            return None
        if len(steps) == 1:
            return steps[0]
        return lambda text: _run_all(steps, text)
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return lambda text: _normalize_as_unicode9(kind, text)
    if kind == "Lowercase":
        return _lowercase
    if kind == "Prepend":
        prefix = spec["prepend"]
        return lambda text: prefix + text if text else text  # HF prepends nothing to empty text
    if kind == "Replace":
        find, content = _pattern_of(spec), spec["content"]
        return lambda text: _replace(find, content, text)
    if kind == "Strip":
        left = f"^[{WHITESPACE_CLASS}]+" if spec.get("strip_left", True) else None
        right = f"[{WHITESPACE_CLASS}]+$" if spec.get("strip_right", True) else None
        strip = re.compile("|".join(filter(None, [left, right])) or "(?!)")
        return lambda text: strip.sub("", text)
    raise UnsupportedStep(f"normalizer {kind!r} is not supported")


# HF normalizes with Unicode 9.0's tables (the unicode-normalization-alignments crate), Python with its own
# version's: a character assigned since (U+1AC7, a mark of class 230 in 13.0) is to HF a character of class 0 with
# no decomposition, which no mark is moved across and nothing composes with. So such characters are left as they
# are, and only the text between them is normalized, which gives HF's result whatever Python's version.
_NEWER_THAN_UNICODE9 = re.compile(
    "([^" + "".join("-".join(f"\\U{int(end, 16):08X}" for end in run.split("-")) for run in ASSIGNED.split()) + "]+)"
)


def _normalize_as_unicode9(form: str, text: str) -> str:
    """``unicodedata.normalize(form, text)`` as HF's normalizers do it: with Unicode 9.0's tables.

    >>> _normalize_as_unicode9("NFC", "\u0301a\u0316\u0301"), _normalize_as_unicode9("NFC", "a\u1ac7\u0316")
    ('\u0301á\u0316', 'a\u1ac7\u0316')
    """
    if text.isascii():
        return text  # every normal form of ASCII is itself
    parts = _NEWER_THAN_UNICODE9.split(text)  # the runs of newer characters at the odd places
    return "".join(part if at % 2 else unicodedata.normalize(form, part) for at, part in enumerate(parts))


# Capitals whose lowercase Unicode gave after 14.0, Python 3.11's version (its str.lower leaves them), and HF's
# Lowercase (Rust's, Unicode 17.0) knows: (first, last, what a code point adds for its lowercase), found by
# comparing the two on every code point. A Python that knows them already gives the same.
_LOWERCASE_SINCE_UNICODE14 = {
    cp: cp + shift
    for first, last, shift in [(0x1C89, 0x1C89, 1), (0xA7CB, 0xA7CB, -42343), (0xA7CC, 0xA7CC, 1), (0xA7CE, 0xA7CE, 1),
                               (0xA7D2, 0xA7D2, 1), (0xA7D4, 0xA7D4, 1), (0xA7DA, 0xA7DA, 1), (0xA7DC, 0xA7DC, -42561),
                               (0x10D50, 0x10D65, 32), (0x16EA0, 0x16EB8, 27)]
    for cp in range(first, last + 1)
}


def _lowercase(text: str) -> str:
    """HF's ``Lowercase``: each character's lowercase on its own. ``str.lower`` looks at context for one letter,
    capital sigma, which it makes final "ς" at the end of a word; HF makes every one "σ"."""
    lowered = text.replace("\u03a3", "\u03c3").lower()
    return lowered if lowered.isascii() else lowered.translate(_LOWERCASE_SINCE_UNICODE14)


def _run_all(steps: list[Normalizer], text: str) -> str:
    for step in steps:
        text = step(text)
    return text


def oniguruma_spans(find: regex.Pattern, text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each match of ``find`` in ``text``, found as HF's Oniguruma finds them one after another:
    each search starts where the last match ended, but an empty match found right there is passed over (``regex``
    takes it: ``\\n?`` in "a\\n" matches "a", "\\n" and the empty end), and after an empty match the next search
    starts one character on (``regex`` looks there again for a longer match: ``(?=b)|b`` in "b" matches twice).

    >>> list(oniguruma_spans(regex.compile("\\n?"), "a\\n")), list(oniguruma_spans(regex.compile("(?=b)|b"), "b"))
    ([(0, 0), (1, 2)], [(0, 0)])
    """
    at, last_end = 0, None
    while at <= len(text):
        m = find.search(text, at)
        if m is None:
            return
        start, end = m.span()
        if start != end or end != last_end:
            yield start, end
        at, last_end = end + 1 if start == end else end, end


# A regex's source in the pieces may_match_empty reads: an escape, a character class (POSIX brackets inside it),
# a lookaround's opening, a comment, or one character. A "[" left over is a class this reading does not judge.
_REGEX_PIECE = regex.compile(r"\\.|\[\^?\]?(?:\\.|\[:\w+:\]|[^\\\]\[])*\]|\(\?<?[=!]|\(\?#[^)]*\)|.", regex.DOTALL)
_LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")
_ANCHORS = ("^", "$", "\\b", "\\B", "\\A", "\\Z", "\\z", "\\G")
# what the reading cannot judge: backreferences, \K, conditionals, recursion, verbose mode
_UNJUDGED = regex.compile(r"\\[1-9kgK]|\(\?(?:\(|R|&|P>|[+-]?\d|[a-zA-Z-]*x)")


def may_match_empty(find: regex.Pattern) -> bool:
    """Whether ``find`` could match an empty string anywhere. Its source with every lookaround and anchor taken
    out is asked to match the empty text: those only narrow where a match may be, and an empty match consumes
    nothing, so a pattern that can match empty anywhere leaves one that matches the empty text. True too for
    what this reading does not judge (:data:`_UNJUDGED`, a nested class, a source it leaves uncompilable).

    >>> may_match_empty(regex.compile(r"\\s+(?!\\S)|[^\\r\\n\\p{L}]?\\p{L}+"))
    False
    >>> may_match_empty(regex.compile("(?=b)|b"))
    True
    """
    if find.flags & regex.VERBOSE or _UNJUDGED.search(find.pattern):
        return True
    kept, depth = [], 0  # depth: parentheses open inside a lookaround being taken out
    for piece in _REGEX_PIECE.findall(find.pattern):
        if piece.startswith("(?#"):  # a comment
            continue
        if piece == "[":
            return True
        if depth:
            depth += piece.startswith("(") - (piece == ")")
        elif piece in _LOOKAROUNDS:
            depth = 1
        elif piece not in _ANCHORS:
            kept.append(piece)
    try:
        return regex.fullmatch("".join(kept), "", find.flags & ~regex.MULTILINE) is not None
    except regex.error:
        return True


def _replace(find: regex.Pattern, content: str, text: str) -> str:
    """Each match of ``find`` in ``text`` replaced by ``content``, matched as HF's Unicode 16.0 tables see it, and
    as HF's Oniguruma finds matches (:func:`oniguruma_spans`), none in empty text.

    >>> _replace(regex.compile("\\n?"), "X", "a\\n"), _replace(regex.compile("x*"), "X", "")
    ('XaX', '')
    """
    if not text:
        return text
    seen_as = seen_as_for(text)
    out, at = [], 0
    for start, end in oniguruma_spans(find, text if seen_as is None else seen_as(text)):
        out += [text[at:start], content]
        at = end
    return "".join(out) + text[at:]


# What Oniguruma (HF tokenizers) and `regex` read differently, found by running constructs on every code point below
# U+3000 in both: \w, \b and [[:word:]] (Oniguruma's word characters take "²"), \h (a hex digit to Oniguruma,
# horizontal space to `regex`), \X (grapheme rules of another Unicode version), POSIX [[:digit:]], [[:alnum:]] and
# [[:punct:]], \p{Word}, \p{XDigit}, and escapes one of them lacks (\N, \O, \G, \c, \e, \y, \Y, \p{L&}). Also \Z
# (before a final line break too, to Oniguruma), the option m ("dot matches a line break" to Oniguruma's Ruby syntax,
# "^ and $ at each line" to `regex`) and a class's && (an intersection to Oniguruma, two characters to `regex`).
_READ_OTHERWISE = regex.compile(
    r"\\[wWbBhHXNOGceyYZ]|\\[pP]\{\^?(?i:L&|Word|XDigit)\}|\[:\^?(?:alnum|digit|punct|word):\]"
    r"|\(\?[imx]*-?[imx]*m[imx]*-?[imx]*[:)]|&&"
)


def _read_otherwise(source: str) -> str | None:
    """The first construct of the regex ``source`` that HF's Oniguruma reads otherwise than ``regex``; None if none."""
    m = _READ_OTHERWISE.search(source.replace("\\\\", "\0\0"))  # (an escaped backslash escapes nothing)
    return source[m.start() : m.end()] if m else None


# Oniguruma's ^: the text's start, or after a line break that does not end the text ("a\n" has no line after it),
# where `regex`'s MULTILINE ^ matches after every "\n", at the text's end too.
_ONIGURUMA_LINE_START = r"(?:\A|^(?!\Z))"


def _line_starts_as_onigurumas(source: str) -> str:
    """``source`` with each ``^`` that anchors a line (not one inside a character class, nor an escaped one) spelled
    so that ``regex`` with MULTILINE matches it where Oniguruma does.

    >>> print(_line_starts_as_onigurumas("^a|[^^]|[]^]b(?#^)"))
    (?:\\A|^(?!\\Z))a|[^^]|[]^]b(?#^)
    """
    out, at, depth = [], 0, 0  # depth: how many character classes the scan is inside (Oniguruma nests them)
    while at < len(source):
        char = source[at]
        if char == "\\":
            out.append(source[at : at + 2])
            at += 2
            continue
        if not depth and source.startswith("(?#", at):  # a comment, copied as it is: it runs to the first ")"
            end = at + 3
            while end < len(source) and source[end] != ")":
                end += 2 if source[end] == "\\" else 1
            out.append(source[at : end + 1])
            at = end + 1
            continue
        if char == "[":
            if depth and source.startswith("[:", at):  # a POSIX bracket [:alpha:] inside a class
                end = source.find(":]", at + 2)
                if end != -1:
                    out.append(source[at : end + 2])
                    at = end + 2
                    continue
            depth += 1
            opening = 2 if source.startswith("[^", at) else 1
            if source.startswith("]", at + opening):  # a "]" first in a class is one of its characters
                opening += 1
            out.append(source[at : at + opening])
            at += opening
            continue
        if char == "]" and depth:
            depth -= 1
        out.append(_ONIGURUMA_LINE_START if char == "^" and not depth else char)
        at += 1
    return "".join(out)


def _pattern_of(spec: dict) -> regex.Pattern:
    """A Split's or Replace's ``pattern``: ``{"Regex": ...}`` (HF's Oniguruma syntax, read by ``regex``, which
    spells the families' patterns the same way) or ``{"String": ...}`` (literal text)."""
    pattern = spec.get("pattern") or {}
    if "Regex" in pattern:
        different = _read_otherwise(pattern["Regex"]) if isinstance(pattern["Regex"], str) else None
        if different:
            raise UnsupportedStep(f"regex {pattern['Regex']!r}: {different!r} means something else to HF tokenizers' "
                                  "Oniguruma than to the regex package")
        # Oniguruma's Ruby syntax reads ^ and $ at the start and end of every line, as `regex` does with MULTILINE,
        # but for one place: its ^ never matches at the end of a text, even after a final line break
        return regex.compile(_line_starts_as_onigurumas(pattern["Regex"]), regex.MULTILINE)
    if "String" in pattern:
        return regex.compile(regex.escape(pattern["String"]))
    raise UnsupportedStep(f"pattern {pattern!r} is neither a Regex nor a String")


# ---- pre-tokenizers ------------------------------------------------------------------------------------------


def split_by(find: regex.Pattern, behavior: str, invert: bool, text: str, seen_as: SeenAs = None) -> list[str]:
    """``text`` cut by the matches of ``find`` as HF's ``Split`` cuts it (see the module's docstring); ``find``
    is matched on ``seen_as(text)`` if given (see :data:`SeenAs`).

    >>> [split_by(regex.compile(r"\\d"), b, False, "ab12c") for b in ("Isolated", "MergedWithPrevious")]
    [['ab', '1', '2', 'c'], ['ab1', '2', 'c']]
    """
    # Every stretch of the text, with whether it is a match (after invert): matches and the gaps between.
    stretches: list[tuple[int, int, bool]] = []
    at = 0
    for start, end in oniguruma_spans(find, text if seen_as is None else seen_as(text)):
        if start > at:
            stretches.append((at, start, invert))
        stretches.append((start, end, not invert))
        at = end
    if at < len(text) or not text:
        stretches.append((at, len(text), invert))
    pieces: list[list[int]] = []  # [start, end] of each piece kept
    if behavior == "Isolated":
        pieces = [[a, b] for a, b, _ in stretches]
    elif behavior == "Removed":
        pieces = [[a, b] for a, b, is_match in stretches if not is_match]
    elif behavior in ("MergedWithPrevious", "Contiguous"):
        previous_match = False
        for a, b, is_match in stretches:
            glue = (is_match and not previous_match) if behavior == "MergedWithPrevious" else is_match == previous_match
            if glue and pieces:
                pieces[-1][1] = b
            else:
                pieces.append([a, b])
            previous_match = is_match
    elif behavior == "MergedWithNext":
        next_match = False
        for a, b, is_match in reversed(stretches):
            if is_match and not next_match and pieces:
                pieces[-1][0] = a
            else:
                pieces.append([a, b])
            next_match = is_match
        pieces.reverse()
    else:
        raise UnsupportedStep(f"Split behavior {behavior!r} is not supported (expected one of {', '.join(BEHAVIORS)})")
    return [text[a:b] for a, b in pieces if b > a]


def pre_tokenizer_from_json(spec: dict | None) -> list[PreTokenizer]:
    """The steps of a ``tokenizer.json``'s ``"pre_tokenizer"``, each a function from pieces to pieces. The
    file must be byte-level: its last step is ``ByteLevel`` (which must not come before another step)."""
    specs = flat_steps(spec)
    kinds = [s.get("type") for s in specs]
    if "ByteLevel" not in kinds:
        found = f"pre-tokenizer {kinds[-1]!r}" if kinds else "no pre-tokenizer"
        raise UnsupportedStep(f"{found} without ByteLevel (not byte-level BPE) is not supported")
    if kinds.index("ByteLevel") != len(kinds) - 1:
        raise UnsupportedStep("a pre-tokenizer step after ByteLevel (which has turned bytes into characters)")
    return [_pre_tokenizer_step(s) for s in specs]


def flat_steps(spec: dict | None) -> list[dict]:
    """The steps of a ``"pre_tokenizer"`` in order, nested ``Sequence`` steps laid flat."""
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        return [step for sub in spec.get("pretokenizers", []) for step in flat_steps(sub)]
    return [spec]


def _pre_tokenizer_step(spec: dict) -> PreTokenizer:
    kind = spec.get("type")
    if kind == "Split":
        find, behavior, invert = _pattern_of(spec), spec.get("behavior", "Isolated"), bool(spec.get("invert"))
        split_by(find, behavior, invert, "")  # an unknown behavior is refused now, not at the first text
        if behavior == "Isolated":  # (matches and gaps alike are pieces: invert changes nothing)
            return _isolated(find)
        return lambda pieces, seen_as: [p for piece in pieces for p in split_by(find, behavior, invert, piece, seen_as)]
    if kind == "Digits":
        # HF's "digit" is Rust's char::is_numeric: any number (Nd, Nl, No), so "²", "½" and "Ⅻ" too. Its tables are
        # not Oniguruma's, so the text is seen as it is, not masked (see _NUMBERS_TO_RUST).
        one = "(?V1)" + _NUMBERS_TO_RUST
        numbers = _isolated(regex.compile(one if spec.get("individual_digits") else one + "+"))
        return lambda pieces, seen_as: numbers(pieces, None)
    if kind == "ByteLevel":
        words = _isolated(regex.compile(GPT2_PATTERN)) if spec.get("use_regex", True) else None
        prefix = bool(spec.get("add_prefix_space"))
        return lambda pieces, seen_as: _byte_level(pieces, prefix, words, seen_as)
    if kind == "Metaspace":
        raise UnsupportedStep("pre-tokenizer 'Metaspace' (SentencePiece-style '▁' words) is not supported")
    raise UnsupportedStep(f"pre-tokenizer {kind!r} is not supported")


# What Rust's char::is_numeric counts as a number, as a `regex` class: Unicode 17.0's new digits (Tolong Siki's
# U+11DE0..U+11DE9, U+16FF4..U+16FF6), which Oniguruma's 16.0 tables do not know, but not the cuneiform numbers
# that the `regex` package's tables count and Rust's do not (U+1246F, U+12475..U+1247F, U+12550..U+12686): found
# by splitting every code point with HF's Digits.
_NUMBERS_TO_RUST = r"[\p{N}--[\U0001246F\U00012475-\U0001247F\U00012550-\U00012686]]"


def _isolated(find: regex.Pattern) -> PreTokenizer:
    """``split_by(find, "Isolated", ...)`` on every piece, as one ``regex`` split in C: with the pattern in a
    group, the split returns the gaps and the matches in order (empty ones dropped). The families' patterns
    have no group of their own; one that has goes through :func:`split_by`."""
    if find.groups:
        return lambda pieces, seen_as: [
            p for piece in pieces for p in split_by(find, "Isolated", False, piece, seen_as)
        ]
    split = regex.compile(f"({find.pattern})", find.flags).split

    if not may_match_empty(find):  # (the families' patterns): no empty match to search on from
        def isolated(pieces: list[str], seen_as: SeenAs) -> list[str]:
            if seen_as is None:
                return [p for piece in pieces for p in split(piece) if p]
            # the masked copy's parts have the lengths of the piece's: unmask cuts the piece itself by them
            return [p for piece in pieces for p in unmask(piece, split(seen_as(piece))) if p]

        return isolated

    def cut(piece: str, seen_as: SeenAs) -> list[str]:
        parts = split(piece) if seen_as is None else unmask(piece, split(seen_as(piece)))
        if "" in parts[1::2]:  # an empty match, after which `regex` searches on otherwise than Oniguruma
            return split_by(find, "Isolated", False, piece, seen_as)
        return parts

    def isolated_checked(pieces: list[str], seen_as: SeenAs) -> list[str]:
        return [p for piece in pieces for p in cut(piece, seen_as) if p]

    return isolated_checked


def _byte_level(pieces: list[str], add_prefix_space: bool, words: PreTokenizer | None, seen_as: SeenAs) -> list[str]:
    """HF's ByteLevel on pieces: a space put in front of each that lacks one, if asked; cut by GPT-2's pattern."""
    if add_prefix_space:
        pieces = [piece if piece.startswith(" ") else " " + piece for piece in pieces]
    if words is None:
        return pieces
    return words(pieces, seen_as)


# ---- the whole pipeline --------------------------------------------------------------------------------------


class TextSteps:
    """Text -> the pieces BPE runs on, as a ``tokenizer.json`` says (see the module's docstring).

    ``added_raw`` / ``added_normalized``: the non-special added tokens (text -> id) looked for before / after
    normalization. ``specs`` keeps the JSON it was made from, so the encoding can be saved again as it was read.
    ``no_decoder``: the file's ``"decoder"`` is null, so HF decodes ids to the tokens' strings joined by spaces
    (:meth:`joined_token_strings`), not to the text they hold.
    """

    def __init__(self, normalize: Normalizer | None, pre_tokenizers: list[PreTokenizer], *,
                 added_raw: dict[str, int] | None = None, added_normalized: dict[str, int] | None = None,
                 specs: dict | None = None, no_decoder: bool = False):
        self._normalize = normalize
        self.pre_tokenizers = pre_tokenizers
        self.added_raw = dict(added_raw or {})
        self.added_normalized = dict(added_normalized or {})
        self.specs = specs or {}
        self.no_decoder = no_decoder
        self._find_raw = _finder(self.added_raw)
        # HF normalizes these tokens' own text too before it looks for them (a Lowercase file's "<Think>" is found
        # as "<think>", in text that the normalizer has lowered)
        self._normalized_ids = {self.normalize(t): i for t, i in self.added_normalized.items() if self.normalize(t)}
        self._find_normalized = _finder(self._normalized_ids)

    @classmethod
    def from_json(cls, normalizer: dict | None, pre_tokenizer: dict | None, added_tokens: list[dict] = (), *,
                  no_decoder: bool = False) -> TextSteps:
        """From a ``tokenizer.json``'s ``"normalizer"``, ``"pre_tokenizer"`` and non-special ``"added_tokens"``
        entries (and whether its ``"decoder"`` is null). Raises :class:`UnsupportedStep` for a step it cannot run
        exactly."""
        added_raw, added_normalized = {}, {}
        for entry in added_tokens:
            for option in ("lstrip", "rstrip", "single_word"):
                if entry.get(option):
                    raise UnsupportedStep(f"added token {entry['content']!r} with {option}=true is not supported")
            (added_normalized if entry.get("normalized") else added_raw)[entry["content"]] = entry["id"]
        specs = {"normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "added_tokens": list(added_tokens)}
        return cls(normalizer_from_json(normalizer), pre_tokenizer_from_json(pre_tokenizer),
                   added_raw=added_raw, added_normalized=added_normalized, specs=specs, no_decoder=no_decoder)

    def __reduce__(self):
        # sent (to another process) as the JSON it was read from: its steps are closures, which pickle cannot send
        if not self.specs:
            raise TypeError("TextSteps made by hand cannot be pickled; make them with TextSteps.from_json")
        specs = self.specs
        return (functools.partial(TextSteps.from_json, no_decoder=self.no_decoder),
                (specs["normalizer"], specs["pre_tokenizer"], specs["added_tokens"]))

    def joined_token_strings(self, tokens: list[int], token_bytes: list[bytes],
                             is_special: Callable[[int], bool]) -> str:
        """What HF tokenizers' ``decode`` gives for ``tokens`` (whose bytes are ``token_bytes``) with a file that
        has no decoder: each token's string in the file (:meth:`token_strings`) joined by spaces."""
        return " ".join(self.token_strings(tokens, token_bytes, is_special))

    def token_strings(self, tokens: list[int], token_bytes: list[bytes],
                      is_special: Callable[[int], bool]) -> list[str]:
        """Each token's string in the file: an added token's is its text, special or not; any other token's is
        its bytes as byte-level characters (" " as "Ġ")."""
        added_ids = {*self.added_raw.values(), *self.added_normalized.values()}
        return [data.decode("utf-8") if token in added_ids or is_special(token) else token_to_gpt2_str(data)
                for token, data in zip(tokens, token_bytes)]

    def what_decides_ids(self) -> dict:
        """The steps as data that two files giving the same ids share (a fingerprint hashes it): the normalizer as
        the file spells it, the pre-tokenizer's steps laid flat without ``trim_offsets`` (which moves offsets
        only), and the added tokens that are not special, by when they are looked for. Not ``no_decoder``, which
        changes decoding, not ids."""
        if not self.specs:
            raise TypeError("TextSteps made by hand have no JSON to describe them; make them with TextSteps.from_json")
        splits = [{key: value for key, value in step.items() if key != "trim_offsets"}
                  for step in flat_steps(self.specs.get("pre_tokenizer"))]
        return {"normalizer": self.specs.get("normalizer"), "pre_tokenizer": splits,
                "added_raw": sorted(self.added_raw.items()), "added_normalized": sorted(self.added_normalized.items())}

    @property
    def has_normalizer(self) -> bool:
        return self._normalize is not None

    def normalize(self, text: str) -> str:
        return text if self._normalize is None else self._normalize(text)

    def split(self, text: str) -> list[str]:
        """The pre-tokenizer's pieces of ``text`` (normalized already, with no added token in it)."""
        pieces = [text] if text else []
        seen_as = seen_as_for(text)
        for step in self.pre_tokenizers:
            pieces = step(pieces, seen_as)
        return pieces

    def cut(self, text: str) -> tuple[list[str], list[int]]:
        """``(stretches, ids)``: ``text`` normalized and cut at its added tokens: one stretch more than ids, as
        the ``Encoding`` face cuts text at special tokens; :meth:`split` then cuts each stretch into pieces.

        >>> TextSteps(str.upper, [], added_raw={"<t>": 9}).cut("a<t>b")
        (['A', 'B'], [9])
        """
        stretches, ids = [], []
        raw_stretches, raw_ids = _cut_at(text, self._find_raw, self.added_raw)
        for k, stretch in enumerate(raw_stretches):
            more_stretches, more_ids = _cut_at(self.normalize(stretch), self._find_normalized, self._normalized_ids)
            stretches += more_stretches
            ids += more_ids
            if k < len(raw_ids):
                ids.append(raw_ids[k])
        return stretches, ids


def _finder(tokens: dict[str, int]) -> regex.Pattern | None:
    """A pattern finding any of ``tokens``, the longest where several start at one place (as HF's)."""
    if not tokens:
        return None
    return regex.compile("|".join(map(regex.escape, sorted(tokens, key=lambda t: (-len(t), t)))))


def _cut_at(text: str, find: regex.Pattern | None, ids_of: dict[str, int]) -> tuple[list[str], list[int]]:
    if find is None:
        return [text], []
    stretches, ids, at = [], [], 0
    for m in find.finditer(text):
        stretches.append(text[at : m.start()])
        ids.append(ids_of[m.group()])
        at = m.end()
    stretches.append(text[at:])
    return stretches, ids
