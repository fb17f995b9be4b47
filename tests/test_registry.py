"""Where vocabulary files come from, and every way that can go wrong."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from unittest import mock

import pytest

import tokenizer.download as download
import tokenizer.registry as registry
from conftest import ENCODINGS_DIR, corpus_text
from conftest_download import file_server  # noqa: F401 - a fixture
from tokenizer import get_encoding, list_encoding_names


@pytest.fixture
def fresh_registry(monkeypatch, tmp_path):
    """No cached encodings, an empty user cache, no data dir: every file must be found anew."""
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.delenv("TOKENIZER_DATA_DIR", raising=False)
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))  # tiktoken's: empty too
    monkeypatch.setattr(download, "BACKOFF_SECONDS", 0.0)
    return tmp_path


def every_name_and_alias() -> list[str]:
    return [*registry.ENCODINGS, *registry.ALIASES]


@pytest.fixture
def without_package_data(monkeypatch, tmp_path):
    """A copy of the package without its vocabulary files (a vendored copy, say): the caches and the download
    are what is left."""
    empty = tmp_path / "package-data"
    empty.mkdir()
    monkeypatch.setattr(registry, "PACKAGE_DATA", empty)


@pytest.fixture
def nothing_but_the_package(fresh_registry, monkeypatch):
    """A user's machine: no variable set, empty caches (tiktoken's default one too), and no network (any
    download fails the test)."""
    for variable in ("TOKENIZER_DATA_DIR", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(fresh_registry / "tmp"))
    monkeypatch.setattr(download, "download_file", lambda url, *a, **k: pytest.fail(f"tried to download {url}"))
    return fresh_registry


def seed_tiktoken_cache(folder, vocab, data: bytes | None = None):
    """Put ``vocab``'s file where tiktoken keeps it: named by the sha1 of its URL on OpenAI's storage."""
    key = hashlib.sha1(f"https://openaipublic.blob.core.windows.net/{vocab.remote}".encode()).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / key).write_bytes(data if data is not None else (ENCODINGS_DIR / vocab.name).read_bytes())
    return folder / key


@pytest.mark.parametrize("variable", ["TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", None])
def test_a_warmed_tiktoken_cache_is_used_offline(fresh_registry, without_package_data, monkeypatch, variable):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")  # nothing listens there: offline
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    if variable is None:  # tiktoken's default: data-gym-cache in the temporary folder
        monkeypatch.setattr(tempfile, "tempdir", str(fresh_registry / "tmp"))
        folder = fresh_registry / "tmp" / "data-gym-cache"
    else:
        folder = fresh_registry / "tiktoken's"
        monkeypatch.setenv(variable, str(folder))
    seeded = seed_tiktoken_cache(folder, registry.R50K)
    assert registry.vocab_file_path(registry.R50K) == seeded
    assert get_encoding("r50k_base").encode("hello world") == [31373, 995]
    assert not (fresh_registry / "cache" / "r50k_base.tiktoken").exists()  # read there, not copied


def test_the_real_tiktoken_finds_the_same_file(fresh_registry, monkeypatch):
    """The file name is tiktoken's own: tiktoken reads the seeded file offline too."""
    tiktoken_load = pytest.importorskip("tiktoken.load")
    seed_tiktoken_cache(fresh_registry / "tiktoken-cache", registry.P50K)
    monkeypatch.setattr(tiktoken_load, "read_file", lambda url: pytest.fail(f"tiktoken tried to download {url}"))
    from tiktoken_ext import openai_public

    assert openai_public.p50k_base()["mergeable_ranks"] == get_encoding("p50k_base").token_ids


def test_a_damaged_tiktoken_cache_file_is_passed_over(fresh_registry, without_package_data, monkeypatch):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")
    seeded = seed_tiktoken_cache(fresh_registry / "tiktoken-cache", registry.CL100K, b"garbage")
    with pytest.raises(OSError, match="TIKTOKEN_CACHE_DIR"):
        get_encoding("cl100k_base")
    assert seeded.read_bytes() == b"garbage"  # tiktoken's file: left for tiktoken to replace


def test_an_empty_tiktoken_cache_dir_turns_that_step_off(monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/somewhere")
    assert registry.tiktoken_cache_path(registry.R50K) is None


def test_names_and_alias():
    assert list_encoding_names() == [
        "gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"
    ]
    assert get_encoding("gpt4") is get_encoding("cl100k_base")
    assert get_encoding("gpt2") is get_encoding("gpt2")  # loaded once


def test_unknown_encoding_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown encoding 'gpt5'.*cl100k_base"):
        get_encoding("gpt5")


def test_gpt2_works_offline_from_packaged_files(fresh_registry, monkeypatch):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")  # nothing listens there
    assert get_encoding("gpt2").encode("hello world") == [31373, 995]


SUITE_TIKTOKEN_CACHE = os.environ["TIKTOKEN_CACHE_DIR"]  # conftest's, seeded: read before a test unsets it


def tiktoken_encoding(name: str):
    """tiktoken's encoding of that name or alias, from the suite's tiktoken cache whatever the test has unset."""
    tiktoken = pytest.importorskip("tiktoken")
    with mock.patch.dict(os.environ, {"TIKTOKEN_CACHE_DIR": SUITE_TIKTOKEN_CACHE}):
        return tiktoken.get_encoding(registry.ALIASES.get(name, name))


SAMPLE = " <|endoftext|> hello\n\n  world 12345 "


def loads_from_the_package_as_tiktoken(name: str) -> None:
    vocab = registry.ENCODINGS[registry.ALIASES.get(name, name)].vocab
    assert registry.vocab_file_path(vocab) == registry.PACKAGE_DATA / Path(vocab.name).name
    sample = corpus_text("en_docs.txt", 2000) + corpus_text("zh_manpages.txt", 2000) + SAMPLE
    expected = tiktoken_encoding(name).encode(sample, disallowed_special=())
    assert get_encoding(name).encode(sample, disallowed_special=()) == expected, name


def test_every_name_and_alias_is_found_in_the_package_with_no_network_and_no_setting(nothing_but_the_package):
    assert set(registry.ALIASES.values()) <= set(registry.ENCODINGS) and len(every_name_and_alias()) == 11
    for name in every_name_and_alias():
        vocab = registry.ENCODINGS[registry.ALIASES.get(name, name)].vocab
        assert registry.vocab_file_path(vocab) == registry.PACKAGE_DATA / Path(vocab.name).name
    # two loaded from scratch (an empty user cache: the packaged file read and parsed), on both cores
    for name in ("r50k_base", "p50k_edit"):
        loads_from_the_package_as_tiktoken(name)
    assert get_encoding("r50k_base", core="reference").encode(SAMPLE, allowed_special="all") == \
        tiktoken_encoding("r50k_base").encode(SAMPLE, allowed_special="all")


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", every_name_and_alias())
def test_each_name_loads_from_the_package_as_tiktoken_with_no_network_and_no_setting(nothing_but_the_package, name):
    loads_from_the_package_as_tiktoken(name)


def test_a_damaged_shipped_file_is_refused_in_one_line(nothing_but_the_package, monkeypatch):
    damaged = nothing_but_the_package / "damaged-package"
    shutil.copytree(registry.PACKAGE_DATA, damaged)
    data = bytearray((damaged / "cl100k_base.tiktoken").read_bytes())
    data[1000] ^= 1
    (damaged / "cl100k_base.tiktoken").write_bytes(data)
    monkeypatch.setattr(registry, "PACKAGE_DATA", damaged)
    with pytest.raises(download.ChecksumError) as info:
        get_encoding("gpt-4")
    message = str(info.value)
    assert "\n" not in message and str(damaged / "cl100k_base.tiktoken") in message
    assert registry.CL100K.sha256 in message and "TOKENIZER_DATA_DIR" in message
    # the package is installed from a checkout or a wheel, never by its name from an index: the advice names those
    assert "git checkout -- tokenizer/data" in message and "--force-reinstall --no-deps" in message
    assert "the checkout or wheel it came from" in message and "reinstall gpt2-numpy" not in message
    assert get_encoding("r50k_base").encode("hello world") == [31373, 995]  # the others are good


def test_a_damaged_shipped_file_is_one_line_from_the_command_line(nothing_but_the_package, monkeypatch, capsys):
    from tokenizer.cli import main

    damaged = nothing_but_the_package / "damaged-package"
    damaged.mkdir()
    (damaged / "o200k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setattr(registry, "PACKAGE_DATA", damaged)
    assert main(["encode", "hi", "--encoding", "o200k_harmony"], prog="gpt2-tokenizer") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpt2-tokenizer") and "--force-reinstall --no-deps" in err, err


def test_the_folders_a_user_names_win_over_the_package(nothing_but_the_package, monkeypatch):
    """$TOKENIZER_DATA_DIR, then tiktoken's cache when a variable names it, then the package; tiktoken's default
    cache (the temporary folder) comes after the package: nobody chose it."""
    shipped = registry.PACKAGE_DATA / "p50k_base.tiktoken"
    default_cache = seed_tiktoken_cache(nothing_but_the_package / "tmp" / "data-gym-cache", registry.P50K)
    assert registry.vocab_file_path(registry.P50K) == shipped
    for variable in ("DATA_GYM_CACHE_DIR", "TIKTOKEN_CACHE_DIR"):  # TIKTOKEN_CACHE_DIR wins over DATA_GYM's
        named = seed_tiktoken_cache(nothing_but_the_package / variable, registry.P50K)
        monkeypatch.setenv(variable, str(nothing_but_the_package / variable))
        assert registry.vocab_file_path(registry.P50K) == named
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken's cache off: the package again
    assert registry.vocab_file_path(registry.P50K) == shipped != default_cache
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
    assert registry.vocab_file_path(registry.P50K) == ENCODINGS_DIR / "p50k_base.tiktoken"
    assert registry.vocab_file_path(registry.GPT2_VOCAB_BPE) == ENCODINGS_DIR / "gpt2" / "vocab.bpe"
    # A damaged file there is an error, though the package holds a good one: the user chose that file.
    damaged = nothing_but_the_package / "data"
    damaged.mkdir()
    (damaged / "p50k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(damaged))
    with pytest.raises(download.ChecksumError, match="unset TOKENIZER_DATA_DIR"):
        registry.vocab_file_path(registry.P50K)
    # A damaged copy in a tiktoken cache a variable names is passed over (tiktoken replaces it).
    monkeypatch.delenv("TOKENIZER_DATA_DIR")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(nothing_but_the_package / "tiktoken's"))
    seed_tiktoken_cache(nothing_but_the_package / "tiktoken's", registry.P50K, b"garbage")
    assert registry.vocab_file_path(registry.P50K) == shipped


def test_data_dir_is_used(fresh_registry, monkeypatch):
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")
    assert get_encoding("r50k_base").encode("hello world") == [31373, 995]


def test_wrong_hash_in_data_dir_names_file_and_hashes(fresh_registry, monkeypatch):
    data = fresh_registry / "data"
    data.mkdir()
    (data / "r50k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(data))
    with pytest.raises(ValueError) as info:
        get_encoding("r50k_base")
    message = str(info.value)
    assert "r50k_base.tiktoken" in message and registry.R50K.sha256 in message
    assert download.sha256_file(data / "r50k_base.tiktoken") in message


def test_missing_offline_says_where_to_put_the_file(fresh_registry, without_package_data, monkeypatch):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")
    with pytest.raises(OSError) as info:
        get_encoding("cl100k_base")
    message = str(info.value)
    assert str(fresh_registry / "cache" / "cl100k_base.tiktoken") in message
    assert "TOKENIZER_DATA_DIR" in message
    assert not (fresh_registry / "cache" / "cl100k_base.tiktoken").exists()


def test_downloads_into_cache_and_verifies(fresh_registry, without_package_data, monkeypatch,
                                           file_server):  # noqa: F811
    file_server.files["/encodings/p50k_base.tiktoken"] = (ENCODINGS_DIR / "p50k_base.tiktoken").read_bytes()
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    enc = get_encoding("p50k_base")
    assert enc.encode("hello world") == [31373, 995]
    cached = fresh_registry / "cache" / "p50k_base.tiktoken"
    assert download.sha256_file(cached) == registry.P50K.sha256
    # a second process finds it in the cache: no new request
    monkeypatch.setattr(registry, "_cache", {})
    before = len(file_server.requests)
    get_encoding("p50k_edit")
    assert len(file_server.requests) == before


def test_download_with_wrong_hash_leaves_nothing(fresh_registry, without_package_data, monkeypatch,
                                                 file_server):  # noqa: F811
    file_server.files["/encodings/o200k_base.tiktoken"] = b"aGVsbG8= 0\n"
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    with pytest.raises(ValueError, match=registry.O200K.sha256):
        get_encoding("o200k_base")
    cache = fresh_registry / "cache"
    assert not cache.exists() or list(cache.iterdir()) == []


@pytest.mark.parametrize("full", [errno.ENOSPC, errno.EDQUOT])
def test_download_onto_a_full_disk_names_the_file_and_folder_and_leaves_nothing(
        fresh_registry, without_package_data, monkeypatch, file_server, full):  # noqa: F811
    """A full disk (or quota) during a vocabulary's download raised a bare OSError, "[Errno 28] No space left on
    device", naming no file, and kept the half-written .part. It says which file, where, and what to do, as a
    DownloadError (an OSError, as before), and leaves no part of the file."""
    file_server.files["/encodings/r50k_base.tiktoken"] = (ENCODINGS_DIR / "r50k_base.tiktoken").read_bytes()
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)

    class FillingDisk(io.FileIO):
        """A file on a disk that fills up after the first bytes written."""

        def write(self, data):
            if self.tell() > 0:
                raise OSError(full, os.strerror(full))
            return super().write(bytes(data[:1000]))

    monkeypatch.setattr(download, "open", lambda path, mode: FillingDisk(path, mode.replace("b", "")),
                        raising=False)
    cache = fresh_registry / "cache"
    with pytest.raises(download.DownloadError) as raised:
        get_encoding("r50k_base")
    message = str(raised.value)
    assert message.startswith(f"cannot save r50k_base.tiktoken, downloaded from {file_server.url}/encodings/"
                              f"r50k_base.tiktoken, as {cache / 'r50k_base.tiktoken'}: {os.strerror(full)}; free "
                              f"space in {cache}, or set TOKENIZER_CACHE_DIR to a folder"), message
    assert "\n" not in message
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_full_disks_part_is_removed_before_a_run_waiting_for_the_file_takes_it_up(
        fresh_registry, without_package_data, monkeypatch, file_server):  # noqa: F811
    """The .part of a vocabulary file whose download met a full disk was removed after the download's lock was
    let go: a second run waiting for the file took the lock in between, found the .part and resumed from it (a
    request for its last bytes) while the first run deleted it. The .part is now removed while the lock is held:
    the second run finds none, asks for the whole file and gets it."""
    path = "/encodings/r50k_base.tiktoken"
    file_server.files[path] = (ENCODINGS_DIR / "r50k_base.tiktoken").read_bytes()
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    second_waits = threading.Event()
    first_run = []  # its thread, once started

    class FillingDisk(io.FileIO):
        """The first run's disk: full after the first 1,000 bytes written, once the second run waits."""

        def write(self, data):
            super().write(bytes(data[:1000]))
            assert second_waits.wait(10)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def opening(path, mode):
        return (FillingDisk(path, mode.replace("b", "")) if threading.current_thread() in first_run
                else open(path, mode))

    def say(line):
        if "waiting for it to finish" in line:
            second_waits.set()

    real_download_file = download.download_file

    def download_file(*args, **kwargs):
        """The first run: when its download fails, what the second run asks for is asked before it goes on."""
        try:
            return real_download_file(*args, **kwargs)
        except OSError:
            if threading.current_thread() in first_run:
                deadline = time.monotonic() + 5
                while len(file_server.requests_for(path)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
            raise

    monkeypatch.setattr(download, "open", opening, raising=False)
    monkeypatch.setattr(download.command_line, "say", say)
    monkeypatch.setattr(download, "download_file", download_file)
    outcomes = {}

    def run(name):
        try:
            outcomes[name] = registry.vocab_file_path(registry.R50K)
        except OSError as error:
            outcomes[name] = error

    first_run.append(threading.Thread(target=run, args=("first",)))
    first_run[0].start()
    deadline = time.monotonic() + 10
    while not file_server.requests_for(path) and time.monotonic() < deadline:  # the first run holds the lock
        time.sleep(0.01)
    run("second")
    first_run[0].join(10)
    cached = fresh_registry / "cache" / "r50k_base.tiktoken"
    assert isinstance(outcomes["first"], download.DownloadError) and "cannot save" in str(outcomes["first"])
    assert outcomes["second"] == cached and cached.read_bytes() == file_server.files[path]
    assert file_server.requests_for(path) == [None, None]  # the second run asked for the whole file
    assert list(cached.parent.iterdir()) == [cached]


def test_corrupt_user_cache_is_replaced(fresh_registry, without_package_data, monkeypatch,
                                        file_server):  # noqa: F811
    cache = fresh_registry / "cache"
    cache.mkdir(parents=True)
    (cache / "r50k_base.tiktoken").write_bytes(b"garbage")
    file_server.files["/encodings/r50k_base.tiktoken"] = (ENCODINGS_DIR / "r50k_base.tiktoken").read_bytes()
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    assert get_encoding("r50k_base").encode("hi") == [5303]


def test_malformed_tiktoken_file_names_line(tmp_path):
    from tokenizer.vocab_files import read_tiktoken_file

    bad = tmp_path / "bad.tiktoken"
    shutil.copyfile(ENCODINGS_DIR / "r50k_base.tiktoken", bad)
    with open(bad, "ab") as f:
        f.write(b"not-base64!! 7\n")
    with pytest.raises(ValueError, match=r"bad.tiktoken, line 50257"):
        read_tiktoken_file(bad)


@pytest.mark.parametrize("bad_id", [50257, -1, 10**12])
def test_decode_unknown_id_is_key_error(bad_id):
    enc = get_encoding("gpt2")
    with pytest.raises(KeyError, match="not in the vocabulary"):
        enc.decode([31373, bad_id])
    with pytest.raises(KeyError):
        enc.decode_single_token_bytes(bad_id)


def test_decode_non_integer_is_type_error():
    with pytest.raises(TypeError, match="integers"):
        get_encoding("gpt2").decode(["hello"])


def test_encode_single_token_errors():
    enc = get_encoding("gpt2")
    with pytest.raises(KeyError, match="not a single token"):
        enc.encode_single_token("hello world")


def test_pickle_round_trip():
    import pickle

    from tokenizer import Encoding

    named = get_encoding("gpt2")
    assert pickle.loads(pickle.dumps(named)) is named  # by name: no vocabulary copied
    custom = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")], ["<s>"])
    again = pickle.loads(pickle.dumps(custom))
    assert again.encode("abc<s>", allowed_special="all") == custom.encode("abc<s>", allowed_special="all") == [256, 99, 257]


def test_docstring_examples():
    import doctest

    import tokenizer
    import tokenizer.encoding
    import tokenizer.loading
    import tokenizer.saving
    import tokenizer.vocab_files

    # encoding.py's method examples use `enc`, the GPT-2 encoding
    modules = [tokenizer, registry, tokenizer.encoding, tokenizer.vocab_files, tokenizer.saving, tokenizer.loading]
    for module in modules:
        result = doctest.testmod(module, extraglobs={"enc": get_encoding("gpt2")})
        assert result.failed == 0 and result.attempted > 0, module.__name__
