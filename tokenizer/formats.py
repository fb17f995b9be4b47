"""Vocabulary files: GPT-2's byte<->unicode map and the readers (and writers) for GPT-2, tiktoken and HF files.

Tokens are byte strings. GPT-2's ``encoder.json`` and ``vocab.bpe`` are text files, so OpenAI wrote every byte
as one printable unicode character: printable Latin-1 bytes stand for themselves (``b"A"`` -> ``"A"``) and the
rest (space, control bytes, ...) are shifted up past 255 (``b" "`` -> ``"Ġ"``, ``b"\\n"`` -> ``"Ċ"``). That is
why GPT-2's vocabulary is full of ``Ġ``: ``"Ġworld"`` is the token ``b" world"``.

tiktoken's ``.tiktoken`` files skip the trick: one line per token, ``base64(token bytes) rank``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from itertools import accumulate
from functools import lru_cache
from pathlib import Path

from .bpe import recover_merges


@lru_cache(maxsize=None)
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte (0..255) to a printable character.

    >>> m = bytes_to_unicode(); m[ord("A")], m[ord(" ")], m[ord("\\n")]
    ('A', 'Ġ', 'Ċ')
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)  # the first unused code points above Latin-1, in byte order
            shifted += 1
    return mapping


@lru_cache(maxsize=None)
def unicode_to_bytes() -> dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`."""
    return {c: b for b, c in bytes_to_unicode().items()}


# str.translate tables, so converting a whole vocabulary runs in C: byte b <-> the character GPT-2 uses for it.
_TO_GPT2 = {b: c for b, c in bytes_to_unicode().items()}
_FROM_GPT2 = {ord(c): b for b, c in bytes_to_unicode().items()}
_NOT_GPT2_CHAR = re.compile("[^" + re.escape("".join(bytes_to_unicode().values())) + "]")


def token_to_gpt2_str(token: bytes) -> str:
    """``b" world"`` -> ``"Ġworld"``."""
    return token.decode("latin-1").translate(_TO_GPT2)


def gpt2_str_to_token(text: str, *, where: str = "") -> bytes:
    """``"Ġworld"`` -> ``b" world"``; a character outside the map raises ValueError naming ``where``."""
    bad = _NOT_GPT2_CHAR.search(text)
    if bad:
        raise ValueError(f"{where}: {bad.group()!r} is not a character of GPT-2's byte<->unicode map")
    return text.translate(_FROM_GPT2).encode("latin-1")


def gpt2_strs_to_tokens(texts: list[str], *, where: str = "") -> list[bytes]:
    """:func:`gpt2_str_to_token` for many strings at once (one C-level pass: loading a vocabulary is fast)."""
    joined = "".join(texts)
    bad = _NOT_GPT2_CHAR.search(joined)
    if bad:
        raise ValueError(f"{where}: {bad.group()!r} is not a character of GPT-2's byte<->unicode map")
    data = joined.translate(_FROM_GPT2).encode("latin-1")  # one character is one byte
    ends = list(accumulate(map(len, texts)))
    return [data[a:b] for a, b in zip([0, *ends], ends)]


def read_json_object(path: Path, what: str) -> dict:
    """A JSON file's top-level object; ValueError naming the file (and the line) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON (line {e.lineno}): {e.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {what}")
    return data


def read_gpt2_encoder_json(path: str | os.PathLike) -> tuple[dict[bytes, int], dict[str, int]]:
    """Read an ``encoder.json``: ``(mergeable tokens -> id, special tokens -> id)``.

    Entries written like ``<|endoftext|>`` that are not byte-level tokens are special tokens.
    """
    path = Path(path)
    data = read_json_object(path, "a JSON object mapping token strings to ids")
    ranks: dict[bytes, int] = {}
    specials: dict[str, int] = {}
    for text, idx in data.items():
        if not isinstance(idx, int):
            raise ValueError(f"{path}: token {text!r} has id {idx!r}, expected an integer")
        if _NOT_GPT2_CHAR.search(text) or (text.startswith("<|") and text.endswith("|>")):
            specials[text] = idx
        else:
            ranks[text.translate(_FROM_GPT2).encode("latin-1")] = idx
    return ranks, specials


def read_gpt2_vocab_bpe(path: str | os.PathLike) -> list[tuple[bytes, bytes]]:
    """Read a ``vocab.bpe``: the merges in priority order, as byte pairs."""
    path = Path(path)
    merges = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if (lineno == 1 and line.startswith("#version")) or not line:
                continue
            fields = line.split(" ")
            if len(fields) != 2:
                raise ValueError(f"{path}, line {lineno}: expected two tokens separated by one space, got {line!r}")
            where = f"{path}, line {lineno}"
            merges.append((gpt2_str_to_token(fields[0], where=where), gpt2_str_to_token(fields[1], where=where)))
    return merges


def read_tiktoken_file(path: str | os.PathLike, data: bytes | None = None) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file: ``base64(token) rank`` per line -> ``{token: rank}``."""
    if data is None:
        data = Path(path).read_bytes()
    ranks = {}
    b64decode = base64.b64decode
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[b64decode(token, validate=True)] = int(rank)
        except ValueError:  # wrong field count, bad base64 (binascii.Error) or a bad integer
            raise ValueError(f"{path}, line {lineno}: expected 'base64-token rank', got {line[:80]!r}") from None
    return ranks


# ---- Saving and loading whole encodings (trained tokenizers): gpt2 / tiktoken / hf formats ----------------
# (owned by the trainer work; see tokenizer/train.py)


SAVE_FORMATS = ("gpt2", "tiktoken", "hf")
TIKTOKEN_FILE = "encoding.tiktoken"  # ranks, tiktoken's own format
TIKTOKEN_META_FILE = "encoding.json"  # what a .tiktoken file cannot hold: name, pattern, special tokens
HF_FILE = "tokenizer.json"


def save_encoding(enc, path, format: str = "gpt2") -> None:  # noqa: A002 - tiktoken-like keyword
    """Write ``enc`` (an :class:`~tokenizer.encoding.Encoding`) into the directory ``path`` (created if needed).

    * ``"gpt2"``: ``encoder.json`` (GPT-2 token string -> id, special tokens included) and ``vocab.bpe``
      (``#version`` line, then one merge per line, two GPT-2 token strings). OpenAI's ``encoder.py``, the
      project's ``encoder.get_encoder`` and HF's ``BPE.from_file`` read them. The format has no place for the
      pattern, so only GPT-2's pattern can be saved this way.
    * ``"tiktoken"``: ``encoding.tiktoken`` (``base64(token) rank`` per line: what ``tiktoken.load`` reads) and
      ``encoding.json`` with the name, pattern and special tokens. Ids must equal merge priority there.
    * ``"hf"``: a ``tokenizer.json`` for ``tokenizers.Tokenizer.from_file``: a BPE model, a ByteLevel
      pre-tokenizer (GPT-2's pattern; any other pattern becomes a ``Split`` before it) and decoder, and the
      special tokens as added tokens.

    The merges are recovered from the encoding's merge ranks: a token of priority ``r`` is the merge of the two
    parts BPE makes of its bytes using only merges below ``r``.
    """
    if format not in SAVE_FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(SAVE_FORMATS)}")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"{folder}: save_encoding writes a directory of files; this is a file")
    folder.mkdir(parents=True, exist_ok=True)
    token_ids: dict[bytes, int] = dict(enc._mergeable_ranks)
    specials: dict[str, int] = enc.special_tokens
    if format == "tiktoken":
        _check_ids_are_priorities(enc)
        with open(folder / TIKTOKEN_FILE, "w", encoding="ascii", newline="\n") as f:
            for token, idx in sorted(token_ids.items(), key=lambda kv: kv[1]):
                f.write(f"{base64.b64encode(token).decode('ascii')} {idx}\n")
        meta = {"name": enc.name, "pat_str": enc.pat_str, "special_tokens": specials}
        (folder / TIKTOKEN_META_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=1) + "\n", "utf-8")
        return
    merges = encoding_merges(enc)
    vocab = {token_to_gpt2_str(t): i for t, i in sorted(token_ids.items(), key=lambda kv: kv[1])}
    for text, idx in specials.items():
        vocab.setdefault(text, idx)
    merge_strs = [(token_to_gpt2_str(a), token_to_gpt2_str(b)) for a, b in merges]
    if format == "gpt2":
        if enc.pat_str not in _gpt2_patterns():
            raise ValueError(
                f"the gpt2 format implies GPT-2's pattern; {enc.name!r} uses another one: save as 'hf' or 'tiktoken'"
            )
        (folder / "encoder.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        with open(folder / "vocab.bpe", "w", encoding="utf-8", newline="\n") as f:
            f.write("#version: 0.2\n")
            f.writelines(f"{a} {b}\n" for a, b in merge_strs)
        return
    # hf
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if enc.pat_str in _gpt2_patterns():
        pre_tokenizer = byte_level
    else:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": _hf_regex(enc.pat_str)},
                    "behavior": "Isolated",
                    "invert": False,
                },
                dict(byte_level, use_regex=False),
            ],
        }
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": idx, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for text, idx in sorted(specials.items(), key=lambda kv: kv[1])
        ],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [list(m) for m in merge_strs],
        },
    }
    (folder / HF_FILE).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def _hf_regex(pat_str: str) -> str:
    """``pat_str`` for HF's regex engine (Oniguruma), which reads ``x{1,3}+`` as ``(x{1,3})+``, not as possessive.

    Dropping the ``+`` keeps the matches of OpenAI's patterns: nothing after such a repeat can backtrack into it.
    """
    return re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", pat_str)


def _known_pattern(hf_regex: str) -> str:
    """The project's own spelling of a pattern read back from a tokenizer.json (so fast paths apply)."""
    from . import pretokenize

    known = (pretokenize.GPT2_PATTERN, pretokenize.R50K_PATTERN, pretokenize.CL100K_PATTERN, pretokenize.O200K_PATTERN)
    for pat in known:
        if _hf_regex(pat) == hf_regex:
            return pat
    return hf_regex


def _gpt2_patterns() -> tuple[str, ...]:
    from .pretokenize import GPT2_PATTERN, R50K_PATTERN

    return (GPT2_PATTERN, R50K_PATTERN)


def _check_ids_are_priorities(enc) -> None:
    """tiktoken files use one number per token as both id and merge priority: the two orders must agree."""
    ranks = enc.merge_ranks
    merged = sorted((t for t in enc._mergeable_ranks if len(t) > 1 and t in ranks), key=ranks.__getitem__)
    ids = [enc._mergeable_ranks[t] for t in merged]
    if any(x >= y for x, y in zip(ids, ids[1:])):
        raise ValueError(f"{enc.name!r}: token ids are not in merge order, which a .tiktoken file cannot express")


def encoding_merges(enc) -> list[tuple[bytes, bytes]]:
    """The merges of ``enc`` in priority order, as byte pairs, recovered from its merge ranks."""
    try:
        return recover_merges(enc.merge_ranks)
    except ValueError as e:
        raise ValueError(f"{enc.name!r}: {e}") from None


def load_encoding(path):
    """Load an encoding written by :func:`save_encoding`; the format is detected from the files.

    ``path`` may be the directory, or one file: a ``tokenizer.json`` (hf), a ``.tiktoken`` file (with an
    ``encoding.json`` beside it if there is one; without, GPT-2's pattern and no special tokens) or either of
    ``encoder.json`` / ``vocab.bpe`` (gpt2, both must be in the same directory). Malformed files raise
    ``ValueError`` naming the file (and the line, where there are lines).
    """
    from .encoding import Encoding
    from .pretokenize import GPT2_PATTERN

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no saved encoding at {p}")
    if p.is_dir():
        folder = p
        if (p / HF_FILE).exists():
            return _load_hf(p / HF_FILE)
        tiktoken_files = sorted(p.glob("*.tiktoken"))
        if (p / "encoder.json").exists() or (p / "vocab.bpe").exists():
            kind = "gpt2"
        elif tiktoken_files:
            return _load_tiktoken(tiktoken_files[0])
        else:
            raise ValueError(
                f"{p}: no saved encoding here (expected {HF_FILE}, encoder.json + vocab.bpe, or *.tiktoken)"
            )
    elif p.suffix == ".tiktoken":
        return _load_tiktoken(p)
    elif p.name in ("encoder.json", "vocab.bpe"):
        folder, kind = p.parent, "gpt2"
    elif p.suffix == ".json":
        return _load_hf(p)
    else:
        raise ValueError(f"{p}: unknown file type (expected a directory, tokenizer.json, *.tiktoken or encoder.json)")
    assert kind == "gpt2"
    for name in ("encoder.json", "vocab.bpe"):
        if not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name}: the gpt2 format needs encoder.json and vocab.bpe together")
    token_ids, specials = read_gpt2_encoder_json(folder / "encoder.json")
    merges = read_gpt2_vocab_bpe(folder / "vocab.bpe")
    vocab = {idx: token for token, idx in token_ids.items()}
    for text, idx in specials.items():
        vocab[idx] = text.encode("utf-8")
    try:
        return Encoding.from_vocab_merges(vocab, merges, specials, name=folder.name, pat_str=GPT2_PATTERN)
    except ValueError as e:
        raise ValueError(f"{folder / 'vocab.bpe'}: {_with_line(e, header_lines=1)}") from None


def _with_line(e: ValueError, header_lines: int) -> str:
    """Turn "merge #k ..." from Encoding.from_vocab_merges into "line n: merge #k ..."."""
    m = re.search(r"merge #(\d+)", str(e))
    return f"line {int(m.group(1)) + 1 + header_lines}: {e}" if m else str(e)


def _load_tiktoken(file: Path):
    from .encoding import Encoding
    from .pretokenize import GPT2_PATTERN

    ranks = read_tiktoken_file(file)
    meta_path = file.parent / TIKTOKEN_META_FILE
    name, pat_str, specials = file.stem, GPT2_PATTERN, {}
    if meta_path.exists():
        meta = read_json_object(meta_path, "a JSON object with name, pat_str, special_tokens")
        name = meta.get("name", name)
        pat_str = meta.get("pat_str", pat_str)
        specials = meta.get("special_tokens", {})
        if not isinstance(pat_str, str) or not isinstance(specials, dict) or not all(
            isinstance(v, int) for v in specials.values()
        ):
            raise ValueError(f"{meta_path}: pat_str must be a string and special_tokens a {{text: id}} object")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise ValueError(f"{file}: {len(missing)} single-byte tokens are missing (e.g. byte {missing[0]})")
    return Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)


def _load_hf(file: Path):
    from .encoding import Encoding
    from .pretokenize import GPT2_PATTERN

    data = read_json_object(Path(file), "an HF tokenizer.json with a BPE model")
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type", "BPE") != "BPE":
        raise ValueError(f"{file}: expected an HF tokenizer.json with a BPE model")
    raw_vocab, raw_merges = model.get("vocab"), model.get("merges")
    if not isinstance(raw_vocab, dict) or not isinstance(raw_merges, list):
        raise ValueError(f"{file}: model.vocab must be an object and model.merges a list")
    specials = {}
    for entry in data.get("added_tokens") or []:
        if not (isinstance(entry, dict) and isinstance(entry.get("content"), str) and isinstance(entry.get("id"), int)):
            raise ValueError(f"{file}: added_tokens entries need a string 'content' and an integer 'id': {entry!r}")
        specials[entry["content"]] = entry["id"]
    vocab: dict[int, bytes] = {}
    for text, idx in raw_vocab.items():
        if not isinstance(idx, int):
            raise ValueError(f"{file}: model.vocab[{text!r}] is {idx!r}, expected an integer id")
        if text in specials:
            vocab[idx] = text.encode("utf-8")
        else:
            vocab[idx] = gpt2_str_to_token(text, where=f"{file}: model.vocab[{text!r}]")
    for text, idx in specials.items():
        vocab.setdefault(idx, text.encode("utf-8"))
    merges = []
    for k, m in enumerate(raw_merges):
        pair = m.split(" ") if isinstance(m, str) else m
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"{file}: model.merges[{k}] is {m!r}, expected two token strings")
        where = f"{file}: model.merges[{k}]"
        merges.append((gpt2_str_to_token(pair[0], where=where), gpt2_str_to_token(pair[1], where=where)))
    pat_str = _hf_pattern(data.get("pre_tokenizer"), file) or GPT2_PATTERN
    try:
        return Encoding.from_vocab_merges(vocab, merges, specials, name=Path(file).parent.name, pat_str=pat_str)
    except ValueError as e:
        raise ValueError(f"{file}: {e}") from None


def _hf_pattern(pre: dict | None, file: Path) -> str | None:
    """The pattern of an HF pre-tokenizer written by save_encoding (ByteLevel, or Split + ByteLevel)."""
    from .pretokenize import GPT2_PATTERN

    if not pre:
        return None
    if pre.get("type") == "ByteLevel":
        if pre.get("add_prefix_space"):
            raise ValueError(f"{file}: ByteLevel add_prefix_space=true changes the text; not supported")
        return GPT2_PATTERN if pre.get("use_regex", True) else None
    if pre.get("type") == "Sequence":
        found = None
        for sub in pre.get("pretokenizers", []):
            if sub.get("type") == "Split" and isinstance(sub.get("pattern"), dict) and "Regex" in sub["pattern"]:
                found = _known_pattern(sub["pattern"]["Regex"])
            elif sub.get("type") == "ByteLevel":
                found = found or _hf_pattern(sub, file)
            else:
                raise ValueError(f"{file}: pre-tokenizer {sub.get('type')!r} is not supported")
        return found
    raise ValueError(f"{file}: pre-tokenizer {pre.get('type')!r} is not supported")
