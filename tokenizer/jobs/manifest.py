"""``manifest.json``: what an ``encode-dataset`` output folder holds, and the proof that each output is whole.

The manifest lists, for each input shard whose output is complete, the input (its path, size and modification time),
the output file, its dtype, how many documents (a ``.txt`` shard's: the non-blank stretches between
``<|endoftext|>``, not the separators) and tokens it holds, ``bytes`` (the UTF-8 bytes of its text, the one meaning
of "bytes" in every command), ``file_bytes`` (the input as stored: compressed, JSON-escaped) and the output's
SHA-256, and ``replaced_bytes`` (of ``bytes``, those not UTF-8 in the input, read as U+FFFD under
``errors="replace"``); then the totals; and the settings every output was made with (the encoding, by name and by a
hash of what decides its ids, :func:`encoding_fingerprint`; the text field; the special-token rule of text shards,
as the flags spell it, :data:`TEXT_RULE`; and how invalid UTF-8 is read, ``errors``). It is written by the job's
driver only, atomically (a temporary file renamed over the old one), after each shard that completes, so an
interrupted job leaves a manifest that claims exactly the shards that are there.

Resuming trusts an output only when the manifest lists it with the same settings and the same input (path, size,
modification time), and the file has the recorded size and SHA-256. Anything else — no manifest, a manifest that
does not parse, another encoding's, an output that was deleted, truncated, edited or put there by someone else — is
redone. A manifest of version 1 (whose ``bytes`` were the file's) is still read: its text shards keep their entries
(there the two are the same), its JSON-lines and parquet shards are redone. Computing the SHA-256 of the outputs
reads them once; that is the price of never trusting a stale file.

What this module does not do: encode, or decide which shards a job has.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..bpe import merge
from .inputs import input_format

MANIFEST_NAME = "manifest.json"
FORMAT = "gpt2-numpy encode-dataset manifest, version 2"
# How encode-dataset encodes a text shard: encode(text, allowed_special="all"), each special token's text its id.
# The settings record it, as --allowed_special and --disallowed_special write it, so that a reader of the ids
# (parity --ids) encodes the text again the same way; a manifest written before it was recorded was made with it.
TEXT_RULE = {"allowed_special": "all", "disallowed_special": "none"}
# How invalid UTF-8 was read: a manifest written before it was recorded (when strict was the only way) was made so
READ_RULE = {"errors": "strict"}
FORMAT_1 = "gpt2-numpy encode-dataset manifest, version 1"  # "bytes" was the input file's size


def encoding_fingerprint(enc) -> str:
    """SHA-256 of what decides an encoding's ids: how it cuts text (its pattern, or a ``tokenizer.json``'s steps:
    normalizer, pre-tokenizer, added tokens that are not special), its tokens, its special tokens, and whether a
    piece that is a token is that token where that changes an id (:func:`has_tokens_only_taken_whole`). Not its
    name, core, decoder or ``hf_post_processing``, which change no id that ``encode`` gives. (The tables are
    hashed as the encoding holds them: the same BPE held as tiktoken's ranks or as a vocab and merges hashes
    differently, which can only make a check refuse, never accept, ids of another encoding.)"""
    h = hashlib.sha256()
    steps = enc.text_steps
    if steps is None:
        h.update(enc.pat_str.encode("utf-8"))
    else:  # the steps cut the text, and pat_str is only shown: two files that differ in a step differ here
        described = json.dumps(steps.what_decides_ids(), sort_keys=True, ensure_ascii=False)
        h.update(b"tokenizer.json steps:" + described.encode("utf-8", "surrogatepass"))
    for table in (enc.merge_ranks, enc.token_ids):
        for token, rank in sorted(table.items(), key=lambda item: item[1]):
            h.update(b"%d:%d:" % (rank, len(token)) + token)
    for token, rank in sorted(enc.special_tokens.items()):
        h.update(b"%d:" % rank + token.encode("utf-8"))
    if not enc.whole_piece_tokens and has_tokens_only_taken_whole(enc):
        h.update(b"merges alone")  # CS336's rule, or a tokenizer.json's "ignore_merges": false, gives other ids here
    return h.hexdigest()


def has_tokens_only_taken_whole(enc) -> bool:
    """Whether ``enc`` holds a token that its merges alone do not build from its bytes, so that a piece of text
    equal to it is that token only under tiktoken's rule (``whole_piece_tokens``): the rule changes ids only
    then. A trained vocabulary has none, nor have OpenAI's (a second or two to tell for 100,000 tokens)."""
    steps = enc.text_steps
    added = set() if steps is None else {text.encode("utf-8") for text in {*steps.added_raw, *steps.added_normalized}}
    ranks = enc.merge_ranks
    return any(len(token) > 1 and token not in added and merge(token, ranks) != [token] for token in enc.token_ids)


def another_encoding(enc) -> str:
    """How a message names the tokenizer that a manifest says wrote the ids when it bears ``enc``'s name but has
    another fingerprint (a tokenizer.json edited in place): "pass --encoding NAME" would name the one given."""
    return (f"another tokenizer named {enc.name!r} (its tokens, special tokens, pattern or tokenizer.json steps "
            "differ from those of the one given)")


def input_identity(path: Path) -> dict:
    """How the manifest recognises an input it has seen: its absolute path, size and modification time."""
    stat = path.stat()
    return {"input": str(path.resolve()), "input_size": stat.st_size, "input_mtime_ns": stat.st_mtime_ns}


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def read_manifest(folder: Path, settings: dict) -> dict[str, dict]:
    """The shard entries of ``folder``'s manifest, by input path, if it was made with ``settings``; else none."""
    try:
        with open(folder / MANIFEST_NAME, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("format") not in (FORMAT, FORMAT_1) or with_text_rule(manifest.get("settings")) != settings:
            return {}
        entries = {entry["input"]: entry for entry in manifest["shards"]}
        if manifest["format"] == FORMAT_1:
            entries = {name: {**entry, "file_bytes": entry["bytes"]} for name, entry in entries.items()
                       if input_format(name) == "text"}
        return entries
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # missing, unreadable or not ours: nothing in the folder is trusted


def recorded_outputs(folder: Path) -> list[str]:
    """The output names ``folder``'s manifest lists, whatever settings it was made with (an earlier run with
    another encoding wrote them too); none when there is no manifest of ours. Each is checked to be what
    ``encode-dataset`` writes, a plain ``.bin`` name in ``folder``, so that a manifest edited by hand cannot have
    anything else removed."""
    try:
        with open(folder / MANIFEST_NAME, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("format") not in (FORMAT, FORMAT_1):
            return []
        names = [entry["output"] for entry in manifest["shards"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return [name for name in names if isinstance(name, str) and name.endswith(".bin") and name == Path(name).name
            and not name.startswith(".")]


def with_text_rule(settings):
    """A manifest's ``settings``, with the text shards' rule and the UTF-8 rule they were made with even where they
    do not say them (a manifest written before they were recorded)."""
    return {**TEXT_RULE, **READ_RULE, **settings} if isinstance(settings, dict) else settings


def written_settings(output: Path) -> dict | None:
    """The settings (``encoding``, ``encoding_sha256``, ``dtype``, ``text_field``, ``allowed_special``,
    ``disallowed_special`` and ``errors``) that ``output`` was written with, from the manifest beside it that lists
    it; None for a file no manifest of ours lists (encode-file's, another tool's)."""
    try:
        with open(output.parent / MANIFEST_NAME, encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("format") not in (FORMAT, FORMAT_1):
            return None
        if output.name not in [entry["output"] for entry in manifest["shards"]]:
            return None
        settings = manifest["settings"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return with_text_rule(settings) if isinstance(settings, dict) else None


def is_complete(entry: dict | None, identity: dict, output: Path, itemsize: int) -> bool:
    """Whether ``output`` is the complete output the manifest ``entry`` records, for the input ``identity``."""
    if entry is None or any(entry.get(key) != value for key, value in identity.items()):
        return False
    if entry.get("output") != output.name:
        return False
    try:
        if output.stat().st_size != entry["tokens"] * itemsize:
            return False
    except OSError:
        return False
    return file_sha256(output) == entry["sha256"]


def write_manifest(folder: Path, settings: dict, entries: list[dict], *, complete: bool) -> dict:
    """Replace ``folder``'s manifest (atomically) with ``entries`` (in input order) and their totals."""
    totals = {key: sum(entry[key] for entry in entries) for key in ("documents", "tokens", "bytes", "file_bytes")}
    totals["replaced_bytes"] = sum(entry.get("replaced_bytes", 0) for entry in entries)  # (none in version 1's)
    manifest = {"format": FORMAT, "settings": settings, "complete": complete, "shards": entries,
                "totals": {"shards": len(entries), **totals}}
    path = folder / MANIFEST_NAME
    tmp = folder / f".{MANIFEST_NAME}.{os.getpid()}.partial"
    try:
        tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return manifest
