"""The output rule (tokenizer/outputs.py) and every writer that follows it: ``encode-file``, ``encode-dataset``,
``train`` (its folder and its ``DIR.checkpoint``), :meth:`Encoding.save` and ``gpt2 --save_hf``. Each case of
issue 42 is reproduced here: a device or FIFO as the output (item 1), an empty path (2), a file where a folder
is meant (7), a place that cannot be written (9), an existing output without ``--force``, a failed
``encode-dataset`` that left an empty manifest, ``--save_hf``'s folder mode and its "wrote" line (12), and
Ctrl-C in ``train`` after the tokenizer is saved (8). Devices and FIFOs are made here, in ``tmp_path``; the
machine's own ``/dev/null`` is never an output of these tests. The commands run in this process (cheap); the
subprocess runs of test_cli.py show the same commands from outside."""

from __future__ import annotations

import doctest
import io
import json
import os
import socket
import stat
import sys

import numpy as np
import pytest

import tokenizer.cli
from conftest import PROG
from gpt2_numpy import checkpoints
from gpt2_numpy import cli as gpt2_cli
from gpt2_numpy.encoder import get_encoder
from test_loading import tiny_params
from tokenizer import get_encoding, outputs
from tokenizer.encoding import Encoding
from tokenizer.jobs.sharded import encode_dataset

TEXT = "low lower lowest newer newest wider " * 40


def run(capsysbinary, *argv) -> tuple[int, bytes, str]:
    """``python -m tokenizer *argv`` in this process: (status, stdout bytes, stderr); a mistake is one line."""
    try:
        status = tokenizer.cli.main(list(argv), prog=PROG)
    except SystemExit as e:
        status = e.code
    out, err = capsysbinary.readouterr()
    err = err.decode()
    if status == 2:
        assert err.count("\n") == 1 and err.startswith(f"{PROG}: error: ") and "Traceback" not in err, err
    return status, out, err


def special_files(folder) -> dict:
    """A FIFO, a socket and (as root, who may make one) a character device like /dev/null, made in ``folder``."""
    made = {}
    os.mkfifo(folder / "fifo")
    made["fifo"] = folder / "fifo"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock"))
    sock.close()
    made["sock"] = folder / "sock"
    if os.geteuid() == 0:
        os.mknod(folder / "mynull", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        made["mynull"] = folder / "mynull"
    return made


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """``tmp_path`` as the current folder, with a small text in it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    return tmp_path


def tiny_encoding() -> Encoding:
    """256 bytes and one merge: quick to save."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"lo"}
    return Encoding.from_vocab_merges(vocab, [(b"l", b"o")], name="tiny")


def listing(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---- the rule itself --------------------------------------------------------------------------------------


def test_devices_fifos_and_sockets_are_refused_and_stay_what_they_were(workdir, capsysbinary):
    """Item 1: ``encode-file --out mynull`` replaced the device with a regular file."""
    made = special_files(workdir)
    for name, path in made.items():
        kind = stat.S_IFMT(path.lstat().st_mode)
        status, out, err = run(capsysbinary, "encode-file", "in.txt", "--out", name)
        assert (status, out) == (2, b"") and f"--out {name} is a" in err and "not a regular file" in err, err
        assert "redirect standard output to it" in err
        for command in (["train", "--input", "in.txt", "--vocab_size", "260"], ["encode-dataset", "in.txt"]):
            status, _, err = run(capsysbinary, *command, "--out", name)
            assert status == 2 and "not a folder" in err, err
        with pytest.raises(ValueError, match="not a folder"):
            tiny_encoding().save(path)
        assert stat.S_IFMT(path.lstat().st_mode) == kind
    assert listing(workdir) == sorted(["in.txt", *made])


def test_an_empty_path_is_refused_not_the_current_folder(workdir, capsysbinary):
    """Item 2: ``--out ''`` wrote into the current folder (or failed with "PosixPath('.') has an empty name")."""
    for command in (["encode-file", "in.txt"], ["encode-dataset", "in.txt"],
                    ["train", "--input", "in.txt", "--vocab_size", "260"]):
        status, _, err = run(capsysbinary, *command, "--out", "")
        assert status == 2 and "--out '': an empty path" in err, err
    with pytest.raises(ValueError, match="empty"):
        tiny_encoding().save("")
    with pytest.raises(SystemExit, match="2"):  # gpt2's mistakes are argparse's exits
        gpt2_cli.main(["--save_hf", ""])
    assert "--save_hf '': an empty path" in capsysbinary.readouterr().err.decode()
    assert listing(workdir) == ["in.txt"]


def test_a_symlink_is_written_through(workdir, capsysbinary):
    """The output lands where the link points (a bigger disk, say), and the link stays a link."""
    (workdir / "disk").mkdir()
    os.symlink("disk/ids.bin", workdir / "ids.bin")  # dangling until written
    assert run(capsysbinary, "encode-file", "in.txt", "--out", "ids.bin")[0] == 0
    assert (workdir / "ids.bin").is_symlink()
    ids = np.fromfile(workdir / "disk" / "ids.bin", dtype="<u2").tolist()
    assert ids == get_encoding("gpt2").encode(TEXT)
    assert run(capsysbinary, "encode-file", "in.txt", "--out", "ids.bin")[0] == 2  # it exists now
    os.symlink("disk", workdir / "tok")
    tiny_encoding().save(workdir / "tok")
    assert (workdir / "tok").is_symlink() and (workdir / "disk" / "vocab.bpe").is_file()


def test_a_folder_where_a_file_goes_and_the_reverse_are_refused_before_any_work(workdir, capsysbinary, monkeypatch):
    """Item 7 and 9: ``train --out de.txt`` trained fully, then failed naming an internal function and left
    ``de.txt.checkpoint/``; ``encode-file --out emptydir`` failed with [Errno 21] after all the encoding."""
    def no_work(*args, **kwargs):
        raise AssertionError("the output is checked before any work")

    monkeypatch.setattr(tokenizer.cli, "train_bpe", no_work)
    monkeypatch.setattr(tokenizer.jobs.dataset, "open_engine", no_work)
    (workdir / "emptydir").mkdir()
    status, _, err = run(capsysbinary, "encode-file", "in.txt", "--out", "emptydir")
    assert status == 2 and "--out emptydir is a folder; name a file" in err
    status, _, err = run(capsysbinary, "train", "--input", "in.txt", "--vocab_size", "260", "--out", "in.txt")
    assert status == 2 and "--out in.txt is a file" in err and "save_encoding" not in err
    (workdir / "tok.checkpoint").write_text("")  # where train keeps its state: a file is in the way
    status, _, err = run(capsysbinary, "train", "--input", "in.txt", "--vocab_size", "260", "--out", "tok")
    assert status == 2 and "--out tok: its state folder tok.checkpoint is a file" in err, err
    assert listing(workdir) == ["emptydir", "in.txt", "tok.checkpoint"]


def test_a_place_that_cannot_be_written_is_named_before_any_work(workdir, capsysbinary):
    """Item 9: raw ``[Errno 2] ... '/proc/tk.checkpoint'`` and ``'/proc/.hf-3x7m_43q'``."""
    for command in (["encode-file", "in.txt"], ["encode-dataset", "in.txt"],
                    ["train", "--input", "in.txt", "--vocab_size", "260"]):
        status, _, err = run(capsysbinary, *command, "--out", "/proc/tk")
        assert status == 2 and err.endswith("--out /proc/tk: cannot write in /proc (No such file or directory); "
                                            "choose another place\n"), err
    with pytest.raises(SystemExit, match="2"):
        gpt2_cli.main(["--save_hf", "/proc/hf"])
    assert "--save_hf /proc/hf: cannot write in /proc" in capsysbinary.readouterr().err.decode()
    (workdir / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="file is not a folder"):
        outputs.check_file(workdir / "file" / "x.bin")
    assert listing(workdir) == ["file", "in.txt"]


def test_an_existing_output_needs_force_or_overwrite_everywhere(workdir, capsysbinary):
    """Item 12: ``encode-file`` and ``Encoding.save`` wrote over an existing output silently, ``train`` did not."""
    (workdir / "in.bin").write_bytes(b"precious")
    status, _, err = run(capsysbinary, "encode-file", "in.txt")
    assert status == 2 and "the output in.bin already exists; pass --force to replace it" in err
    assert (workdir / "in.bin").read_bytes() == b"precious"
    assert run(capsysbinary, "encode-file", "in.txt", "--force")[0] == 0
    assert np.fromfile(workdir / "in.bin", dtype="<u2").tolist() == get_encoding("gpt2").encode(TEXT)

    enc = tiny_encoding()
    enc.save("tok", format="hf")
    (workdir / "tok" / "README").write_text("mine")
    with pytest.raises(FileExistsError, match=r"tok already holds a tokenizer \(tokenizer.json\); pass "
                       "overwrite=True to replace it"):
        enc.save("tok")
    enc.save("tok", overwrite=True)  # the hf file goes (it would be loaded first); other files stay
    assert listing(workdir / "tok") == ["README", "encoder.json", "vocab.bpe"]
    assert not [p for p in workdir.iterdir() if p.name.startswith(".")]  # no hidden partial left


def test_docstring_examples():
    result = doctest.testmod(outputs)
    assert result.attempted >= 2 and result.failed == 0


def test_written_beside_and_renamed_nothing_left_on_failure_or_ctrl_c(tmp_path):
    target = tmp_path / "a" / "b" / "out.bin"
    for error in (ValueError("bad input"), KeyboardInterrupt()):
        with pytest.raises(type(error)):
            with outputs.replaced_file(target) as out:
                out.write(b"half")
                assert listing(target.parent)[0].startswith(".out.bin.")  # a hidden sibling, not the output
                raise error
        assert listing(tmp_path) == []  # the folders made for it are taken back too
        with pytest.raises(type(error)):
            with outputs.replaced_folder_files(tmp_path / "tok") as partial:
                (partial / "vocab.bpe").write_text("half")
                raise error
        assert listing(tmp_path) == []
    with outputs.replaced_folder_files(tmp_path / "tok") as partial:
        (partial / "vocab.bpe").write_text("whole")
    assert listing(tmp_path) == ["tok"] and (tmp_path / "tok" / "vocab.bpe").read_text() == "whole"
    assert stat.S_IMODE((tmp_path / "tok").stat().st_mode) == 0o777 & ~current_umask()
    (tmp_path / "tok" / "README").write_text("mine")
    with pytest.raises(KeyboardInterrupt):  # into an existing folder: its files stay as they were
        with outputs.replaced_folder_files(tmp_path / "tok") as partial:
            (partial / "vocab.bpe").write_text("half")
            raise KeyboardInterrupt
    assert listing(tmp_path / "tok") == ["README", "vocab.bpe"] and (tmp_path / "tok" / "vocab.bpe").read_text() == \
        "whole"
    with outputs.replaced_folder_files(tmp_path / "tok", stale=lambda folder: ["vocab.bpe"]) as partial:
        (partial / "tokenizer.json").write_text("{}")
    assert listing(tmp_path / "tok") == ["README", "tokenizer.json"] and listing(tmp_path) == ["tok"]


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    # encode-file --force over a file made read-only or group-writable: the file that replaces it is so too
    target = tmp_path / "out.bin"
    for mode in (0o444, 0o664, 0o600):
        target.write_bytes(b"old")
        target.chmod(mode)
        with outputs.replaced_file(target) as out:
            out.write(b"new")
        assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == mode
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.bpe").write_text("old")
    (tmp_path / "tok" / "vocab.bpe").chmod(0o640)
    with outputs.replaced_folder_files(tmp_path / "tok") as partial:
        (partial / "vocab.bpe").write_text("new")
        (partial / "encoder.json").write_text("{}")
    assert stat.S_IMODE((tmp_path / "tok" / "vocab.bpe").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "tok" / "encoder.json").stat().st_mode) == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_encode_file_out_dash_writes_the_ids_to_stdout_and_the_summary_to_stderr(workdir, capsysbinary,
                                                                                   monkeypatch):
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))  # a pipe, not a terminal
    status = tokenizer.cli.main(["encode-file", "in.txt", "--out", "-"], prog=PROG)
    ids = np.frombuffer(sys.stdout.buffer.getvalue(), dtype="<u2").tolist()
    assert status == 0 and ids == get_encoding("gpt2").encode(TEXT)
    assert capsysbinary.readouterr().err.decode().startswith("stdout: ")
    assert listing(workdir) == ["in.txt"]


def test_a_failed_encode_dataset_leaves_no_folder_and_no_empty_manifest(workdir):
    """Item 12: a failed ``encode-dataset`` left DIR with an empty manifest."""
    (workdir / "bad.txt").write_bytes(b"ok \xff")
    with pytest.raises(ValueError, match="byte 3"):
        encode_dataset(["bad.txt"], "out/ids", workers=1, progress=False)
    assert listing(workdir) == ["bad.txt", "in.txt"]
    (workdir / "mine").mkdir()
    (workdir / "mine" / "notes.txt").write_text("")
    with pytest.raises(FileExistsError, match=r"mine already holds files but no manifest of encode-dataset "
                       r"\(notes.txt\); pass overwrite=True to write into it"):
        encode_dataset(["in.txt"], "mine", workers=1, progress=False)
    encode_dataset(["in.txt"], "mine", workers=1, progress=False, overwrite=True)
    assert listing(workdir / "mine") == ["in.bin", "manifest.json", "notes.txt"]


# ---- train: its checkpoint, and Ctrl-C -------------------------------------------------------------------

TRAIN = ["train", "--input", "in.txt", "--vocab_size", "262", "--out", "tok", "--num_workers", "1"]
KEPT = f"{PROG}: interrupted; the training state is kept in tok.checkpoint: run the same command with --resume " \
       "to continue\n"


def test_ctrl_c_after_the_tokenizer_is_saved_says_so(workdir, capsysbinary, monkeypatch):
    """Item 8: Ctrl-C while the training text is encoded again for the summary said "interrupted" alone."""
    def ctrl_c(*args, **kwargs):
        assert (workdir / "tok" / "vocab.bpe").is_file()  # the summary comes after the save
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer.cli.dataset, "file_stats", ctrl_c)
    status, out, err = run(capsysbinary, *TRAIN)
    assert (status, out) == (130, b"")
    assert err == f"{PROG}: interrupted; the tokenizer is saved in tok; only the summary was cut short\n"
    assert listing(workdir) == ["in.txt", "tok"] and listing(workdir / "tok") == ["encoder.json", "vocab.bpe"]


def test_the_resume_hint_appears_whenever_a_state_is_kept_and_never_otherwise(workdir, capsysbinary, monkeypatch):
    import tokenizer.saving

    def ctrl_c_while_saving(*args, **kwargs):  # the merges are learned and kept: resuming finishes at once
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer.cli, "save_encoding", ctrl_c_while_saving)
    assert run(capsysbinary, *TRAIN)[::2] == (130, KEPT)
    assert listing(workdir) == ["in.txt", "tok.checkpoint"]

    monkeypatch.setattr(tokenizer.cli, "save_encoding", tokenizer.saving.save_encoding)
    status, _, err = run(capsysbinary, *TRAIN)  # a kept state is not thrown away without a word
    assert status == 2 and "tok.checkpoint holds the training state of a run that stopped: pass --resume" in err
    assert run(capsysbinary, *TRAIN, "--resume")[0] == 0
    assert listing(workdir) == ["in.txt", "tok"]

    def ctrl_c_while_keeping(*args, checkpoint, **kwargs):  # counted, but the state is not whole yet
        (checkpoint / "counts.pickle").write_bytes(b"")
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer.cli, "train_bpe", ctrl_c_while_keeping)
    train_elsewhere = [*TRAIN[:-3], "runs/tok2", *TRAIN[-2:]]
    assert run(capsysbinary, *train_elsewhere)[::2] == (130, f"{PROG}: interrupted\n")
    assert listing(workdir) == ["in.txt", "tok"]  # no half state, no runs/ folder made for it


# ---- gpt2 --save_hf ---------------------------------------------------------------------------------------


def test_save_hf_follows_the_umask_says_wrote_on_stdout_and_needs_force(tmp_path, capsys):
    """Item 12: the folder was 0700 (mkdtemp's mode) and "wrote DIR" went to stderr."""
    hparams = {"n_vocab": 50257, "n_ctx": 8, "n_embd": 4, "n_head": 1, "n_layer": 1}
    encoder = get_encoder("124M", tmp_path / "models")
    checkpoints.save_hf(tmp_path / "a", encoder, hparams, tiny_params())
    b = tmp_path / "b"
    assert gpt2_cli.main(["--model", str(tmp_path / "a"), "--save_hf", str(b)]) == 0
    assert capsys.readouterr().out == f"wrote {b}\n"
    assert stat.S_IMODE(b.stat().st_mode) == 0o777 & ~current_umask()
    assert all((b / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
               for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt"))
    assert json.loads((b / "config.json").read_text())["n_embd"] == 4
    with pytest.raises(SystemExit, match="2"):
        gpt2_cli.main(["--model", str(tmp_path / "a"), "--save_hf", str(b)])
    assert "already holds a model (config.json, model.safetensors, vocab.json, merges.txt); pass --force" in \
        capsys.readouterr().err
    (b / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="2"):
        gpt2_cli.main(["--force", "Hello"])
    assert "--force goes with --save_hf, which is not given" in capsys.readouterr().err
    checkpoints.save_hf(b, encoder, hparams, tiny_params(), overwrite=True)  # what --force does
    assert sorted(p.name for p in b.iterdir()) == ["config.json", "merges.txt", "model.safetensors", "notes.txt",
                                                   "vocab.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_found_in_review_each_a_destination_told_before_any_work(workdir, capsysbinary, monkeypatch):
    """A trailing slash names a folder; a shard's own output that is a FIFO or a folder; the destination before a
    vocabulary that would have to be downloaded; a state folder holding files of the user's is never removed."""
    def no_work(*args, **kwargs):
        raise AssertionError("the output is checked before any work")

    status, _, err = run(capsysbinary, "encode-file", "in.txt", "--out", "newdir/")
    assert status == 2 and "--out newdir/ names a folder" in err and not (workdir / "newdir").exists()
    monkeypatch.setattr(tokenizer.cli, "open_encoding", no_work)  # as a download would come first
    (workdir / "exists.bin").write_bytes(b"")
    status, _, err = run(capsysbinary, "encode-file", "in.txt", "--out", "exists.bin", "--encoding", "cl100k_base")
    assert status == 2 and "already exists" in err
    (workdir / "data").mkdir()
    (workdir / "data" / "notes.txt").write_text("mine", encoding="utf-8")
    status, _, err = run(capsysbinary, "encode-dataset", "in.txt", "--out", "data")
    assert status == 2 and "files but no manifest" in err
    monkeypatch.undo()
    monkeypatch.chdir(workdir)
    (workdir / "ds").mkdir()
    os.mkfifo(workdir / "ds" / "in.bin")  # where the shard of in.txt goes
    status, _, err = run(capsysbinary, "encode-dataset", "in.txt", "--out", "ds", "--force")
    assert status == 2 and "FIFO" in err and stat.S_ISFIFO((workdir / "ds" / "in.bin").lstat().st_mode)
    (workdir / "tok.checkpoint").mkdir()
    (workdir / "tok.checkpoint" / "notes").write_text("precious", encoding="utf-8")
    status, _, err = run(capsysbinary, "train", "--input", "in.txt", "--vocab_size", "260", "--out", "tok")
    assert status == 2 and "holds other files (notes)" in err
    assert (workdir / "tok.checkpoint" / "notes").read_text(encoding="utf-8") == "precious"
    assert not (workdir / "tok").exists()
