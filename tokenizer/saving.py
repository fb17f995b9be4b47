"""Saving an encoding as files other tools read: GPT-2's ``encoder.json`` + ``vocab.bpe``, tiktoken's
``.tiktoken``, or Hugging Face's ``tokenizer.json``.

A trained tokenizer is only useful if it can be written down. The three formats hold the same two tables
(token bytes -> id, and the merges in priority order) in different clothes, plus what each can say about the
pattern and the special tokens:

* ``"gpt2"``: ``encoder.json`` (GPT-2 token string -> id, special tokens included) and ``vocab.bpe``
  (``#version`` line, then one merge per line, two GPT-2 token strings). OpenAI's ``encoder.py``, this
  project's ``encoder.get_encoder`` and HF's ``BPE.from_file`` read them. There is no place for the pattern, so
  only GPT-2's pattern can be saved this way; nor a mark for special tokens, which readers tell by their form
  ``<|...|>``, so a special token written otherwise (``[SEP]``) cannot be.
* ``"tiktoken"``: ``encoding.tiktoken`` (``base64(token) rank`` per line: what ``tiktoken.load`` reads) and
  ``encoding.json`` with the name, pattern and special tokens. One number per token is both its id and its merge
  priority, so the ids must be in merge order.
* ``"hf"``: a ``tokenizer.json`` for ``tokenizers.Tokenizer.from_file``: a BPE model, a ByteLevel pre-tokenizer
  (GPT-2's pattern; any other pattern becomes a ``Split`` before it) and decoder, the special tokens as added
  tokens. An encoding loaded from a ``tokenizer.json`` with more steps (``Encoding.text_steps``: a normalizer,
  several splits, added tokens that are not special) gets them written back as they were read, and so are the
  file's post-processor, truncation and padding (``Encoding.hf_post_processing``: what HF's default ``encode``
  does to the ids after BPE, such as Llama 3's ``<|begin_of_text|>`` first), which change no id of
  ``Encoding.encode`` and which the two other formats have no place for (tiktoken and ``encoder.py`` add no
  token either).

This module only writes; :mod:`tokenizer.loading` reads the files back into an ``Encoding``. It takes any
object with ``Encoding``'s public surface and does not import :mod:`tokenizer.encoding` (which calls it).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from . import outputs
from .pretokenize import GPT2_PATTERN, R50K_PATTERN
from .vocab_files import is_gpt2_special_token, token_to_gpt2_str

SAVE_FORMATS = ("gpt2", "tiktoken", "hf")
GPT2_FILES = ("encoder.json", "vocab.bpe")
TIKTOKEN_FILE = "encoding.tiktoken"  # ranks, tiktoken's own format
TIKTOKEN_META_FILE = "encoding.json"  # what a .tiktoken file cannot hold: name, pattern, special tokens
HF_FILE = "tokenizer.json"
# A tokenizer.json's sections that HF runs on the ids after BPE (in its default encode), which an Encoding only keeps
HF_POST_PROCESSING = ("post_processor", "truncation", "padding")
GPT2_PATTERNS = (GPT2_PATTERN, R50K_PATTERN)  # the same pattern, spelled for `regex` and as tiktoken spells it


def save_encoding(enc, path, format: str = "gpt2", *, overwrite: bool = False,  # noqa: A002 - Encoding.save's
                  flag: str | None = None) -> None:
    """Write ``enc`` (an :class:`~tokenizer.encoding.Encoding`) into the folder ``path`` (created if needed)
    in ``format``: ``"gpt2"``, ``"tiktoken"`` or ``"hf"`` (see the module's docstring).

    The merges written are ``enc.merges``: the ones the encoding was made from. A folder that already holds a
    saved tokenizer (:func:`saved_tokenizer_files`) is refused unless ``overwrite``; then its tokenizer files
    are replaced, those of another format removed (loading would find them first), other files left alone.
    The destination is checked (:func:`tokenizer.outputs.check_folder`; ``flag`` names it on a command line)
    and the encoding converted before anything is written, and the files are written beside the folder and
    moved in once all are complete, so an error or Ctrl-C leaves nothing behind.
    """
    if format not in SAVE_FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {', '.join(SAVE_FORMATS)}")
    if format != "hf" and getattr(enc, "text_steps", None) is not None:
        raise ValueError(f"{enc.name!r} runs a tokenizer.json's steps before BPE (a normalizer, several splits or "
                         f"added tokens), which the {format} format cannot hold: save it as 'hf'")
    folder = check_tokenizer_folder(path, overwrite=overwrite, flag=flag)
    if format == "tiktoken":
        _check_ids_are_priorities(enc)
        files = {TIKTOKEN_FILE: _tiktoken_lines(enc), TIKTOKEN_META_FILE: _tiktoken_meta(enc)}
    elif format == "gpt2":
        files = dict(zip(GPT2_FILES, _gpt2_files(enc)))
    else:
        files = {HF_FILE: json.dumps(_hf_tokenizer_json(enc), ensure_ascii=False, indent=1)}
    with outputs.replaced_folder_files(folder, stale=saved_tokenizer_files) as partial:
        for name, text in files.items():
            (partial / name).write_text(text, encoding="utf-8", newline="\n")


def check_tokenizer_folder(path, *, overwrite: bool = False, flag: str | None = None) -> Path:
    """``path`` checked as :func:`save_encoding`'s destination (:func:`tokenizer.outputs.check_folder`): a folder
    that holds a saved tokenizer is refused unless ``overwrite``. Returns where to write."""
    return outputs.check_folder(path, holds=saved_tokenizer_files, what="a tokenizer", overwrite=overwrite, flag=flag)


def replaced_tokenizer_files(folder, format: str) -> list[str]:  # noqa: A002 - save_encoding's name
    """The files in ``folder`` that :func:`save_encoding` in ``format`` with ``overwrite`` replaces or removes:
    the format's own, and any other saved tokenizer's (what a command checks its inputs against)."""
    own = {"gpt2": GPT2_FILES, "tiktoken": (TIKTOKEN_FILE, TIKTOKEN_META_FILE), "hf": (HF_FILE,)}[format]
    return list(dict.fromkeys([*own, *saved_tokenizer_files(folder)]))


def saved_tokenizer_files(folder) -> list[str]:
    """The files of a saved tokenizer in ``folder`` (what :func:`tokenizer.loading.load_encoding` looks for)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    names = [HF_FILE, *GPT2_FILES, "vocab.json", "merges.txt", TIKTOKEN_META_FILE]
    return [n for n in names if (folder / n).is_file()] + sorted(p.name for p in folder.glob("*.tiktoken"))


def _tiktoken_lines(enc) -> str:
    by_id = sorted(enc.token_ids.items(), key=lambda kv: kv[1])
    return "".join(f"{base64.b64encode(token).decode('ascii')} {idx}\n" for token, idx in by_id)


def _tiktoken_meta(enc) -> str:
    meta = {"name": enc.name, "pat_str": enc.pat_str, "special_tokens": enc.special_tokens}
    return json.dumps(meta, ensure_ascii=False, indent=1) + "\n"


def _check_ids_are_priorities(enc) -> None:
    """tiktoken files use one number per token as both id and merge priority: the two orders must agree."""
    ranks, token_ids = enc.merge_ranks, enc.token_ids
    merged = sorted((t for t in token_ids if len(t) > 1 and t in ranks), key=ranks.__getitem__)
    ids = [token_ids[t] for t in merged]
    if any(x >= y for x, y in zip(ids, ids[1:])):
        raise ValueError(f"{enc.name!r}: token ids are not in merge order, which a .tiktoken file cannot express")


def _gpt2_vocab(enc) -> dict[str, int]:
    """GPT-2 token string -> id, in id order, special tokens after the ordinary ones."""
    vocab = {token_to_gpt2_str(t): i for t, i in sorted(enc.token_ids.items(), key=lambda kv: kv[1])}
    for text, idx in enc.special_tokens.items():
        vocab.setdefault(text, idx)
    return vocab


def _gpt2_merge_strs(enc) -> list[tuple[str, str]]:
    return [(token_to_gpt2_str(a), token_to_gpt2_str(b)) for a, b in enc.merges]


def _gpt2_files(enc) -> tuple[str, str]:
    """The text of ``encoder.json`` and of ``vocab.bpe``."""
    if enc.pat_str not in GPT2_PATTERNS:
        raise ValueError(
            f"the gpt2 format implies GPT-2's pattern; {enc.name!r} uses another one: save as 'hf' or 'tiktoken'"
        )
    unmarked = [text for text in enc.special_tokens if not is_gpt2_special_token(text)]
    if unmarked:  # its encoder.json entry would read back as plain text, and the special token be lost
        raise ValueError(f"the gpt2 format tells special tokens only by their form <|...|>, so {unmarked[0]!r} would "
                         "load back as ordinary text: save as 'hf' or 'tiktoken', or name it like <|...|>")
    merge_strs = _gpt2_merge_strs(enc)
    if not merge_strs:
        raise ValueError(f"{enc.name!r} has no merges, and a vocab.bpe without merges is not read back: "
                         "save as 'hf' or 'tiktoken'")
    encoder_json = json.dumps(_gpt2_vocab(enc), ensure_ascii=False)
    vocab_bpe = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merge_strs)
    return encoder_json, vocab_bpe


def hf_regex(pat_str: str) -> str:
    """``pat_str`` for HF's regex engine (Oniguruma), which reads ``x{1,3}+`` as ``(x{1,3})+``, not as possessive.

    Dropping the ``+`` keeps the matches of OpenAI's patterns: nothing after such a repeat can backtrack into it.

    >>> hf_regex(r"\\p{N}{1,3}+")
    '\\\\p{N}{1,3}'
    """
    return re.sub(r"(\{\d+(?:,\d*)?\})\+", r"\1", pat_str)


def _leave_added_tail_out(vocab: dict[str, int], added_tokens: list[dict]) -> None:
    """Take out of ``vocab`` (model.vocab) the added tokens (sorted by id) whose ids follow the other tokens' one by
    one, as the families' files have them: HF gives an added token missing from model.vocab the next free id, which
    is then its own, and counts only model.vocab in its ``get_vocab_size(with_added_tokens=False)`` (transformers'
    ``vocab_size``: Llama 3's 128,000, not 128,256). Where the ids do not follow so (a gap, an id twice, a token's
    text also an ordinary token's string), all stay in model.vocab, where HF reads each one's id."""
    added_texts = {entry["content"] for entry in added_tokens}
    others = {text: idx for text, idx in vocab.items() if text not in added_texts}
    first_free = max(others.values(), default=-1) + 1
    tail = [entry for entry in added_tokens if entry["id"] >= first_free]
    tail_texts = {entry["content"] for entry in tail}
    kept_ids = [idx for text, idx in vocab.items() if text not in tail_texts]
    follow_one_by_one = [entry["id"] for entry in tail] == list(range(first_free, first_free + len(tail)))
    each_id_once = len(tail_texts) == len(tail) and len(set(kept_ids)) == len(kept_ids) == first_free
    if not follow_one_by_one or not each_id_once or any(vocab.get(e["content"]) != e["id"] for e in tail):
        return
    for entry in tail:
        del vocab[entry["content"]]


def _hf_tokenizer_json(enc) -> dict:
    steps = enc.text_steps  # a loaded tokenizer.json's own steps, written back as they were read
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if steps is not None:
        pre_tokenizer, normalizer = steps.specs["pre_tokenizer"], steps.specs["normalizer"]
    elif enc.pat_str in GPT2_PATTERNS:
        pre_tokenizer, normalizer = byte_level, None
    else:
        split = {"type": "Split", "pattern": {"Regex": hf_regex(enc.pat_str)}, "behavior": "Isolated", "invert": False}
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, dict(byte_level, use_regex=False)]}
        normalizer = None
    added_tokens = [
        {"id": idx, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for text, idx in enc.special_tokens.items()
    ]
    # Each field written out, as HF tokenizers requires: its "normalized" as the steps ran it (looked for after the
    # normalizer, or in the text as it came), what the entries read from a tokenizer.json say, or a hand-made
    # entry's missing "normalized" as the steps read it (false)
    not_special = [
        {"id": entry["id"], "content": entry["content"], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": bool(entry.get("normalized")), "special": False}
        for entry in (steps.specs["added_tokens"] if steps is not None else [])
    ]
    added_tokens = sorted(added_tokens + not_special, key=lambda entry: entry["id"])
    vocab = _gpt2_vocab(enc)
    clash = next((text for text, idx in enc.special_tokens.items() if vocab[text] != idx), None)
    if clash is not None:  # model.vocab has one entry per string, and HF gives an added token that entry's id
        raise ValueError(f"{enc.name!r}: special token {clash!r} is spelled as ordinary token {vocab[clash]} is in a "
                         "tokenizer.json (GPT-2's characters for its bytes), so HF tokenizers would give it that id: "
                         "save as 'tiktoken', or rename the special token")
    for entry in not_special:
        # Under its own text, as special tokens are: HF gives an added token missing from model.vocab the next
        # free id, not the id written beside it, so DeepSeek V3's <｜User｜> (between special tokens that are in
        # model.vocab) read back as another token's id.
        vocab.pop(token_to_gpt2_str(entry["content"].encode("utf-8")), None)
        vocab[entry["content"]] = entry["id"]
    _leave_added_tail_out(vocab, added_tokens)
    # a loaded file's post-processor (Llama 3's BOS), truncation and padding as they were read, else GPT-2's
    after_bpe = getattr(enc, "hf_post_processing", None) or {
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    }
    return {
        "version": "1.0",
        "truncation": after_bpe.get("truncation"),
        "padding": after_bpe.get("padding"),
        "added_tokens": added_tokens,
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": after_bpe.get("post_processor"),
        # (none if the file read had none: HF then decodes to the tokens' strings joined, and so does the encoding)
        "decoder": None if steps is not None and steps.no_decoder else
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # a piece that is a token is that token (tiktoken's rule), or the merges alone decide (CS336's)
            "ignore_merges": enc.whole_piece_tokens,
            "vocab": vocab,
            "merges": [list(m) for m in _gpt2_merge_strs(enc)],
        },
    }
