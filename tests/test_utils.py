"""Tests for gpt2_numpy/checkpoints.py (picoGPT's utils.py): downloading a GPT-2 checkpoint and reading it without
TensorFlow, and gpt2_numpy/models_dir.py, the rule for where it goes.

A tiny checkpoint in OpenAI's exact format (tests/tiny_checkpoint.py) stands in for the real 500 MB
one; it is written once per session because importing TensorFlow takes seconds. Downloads come from
a local HTTP server (tests/conftest_download.py). In-process tests replace the encoder with a stub so they
exercise only the checkpoint code; the warm-start test runs the real one in a fresh interpreter, through the
checkout's utils.py.
"""

import errno
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # let `import gpt2_numpy` work however pytest was started
    sys.path.insert(0, str(ROOT))

import gpt2_numpy.encoder  # noqa: E402
from gpt2_numpy import checkpoints, models_dir  # noqa: E402
from tokenizer import command_line, download  # noqa: E402
from tokenizer.download import DownloadError  # noqa: E402
from conftest import interrupt  # noqa: E402
from conftest_download import file_server  # noqa: E402,F401 - a fixture, used by name
from tiny_checkpoint import write_tiny_checkpoint  # noqa: E402

SIZE = "124M"  # served under the real name; the files inside are tiny


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """(model_dir, params) of a tiny checkpoint shared by every test; copy it before changing it."""
    model_dir = tmp_path_factory.mktemp("tiny") / SIZE
    return model_dir, write_tiny_checkpoint(model_dir)


@pytest.fixture
def stub_encoder(monkeypatch):
    monkeypatch.setattr(gpt2_numpy.encoder, "get_encoder",
                        lambda model_name, models_dir: ("stub encoder", model_name, str(models_dir)))


@pytest.fixture
def served(file_server, tiny, monkeypatch):
    """The tiny checkpoint's files, served where download_gpt2_files looks for GPT-2 124M."""
    model_dir, _ = tiny
    for name in checkpoints.CHECKPOINT_FILES:
        path = model_dir / name
        # The tiny checkpoint has no .meta graph; nothing reads it, but the real release has one.
        body = path.read_bytes() if path.exists() else b"placeholder meta graph\n"
        file_server.files[f"/gpt-2/models/{SIZE}/{name}"] = body
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    return file_server


@pytest.fixture
def conversions(monkeypatch):
    """The verify_data flag of every checkpoint read (still doing the real work)."""
    calls = []
    read = checkpoints.read_checkpoint

    def recording(prefix, *, verify_data, **options):
        calls.append(verify_data)
        return read(prefix, verify_data=verify_data, **options)

    monkeypatch.setattr(checkpoints, "read_checkpoint", recording)
    return calls


def assert_same_params(actual, expected):
    assert actual.keys() == expected.keys()
    assert len(actual["blocks"]) == len(expected["blocks"])
    pairs = [(actual["wte"], expected["wte"]), (actual["wpe"], expected["wpe"])]
    pairs += _leaf_pairs(actual["ln_f"], expected["ln_f"])
    for got_block, want_block in zip(actual["blocks"], expected["blocks"]):
        pairs += _leaf_pairs(got_block, want_block)
    for got, want in pairs:
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


def _leaf_pairs(got, want):
    assert got.keys() == want.keys()
    pairs = []
    for key in want:
        if isinstance(want[key], dict):
            pairs += _leaf_pairs(got[key], want[key])
        else:
            pairs.append((got[key], want[key]))
    return pairs


def test_tiny_checkpoint_has_openai_layout(tiny):
    import tensorflow as tf

    model_dir, params = tiny
    assert tf.train.latest_checkpoint(str(model_dir)) == str(model_dir / "model.ckpt")
    assert checkpoints.latest_checkpoint(model_dir) == model_dir / "model.ckpt"  # the TF-free twin agrees
    shapes = dict(tf.train.list_variables(str(model_dir / "model.ckpt")))
    assert shapes["model/wte"] == [50257, 16]
    assert shapes["model/h1/attn/c_attn/w"] == [1, 16, 48]
    assert shapes["model/h0/mlp/c_proj/w"] == [1, 64, 16]
    assert params["blocks"][0]["mlp"]["c_proj"]["w"].shape == (64, 16)


def test_latest_checkpoint_needs_the_index_file(tiny, tmp_path):
    assert checkpoints.latest_checkpoint(tmp_path) is None
    shutil.copy(tiny[0] / "checkpoint", tmp_path)
    assert checkpoints.latest_checkpoint(tmp_path) is None  # names model.ckpt, whose .index is absent


def test_conversion_round_trip_is_exact(tiny):
    model_dir, params = tiny
    hparams = json.loads((model_dir / "hparams.json").read_text())
    assert_same_params(checkpoints.load_gpt2_params_from_tf_ckpt(model_dir / "model.ckpt", hparams), params)


def test_shape_mismatch_names_variable_and_both_shapes(tiny):
    model_dir, _ = tiny
    hparams = json.loads((model_dir / "hparams.json").read_text())
    with pytest.raises(ValueError) as info:
        checkpoints.load_gpt2_params_from_tf_ckpt(model_dir / "model.ckpt", {**hparams, "n_ctx": 64})
    message = str(info.value)
    assert "model/wpe" in message and "[32, 16]" in message and "[64, 16]" in message


@pytest.mark.parametrize(
    "n_layer, named", [(3, "missing variables ['model/h2/"), (1, "unexpected variables ['model/h1/")]
)
def test_layer_count_mismatch_names_the_variables(tiny, n_layer, named):
    model_dir, _ = tiny
    hparams = json.loads((model_dir / "hparams.json").read_text())
    with pytest.raises(ValueError, match=named.replace("[", r"\[")):
        checkpoints.load_gpt2_params_from_tf_ckpt(model_dir / "model.ckpt", {**hparams, "n_layer": n_layer})


def test_unknown_model_size_lists_the_valid_ones(tmp_path):
    for call in (checkpoints.download_gpt2_files, checkpoints.load_encoder_hparams_and_params):
        with pytest.raises(ValueError) as info:
            call("125M", tmp_path)
        assert "125M" in str(info.value)
        assert all(size in str(info.value) for size in ("124M", "355M", "774M", "1558M"))
    assert list(tmp_path.iterdir()) == []


def test_download_gpt2_files_fetches_all_seven(served, tmp_path, capsys):
    """Off a terminal (a log), each file says one line as it starts and one as it ends: no bar's carriage returns."""
    checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    for name in checkpoints.CHECKPOINT_FILES:
        assert (tmp_path / SIZE / name).read_bytes() == served.files[f"/gpt-2/models/{SIZE}/{name}"]
    assert len(served.requests) == 7
    said = capsys.readouterr().err
    assert "\r" not in said
    lines = said.splitlines()
    assert [line.split(" (")[0] for line in lines[:-1]] == [
        f"{what} {SIZE}/{name}{where}" for name in checkpoints.CHECKPOINT_FILES
        for what, where in [("downloading", f" from {served.url}/gpt-2/models/{SIZE}/{name}"), ("downloaded", "")]]
    # and, once, where they are: the lines above name only the size, and the default folder is not one to guess
    size = sum(len(served.files[f"/gpt-2/models/{SIZE}/{name}"]) for name in checkpoints.CHECKPOINT_FILES)
    assert lines[-1] == f"saved GPT-2 {SIZE} in {tmp_path / SIZE} ({size:,} bytes); later runs read it from there"
    checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    assert capsys.readouterr().err == "" and len(served.requests) == 7  # all there: nothing fetched, nothing said


def test_a_file_where_a_sizes_folder_goes_is_a_mistake_named_before_any_download(served, tmp_path, capsys):
    """models/124M a file (not the folder the size's files go in): one line naming it and what to do, exit 2 from
    the command, nothing asked of the server and the file left as it was (it was 'checkpoint: Not a directory',
    exit 1)."""
    from gpt2_numpy.cli import main

    (tmp_path / SIZE).write_text("not a folder")
    with pytest.raises(ValueError) as info:
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert str(info.value).startswith(f"{tmp_path / SIZE} is not a folder, but GPT-2 {SIZE}'s files go in a folder")
    with pytest.raises(SystemExit) as exit_:  # a mistake in the command line: said before any work
        main(["hello", "--models_dir", str(tmp_path)], prog="gpt2")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"gpt2: error: {tmp_path / SIZE} is not a folder"), err
    assert "move it away" in err and served.requests == [] and (tmp_path / SIZE).read_text() == "not a folder"


def test_a_models_folder_that_cannot_be_written_says_so_and_what_to_do(served, tmp_path, monkeypatch, capsys):
    """A download into a folder the user may not write (a read-only $GPT2_MODELS_DIR) fails with one line that names
    the folder and how to choose another, not a bare PermissionError from deep inside the download; and no
    "downloading 124M/checkpoint ..." line before it, for a file that could not even be opened."""
    model_dir = tmp_path / "read-only" / SIZE
    real_mkdir = Path.mkdir

    def refused_mkdir(path, *args, **kwargs):  # as for a user without write permission (tests may run as root)
        if Path(path).is_relative_to(tmp_path / "read-only"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refused_mkdir)
    with pytest.raises(OSError) as info:
        checkpoints.download_gpt2_files(SIZE, model_dir)
    message = command_line.error_message(info.value)
    assert f"cannot save GPT-2 {SIZE}'s files in {model_dir}" in message and "Permission denied" in message
    assert "make that folder writable" in message and "$GPT2_MODELS_DIR" in message and "\n" not in message
    assert len(served.requests) == 1  # the first file's failure ends it: the others would fail the same way
    assert not (tmp_path / "read-only").exists()
    assert capsys.readouterr().err == ""  # (the error is the command's one line)


def test_a_first_loads_crc_check_draws_a_bar_in_bytes_on_a_terminal(tiny, monkeypatch, capsys):
    """Checking every CRC reads the whole data file (seconds for the larger sizes): the check reports each tensor's
    bytes, and a terminal gets a bar over them (after command_line.SLOW_AFTER_SECONDS); a load that skips the
    CRCs, or stderr on no terminal, draws none."""
    from gpt2_numpy import tfcheckpoint
    from tokenizer import command_line

    model_dir, _ = tiny
    prefix = model_dir / "model.ckpt"
    hparams = json.loads((model_dir / "hparams.json").read_text())
    stored = tfcheckpoint.read_checkpoint(prefix)
    reports = []
    tfcheckpoint.read_checkpoint(prefix, checked=lambda n_bytes, total: reports.append((n_bytes, total)))
    assert sorted(n for n, _ in reports) == sorted(array.nbytes for array in stored.values())
    assert {total for _, total in reports} == {sum(array.nbytes for array in stored.values())}
    tfcheckpoint.read_checkpoint(prefix, verify_data=False, checked=lambda *report: pytest.fail("no check"))
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams)
    assert capsys.readouterr().err == ""  # no terminal
    monkeypatch.setattr(command_line, "show_progress", lambda: True)
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0)
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams)
    assert "checking model.ckpt" in capsys.readouterr().err
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams, verify_data=False)
    assert capsys.readouterr().err == ""


def test_off_a_terminal_a_large_crc_check_says_so_in_one_line_at_its_start(tiny, monkeypatch, capsys):
    """A log gets no bar and no timed line (it would differ from run to run): a check of command_line.SLOW_BYTES
    or more (355M and up) is announced by its size, once, as it starts; a smaller one, or one skipped, says
    nothing. SLOW_BYTES lowered to the tiny checkpoint's size stands in for a large model."""
    from gpt2_numpy import tfcheckpoint
    from tokenizer import command_line

    model_dir, _ = tiny
    prefix = model_dir / "model.ckpt"
    hparams = json.loads((model_dir / "hparams.json").read_text())
    n_bytes = sum(array.nbytes for array in tfcheckpoint.read_checkpoint(prefix).values())
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes + 1)
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams)
    assert capsys.readouterr().err == "checking model.ckpt ...\n"
    checkpoints.load_gpt2_params_from_tf_ckpt(prefix, hparams, verify_data=False)
    assert capsys.readouterr().err == ""


def test_cold_load_downloads_and_checks_then_warm_load_skips_the_crcs(
    served, tiny, tmp_path, stub_encoder, conversions, monkeypatch
):
    _, params = tiny
    encoder, hparams, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert encoder == ("stub encoder", SIZE, str(tmp_path))
    assert hparams == {"n_vocab": 50257, "n_ctx": 32, "n_embd": 16, "n_head": 2, "n_layer": 2}
    assert_same_params(loaded, params)
    assert len(served.requests) == 7
    assert (tmp_path / SIZE / "model.ckpt.crc32c-ok.json").is_file()
    assert conversions == [True]

    def forbidden(*args, **kwargs):
        raise AssertionError("a warm start must not download")

    monkeypatch.setattr(checkpoints, "download_gpt2_files", forbidden)
    _, hparams_again, warm = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert conversions == [True, False]
    assert hparams_again == hparams
    assert_same_params(warm, params)
    assert isinstance(warm["wte"], np.memmap) and not warm["wte"].flags.writeable
    assert not list((tmp_path / SIZE).glob(".*"))  # no temporary files left behind


@pytest.fixture
def no_tensorflow(tmp_path):
    """A folder to put first on PYTHONPATH: in it, `import tensorflow` raises ImportError."""
    blocker = tmp_path / "no-tf"
    (blocker / "tensorflow").mkdir(parents=True)
    (blocker / "tensorflow" / "__init__.py").write_text("raise ImportError('tensorflow is blocked in this test')\n")
    return blocker


def test_load_never_imports_tensorflow(served, tiny, tmp_path, no_tensorflow):
    """Cold (download, CRC check) and warm, in a fresh interpreter where `import tensorflow` fails,
    with the project's real encoder.py."""
    blocker = no_tensorflow
    script = (
        "import sys\n"
        "import utils\n"
        "encoder, hparams, params = utils.load_encoder_hparams_and_params('124M', sys.argv[1])\n"
        "assert encoder.encode('Hello world') == [15496, 995], encoder.encode('Hello world')\n"
        "print(type(params['blocks'][1]['attn']['c_attn']['w']).__name__)\n"
    )
    for run in ("cold", "warm"):
        result = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "models")],
            cwd=ROOT,
            env={"PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}", "OPENAIPUBLIC_URL": served.url, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, (run, result.stderr)
        assert result.stdout.split() == ["memmap"]
    assert len(served.requests) == 7  # the warm run downloaded nothing
    assert (tmp_path / "models" / SIZE / "model.ckpt.crc32c-ok.json").is_file()


def test_a_changed_checkpoint_is_checked_again(tiny, tmp_path, stub_encoder, conversions):
    model_dir = tmp_path / SIZE
    shutil.copytree(tiny[0], model_dir)
    checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert conversions == [True, False]

    new_params = write_tiny_checkpoint(model_dir, seed=1)  # same shapes, new weights
    _, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert conversions == [True, False, True]
    assert_same_params(loaded, new_params)
    _, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert conversions == [True, False, True, False]
    assert_same_params(loaded, new_params)


def test_a_damaged_stamp_only_means_checking_again(tiny, tmp_path, stub_encoder, conversions):
    shutil.copytree(tiny[0], tmp_path / SIZE)
    checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    (tmp_path / SIZE / "model.ckpt.crc32c-ok.json").write_text("{damaged")
    _, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert conversions == [True, True]
    assert_same_params(loaded, tiny[1])


def test_a_flipped_byte_in_the_data_is_refused_on_first_load(tiny, tmp_path, stub_encoder):
    model_dir = tmp_path / SIZE
    shutil.copytree(tiny[0], model_dir)
    data = model_dir / "model.ckpt.data-00000-of-00001"
    body = bytearray(data.read_bytes())
    body[len(body) // 2] ^= 0x10
    data.write_bytes(bytes(body))
    with pytest.raises(ValueError, match="data-00000-of-00001 is damaged: tensor model/wte fails its CRC-32C"):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert not (model_dir / "model.ckpt.crc32c-ok.json").exists()


def test_a_data_file_changed_but_given_its_old_time_back_is_checked_again(tiny, tmp_path, stub_encoder):
    """The stamp must not vouch for other bytes of the same size under the old modification time (as cp -p,
    rsync -a or tar leave them): a damaged copy put in place after a first load is still refused."""
    model_dir = tmp_path / SIZE
    shutil.copytree(tiny[0], model_dir)
    checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    data = model_dir / "model.ckpt.data-00000-of-00001"
    body = bytearray(data.read_bytes())
    body[len(body) // 2] ^= 0x10
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(body))
    os.utime(damaged, ns=(data.stat().st_atime_ns, data.stat().st_mtime_ns))
    os.replace(damaged, data)
    with pytest.raises(ValueError, match="data-00000-of-00001 is damaged: tensor model/wte fails its CRC-32C"):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)


def test_a_stamp_that_cannot_be_written_costs_one_plain_line(tiny, tmp_path, stub_encoder, monkeypatch, capsys):
    """A read-only checkpoint folder loads, says why the CRCs will be checked again in one line, and warns of
    nothing (a Python warning is two lines naming this package's source)."""
    shutil.copytree(tiny[0], tmp_path / SIZE)

    def refuse(*args, **kwargs):  # as in a read-only folder (chmod does not stop root, who runs CI)
        raise OSError(30, "Read-only file system", str(tmp_path / SIZE / ".model.ckpt.crc32c-ok.json-tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert_same_params(loaded, tiny[1])
    assert capsys.readouterr().err == (f"the checkpoint's CRCs were checked; {tmp_path / SIZE}/model.ckpt.crc32c-ok"
                                       f".json cannot be written (Read-only file system), so the next load checks "
                                       f"them again\n")
    assert not (tmp_path / SIZE / "model.ckpt.crc32c-ok.json").exists()


def test_ctrl_c_while_the_stamp_is_written_leaves_no_temporary_file(tiny, tmp_path, stub_encoder, monkeypatch):
    shutil.copytree(tiny[0], tmp_path / SIZE)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints.json, "dump", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert [path.name for path in (tmp_path / SIZE).iterdir() if path.name.startswith(".")] == []
    assert not (tmp_path / SIZE / "model.ckpt.crc32c-ok.json").exists()


def test_partial_download_is_completed(served, tiny, tmp_path, stub_encoder):
    model_dir = tmp_path / SIZE
    shutil.copytree(tiny[0], model_dir)
    (model_dir / "vocab.bpe").unlink()  # as if an earlier download stopped near the end
    _, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    assert_same_params(loaded, tiny[1])
    assert (model_dir / "vocab.bpe").read_bytes() == (tiny[0] / "vocab.bpe").read_bytes()
    # Only what was missing was fetched: vocab.bpe and the (unneeded but absent) .meta graph.
    assert sorted(path for path, _ in served.requests) == [
        f"/gpt-2/models/{SIZE}/model.ckpt.meta",
        f"/gpt-2/models/{SIZE}/vocab.bpe",
    ]


def test_corrupt_hparams_json_is_named(tiny, tmp_path, stub_encoder):
    shutil.copytree(tiny[0], tmp_path / SIZE)
    (tmp_path / SIZE / "hparams.json").write_text("{not json")
    with pytest.raises(ValueError, match="hparams.json"):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)
    (tmp_path / SIZE / "hparams.json").write_text('{"n_vocab": 50257}')
    with pytest.raises(ValueError, match="n_ctx"):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)


def test_truncated_checkpoint_data_is_named(tiny, tmp_path, stub_encoder):
    model_dir = tmp_path / SIZE
    shutil.copytree(tiny[0], model_dir)
    data = model_dir / "model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(ValueError, match="model.ckpt"):
        checkpoints.load_encoder_hparams_and_params(SIZE, tmp_path)


def test_gpt2_cli_downloads_the_served_checkpoint_and_generates(served, tiny, tmp_path, no_tensorflow):
    """The user's main command end to end, run from another folder with no --models_dir and TensorFlow
    unimportable: download (local server) into $GPT2_MODELS_DIR, read, encode, generate, decode;
    nothing lands in the cwd."""
    import gpt2

    models, elsewhere = tmp_path / "models", tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{no_tensorflow}{os.pathsep}{ROOT}", "OPENAIPUBLIC_URL": served.url,
           "PYTHONIOENCODING": "utf-8", "GPT2_MODELS_DIR": str(models)}
    command = [sys.executable, str(ROOT / "gpt2.py"), "Alan Turing theorized", "--n_tokens_to_generate", "5"]
    run = subprocess.run(command, cwd=elsewhere, capture_output=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    for name in checkpoints.CHECKPOINT_FILES:
        assert (models / SIZE / name).is_file()
    assert not list((models / SIZE).glob("*.part"))
    assert list(elsewhere.iterdir()) == []
    # the same continuation as generating in-process from the served weights
    _, params = tiny
    encoder = __import__("encoder").get_encoder(SIZE, models)
    expected = encoder.decode(gpt2.generate(encoder.encode("Alan Turing theorized"), params, 2, 5))
    assert run.stdout.decode("utf-8") == expected + "\n"
    # a second run is offline: nothing is downloaded again
    before = len(served.requests)
    rerun = subprocess.run(command, cwd=elsewhere, capture_output=True, env=env, timeout=300)
    assert rerun.returncode == 0 and rerun.stdout == run.stdout
    assert len(served.requests) == before


def last_line(stderr: bytes) -> str:
    return stderr.decode(errors="replace").replace("\r", "\n").strip().splitlines()[-1]  # after progress bars


def test_gpt2_cli_offline_error_is_one_line(file_server, tmp_path):
    """Nothing to download (404): one line naming the URL, every missing file, and where to place them."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAIPUBLIC_URL": file_server.url}
    command = [sys.executable, str(ROOT / "gpt2.py"), "hello", "--models_dir", str(tmp_path / "models")]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, env=env, timeout=300)
    error = run.stderr.decode(errors="replace")
    assert run.returncode == 1 and "Traceback" not in error
    line = last_line(run.stderr)
    assert line.startswith("python gpt2.py: error: could not download 7 of the 7 files of GPT-2 124M")
    assert f"{file_server.url}/gpt-2/models/{SIZE}/" in line and "HTTP 404" in line
    assert all(name in line for name in checkpoints.CHECKPOINT_FILES)
    assert f"place it in {tmp_path / 'models' / SIZE}" in line and "OPENAIPUBLIC_URL" in line
    assert not list((tmp_path / "models").rglob("*.part"))


def test_gpt2_cli_offline_is_one_line_without_progress_bars_or_an_empty_folder(tmp_path):
    """Offline (a refused connection): stderr is the one error line, naming the folder the next run reads, and
    the models folder this run would have made is not left behind empty."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{sock.getsockname()[1]}"
    models = tmp_path / "cache" / "models"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAIPUBLIC_URL": refused, "GPT2_MODELS_DIR": str(models)}
    run = subprocess.run([sys.executable, str(ROOT / "gpt2.py"), "hello"], cwd=tmp_path, capture_output=True,
                         env=env, timeout=300)
    error = run.stderr.decode(errors="replace")
    assert run.returncode == 1 and error.count("\n") == 1 and "\r" not in error, error
    assert error.startswith("python gpt2.py: error: could not download 7 of the 7 files of GPT-2 124M")
    assert f"cannot connect to {refused}" in error and f"place it in {models / SIZE}{os.sep} " in error
    assert not (tmp_path / "cache").exists()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("root", [f"http://127.0.0.1:{free_port()}", "http://nonexistent.invalid"],
                         ids=["connection refused", "unknown host"])
def test_unreachable_server_is_asked_once_and_every_missing_file_named(tmp_path, monkeypatch, root):
    monkeypatch.setenv("OPENAIPUBLIC_URL", root)
    delays = []
    monkeypatch.setattr(download, "_sleep", delays.append)
    model_dir = tmp_path / SIZE
    model_dir.mkdir()
    (model_dir / "hparams.json").write_text("{}")  # already here: kept, not reported
    attempts = []
    real_fetch = download._fetch_into
    monkeypatch.setattr(download, "_fetch_into", lambda url, *rest: attempts.append(url) or real_fetch(url, *rest))
    with pytest.raises(DownloadError) as info:
        checkpoints.download_gpt2_files(SIZE, model_dir)
    assert attempts == [f"{root}/gpt-2/models/{SIZE}/checkpoint"] and delays == []  # once, no retries
    message = str(info.value)
    assert message.startswith("could not download 6 of the 7 files of GPT-2 124M")
    missing = [name for name in checkpoints.CHECKPOINT_FILES if name != "hparams.json"]
    assert f"({', '.join(missing)}: cannot connect to {root}: " in message
    # as get_encoding's error for a vocabulary it cannot reach says it (its message lacked the hint)
    assert "); are you offline? To supply them yourself, fetch each missing file from " in message, message
    assert f"{root}/gpt-2/models/{SIZE}/" in message and str(model_dir) in message
    assert "$OPENAIPUBLIC_URL" in message and "\n" not in message


def test_files_missing_on_the_server_are_reported_together(served, tmp_path):
    del served.files[f"/gpt-2/models/{SIZE}/encoder.json"]
    del served.files[f"/gpt-2/models/{SIZE}/vocab.bpe"]
    with pytest.raises(DownloadError) as info:
        checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    assert str(info.value).startswith("could not download 2 of the 7 files")
    assert "(encoder.json, vocab.bpe: HTTP 404 Not Found). To supply them yourself" in str(info.value)
    assert "offline" not in str(info.value)  # a server that answers is reachable
    assert (tmp_path / SIZE / "model.ckpt.index").is_file()  # the others did arrive


def test_default_models_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "chosen"))
    assert models_dir.default_models_dir() == tmp_path / "chosen"
    monkeypatch.delenv("GPT2_MODELS_DIR")
    assert models_dir.default_models_dir() == ROOT / "models"  # this checkout's own folder, whatever the cwd
    assert (ROOT / "models" / "README.md").is_file()
    # installed as a package: no models/README.md beside the gpt2_numpy folder
    monkeypatch.setattr(models_dir, "CHECKOUT_MODELS_DIR", tmp_path / "site-packages" / "models")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models_dir.default_models_dir() == tmp_path / "xdg" / "gpt2-numpy" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models_dir.default_models_dir() == tmp_path / "home" / ".cache" / "gpt2-numpy" / "models"


def test_a_models_folder_is_a_sizes_subfolder_or_the_folder_named(monkeypatch, tmp_path):
    """checkpoints.model_folder: the one rule the command's --model and --draft, and loading, follow."""
    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "chosen"))
    assert checkpoints.model_folder(SIZE) == tmp_path / "chosen" / SIZE
    assert checkpoints.model_folder(SIZE, tmp_path / "other") == tmp_path / "other" / SIZE
    assert checkpoints.model_folder(str(tmp_path / "mine"), tmp_path / "other") == tmp_path / "mine"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert checkpoints.model_folder("~/gpt2") == tmp_path / "home" / "gpt2"


def test_load_without_models_dir_uses_the_default(tiny, tmp_path, stub_encoder, monkeypatch):
    shutil.copytree(tiny[0], tmp_path / "env models" / SIZE)
    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "env models"))
    encoder, _, loaded = checkpoints.load_encoder_hparams_and_params(SIZE)
    assert encoder == ("stub encoder", SIZE, str(tmp_path / "env models"))
    assert_same_params(loaded, tiny[1])


def test_ctrl_c_during_a_download_is_one_line_and_exit_130(file_server, tiny, tmp_path):
    """SIGINT while the server is slow to answer: one line on stderr, status 130, no file left half-written."""
    file_server.files[f"/gpt-2/models/{SIZE}/checkpoint"] = (tiny[0] / "checkpoint").read_bytes()
    file_server.stall_seconds = 60
    file_server.fault(f"/gpt-2/models/{SIZE}/checkpoint", "stall")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAIPUBLIC_URL": file_server.url}
    models = tmp_path / "models"
    command = [sys.executable, str(ROOT / "gpt2.py"), "hello", "--models_dir", str(models)]
    child = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)
    deadline = time.monotonic() + 60
    while not file_server.requests and time.monotonic() < deadline:  # wait until it is waiting
        time.sleep(0.05)
    out, err = interrupt(child)
    assert file_server.requests, "the child never asked for the file"
    assert child.returncode == 130
    assert b"Traceback" not in err and last_line(err) == "python gpt2.py: interrupted"
    assert [line for line in err.decode().replace("\r", "\n").splitlines() if "interrupted" in line] == \
        ["python gpt2.py: interrupted"]
    assert not (models / SIZE / "checkpoint").exists()


def download_in_a_thread_until_its_data_file(served, folder) -> threading.Thread:
    """A first run downloading SIZE into folder, in a thread, once it is on the data file (its fourth request):
    a second run started then joins the download."""
    first = threading.Thread(target=checkpoints.download_gpt2_files, args=(SIZE, folder))
    first.start()
    deadline = time.monotonic() + 20
    while len(served.requests) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    return first


@pytest.mark.parametrize("path", ["the same", "a symbolic link"])
def test_a_second_run_joining_a_sizes_download_says_it_waits_once(served, tmp_path, capsys, path):
    """A second run that starts while another downloads the same size said its waiting line once per file still to
    come (each file had a lock of its own, and between two files either run could take the next one's): now one
    line for the whole size, naming the other run and the folder, and no file is asked for twice. The folder named
    through a symbolic link (a $GPT2_MODELS_DIR of ~/models linking to it) is the same folder: the lock was the
    path's, so both runs wrote the same files at once."""
    second = tmp_path
    if path == "a symbolic link":
        second = tmp_path.parent / f"{tmp_path.name}-link"
        second.symlink_to(tmp_path, target_is_directory=True)
    served.stall_seconds = 1.0
    for name in ("model.ckpt.data-00000-of-00001", "model.ckpt.index"):  # two files still to come when it joins
        served.fault(f"/gpt-2/models/{SIZE}/{name}", "stall")
    first = download_in_a_thread_until_its_data_file(served, tmp_path / SIZE)
    checkpoints.download_gpt2_files(SIZE, second / SIZE)
    first.join()
    for name in checkpoints.CHECKPOINT_FILES:
        assert (tmp_path / SIZE / name).read_bytes() == served.files[f"/gpt-2/models/{SIZE}/{name}"]
    assert sorted(path for path, _ in served.requests) == sorted(
        f"/gpt-2/models/{SIZE}/{name}" for name in checkpoints.CHECKPOINT_FILES)  # each asked for once
    waiting = [line for line in capsys.readouterr().err.splitlines() if "waiting" in line]
    assert waiting == [f"another run (process {os.getpid()}) is downloading GPT-2 {SIZE} into {second / SIZE}; "
                       "waiting for it to finish ..."], waiting


def test_a_server_failing_every_attempt_costs_its_retries_once_not_once_per_file(served, tmp_path, monkeypatch):
    """A server answering 500 to everything was retried with backoff for each of the seven files: 52 s of silence
    before the error. The first file still gets every retry (a 500 may pass); once it failed through all of them,
    each later file is asked once, and the error still names every file and why."""
    delays = []
    monkeypatch.setattr(download, "_sleep", delays.append)
    for name in checkpoints.CHECKPOINT_FILES:
        served.fault(f"/gpt-2/models/{SIZE}/{name}", *["500"] * 5)
    with pytest.raises(DownloadError) as info:
        checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    assert delays == [0.5, 1.0, 2.0, 4.0]  # the first file's retries, and no one else's
    assert [path.rsplit("/", 1)[1] for path, _ in served.requests] == ["checkpoint"] * 5 + list(
        checkpoints.CHECKPOINT_FILES[1:])
    message = str(info.value)
    assert message.startswith(f"could not download 7 of the 7 files of GPT-2 {SIZE}")
    assert "(checkpoint: HTTP 500 Internal Server Error (after 5 attempts); encoder.json, hparams.json, " in message
    assert "vocab.bpe: HTTP 500 Internal Server Error (after 1 attempt))" in message and "\n" not in message
    assert not (tmp_path / SIZE).exists()


def test_a_disk_filling_up_mid_download_says_so_and_keeps_the_bytes_for_the_next_run(served, tmp_path, monkeypatch):
    """The disk filling up while the weights are written said "make that folder writable" (the advice for a folder
    that refuses writes): now it says to free space, and where the bytes received wait, which the next run resumes
    from; no file is left looking complete."""
    data = "model.ckpt.data-00000-of-00001"
    real_open = open

    class FillingUp:  # a file on a disk with room for its first write only
        def __init__(self, *args):
            self.file, self.written = real_open(*args), False

        def write(self, chunk):
            if self.written:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.written = True
            return self.file.write(chunk)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

    served.files[f"/gpt-2/models/{SIZE}/{data}"] *= 3  # more than one chunk of 1 MiB
    monkeypatch.setattr(download, "open", lambda path, mode: (FillingUp if path.name.startswith(data) else real_open)(
        path, mode), raising=False)
    with pytest.raises(OSError) as info:
        checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    message = command_line.error_message(info.value)
    part = tmp_path / SIZE / f"{data}.part"
    assert message == (f"cannot save GPT-2 {SIZE}'s files in {tmp_path / SIZE}: its disk is full (No space left on "
                       f"device); free some space and run again (the {download.CHUNK_SIZE:,} bytes of {data} received "
                       f"so far are kept in {part.name}, and the next run resumes from them), or choose another models "
                       "folder (--models_dir, $GPT2_MODELS_DIR, or models_dir=)")
    assert part.stat().st_size == download.CHUNK_SIZE and not (tmp_path / SIZE / data).exists()
    monkeypatch.setattr(download, "open", real_open, raising=False)  # space freed
    checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    assert (tmp_path / SIZE / data).read_bytes() == served.files[f"/gpt-2/models/{SIZE}/{data}"]
    assert served.requests_for(f"/gpt-2/models/{SIZE}/{data}")[-1] == f"bytes={download.CHUNK_SIZE}-"


def test_a_vocabulary_file_that_is_not_gpt2s_is_refused_at_download(served, tmp_path):
    """Every size's encoder.json and vocab.bpe are GPT-2's own, whose sha256 the package knows; a server (a mirror)
    sending other bytes that still parse (a vocab.bpe short of its last merges) was saved and used, encoding text
    differently without a word. Now the file is refused with the others' reasons, its bytes deleted."""
    from tokenizer.registry import GPT2_VOCAB_BPE

    whole = served.files[f"/gpt-2/models/{SIZE}/vocab.bpe"]
    served.files[f"/gpt-2/models/{SIZE}/vocab.bpe"] = short = b"\n".join(whole.split(b"\n")[:-100]) + b"\n"
    with pytest.raises(DownloadError) as info:
        checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    message = str(info.value)
    assert message.startswith(f"could not download 1 of the 7 files of GPT-2 {SIZE}")
    actual = hashlib.sha256(short).hexdigest()
    assert (f"(vocab.bpe: its sha256 is {actual}, not GPT-2's {GPT2_VOCAB_BPE.sha256}; the bytes were deleted)"
            in message), message
    assert not (tmp_path / SIZE / "vocab.bpe").exists() and not list((tmp_path / SIZE).glob("*.part"))
    assert (tmp_path / SIZE / "encoder.json").read_bytes() == served.files[f"/gpt-2/models/{SIZE}/encoder.json"]


@pytest.mark.parametrize("given", ["$GPT2_MODELS_DIR", "models_dir="])
def test_a_models_folder_that_is_a_file_is_named_by_the_python_api_too(served, tmp_path, monkeypatch, given):
    """$GPT2_MODELS_DIR (or models_dir=) naming a file, or a path inside one: the gpt2 command said so in one line,
    but load_encoder_hparams_and_params, and picoGPT's gpt2.main through it, stopped on NotADirectoryError from
    deep inside ("...124M/checkpoint"). Now a ValueError names the setting, before any download."""
    import gpt2

    a_file = tmp_path / "models.txt"
    a_file.write_text("not a folder")
    inside = f"lies inside {a_file}, which is not a folder"
    for folder, what in [(a_file, "is not a folder"), (a_file / "inner", inside)]:
        if given == "$GPT2_MODELS_DIR":
            monkeypatch.setenv("GPT2_MODELS_DIR", str(folder))
            calls = [lambda: checkpoints.load_encoder_hparams_and_params(SIZE), lambda: gpt2.main("Hello", 1)]
        else:
            calls = [lambda: checkpoints.load_encoder_hparams_and_params(SIZE, folder),
                     lambda: gpt2.main("Hello", 1, models_dir=str(folder))]
        for call in calls:
            with pytest.raises(ValueError) as info:
                call()
            assert str(info.value) == (f"{given.rstrip('=')} {folder} {what}, but GPT-2 {SIZE}'s files go in a "
                                       f"folder inside it: choose another models folder (--models_dir, "
                                       "$GPT2_MODELS_DIR, or models_dir=)")
    assert served.requests == [] and a_file.read_text() == "not a folder"


def test_a_run_waiting_for_anothers_download_draws_its_progress_on_a_terminal(served, tmp_path, monkeypatch):
    """Waiting for another run's download (1558M: 6 GB) said one line and then nothing for minutes: on a terminal a
    bar (bar_if_slow: drawn once the wait is slow) counts the bytes of the file that run is on, out of that file's
    size (the server's Content-Length, said by the other run beside its lock), where the bar had no total."""
    data = "model.ckpt.data-00000-of-00001"
    served.files[f"/gpt-2/models/{SIZE}/{data}"] *= 3  # more than one chunk of 1 MiB
    size = len(served.files[f"/gpt-2/models/{SIZE}/{data}"])
    bars, seen = [], []

    class Bar:  # bar_if_slow's bar, as it is used
        def __init__(self, **options):
            self.options, self.desc, self.total, self.closed = options, options["desc"], options["total"], False
            self.n = options.get("initial", 0)
            bars.append(self)

        def set_description_str(self, desc, refresh=True):
            self.desc = desc

        def update(self, n):
            self.n += n
            seen.append((self.desc, self.n, self.total))

        def close(self):
            self.closed = True

    monkeypatch.setattr(command_line, "show_progress", lambda: True)
    monkeypatch.setattr(command_line, "bar_if_slow", lambda **options: Bar(**options))
    monkeypatch.setattr(download, "WAIT_POLL_SECONDS", 0.01)
    first = []
    counting = download._LazyBar.update
    on_data = (f"GPT-2 {SIZE}'s {data}, by the other run", download.CHUNK_SIZE, size)

    def update(self, n):  # the first run, a chunk of the data file received: it goes on once the bar shows it
        counting(self, n)
        if threading.current_thread() in first and self.desc.endswith(data):
            deadline = time.monotonic() + 10
            while on_data not in seen and time.monotonic() < deadline:
                time.sleep(0.01)

    monkeypatch.setattr(download._LazyBar, "update", update)
    served.stall_seconds = 1.0
    served.fault(f"/gpt-2/models/{SIZE}/{data}", "stall")
    first.append(download_in_a_thread_until_its_data_file(served, tmp_path / SIZE))
    checkpoints.download_gpt2_files(SIZE, tmp_path / SIZE)
    first[0].join()
    assert len(bars) == 1 and bars[0].closed and bars[0].options["unit"] == "B"
    assert on_data in seen, seen  # the data file's bytes, out of its size
    hparams = len(served.files[f"/gpt-2/models/{SIZE}/hparams.json"])
    # before the data file came: the last file the other run had fetched, whole
    assert seen[0] == (f"GPT-2 {SIZE}'s hparams.json, by the other run", hparams, hparams), seen
