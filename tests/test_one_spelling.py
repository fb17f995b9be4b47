"""Facts spelled once and used everywhere: each test holds every user of a fact to its one spelling, so that a
second spelling that drifts (or a user that stops sharing the one object) fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import regex

import gpt2_numpy.encoder as gpt2_encoder
from conftest import REPO
from gpt2_numpy import checkpoints, cli, compiled_matvec, models_dir
from tokenizer import Encoding, bytes_to_unicode, get_encoding, numba_cache, user_cache
from tokenizer.cuts import safe_cuts
from tokenizer.fast import array_split, compiled_bpe
from tokenizer.kernel_loader import KernelLoader
from tokenizer.patterns import GPT2_PATTERN, WHITESPACE, WHITESPACE_CLASS
from tokenizer.pretokenize import special_token_regex
from tokenizer.training import compiled_loop_loader
from tokenizer.training.train import count_pretokens, train_bpe

EVERY_CHARACTER = "".join(map(chr, range(0x110000)))


# ---- one whitespace set ---------------------------------------------------------------------------------------

def test_the_whitespace_set_is_what_the_patterns_mean_by_s():
    assert WHITESPACE == set(regex.findall(r"\s", EVERY_CHARACTER)) and len(WHITESPACE) == 25
    assert set(re.findall(f"[{WHITESPACE_CLASS}]", EVERY_CHARACTER)) == WHITESPACE
    assert set(regex.findall(f"[{WHITESPACE_CLASS}]", EVERY_CHARACTER)) == WHITESPACE
    # Python's own idea differs by four control characters, which is why str.isspace stands for it nowhere
    assert {c for c in EVERY_CHARACTER[:0x3001] if c.isspace()} - WHITESPACE == set("\x1c\x1d\x1e\x1f")


def test_the_array_split_tables_hold_the_same_whitespace():
    as_set = lambda flags: set(map(chr, np.flatnonzero(flags).tolist()))  # noqa: E731
    assert as_set(array_split.class_table() & array_split.SPACE) == WHITESPACE
    assert as_set((array_split.o200k_class_table() & 3) == array_split.SPACE_KIND) == WHITESPACE


def test_the_safe_cuts_take_whitespace_from_the_set():
    # (space) rule: a cut before whitespace other than CR and LF, after a character that is not whitespace
    for c in sorted(WHITESPACE | set("\x1c\x1f\u200b")):
        expected = [1] if c in WHITESPACE - set("\r\n") else []
        assert list(safe_cuts("!" + c, pattern=GPT2_PATTERN)) == expected, repr(c)


def test_no_module_spells_whitespace_again():
    # str.isspace (four characters too many) or a White_Space property of its own: only the class tables,
    # which read tokenizer.patterns.code_point_runs, name it
    allowed = {"tokenizer/patterns.py", "tokenizer/fast/unicode16.py", "tokenizer/fast/stdlib_patterns.py",
               "tokenizer/fast/array_split.py"}
    offenders = []
    for path in sorted([*(REPO / "tokenizer").rglob("*.py"), *(REPO / "gpt2_numpy").rglob("*.py")]):
        name = path.relative_to(REPO).as_posix()
        code = path.read_text(encoding="utf-8")
        if ".isspace()" in code or ("White_Space" in code and name not in allowed):
            offenders.append(name)
    assert offenders == []


# ---- one special-token alternation ----------------------------------------------------------------------------

PREFIXED = ["<|a|>", "<|a|><|b|>"]  # the first is a prefix of the second


def test_the_alternation_is_longest_first_then_by_text_whatever_the_order_given():
    # (two specials of one length that match at one place are the same string: the tie order only makes the
    # pattern one text, whatever order the specials come in)
    for order in (PREFIXED + ["<|b|>"], ["<|b|>"] + PREFIXED[::-1]):
        assert special_token_regex(frozenset(order)).pattern == "<\\|a\\|><\\|b\\|>|<\\|a\\|>|<\\|b\\|>"


def test_a_special_token_that_is_a_prefix_of_another_in_encoding_and_training(tmp_path):
    text = "x<|a|><|b|>y<|a|>z"
    ranks = {bytes([b]): b for b in range(256)}
    enc = Encoding("prefixed", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                   special_tokens={"<|a|>": 256, "<|a|><|b|>": 257})
    assert enc.encode(text, allowed_special="all") == [ord("x"), 257, ord("y"), 256, ord("z")]
    path = tmp_path / "prefixed.txt"
    path.write_text(text.replace("z", "z ") * 3, encoding="utf-8")
    for order in (PREFIXED, PREFIXED[::-1]):
        # the longer special is cut out whole: no "<|b|>" left over to count
        assert count_pretokens(path, order, num_workers=1) == Counter({"x": 1, " x": 2, "y": 3, "z": 3, " ": 1})
        vocab, merges = train_bpe(path, 256 + 2 + 1, order, num_workers=1, progress=False)
        assert merges == [(b" ", b"x")] and {s.encode() for s in PREFIXED} <= set(vocab.values())


# ---- one kernel loader ---------------------------------------------------------------------------------------

def test_every_compiled_kernel_comes_through_the_one_loader():
    loaders = [compiled_bpe.LOADER, compiled_loop_loader.LOADER, compiled_matvec.LOADER]
    assert all(isinstance(loader, KernelLoader) for loader in loaders)
    assert {loader.name for loader in loaders} == set(numba_cache.KERNELS)


def test_a_fork_waits_for_every_loaders_thread(tmp_path, monkeypatch):
    # (the fast core's loader had the guard and the trainer's had not: now both have it, from the one class)
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(tmp_path))
    numba_cache.folder("merge_loop").mkdir(parents=True)
    numba_cache.mark(numba_cache.folder("merge_loop"))  # as if compiled: start_loading starts the thread at once
    loaded, release = threading.Event(), threading.Event()

    def slow_load():  # loading until the test lets it finish: whatever the machine's speed
        release.wait(60)
        loaded.set()
        return numba_cache

    loader = KernelLoader("merge_loop", title="a stand-in", program="-", load=slow_load, without="-")
    loader.start_loading()
    assert loader.status() == "loading"
    threading.Timer(0.05, release.set).start()  # lets it finish while the fork below waits for it
    pid = os.fork()
    if pid == 0:
        os._exit(0 if loaded.is_set() else 3)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert loader.kernel() is numba_cache and loader.status() == "loaded"


# ---- one list of model sizes, one cache root ------------------------------------------------------------------

def test_one_list_of_gpt2_sizes():
    assert gpt2_encoder.GPT2_MODEL_NAMES is models_dir.MODEL_SIZES is checkpoints.MODEL_SIZES is cli.MODEL_SIZES


def test_one_user_cache_root(tmp_path, monkeypatch):
    monkeypatch.delenv("GPT2_MODELS_DIR", raising=False)
    monkeypatch.delenv("TOKENIZER_CACHE_DIR", raising=False)
    monkeypatch.setattr(models_dir, "CHECKOUT_MODELS_DIR", tmp_path / "not-a-checkout")  # as an installed package
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for xdg, root in ((str(tmp_path / "xdg"), tmp_path / "xdg"), (None, tmp_path / "home" / ".cache"),
                      ("", tmp_path / "home" / ".cache"), ("relative/cache", tmp_path / "home" / ".cache")):
        if xdg is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        assert user_cache.user_cache_root() == root
        assert user_cache.cache_dir() == root / "gpt2-tokenizer"
        assert models_dir.default_models_dir() == root / "gpt2-numpy" / "models"


def test_a_user_without_a_home_folder_gets_a_cache_folder_of_their_own(tmp_path, monkeypatch, capsys):
    """No $HOME and no entry in the passwd database (a container run as a uid of its own): every command stopped
    with a traceback ("Could not determine home directory"), gpt2 --help too. The cache goes in the temporary
    folder, in a folder this user alone may write; one that another user made, or may write, is never read."""
    import pwd
    import stat
    import tempfile

    from tokenizer.cli import main as tokenizer_main

    for name in ("HOME", "XDG_CACHE_HOME", "TOKENIZER_CACHE_DIR", "GPT2_MODELS_DIR"):
        monkeypatch.delenv(name, raising=False)

    def no_such_user(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_such_user)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(models_dir, "CHECKOUT_MODELS_DIR", tmp_path / "not-a-checkout")  # as an installed package
    root = tmp_path / f"gpt2-numpy-cache-{os.getuid()}"
    assert user_cache.user_cache_root() == root and stat.S_IMODE(root.stat().st_mode) == 0o700
    assert models_dir.default_models_dir() == root / "gpt2-numpy" / "models"
    assert tokenizer_main(["encode", "hi", "--encoding", "cl100k_base"], prog="gpt2-tokenizer") == 0
    assert capsys.readouterr().out == "6151\n"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"], prog="gpt2")
    assert exit_.value.code == 0 and str(root / "gpt2-numpy" / "models") in " ".join(capsys.readouterr().out.split())

    root.chmod(0o777)  # as if another user had made it first, for everyone to write
    own = user_cache.user_cache_root()
    assert own != root and own.parent == tmp_path and stat.S_IMODE(own.stat().st_mode) == 0o700
    assert user_cache.user_cache_root() == own  # one folder for the whole process

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))  # nowhere to make one: no cache
    assert user_cache.user_cache_root() == Path(os.devnull) / "gpt2-numpy-cache"
    assert tokenizer_main(["encode", "hi", "--encoding", "o200k_base"], prog="gpt2-tokenizer") == 0
    assert capsys.readouterr().out == "3686\n"


def test_a_tilde_that_names_no_home_folder_is_kept_as_typed_as_a_shell_does(tmp_path, monkeypatch, capsys):
    """"~nobody-here/..." (an unknown user, or no home folder at all): pathlib's expanduser raised RuntimeError, a
    traceback from gpt2 --help, --model, --save_hf and, through $XDG_CACHE_HOME, every gpt2-tokenizer command. A
    shell keeps such a word as typed; so does each of them now."""
    from tokenizer.cli import main as tokenizer_main

    unknown = "~no-such-user-s62"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setattr(models_dir, "CHECKOUT_MODELS_DIR", tmp_path / "not-a-checkout")  # as an installed package
    monkeypatch.delenv("TOKENIZER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", unknown)  # not an absolute path: ~/.cache, by the XDG rule
    assert user_cache.user_cache_root() == tmp_path / "home" / ".cache"
    assert tokenizer_main(["encode", "hi"], prog="gpt2-tokenizer") == 0 and capsys.readouterr().out == "5303\n"

    monkeypatch.setenv("GPT2_MODELS_DIR", f"{unknown}/models")
    assert models_dir.default_models_dir() == Path(unknown) / "models"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"], prog="gpt2")
    assert exit_.value.code == 0 and f"default: {unknown}/models" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit) as exit_:
        cli.main(["hi", "--model", f"{unknown}/gpt2"], prog="gpt2")
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "is neither a GPT-2 size" in err and err.count("\n") == 1, err

    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "models"))
    assert cli.main(["--model", "124M", "--save_hf", f"{unknown}/out"], prog="gpt2") == 1  # offline: no model
    err = capsys.readouterr().err
    assert err.startswith("gpt2: error: could not download") and err.count("\n") == 1, err


def test_both_folder_variables_expand_a_quoted_tilde(tmp_path, monkeypatch):
    """A "~" that reached the program unexpanded (quoted, or from a Dockerfile's ENV) means the home folder in both
    variables, never a folder named "~" inside the current one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", "~/tokenizer-cache")
    monkeypatch.setenv("GPT2_MODELS_DIR", "~/gpt2-models")
    assert user_cache.cache_dir() == tmp_path / "home" / "tokenizer-cache"
    assert models_dir.default_models_dir() == tmp_path / "home" / "gpt2-models"


# ---- one GPT-2 Encoding ---------------------------------------------------------------------------------------

def test_gpt2_files_get_the_shared_encoding_and_other_files_their_own(tmp_path):
    shared = get_encoding("gpt2")
    assert gpt2_encoder.get_encoder("124M", tmp_path).encoding is shared  # no files: the packaged ones
    copy = tmp_path / "copy"
    shutil.copytree(gpt2_encoder.PACKAGED, copy)
    assert gpt2_encoder.holds_gpt2_vocabulary(copy)
    assert gpt2_encoder.get_encoder("copy", tmp_path).encoding is shared
    # another vocabulary (one merge): an Encoding of its own
    other = tmp_path / "other"
    other.mkdir()
    byte_strs = bytes_to_unicode()
    table = {byte_strs[b]: b for b in range(256)} | {"ab": 256, "<|endoftext|>": 257}
    (other / "encoder.json").write_text(json.dumps(table), encoding="utf-8")
    (other / "vocab.bpe").write_text("#version: 0.2\na b\n", encoding="utf-8")
    assert not gpt2_encoder.holds_gpt2_vocabulary(other)
    own = gpt2_encoder.get_encoder("other", tmp_path)
    assert own.encoding is not shared and own.encode("abc") == [256, ord("c")]


def test_the_token_bytes_of_the_stream_are_the_encodings(monkeypatch):
    # gpt2 --stream and --score ask the Encoding for a token's bytes: no spelling of their own
    assert not hasattr(cli, "token_bytes")
    encoder = gpt2_encoder.get_encoder("124M", Path("/nonexistent"))
    ids = encoder.encode("a é 🙂 z")
    assert "".join(cli.decode_stream(encoder, ids)) == "a é 🙂 z"
    asked = []
    monkeypatch.setattr(type(encoder.encoding), "decode_single_token_bytes",
                        lambda self, token: asked.append(token) or b"?")
    assert "".join(cli.decode_stream(encoder, ids)) == "?" * len(ids) and asked == ids
