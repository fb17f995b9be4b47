"""The pair table kept on disk (tokenizer/fast/table_cache.py): found again, never trusted when wrong."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import threading
import time
import warnings
import zlib
from types import SimpleNamespace

import numpy as np
import pytest

import tokenizer.fast.batch_bpe as batch_bpe
import tokenizer.fast.table_cache as table_cache
from tokenizer import Encoding, get_encoding

SMALL_RANKS = {b"ab": 0, b"bc": 1, b"abc": 2, b"  ": 3}


def small_vocab(merge_ranks):
    token_ids = {bytes([b]): b for b in range(256)}
    for i, token in enumerate(sorted(merge_ranks)):
        token_ids[token] = 256 + i
    return token_ids


def same_table(a: batch_bpe.PairTable, b: batch_bpe.PairTable) -> bool:
    return all(
        np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y for x, y in zip(a, b, strict=True)
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "pair-tables"


def test_docstring_examples(cache):
    assert doctest.testmod(table_cache).failed == 0


def test_saved_then_loaded_without_building(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    built = table_cache.load_or_build(SMALL_RANKS, token_ids)
    [saved] = cache.iterdir()
    assert saved.name == table_cache.vocabulary_digest(SMALL_RANKS, token_ids) + ".tables"

    def no_build(*args):
        raise AssertionError("the table should have been read from disk")

    monkeypatch.setattr(table_cache, "build_pair_table", no_build)
    loaded = table_cache.load_or_build(SMALL_RANKS, token_ids)
    assert same_table(loaded, built)
    assert same_table(loaded, batch_bpe.build_pair_table(SMALL_RANKS, token_ids))


@pytest.mark.parametrize("damage", ["truncate", "garbage", "one bit flipped", "longer", "empty", "missing field"])
def test_a_damaged_file_is_rebuilt_and_replaced(cache, damage):
    token_ids = small_vocab(SMALL_RANKS)
    expected = table_cache.load_or_build(SMALL_RANKS, token_ids)
    [path] = cache.iterdir()
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(data[:100] + bytes(len(data) - 200) + data[-100:])
    elif damage == "one bit flipped":  # in the arrays' bytes, past the header: only the checksum can tell
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 1]) + data[middle + 1 :])
    elif damage == "longer":
        path.write_bytes(data + b"\0")
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        digest = table_cache.vocabulary_digest(SMALL_RANKS, token_ids)
        table_cache.write_arrays(path, digest, {}, {})  # right digest, no arrays
    assert table_cache.read_tables(path, table_cache.vocabulary_digest(SMALL_RANKS, token_ids)) is None
    assert same_table(table_cache.load_or_build(SMALL_RANKS, token_ids), expected)
    assert table_cache.read_tables(path, table_cache.vocabulary_digest(SMALL_RANKS, token_ids)) is not None


def test_a_file_from_another_vocabulary_is_not_used(cache):
    token_ids = small_vocab(SMALL_RANKS)
    other_ranks = {b"ab": 0, b"bc": 2, b"abc": 1, b"  ": 3}  # same tokens, other priorities
    assert table_cache.vocabulary_digest(other_ranks, token_ids) != table_cache.vocabulary_digest(SMALL_RANKS, token_ids)
    other = table_cache.load_or_build(other_ranks, token_ids)
    [other_path] = cache.iterdir()
    # put the other vocabulary's table where this one's belongs
    other_path.rename(table_cache.table_path(table_cache.vocabulary_digest(SMALL_RANKS, token_ids)))
    table = table_cache.load_or_build(SMALL_RANKS, token_ids)
    assert not same_table(table, other)
    assert same_table(table, batch_bpe.build_pair_table(SMALL_RANKS, token_ids))


def test_digest_covers_bytes_ids_and_priorities():
    token_ids = small_vocab(SMALL_RANKS)
    digest = table_cache.vocabulary_digest(SMALL_RANKS, token_ids)
    moved_id = dict(token_ids) | {b"abc": 999}
    renamed = {(b"ac" if t == b"abc" else t): i for t, i in token_ids.items()}
    without_rank = {t: r for t, r in SMALL_RANKS.items() if t != b"  "}
    assert table_cache.vocabulary_digest(SMALL_RANKS, moved_id) != digest
    assert table_cache.vocabulary_digest({**SMALL_RANKS, b"ac": 2}, renamed) != digest
    assert table_cache.vocabulary_digest(without_rank, token_ids) != digest
    assert table_cache.vocabulary_digest({k: v * 10**30 for k, v in SMALL_RANKS.items()}, token_ids) != digest
    # priorities equal to the ids (tiktoken's files) give one digest however the tables are passed
    same = table_cache.vocabulary_digest(token_ids, token_ids)
    assert table_cache.vocabulary_digest(dict(token_ids), token_ids) == same
    assert table_cache.vocabulary_digest(token_ids, {**token_ids, b"ab": 300}) != same


def test_an_unwritable_cache_folder_only_costs_the_saving(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(blocker))
    token_ids = small_vocab(SMALL_RANKS)
    table = table_cache.load_or_build(SMALL_RANKS, token_ids)
    assert same_table(table, batch_bpe.build_pair_table(SMALL_RANKS, token_ids))


def test_no_temporary_file_is_left_behind(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    table_cache.load_or_build(SMALL_RANKS, token_ids)
    assert [p.suffix for p in cache.iterdir()] == [".tables"]
    # a failed write leaves nothing either
    monkeypatch.setattr(table_cache.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    table_cache.load_or_build({**SMALL_RANKS, b"ca": 4}, small_vocab({**SMALL_RANKS, b"ca": 4}))
    assert len(list(cache.iterdir())) == 1


def test_a_vocabulary_without_a_table_saves_nothing(cache):
    token_ids = {bytes([b]): b for b in range(256)} | {b"ab": 97}  # id 97 twice
    assert table_cache.load_or_build({b"ab": 0}, token_ids) is None
    assert not cache.exists() or not list(cache.iterdir())


def test_a_fresh_encoding_loads_the_saved_table(cache, monkeypatch):
    enc = get_encoding("gpt2")
    ranks = dict(enc.token_ids)
    first = Encoding("gpt2", pat_str=enc.pat_str, mergeable_ranks=ranks, special_tokens=enc.special_tokens)
    assert first.core.batch_table() is not None
    monkeypatch.setattr(table_cache, "build_pair_table", lambda *a: pytest.fail("built again"))
    second = Encoding("gpt2", pat_str=enc.pat_str, mergeable_ranks=dict(ranks), special_tokens=enc.special_tokens)
    assert same_table(second.core.batch_table(), first.core.batch_table())


def test_the_token_table_is_saved_and_loaded_with_the_pair_table(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    table_cache.load_or_build_tables(SMALL_RANKS, token_ids)
    monkeypatch.setattr(table_cache.PieceTable, "__init__", lambda self, values: pytest.fail("should be read"))
    _, tokens = table_cache.load_or_build_tables(SMALL_RANKS, token_ids)
    pieces = list(token_ids) + [b"zz", b"abcabcabcabcabcabcabc"]
    blob = np.frombuffer(b"".join(pieces) + bytes(8), dtype=np.uint8)
    lengths = np.array([len(p) for p in pieces])
    found = tokens.find(blob, np.cumsum(lengths) - lengths, lengths)
    assert found.tolist() == [token_ids.get(p, -1) for p in pieces]


def test_a_named_vocabulary_is_found_again_without_hashing_it(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    built = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small sha256 0123")
    assert sorted(p.suffix for p in cache.iterdir()) == [".digest", ".tables"]  # one table, named as before
    monkeypatch.setattr(table_cache, "vocabulary_digest", lambda *a: pytest.fail("hashed the vocabulary again"))
    monkeypatch.setattr(table_cache, "build_pair_table", lambda *a: pytest.fail("built again"))
    loaded = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small sha256 0123")
    assert same_table(loaded[0], built[0])
    # another name is not the same vocabulary as far as the cache knows: it hashes (and here fails)
    with pytest.raises(pytest.fail.Exception):
        table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small sha256 4567")


@pytest.mark.parametrize("damage", ["tables removed", "tables damaged", "digest garbage", "digest of another vocabulary"])
def test_a_remembered_digest_that_leads_nowhere_costs_only_the_hashing(cache, damage):
    token_ids = small_vocab(SMALL_RANKS)
    other_ranks = {b"xy": 0}
    other_ids = small_vocab(other_ranks)
    table_cache.load_or_build_tables(other_ranks, other_ids)  # another vocabulary's tables, also in the folder
    expected = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small")
    [remembered] = cache.glob("*.digest")
    digest = table_cache.vocabulary_digest(SMALL_RANKS, token_ids)
    if damage == "tables removed":
        table_cache.table_path(digest).unlink()
    elif damage == "tables damaged":  # found by name, mapped, and fails its check (in the thread)
        data = bytearray(table_cache.table_path(digest).read_bytes())
        data[-1] ^= 1
        table_cache.table_path(digest).write_bytes(data)
    elif damage == "digest garbage":
        remembered.write_text("not a digest")
    else:  # a remembered digest is only a name: the tables it leads to must hold that digest, and these do not
        remembered.write_text(table_cache.vocabulary_digest(other_ranks, other_ids))
        table_cache.table_path(digest).rename(table_cache.table_path(remembered.read_text()))
    tables = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small")
    assert same_table(tables[0], expected[0])
    assert same_table(tables[0], batch_bpe.build_pair_table(SMALL_RANKS, token_ids))
    assert remembered.read_text() == digest  # put right


@pytest.mark.parametrize("other_ranks", [{b"xy": 0}, {b"xy": 0, b"yz": 1, b"xz": 2, b"zz": 3}],
                         ids=["fewer tokens", "as many tokens"])
def test_a_name_that_leads_to_another_vocabularys_tables_is_caught(cache, monkeypatch, other_ranks):
    table_cache.load_or_build_tables(SMALL_RANKS, small_vocab(SMALL_RANKS), source="a name")
    other_ids = small_vocab(other_ranks)
    tables = table_cache.load_or_build_tables(other_ranks, other_ids, source="a name")  # the wrong name
    assert same_table(tables[0], batch_bpe.build_pair_table(other_ranks, other_ids))
    assert tables[1].values_of(list(other_ids)) == list(other_ids.values())
    # put right: the name now leads to this vocabulary's tables, found without hashing
    monkeypatch.setattr(table_cache, "vocabulary_digest", lambda *a: pytest.fail("hashed the vocabulary again"))
    assert same_table(table_cache.load_or_build_tables(other_ranks, other_ids, source="a name")[0], tables[0])


def test_the_registry_names_its_vocabularies_by_their_checked_files():
    enc = get_encoding("gpt2")
    assert enc.core.vocabulary_source == "gpt2/encoder.json sha256 " + "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
    copy = Encoding("gpt2", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)
    assert copy.core.vocabulary_source is None  # handed over as dicts: nothing vouches for them


def test_a_fresh_process_finds_the_registry_tables_without_hashing(cache):
    code = (
        "import tokenizer.fast.table_cache as tc\n"
        "from tokenizer import get_encoding\n"
        "reads = []\n"
        "read_tables_soon = tc.read_tables_soon\n"
        "tc.read_tables_soon = lambda *a: reads.append(a) or read_tables_soon(*a)\n"
        "if {strict}:  # any hashing or building fails\n"
        "    tc.vocabulary_digest = tc.build_pair_table = None\n"
        "text = ' '.join(str(i * 7919) + 'qz' for i in range(3000))  # long: the array path\n"
        "print(len(reads), get_encoding('gpt2').encode_ordinary(text), len(reads))\n"
    )
    env = dict(os.environ, TOKENIZER_CACHE_DIR=str(cache.parent))
    runs = [subprocess.run([sys.executable, "-c", code.format(strict=strict)], env=env, capture_output=True, text=True)
            for strict in (False, True)]
    first, second = (run.stdout.split(" ", 1) for run in runs)
    assert runs[1].returncode == 0, runs[1].stderr
    assert first[0] == second[0] == "0" and second[1].endswith(" 1\n")  # the tables were read, once
    assert first[1] == second[1]


def blocking_crc(monkeypatch, release: threading.Event):
    """Make the tables check, when it runs on its own thread, wait for ``release``; where it ran is recorded."""
    ran_on = []

    def crc32(data, value=0):
        ran_on.append(threading.current_thread().name)
        if threading.current_thread() is not threading.main_thread():
            assert release.wait(30), "never released"
        return zlib.crc32(data, value)

    monkeypatch.setattr(table_cache, "zlib", SimpleNamespace(crc32=crc32))
    return ran_on


def test_the_check_runs_while_the_caller_goes_on(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    built = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small")
    release = threading.Event()
    ran_on = blocking_crc(monkeypatch, release)
    soon = table_cache.load_tables_soon(SMALL_RANKS, token_ids, source="small")  # returns, the check waiting
    release.set()
    assert same_table(soon()[0], built[0])
    assert ran_on == ["tables check"]


def test_a_process_forked_during_the_check_checks_for_itself(cache, monkeypatch):
    token_ids = small_vocab(SMALL_RANKS)
    built = table_cache.load_or_build_tables(SMALL_RANKS, token_ids, source="small")
    release = threading.Event()
    ran_on = blocking_crc(monkeypatch, release)
    soon = table_cache.load_tables_soon(SMALL_RANKS, token_ids, source="small")
    while not ran_on:  # the check has begun (and waits)
        time.sleep(0.001)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (3.12+: forking a process with threads)
        child = os.fork()
    if child == 0:  # the thread is not in the child: it checks on its own thread, and gets the tables
        code = 1
        try:
            code = 0 if same_table(soon()[0], built[0]) and ran_on == ["tables check", "MainThread"] else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    release.set()
    assert os.waitstatus_to_exitcode(status) == 0
    assert same_table(soon()[0], built[0])


def test_tables_of_older_formats_are_removed_when_new_ones_are_written(cache):
    cache.mkdir(parents=True)
    old_npz = cache / ("0" * 64 + ".npz")
    old_npz.write_bytes(b"PK old zip")
    other_vocabulary = {b"xy": 0}
    table_cache.load_or_build_tables(other_vocabulary, small_vocab(other_vocabulary))  # this format: kept
    [kept] = cache.glob("*.tables")
    older = cache / ("1" * 64 + ".tables")
    header = json.dumps({"format": table_cache.FORMAT_VERSION - 1}).encode()
    older.write_bytes(table_cache._MAGIC + len(header).to_bytes(8, "little") + header)
    unreadable = cache / ("2" * 64 + ".tables")
    unreadable.write_bytes(b"not ours")
    table_cache.load_or_build_tables(SMALL_RANKS, small_vocab(SMALL_RANKS))
    assert not old_npz.exists() and not older.exists()
    assert kept.exists() and unreadable.exists()  # another vocabulary's current tables, and what is not ours
    assert len(list(cache.glob("*.tables"))) == 3
