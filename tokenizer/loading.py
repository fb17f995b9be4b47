"""Loading an encoding from files: what :mod:`tokenizer.saving` writes (gpt2, tiktoken or hf format), and the
same formats written by OpenAI, tiktoken or Hugging Face's ``tokenizers``.

The format is detected from the file names. Every file is validated as it is read: a malformed one raises a
``ValueError`` that names the file and, where there are lines, the line, so a hand-edited or truncated
tokenizer is refused before it can produce wrong ids.

This module does not find or download OpenAI's named encodings (:mod:`tokenizer.registry` does) and reads only
the parts of a ``tokenizer.json`` that :mod:`tokenizer.saving` writes (a byte-level BPE model).
"""

from __future__ import annotations

import re
from pathlib import Path

from .encoding import Encoding
from .patterns import KNOWN_PATTERNS
from .pretokenize import GPT2_PATTERN
from .saving import GPT2_FILES, HF_FILE, TIKTOKEN_META_FILE, hf_regex

HF_GPT2_FILES = ("vocab.json", "merges.txt")  # GPT-2's two files under Hugging Face's names
from .vocab_files import (
    gpt2_str_to_token,
    read_gpt2_encoder_json,
    read_gpt2_vocab_bpe,
    read_json_object,
    read_tiktoken_file,
)


def load_encoding(path) -> Encoding:
    """Load an encoding written by :func:`tokenizer.saving.save_encoding`; the format is detected from the files.

    ``path`` may be the directory, or one file: a ``tokenizer.json`` (hf), a ``.tiktoken`` file (with an
    ``encoding.json`` beside it if there is one; without, GPT-2's pattern and no special tokens), either of
    ``encoder.json`` / ``vocab.bpe`` (gpt2, both must be in the same directory) or either of ``vocab.json`` /
    ``merges.txt`` (the same two files as Hugging Face names them, e.g. in a ``gpt2 --save_hf`` folder). Malformed files raise
    ``ValueError`` naming the file (and the line, where there are lines).

    >>> import tempfile
    >>> from tokenizer import get_encoding
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     get_encoding("gpt2").save(folder, format="tiktoken")
    ...     load_encoding(folder).encode("hello world")
    [31373, 995]
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no saved encoding at {p}")
    if p.is_dir():
        if (p / HF_FILE).exists():
            return _load_hf(p / HF_FILE)
        if any((p / name).exists() for name in GPT2_FILES):
            return _load_gpt2(p)
        if any((p / name).exists() for name in HF_GPT2_FILES):
            return _load_gpt2(p, HF_GPT2_FILES)
        tiktoken_files = sorted(p.glob("*.tiktoken"))
        if tiktoken_files:
            return _load_tiktoken(tiktoken_files[0])
        raise ValueError(f"{p}: no saved encoding here (expected {HF_FILE}, encoder.json + vocab.bpe, "
                         "vocab.json + merges.txt, or *.tiktoken)")
    if p.suffix == ".tiktoken":
        return _load_tiktoken(p)
    if p.name in GPT2_FILES:
        return _load_gpt2(p.parent)
    if p.name in HF_GPT2_FILES:
        return _load_gpt2(p.parent, HF_GPT2_FILES)
    if p.suffix == ".json":
        return _load_hf(p)
    raise ValueError(f"{p}: unknown file type (expected a directory, tokenizer.json, *.tiktoken or encoder.json)")


def _load_gpt2(folder: Path, files: tuple[str, str] = GPT2_FILES) -> Encoding:
    """OpenAI's ``encoder.json`` + ``vocab.bpe``, or the same two files under Hugging Face's names
    (``vocab.json`` + ``merges.txt``, as ``gpt2 --save_hf`` and ``transformers``' GPT2Tokenizer write them)."""
    vocab_file, merges_file = files
    for name in files:
        if not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name}: missing; {vocab_file} and {merges_file} go together")
    token_ids, specials = read_gpt2_encoder_json(folder / vocab_file)
    merges = read_gpt2_vocab_bpe(folder / merges_file)
    vocab = {idx: token for token, idx in token_ids.items()}
    for text, idx in specials.items():
        vocab[idx] = text.encode("utf-8")
    try:
        return Encoding.from_vocab_merges(vocab, merges, specials, name=folder.name, pat_str=GPT2_PATTERN)
    except ValueError as e:
        raise ValueError(f"{folder / merges_file}: {_with_line(e, header_lines=1)}") from None


def _with_line(e: ValueError, header_lines: int) -> str:
    """Turn "merge #k ..." from Encoding.from_vocab_merges into "line n: merge #k ..."."""
    m = re.search(r"merge #(\d+)", str(e))
    return f"line {int(m.group(1)) + 1 + header_lines}: {e}" if m else str(e)


def _load_tiktoken(file: Path) -> Encoding:
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


def _load_hf(file: Path) -> Encoding:
    data = read_json_object(file, "an HF tokenizer.json with a BPE model")
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


def _known_pattern(regex_in_file: str) -> str:
    """The project's own spelling of a pattern read back from a tokenizer.json (so fast paths apply)."""
    for pat in KNOWN_PATTERNS:
        if hf_regex(pat) == regex_in_file:
            return pat
    return regex_in_file
