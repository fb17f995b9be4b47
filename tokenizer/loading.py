"""Loading an encoding from files: what :mod:`tokenizer.saving` writes (gpt2, tiktoken or hf format), and the
same formats written by OpenAI, tiktoken or Hugging Face's ``tokenizers``.

The format is detected from the file names. Every file is validated as it is read: a malformed one raises a
``ValueError`` that names the file and, where there are lines, the line, so a hand-edited or truncated
tokenizer is refused before it can produce wrong ids.

This module does not find or download OpenAI's named encodings (:mod:`tokenizer.registry` does). Of
``tokenizer.json`` files it reads byte-level BPE ones, with the steps :mod:`tokenizer.hf_steps` runs, and
refuses the rest (SentencePiece-style, Unigram, WordPiece, unknown steps) in one line naming what is missing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import regex
from typing import Callable

from .encoding import Encoding
from .hf_steps import TextSteps, UnsupportedStep, flat_steps
from .patterns import KNOWN_PATTERNS
from .pretokenize import GPT2_PATTERN
from .saving import GPT2_FILES, HF_FILE, HF_POST_PROCESSING, TIKTOKEN_META_FILE, hf_regex

HF_GPT2_FILES = ("vocab.json", "merges.txt")  # GPT-2's two files under Hugging Face's names
from .vocab_files import (
    gpt2_merges,
    gpt2_str_to_token,
    gpt2_strs_to_tokens,
    gpt2_vocab,
    read_encoder_json,
    read_json_object,
    read_tiktoken_file,
    read_vocab_bpe,
)


def load_encoding(path, *, core: str = "fast") -> Encoding:
    """Load an encoding written by :func:`tokenizer.saving.save_encoding`; the format is detected from the files.

    ``path`` may be the directory, or one file: a ``tokenizer.json`` (hf), a ``.tiktoken`` file (with an
    ``encoding.json`` beside it if there is one; without, GPT-2's pattern and no special tokens), either of
    ``encoder.json`` / ``vocab.bpe`` (gpt2, both must be in the same directory) or either of ``vocab.json`` /
    ``merges.txt`` (the same two files as Hugging Face names them, e.g. in a ``gpt2 --save_hf`` folder). Malformed files raise
    ``ValueError`` naming the file (and the line, where there are lines). ``core`` is ``Encoding``'s.

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
    layout, where = saved_layout(p)
    if layout == "hf":
        return _load_hf(where, core)
    if layout == "tiktoken":
        return _load_tiktoken(where, core)
    return _load_gpt2(where, GPT2_FILES if layout == "gpt2" else HF_GPT2_FILES, core=core)


def saved_layout(path) -> tuple[str, Path]:
    """Which layout :func:`load_encoding` reads at ``path`` (an existing file or folder), and from where:
    ``("hf", its tokenizer.json)``, ``("gpt2", the folder of encoder.json + vocab.bpe)``, ``("hf_gpt2", the
    folder of vocab.json + merges.txt)`` or ``("tiktoken", the .tiktoken file)``; ``ValueError`` for none. Paths
    that give the same answer (a folder and its tokenizer.json, after their real paths are taken) name the same
    tokenizer.

    >>> layout, where = saved_layout("mine/vocab.bpe")  # a file is known by its name (this one need not exist)
    >>> layout, str(where)
    ('gpt2', 'mine')
    """
    p = Path(path)
    if p.is_dir():
        if (p / HF_FILE).exists():
            return "hf", p / HF_FILE
        if any((p / name).exists() for name in GPT2_FILES):
            return "gpt2", p
        if any((p / name).exists() for name in HF_GPT2_FILES):
            return "hf_gpt2", p
        tiktoken_files = sorted(p.glob("*.tiktoken"))
        if tiktoken_files:
            return "tiktoken", tiktoken_files[0]
        raise ValueError(f"{p}: no saved encoding here (expected {HF_FILE}, encoder.json + vocab.bpe, "
                         "vocab.json + merges.txt, or *.tiktoken)")
    if p.suffix == ".tiktoken":
        return "tiktoken", p
    if p.name in GPT2_FILES:
        return "gpt2", p.parent
    if p.name in HF_GPT2_FILES:
        return "hf_gpt2", p.parent
    if p.suffix == ".json":
        return "hf", p
    raise ValueError(f"{p}: unknown file type (expected a directory, tokenizer.json, *.tiktoken or encoder.json)")


def folder_name(folder: Path) -> str:
    """The name a tokenizer read from ``folder`` bears: the folder's own, also when it was named ``.`` or a file
    in the current folder was (whose ``Path.name`` is ``""``); a symlink keeps the name it was reached by.

    >>> import os
    >>> folder_name(Path(".")) == os.path.basename(os.getcwd()), folder_name(Path("models/x/"))
    (True, 'x')
    """
    return Path(os.path.abspath(folder)).name


def _load_gpt2(folder: Path, files: tuple[str, str] = GPT2_FILES, *, core: str = "fast") -> Encoding:
    """OpenAI's ``encoder.json`` + ``vocab.bpe``, or the same two files under Hugging Face's names
    (``vocab.json`` + ``merges.txt``, as ``gpt2 --save_hf`` and ``transformers``' GPT2Tokenizer write them)."""
    vocab_file, merges_file = files
    for name in files:
        if not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name}: missing; {vocab_file} and {merges_file} go together")
    table, pairs = read_encoder_json(folder / vocab_file), read_vocab_bpe(folder / merges_file)
    # an entry written like a special token (<|>) that a merge makes is BPE's own token, learned from text
    token_ids, specials = gpt2_vocab(table, where=str(folder / vocab_file), merged={a + b for a, b in pairs})
    merges = gpt2_merges(pairs, where=str(folder / merges_file))
    vocab = {idx: token for token, idx in token_ids.items()}
    for text, idx in specials.items():
        vocab[idx] = text.encode("utf-8")
    try:
        return Encoding.from_vocab_merges(vocab, merges, specials, name=folder_name(folder), pat_str=GPT2_PATTERN,
                                          core=core)
    except ValueError as e:
        raise ValueError(f"{folder / merges_file}: {_with_line(e, header_lines=1)}") from None


def _with_line(e: ValueError, header_lines: int) -> str:
    """Turn "merge #k ..." from Encoding.from_vocab_merges into "line n: merge #k ..."."""
    m = re.search(r"merge #(\d+)", str(e))
    return f"line {int(m.group(1)) + 1 + header_lines}: {e}" if m else str(e)


def _load_tiktoken(file: Path, core: str = "fast") -> Encoding:
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
    return Encoding(name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials, core=core)


def _load_hf(file: Path, core: str = "fast") -> Encoding:
    """A byte-level BPE ``tokenizer.json`` (Hugging Face's format), with the steps it runs on text before BPE
    (:mod:`tokenizer.hf_steps`). Anything that would not give exactly ``tokenizers``' ids is refused, in one
    line naming the file and the unsupported feature."""
    data = read_json_object(file, "an HF tokenizer.json with a BPE model")
    model = data.get("model")
    if not isinstance(model, dict):
        # (a model's folder holds other JSON files beside its tokenizer.json: tokenizer_config.json, config.json)
        beside = Path(file).parent / HF_FILE
        hint = f": pass {beside} (or its folder)" if Path(file).name != HF_FILE and beside.is_file() else ""
        raise ValueError(f"{file}: expected an HF tokenizer.json with a BPE model, found no \"model\"{hint}")
    _check_hf_model(model, data.get("decoder"), file)
    raw_vocab, raw_merges = model.get("vocab"), model.get("merges")
    if not isinstance(raw_vocab, dict) or not isinstance(raw_merges, list):
        raise ValueError(f"{file}: model.vocab must be an object and model.merges a list")
    added = {}  # added token text -> its entry (special or not)
    for entry in data.get("added_tokens") or []:
        if not (isinstance(entry, dict) and isinstance(entry.get("content"), str) and isinstance(entry.get("id"), int)):
            raise ValueError(f"{file}: added_tokens entries need a string 'content' and an integer 'id': {entry!r}")
        # (HF strips the spaces beside such a token, or takes it only as a whole word: special tokens are found
        # here as tiktoken finds them, so a file that asks for more is refused, not encoded otherwise)
        for option in ("lstrip", "rstrip", "single_word"):
            if entry.get(option):
                raise ValueError(f"{file}: added token {entry['content']!r} with {option}=true is not supported; "
                                 "only byte-level BPE files load")
        added[entry["content"]] = entry
    _check_added_token_ids(data.get("added_tokens") or [], raw_vocab, file)
    vocab = _hf_vocab(raw_vocab, added, file)
    merges = _hf_merges(raw_merges, file)
    for text, entry in added.items():
        vocab.setdefault(entry["id"], text.encode("utf-8"))
    specials = [text for text, entry in added.items() if entry.get("special", True)]
    others = [entry for entry in added.values() if not entry.get("special", True)]
    _check_added_tokens_apart([added[text] for text in specials], others, file)
    try:
        # (a file without a decoder decodes otherwise: HF joins the tokens' strings, which the steps route does)
        steps = TextSteps.from_json(data.get("normalizer"), data.get("pre_tokenizer"), others,
                                    no_decoder=data.get("decoder") is None)
    except UnsupportedStep as e:
        raise ValueError(f"{file}: {e}; only byte-level BPE files load") from None
    except regex.error as e:
        # HF's Oniguruma reads some syntax that `regex` lacks (\x{41}, \k<name>): not only typos end here
        raise ValueError(f"{file}: a regex of the normalizer or pre_tokenizer does not compile in the regex package "
                         f"({e}): a typo, or Oniguruma syntax that package lacks (such as \\x{{41}} or \\k<name>), "
                         "which is not supported; spell it another way") from None
    except (KeyError, TypeError, AttributeError) as e:
        # a step spelled wrong: a field missing, a list or string where an object goes
        raise ValueError(f"{file}: the normalizer or pre_tokenizer is malformed ({type(e).__name__}: {e}); "
                         "check it against a tokenizer.json that HF tokenizers writes") from None
    if steps.has_normalizer and any(added[t].get("normalized") for t in specials):
        raise ValueError(f"{file}: special tokens matched after the normalizer (normalized=true) are not supported")
    pat_str = _one_known_pattern(steps)
    try:
        return Encoding.from_vocab_merges(
            vocab, merges, specials, name=folder_name(Path(file).parent), pat_str=pat_str or _shown_pattern(steps),
            whole_piece_tokens=bool(model.get("ignore_merges", False)), text_steps=None if pat_str else steps,
            core=core, hf_post_processing={section: data.get(section) for section in HF_POST_PROCESSING},
        )
    except ValueError as e:
        raise ValueError(f"{file}: {e}") from None


def _check_added_token_ids(entries: list[dict], raw_vocab: dict, file: Path) -> None:
    """Refuse added tokens whose ids HF ``tokenizers`` does not give them. HF reads an added token's id from
    ``model.vocab`` when its text is there, else gives it the next free id (the vocabulary's size, then one past
    the last added token's), whatever ``added_tokens`` says: a file with gaps or other ids would be encoded with
    other ids than HF's."""
    given: dict[str, int] = {}
    highest = None  # the highest id given so far
    for entry in entries:
        text = entry["content"]
        if text in given:
            continue
        if text in raw_vocab:
            hf_id = raw_vocab[text]
        else:
            hf_id = len(raw_vocab) if highest is None or highest < len(raw_vocab) else highest + 1
        given[text] = hf_id
        highest = hf_id if highest is None else max(highest, hf_id)
        if entry["id"] != hf_id:
            raise ValueError(f"{file}: added token {text!r} has id {entry['id']} in added_tokens, but HF tokenizers "
                             f"gives it id {hf_id} (an added token's id is its model.vocab entry's, else the next "
                             "free one); put the token in model.vocab at its id, or give it that id")


def _check_added_tokens_apart(specials: list[dict], others: list[dict], file: Path) -> None:
    """Refuse a special token and an added token that is not special (``added_tokens`` entries) that can overlap in
    a text (one inside the other, or one's end the other's start), where HF would find them otherwise: it looks for
    the tokens with normalized=false at once (the longest at the first place), then for the others in the
    normalized text, where the ``Encoding`` cuts special tokens out first, so "a<x>" would give other ids when
    "<x>" is special and "a<" is not. The one order both keep: a special token with normalized=false before an
    added token with normalized=true. Tokens that cannot overlap are found the same wherever each is looked for."""
    for other in others:
        for special in specials:
            same_order = not special.get("normalized") and other.get("normalized")
            if not same_order and _can_overlap(other["content"], special["content"]):
                raise ValueError(f"{file}: added token {other['content']!r} (not special) and special token "
                                 f"{special['content']!r} can overlap in a text, where HF tokenizers finds them "
                                 "otherwise than tiktoken's special tokens are found; such tokens are not supported")


def _can_overlap(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` can share characters in a text: one holds the other, or an end of one starts the other
    (a shorter overlap than the shorter text; a longer one would be one inside the other).

    >>> _can_overlap("a<", "<x>"), _can_overlap("<x>", "<x>y"), _can_overlap("<x>", "<y>")
    (True, True, False)
    """
    return a in b or b in a or any(a.endswith(b[:k]) or b.endswith(a[:k]) for k in range(1, min(len(a), len(b))))


def _hf_vocab(raw_vocab: dict, added: dict, file: Path) -> dict[int, bytes]:
    """``model.vocab`` as id -> bytes: GPT-2 token strings converted all at once (an added token's text is
    its own bytes)."""
    for text, idx in raw_vocab.items():
        if not isinstance(idx, int):
            raise ValueError(f"{file}: model.vocab[{text!r}] is {idx!r}, expected an integer id")
    byte_level = [text for text in raw_vocab if text not in added]
    converted = iter(_gpt2_tokens(byte_level, lambda k: f"model.vocab[{byte_level[k]!r}]", file))
    return {idx: text.encode("utf-8") if text in added else next(converted) for text, idx in raw_vocab.items()}


def _hf_merges(raw_merges: list, file: Path) -> list[tuple[bytes, bytes]]:
    """``model.merges`` (``"a b"`` strings or ``["a", "b"]`` pairs) as byte pairs."""
    pairs = [m.split(" ") if isinstance(m, str) else m for m in raw_merges]
    halves = [half for pair in pairs if type(pair) is list for half in pair]
    if len(halves) != 2 * len(pairs) or set(map(len, pairs)) - {2} or set(map(type, halves)) - {str}:
        # (checked above in C, all at once; the culprit is looked for only now)
        for k, pair in enumerate(pairs):
            if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
                raise ValueError(f"{file}: model.merges[{k}] is {raw_merges[k]!r}, expected two token strings")
    tokens = _gpt2_tokens(halves, lambda k: f"model.merges[{k // 2}]", file)
    return list(zip(tokens[0::2], tokens[1::2]))


def _gpt2_tokens(texts: list[str], where: Callable[[int], str], file: Path) -> list[bytes]:
    """GPT-2 token strings -> bytes, all in one pass; a bad one raises ValueError naming the file and its place
    (``where(k)`` for the k-th string; found by a second pass, one by one, only then)."""
    try:
        return gpt2_strs_to_tokens(texts)
    except ValueError:
        for k, text in enumerate(texts):
            gpt2_str_to_token(text, where=f"{file}: {where(k)}")
        raise


def _check_hf_model(model: dict, decoder: dict | None, file: Path) -> None:
    """Refuse, naming it, any part of the model or decoder that byte-level BPE as run here cannot reproduce."""
    kind = model.get("type", "BPE")
    if kind != "BPE":
        raise ValueError(f"{file}: model {kind!r} is not supported; only byte-level BPE files load")
    if model.get("byte_fallback"):
        raise ValueError(f"{file}: model byte_fallback=true (SentencePiece-style '▁' words with <0x..> byte tokens) "
                         "is not supported; only byte-level BPE files load")
    if model.get("dropout"):
        raise ValueError(f"{file}: model dropout={model['dropout']} (random merges) is not supported; "
                         "set it to null for exact ids")
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise ValueError(f"{file}: model {option}={model[option]!r} (WordPiece-style word marks) is not "
                             "supported; only byte-level BPE files load")
    decoder_kind = decoder.get("type") if isinstance(decoder, dict) else decoder
    if decoder is not None and decoder_kind != "ByteLevel":
        raise ValueError(f"{file}: decoder {decoder_kind!r} is not supported; only byte-level BPE files load")


def _one_known_pattern(steps: TextSteps) -> str | None:
    """The project's own spelling of the one OpenAI pattern the steps amount to, if they are just that (no
    normalizer, no added tokens that are not special, one pattern, a decoder): such encodings keep the fast core's
    routes. None when the steps do more."""
    if steps.has_normalizer or steps.added_raw or steps.added_normalized or steps.no_decoder:
        return None
    specs = flat_steps(steps.specs.get("pre_tokenizer"))
    *splits, byte_level = specs
    if byte_level.get("add_prefix_space"):
        return None
    if not splits:
        return GPT2_PATTERN if byte_level.get("use_regex", True) else None
    if len(splits) > 1 or byte_level.get("use_regex", True):
        return None
    (split,) = splits
    regex_in_file = (split.get("pattern") or {}).get("Regex")
    if split.get("type") != "Split" or split.get("behavior") != "Isolated" or split.get("invert") or not regex_in_file:
        return None
    return _known_pattern(regex_in_file)


def _shown_pattern(steps: TextSteps) -> str:
    """What ``Encoding.pat_str`` shows for an encoding whose steps are more than one pattern: the last Split's
    regex (ByteLevel's GPT-2 pattern if there is none), for display only: the steps do the splitting."""
    regexes = [(s.get("pattern") or {}).get("Regex") for s in flat_steps(steps.specs.get("pre_tokenizer"))]
    return next((r for r in reversed(regexes) if r), GPT2_PATTERN)


def _known_pattern(regex_in_file: str) -> str | None:
    """The project's own spelling of a known pattern (:data:`tokenizer.patterns.KNOWN_PATTERNS`) read back from a
    tokenizer.json (so fast paths apply), or None if it is not one."""
    for pat in KNOWN_PATTERNS:
        if hf_regex(pat) == regex_in_file:
            return pat
    return None
