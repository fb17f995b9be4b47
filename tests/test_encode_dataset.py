"""encode-dataset (tokenizer/jobs/sharded.py, shards.py, manifest.py, engines.py) and train --engine ray.

The oracle is tiktoken: every JSON-lines / parquet document must be ``encode_ordinary(text) + [eot]``, every
.txt file ``encode(text, allowed_special="all")``. The Ray engine runs on one local cluster (2 CPUs) started
for this module and shut down after it; its outputs must be byte-identical to the local engine's, also when
one of its worker processes is killed in the middle of a task.
"""

from __future__ import annotations

import doctest
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tiktoken

from conftest import REPO, corpus_text
from tokenizer.jobs import engines
from tokenizer.cli import main
from tokenizer.jobs.manifest import MANIFEST_NAME
from tokenizer.jobs.sharded import encode_dataset
from tokenizer.training.train import count_pretokens, train_bpe


# One local Ray cluster at a time: these tests run in one pytest-xdist worker, one after another.
pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module")
def ray_cluster():
    ray = engines.start_ray(num_cpus=2)
    yield ray
    ray.shutdown()


def documents(name: str, limit: int) -> list[str]:
    """Paragraphs of a corpus file as documents, plus the awkward ones: empty, special-token text, emoji."""
    docs = [p for p in corpus_text(name, limit).split("\n\n") if p.strip()]
    return docs + ["", "a document that spells <|endoftext|> as text", "emoji 🤗 and\r\nCRLF"]


def write_jsonl(path: Path, docs: list[str], field: str = "text") -> None:
    lines = "".join(json.dumps({field: d, "id": i}, ensure_ascii=i % 2 == 0) + "\n" for i, d in enumerate(docs))
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(lines)
    else:
        path.write_text(lines + "\n", encoding="utf-8")  # and a blank line, which is no document


def write_parquet(path: Path, docs: list, field: str = "text", row_group_size: int = 40) -> None:
    pq.write_table(pa.table({field: docs}), path, row_group_size=row_group_size)


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory) -> Path:
    """A dataset of four shards, one per format, from ../shared/corpus."""
    folder = tmp_path_factory.mktemp("shards")
    (folder / "a_docs.txt").write_text(corpus_text("en_docs.txt", 150_000), encoding="utf-8")
    write_jsonl(folder / "b_ja.jsonl", documents("ja_manpages.txt", 60_000))
    write_jsonl(folder / "c_ru.jsonl.gz", documents("ru_manpages.txt", 60_000))
    write_parquet(folder / "d_zh.parquet", documents("zh_manpages.txt", 60_000))
    return folder


def expected_ids(path: Path, encoding: str) -> list[int]:
    """tiktoken's ids for one shard, the way encode-dataset lays them out."""
    enc = tiktoken.get_encoding(encoding)
    if path.suffix == ".txt":
        return enc.encode(path.read_text(encoding="utf-8"), allowed_special="all")
    if path.suffix == ".parquet":
        docs = pq.read_table(path).column("text").to_pylist()
    else:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            docs = [json.loads(line)["text"] for line in f if line.strip()]
    return [i for d in docs for i in enc.encode_ordinary(d) + [enc.eot_token]]


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def assert_consistent(folder: Path) -> dict:
    """What must hold after any run, finished or not: no partial file, and the manifest claims exactly the
    .bin files that are there, each with its recorded size and hash."""
    import hashlib

    names = {p.name for p in folder.iterdir()}
    assert not [n for n in names if n.endswith(".partial")]
    manifest = json.loads((folder / MANIFEST_NAME).read_text())
    claimed = {s["output"] for s in manifest["shards"]}
    assert claimed == {n for n in names if n.endswith(".bin")}
    for s in manifest["shards"]:
        data = (folder / s["output"]).read_bytes()
        assert len(data) == s["tokens"] * np.dtype(s["dtype"]).itemsize
        assert hashlib.sha256(data).hexdigest() == s["sha256"]
    return manifest


@pytest.mark.parametrize("encoding,dtype", [("gpt2", "uint16"), ("o200k_base", "uint32")])
def test_local_and_ray_give_tiktoken_ids_byte_identical(shard_dir, tmp_path, ray_cluster, encoding, dtype):
    local = encode_dataset([shard_dir], tmp_path / "local", encoding=encoding, workers=2, progress=False)
    on_ray = encode_dataset([shard_dir], tmp_path / "ray", encoding=encoding, engine="ray", progress=False)
    assert outputs(tmp_path / "local") == outputs(tmp_path / "ray")  # the manifest included
    assert local["shards"] == on_ray["shards"] and local["encoded"] == 4
    manifest = assert_consistent(tmp_path / "local")
    assert manifest["complete"] and manifest["settings"]["dtype"] == dtype
    for entry, shard in zip(manifest["shards"], sorted(shard_dir.iterdir())):
        assert entry["input"] == str(shard.resolve()) and entry["file_bytes"] == shard.stat().st_size
        ids = np.fromfile(tmp_path / "local" / entry["output"], dtype=dtype).tolist()
        assert ids == expected_ids(shard, encoding), shard.name
        assert entry["tokens"] == len(ids)
    assert manifest["totals"]["tokens"] == sum(e["tokens"] for e in manifest["shards"])
    n_docs = len(documents("ja_manpages.txt", 60_000))
    assert manifest["shards"][1]["documents"] == n_docs  # every record, the empty one included


def test_a_killed_ray_worker_is_retried_and_the_outputs_are_identical(tmp_path, ray_cluster):
    data = tmp_path / "in"
    data.mkdir()
    text = corpus_text("en_dictionary.txt", 2_400_000)
    for k in range(4):  # shards that each take a while, so one can be caught in the middle of its task
        (data / f"part{k}.txt").write_text(text[k * 600_000:(k + 1) * 600_000], encoding="utf-8")
    encode_dataset([data], tmp_path / "local", workers=2, progress=False)

    job = {}
    thread = threading.Thread(target=lambda: job.update(
        result=encode_dataset([data], tmp_path / "ray", engine="ray", progress=False)))
    thread.start()
    killed = None
    deadline = time.monotonic() + 60
    while killed is None and thread.is_alive() and time.monotonic() < deadline:
        for pid in ray_task_processes("encode_shard"):
            os.kill(pid, signal.SIGKILL)
            killed = pid
            break
        time.sleep(0.01)
    thread.join()
    assert killed is not None, "no worker was seen running encode_shard"
    assert job["result"]["encoded"] == 4
    assert outputs(tmp_path / "local") == outputs(tmp_path / "ray")
    assert_consistent(tmp_path / "ray")


def ray_task_processes(task_name: str) -> list[int]:
    """Pids of the processes running a Ray task of that name right now (Ray titles them ``ray::NAME``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(f"ray::{task_name}".encode()):
                pids.append(int(entry.name))
        except OSError:
            pass
    return pids


def test_resume_redoes_only_missing_corrupt_or_stale_shards(shard_dir, tmp_path):
    out = tmp_path / "out"
    first = encode_dataset([shard_dir], out, workers=1, progress=False)
    before = outputs(out)
    inodes = {p.name: p.stat().st_ino for p in out.iterdir()}
    assert encode_dataset([shard_dir], out, workers=1, progress=False)["skipped"] == 4

    (out / "b_ja.bin").unlink()  # a deleted output
    again = encode_dataset([shard_dir], out, workers=1, progress=False)
    assert (again["encoded"], again["skipped"]) == (1, 3)
    assert outputs(out) == before
    assert all((out / n).stat().st_ino == inodes[n] for n in ("a_docs.bin", "c_ru.bin", "d_zh.bin"))

    data = bytearray((out / "c_ru.bin").read_bytes())  # a corrupt output of the right size
    data[100] ^= 1
    (out / "c_ru.bin").write_bytes(bytes(data))
    again = encode_dataset([shard_dir], out, workers=1, progress=False)
    assert (again["encoded"], again["skipped"]) == (1, 3)
    assert outputs(out) == before and again["shards"] == first["shards"]


def test_foreign_files_and_manifests_are_never_trusted(shard_dir, tmp_path):
    out = tmp_path / "out"
    reference = tmp_path / "reference"
    encode_dataset([shard_dir], reference, workers=1, progress=False)
    out.mkdir()
    (out / "a_docs.bin").write_bytes(b"\x00\x01" * 50)  # someone else's file, where an output goes
    (out / ".b_ja.bin.0123.partial").write_bytes(b"\x00\x01")  # a killed task's leftover
    with pytest.raises(FileExistsError, match=r"holds files but no manifest of encode-dataset \(a_docs.bin\); "
                       "pass overwrite=True to write into it"):  # a folder of files that are not ours
        encode_dataset([shard_dir], out, workers=1, progress=False)
    assert encode_dataset([shard_dir], out, workers=1, progress=False, overwrite=True)["encoded"] == 4
    assert outputs(out) == outputs(reference)

    # a manifest that does not parse, or lists the outputs of another encoding: everything is redone
    (out / MANIFEST_NAME).write_text("{not json")
    assert encode_dataset([shard_dir], out, workers=1, progress=False)["encoded"] == 4
    encode_dataset([shard_dir], out, encoding="o200k_base", workers=1, progress=False)
    assert encode_dataset([shard_dir], out, workers=1, progress=False)["encoded"] == 4
    assert outputs(out) == outputs(reference)


def test_a_text_shard_counts_its_documents_not_its_separators(tmp_path):
    """Any file that is not .jsonl, .jsonl.gz or .parquet is a text; its documents are the stretches between
    <|endoftext|> separators that hold more than whitespace."""
    (tmp_path / "notes.md").write_text("one story<|endoftext|>\n<|endoftext|>two\nstories<|endoftext|>  \n")
    m = encode_dataset([tmp_path / "notes.md"], tmp_path / "out", progress=False)
    assert (m["shards"][0]["output"], m["shards"][0]["documents"]) == ("notes.md.bin", 2)


def test_a_changed_input_is_redone(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"text": "hello"}\n')
    out = tmp_path / "out"
    encode_dataset([tmp_path / "x.jsonl"], out, progress=False)
    (tmp_path / "x.jsonl").write_text('{"text": "hello world"}\n')
    result = encode_dataset([tmp_path / "x.jsonl"], out, progress=False)
    assert result["encoded"] == 1
    assert np.fromfile(out / "x.bin", dtype=np.uint16).tolist() == [31373, 995, 50256]


def test_outputs_of_shards_with_the_same_name_do_not_collide(tmp_path):
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "train.jsonl").write_text(json.dumps({"text": sub}) + "\n")
    m = encode_dataset([tmp_path / "a", tmp_path / "b" / "train.jsonl"], tmp_path / "out", progress=False)
    assert [s["output"] for s in m["shards"]] == ["train.bin", "train-2.bin"]


def test_an_output_never_replaces_an_input(tmp_path, capsys, monkeypatch):
    # x.txt's output is x.bin: with --out the folder that holds an input x.bin (a text file, as any other
    # extension is), it was written over that input
    (tmp_path / "x.bin").write_text("notes kept as text", encoding="utf-8")
    (tmp_path / "x.txt").write_text("hello", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["encode-dataset", "x.bin", "x.txt", "--out", ".", "--force"], prog="gpt2-tokenizer") == 2
    err = capsys.readouterr().err
    assert err == (f"gpt2-tokenizer: error: --out .: the output of x.txt, {tmp_path / 'x.bin'}, would replace the "
                   "input x.bin; name another folder\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin", "x.txt"]
    assert (tmp_path / "x.bin").read_text(encoding="utf-8") == "notes kept as text"


def test_the_manifest_never_replaces_an_input(tmp_path, capsys, monkeypatch):
    # the folder's manifest.json named as an input was read as text, then written over by the new manifest
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text("hello", encoding="utf-8")
    assert main(["encode-dataset", "x.txt", "--out", "out"], prog="gpt2-tokenizer") == 0
    capsys.readouterr()
    before = (tmp_path / "out" / MANIFEST_NAME).read_bytes()
    for forced in ([], ["--force"]):
        assert main(["encode-dataset", f"out/{MANIFEST_NAME}", "--out", "out", *forced], prog="gpt2-tokenizer") == 2
        assert capsys.readouterr().err == (
            f"gpt2-tokenizer: error: --out out: its manifest, {tmp_path / 'out' / MANIFEST_NAME}, would replace the "
            f"input out/{MANIFEST_NAME}; name another folder\n")
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(["x.bin", MANIFEST_NAME])
        assert (tmp_path / "out" / MANIFEST_NAME).read_bytes() == before


def test_outputs_of_inputs_no_longer_given_are_removed(tmp_path, capsys, monkeypatch):
    # a run with fewer inputs left the earlier run's other .bin files: a loader reading every *.bin read them too
    monkeypatch.chdir(tmp_path)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"shard {name}", encoding="utf-8")
    encode_dataset(["a.txt", "b.txt", "c.txt"], "out", progress=False)
    assert main(["encode-dataset", "a.txt", "--out", "out"], prog="t") == 0
    said = capsys.readouterr().out
    assert said.splitlines()[0] == ("out: removed 2 .bin files that the earlier manifest listed for inputs not given "
                                    "this time (b.bin, c.bin)")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.bin", MANIFEST_NAME]
    assert_consistent(tmp_path / "out")
    # an earlier manifest of another encoding: its outputs are stale all the same
    encode_dataset(["b.txt"], "out", encoding="r50k_base", progress=False)
    assert encode_dataset(["a.txt"], "out", progress=False)["removed"] == ["b.bin"]
    assert main(["encode-dataset", "a.txt", "--out", "out"], prog="t") == 0
    said = capsys.readouterr().out
    assert "removed" not in said  # nothing to remove: nothing said
    # one of each is said in the singular ("1 documents" was)
    assert said.startswith("out: 3 tokens (uint16) in 1 shard from 7 bytes, 1 document; encoded 0, already ")


def test_only_files_an_earlier_manifest_named_as_outputs_are_removed(tmp_path):
    (tmp_path / "a.txt").write_text("shard a", encoding="utf-8")
    out = tmp_path / "out"
    encode_dataset([tmp_path / "a.txt"], out, progress=False)
    (out / "notes.bin").write_text("kept: an input of the next run", encoding="utf-8")
    (out / "folder.bin").mkdir()
    (out / "mine.bin").write_bytes(b"\x00\x01")  # no manifest names it: not encode-dataset's to remove
    (out / "link.bin").symlink_to(tmp_path / "a.txt")
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    for name in ("notes.bin", "folder.bin", "link.bin", "../a.txt", str(tmp_path / "a.txt"), "a.txt", ".hidden.bin"):
        manifest["shards"].append({**manifest["shards"][0], "output": name})  # a manifest edited by hand
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    (out / ".hidden.bin").write_bytes(b"")
    # an input missing: nothing is done, and nothing removed, before the new manifest is in place
    with pytest.raises(FileNotFoundError):
        encode_dataset([tmp_path / "a.txt", tmp_path / "absent.txt"], out, progress=False)
    assert json.loads((out / MANIFEST_NAME).read_text()) == manifest
    result = encode_dataset([tmp_path / "a.txt", out / "notes.bin"], out, progress=False)
    assert result["removed"] == []
    assert sorted(p.name for p in out.iterdir()) == sorted([".hidden.bin", "a.bin", "folder.bin", "link.bin",
                                                            MANIFEST_NAME, "mine.bin", "notes.bin", "notes.bin.bin"])
    assert (out / "notes.bin").read_text(encoding="utf-8") == "kept: an input of the next run"
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "shard a"


@pytest.mark.parametrize("bad,message", [
    ({"b.jsonl": '{"text": "ok"}\n{"body": "x"}\n'}, r'b\.jsonl line 2: no "text" field \(its fields: "body"\)'),
    ({"b.jsonl": '{"text": "ok"}\n\n{"text": 3}\n'}, r'b\.jsonl line 3: "text" holds a number, not text'),
    ({"b.jsonl": b'{"text": "ok"}\n{"text": "caf\xe9"}\n'}, r"b\.jsonl line 2 is not valid UTF-8: byte 13"),
    ({"b.jsonl": '{"text": "ok"}\nnot json\n'}, r"b\.jsonl line 2: not JSON"),
    ({"b.parquet": ["ok", None]}, r'b\.parquet row 2: "text" holds a null, not text'),
    ({"b.parquet": {"body": ["x"]}}, r'b\.parquet: no "text" column \(its columns: "body"\)'),
    ({"b.txt": b"ok \xff"}, r"b\.txt is not valid UTF-8: byte 3"),
])
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_bad_input_names_the_place_and_leaves_only_complete_shards(tmp_path, request, bad, message, engine):
    if engine == "ray":
        request.getfixturevalue("ray_cluster")
    (tmp_path / "a.jsonl").write_text('{"text": "fine"}\n')
    (name, content), = bad.items()
    if name.endswith(".parquet"):
        table = pa.table(content if isinstance(content, dict) else {"text": content})
        pq.write_table(table, tmp_path / name, row_group_size=1)
    elif isinstance(content, bytes):
        (tmp_path / name).write_bytes(content)
    else:
        (tmp_path / name).write_text(content)
    with pytest.raises(ValueError, match=message):
        encode_dataset([tmp_path / "a.jsonl", tmp_path / name], tmp_path / "out", engine=engine, workers=1,
                       progress=False)
    manifest = assert_consistent(tmp_path / "out")
    assert [s["output"] for s in manifest["shards"]] == ["a.bin"] and not manifest["complete"]


def test_missing_inputs_and_unwritable_output(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no file matches '.*nothing\*\.jsonl'"):
        encode_dataset([str(tmp_path / "nothing*.jsonl")], tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="input file not found"):
        encode_dataset([tmp_path / "absent.jsonl"], tmp_path / "out")
    with pytest.raises(ValueError, match="standard input"):
        encode_dataset(["-"], tmp_path / "out")
    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="file is not a folder"):
        encode_dataset([tmp_path / "a.jsonl"], tmp_path / "file" / "out")
    assert not (tmp_path / "out").exists()


def test_cli_writes_the_dataset_and_reports_mistakes_in_one_line(shard_dir, tmp_path, capsys, monkeypatch):
    assert main(["encode-dataset", str(shard_dir / "*.jsonl*"), "--out", str(tmp_path / "out")], prog="t") == 0
    said = capsys.readouterr().out
    assert "in 2 shards" in said and "encoded 2, already complete 0" in said
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["b_ja.bin", "c_ru.bin", MANIFEST_NAME]

    def error(*argv) -> str:
        try:
            status = main(["encode-dataset", *argv], prog="t")
        except SystemExit as e:  # argparse's own mistakes
            status = e.code
        assert status == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        return err

    assert "no file matches" in error(str(tmp_path / "none*.jsonl"), "--out", str(tmp_path / "o"))
    assert "--out" in error(str(shard_dir))
    assert "pass it with --engine ray" in error(str(shard_dir), "--out", str(tmp_path / "o"), "--address", "auto")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    said = error(str(shard_dir), "--out", str(tmp_path / "o"), "--engine", "ray")
    assert "pip install 'ray>=2.9' 'pyarrow>=14'" in said
    said = train_error(capsys, tmp_path)
    assert "pip install 'ray>=2.9' 'pyarrow>=14'" in said


def train_error(capsys, tmp_path) -> str:
    (tmp_path / "t.txt").write_text("hello world " * 10)
    assert main(["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "260", "--out",
                 str(tmp_path / "tok"), "--engine", "ray"], prog="t") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_cli_ray_engine_starts_and_stops_its_own_cluster(shard_dir, tmp_path):
    """Without --address a local cluster is started for the job and shut down after (a process of its own,
    so the module's cluster is not the one used)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "tokenizer", "encode-dataset", str(shard_dir / "b_ja.jsonl"),
                          "--out", str(tmp_path / "out"), "--engine", "ray", "--workers", "1"],
                         capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "ray engine" in run.stdout
    encode_dataset([shard_dir / "b_ja.jsonl"], tmp_path / "local", progress=False)
    assert outputs(tmp_path / "out") == outputs(tmp_path / "local")


def test_ray_counting_equals_local_counting_and_training_merges(shard_dir, tmp_path, ray_cluster):
    paths = [str(shard_dir / "a_docs.txt"), str(shard_dir / "b_ja.jsonl"), str(shard_dir / "c_ru.jsonl.gz")]
    specials = ["<|endoftext|>"]
    local = count_pretokens(paths, specials, num_workers=2, chunk_size=20_000)
    on_ray = count_pretokens(paths, specials, num_workers=2, chunk_size=20_000, engine="ray")
    assert on_ray == local and sum(local.values()) > 10_000
    merges = [train_bpe(paths, 400, specials, progress=False, engine=engine, chunk_size=20_000)
              for engine in ("local", "ray")]
    assert merges[0] == merges[1] and len(merges[0][1]) == 400 - 256 - 1


def test_train_on_ray_says_whose_peak_memory_it_measured(shard_dir, tmp_path, ray_cluster, capsys):
    # it said "largest of this process and one worker", and measured none of Ray's workers (not its children)
    assert main(["train", "--input", str(shard_dir / "b_ja.jsonl"), "--vocab_size", "300", "--out",
                 str(tmp_path / "tok"), "--engine", "ray"], prog="t") == 0
    lines = capsys.readouterr().out.splitlines()
    memory = next(line for line in lines if line.startswith("peak memory: "))
    assert memory.endswith(" MB (this process; the Ray workers' is not measured)"), memory


def test_docstring_examples():
    from tokenizer.jobs import inputs

    result = doctest.testmod(inputs)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_the_progress_bar_counts_every_input_byte_once(shard_dir, tmp_path, request, capsys, engine):
    if engine == "ray":
        request.getfixturevalue("ray_cluster")
    encode_dataset([shard_dir], tmp_path / "out", engine=engine, workers=2, progress=True)
    total = sum(p.stat().st_size for p in shard_dir.iterdir())
    last = capsys.readouterr().err.strip().split("\r")[-1]
    shown = f"{total / 1000:.0f}kB" if total < 1e6 else f"{total / 1e6:.2f}MB"  # (tqdm's scaling: 3 digits)
    assert f"{shown}/{shown}" in last and "100%" in last, last


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("  \n", 0), ("one story", 1), ("a<|endoftext|>b", 2), ("a<|endoftext|>\n", 1),
    ("<|endoftext|>a<|endoftext|><|endoftext|>b<|endoftext|>\n", 2), ("a<|endoftext|>\nb<|endoftext|>\nc", 3),
])
def test_txt_shard_documents_are_documents_not_separators(tmp_path, text, expected):
    (tmp_path / "s.txt").write_text(text, encoding="utf-8")
    m = encode_dataset([tmp_path / "s.txt"], tmp_path / "out", workers=1, progress=False)
    assert m["shards"][0]["documents"] == m["totals"]["documents"] == expected


def test_txt_shard_documents_counted_across_chunks(tmp_path, monkeypatch):
    """A long shard read in many chunks: the count is the whole text's."""
    from tokenizer.jobs import dataset

    whole_chunks = dataset.iter_chunks
    monkeypatch.setattr(dataset, "iter_chunks", lambda f, specials, chunk_bytes, **kw: whole_chunks(f, specials, 4096, **kw))
    text = corpus_text("fr_manpages.txt", 60_000)
    assert "<|" not in text
    stories = [text[k * 3000:(k + 1) * 3000] for k in range(20)]
    (tmp_path / "s.txt").write_text("<|endoftext|>\n".join(stories) + "<|endoftext|>\n", encoding="utf-8")
    m = encode_dataset([tmp_path / "s.txt"], tmp_path / "out", workers=1, progress=False)
    assert m["shards"][0]["documents"] == 20


def test_cli_non_utf8_txt_shard_names_what_encode_dataset_accepts(tmp_path, capsys):
    (tmp_path / "b.txt").write_bytes(b"ok \xff")
    assert main(["encode-dataset", str(tmp_path / "b.txt"), "--out", str(tmp_path / "out")], prog="t") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "byte 3" in err and err.endswith(
        "convert the file to UTF-8, or pass --errors replace (errors='replace') to read invalid bytes as U+FFFD\n")
    assert not (tmp_path / "out").exists()


def bad_bytes_dataset(folder: Path) -> tuple[list[Path], list[str]]:
    """Shards of each format with a few bytes that are not UTF-8, and their texts as read with U+FFFD."""
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"ok \xff\xfe then<|endoftext|>more caf\xe9\n")
    (folder / "b.jsonl").write_bytes(b'{"text": "caf\xe9 au lait"}\n{"text": "fine"}\n')
    texts = [(folder / "a.txt").read_bytes().decode("utf-8", errors="replace"), "caf\ufffd au lait", "fine"]
    return [folder / "a.txt", folder / "b.jsonl"], texts


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_errors_replace_reads_bad_bytes_as_u_fffd_and_the_manifest_counts_them(tmp_path, request, engine):
    # encode-dataset had no --errors, where count, encode-file and parity have --errors replace
    if engine == "ray":
        request.getfixturevalue("ray_cluster")
    shards, texts = bad_bytes_dataset(tmp_path / "in")
    m = encode_dataset(shards, tmp_path / "out", errors="replace", engine=engine, workers=2, progress=False)
    enc = tiktoken.get_encoding("gpt2")
    assert np.fromfile(tmp_path / "out" / "a.bin", dtype=np.uint16).tolist() == enc.encode(texts[0],
                                                                                           allowed_special="all")
    assert np.fromfile(tmp_path / "out" / "b.bin", dtype=np.uint16).tolist() == [
        i for text in texts[1:] for i in enc.encode_ordinary(text) + [enc.eot_token]]
    assert [s["replaced_bytes"] for s in m["shards"]] == [3, 1] and m["totals"]["replaced_bytes"] == 4
    assert m["settings"]["errors"] == "replace" and assert_consistent(tmp_path / "out") == {
        key: m[key] for key in ("format", "settings", "complete", "shards", "totals")}
    # read as strict, the same shards are redone, and refused: their outputs were not made that way
    with pytest.raises(ValueError, match=r"a\.txt is not valid UTF-8: byte 3 .* or pass --errors replace"):
        encode_dataset(shards, tmp_path / "out", engine=engine, workers=1, progress=False)


def test_errors_is_a_setting_of_the_manifest_and_an_older_one_was_strict(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.txt").write_text("all UTF-8", encoding="utf-8")
    strict = encode_dataset(["good.txt"], "out", progress=False)
    assert strict["settings"]["errors"] == "strict" and strict["totals"]["replaced_bytes"] == 0
    manifest = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    del manifest["settings"]["errors"]  # as written before errors was recorded, when strict was the only way
    (tmp_path / "out" / MANIFEST_NAME).write_text(json.dumps(manifest))
    assert encode_dataset(["good.txt"], "out", progress=False)["skipped"] == 1
    assert encode_dataset(["good.txt"], "out", errors="replace", progress=False)["encoded"] == 1
    with pytest.raises(ValueError, match="errors must be 'strict' or 'replace', got 'ignore'"):
        encode_dataset(["good.txt"], "out", errors="ignore", progress=False)

    shards, texts = bad_bytes_dataset(tmp_path / "in")
    assert main(["encode-dataset", *map(str, shards), "--out", "bad", "--errors", "replace"], prog="t") == 0
    said = capsys.readouterr().out
    # the text's bytes as they are in the inputs, the bad ones among them: a.txt's 33, and the documents' 12 and 4
    n_bytes = shards[0].stat().st_size + len(b"caf\xe9 au lait") + len(texts[2])
    assert said.startswith(f"bad: 18 tokens (uint16) in 2 shards from {n_bytes} bytes (4 of them not UTF-8, each run "
                           f"read as U+FFFD; {sum(p.stat().st_size for p in shards)} file bytes), 4 documents; "), said


@pytest.mark.parametrize("count", [0, 1, 2, 7])
def test_a_batch_of_documents_is_each_documents_ids_then_endoftext(count):
    # what a worker writes for a batch of .jsonl/.parquet records: tiktoken's ids of each document, each followed
    # by <|endoftext|> (an empty document is that token alone; an empty batch, nothing)
    from tokenizer import get_encoding
    from tokenizer.jobs.dataset import PieceEncoder

    oracle = tiktoken.get_encoding("gpt2")
    documents = (["", "hello <|endoftext|> world", corpus_text("de_manpages.txt", 3000)] * 3)[:count]
    expected = [i for doc in documents for i in [*oracle.encode_ordinary(doc), oracle.eot_token]]
    ids = PieceEncoder(get_encoding("gpt2"), "x").ids(("documents", documents))
    assert ids == expected and len(ids) >= count


# ---- an address where no Ray cluster answers ------------------------------------------------------------------


@pytest.fixture
def web_server():
    """``HOST:PORT`` of a local HTTP server: an address that answers, but not as Ray does."""
    import http.server

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def closed_port_address() -> str:
    """``127.0.0.1:PORT`` of a port nothing listens on (it was free a moment ago)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_an_address_without_ray_is_refused_within_the_timeout_given(web_server):
    import socket

    def refusal(address: str) -> str:
        with pytest.raises(engines.RayAddressError) as caught:
            engines.check_ray_address(address, timeout=0.5)
        assert caught.value.address == address
        return caught.value.reason

    assert refusal(closed_port_address()) == "Connection refused"
    assert refusal(web_server) == "something answers, but not as Ray does (gRPC)"
    assert refusal(f"ray://{web_server}") == "something answers, but not as Ray does (gRPC)"
    with socket.socket() as silent:  # accepts connections (the kernel does), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        assert refusal(f"127.0.0.1:{silent.getsockname()[1]}") == "no answer within 0.5 s"
    assert refusal("nowhere.invalid:1").startswith("no machine is known by the name nowhere.invalid: ")
    for malformed in ("nowhere", "host:", ":6379", "host:99999", "host:port"):
        assert refusal(malformed).startswith("not HOST:PORT")
    engines.check_ray_address("auto")  # Ray's own to find: not looked at
    said = engines.RayAddressError("h:1", "Connection refused").said("--address")
    assert said == ("--address h:1: no Ray cluster answers there (Connection refused); start one with `ray start "
                    "--head` and pass the address it prints, or leave --address out to start a local cluster for "
                    "the job")


def test_a_cluster_speaking_tls_is_checked_for_a_connection_only(web_server, monkeypatch):
    # Ray's TLS (RAY_USE_TLS=1) answers a plain HTTP/2 hello as a failed handshake: a real cluster was refused
    monkeypatch.setenv("RAY_USE_TLS", "1")
    engines.check_ray_address(web_server, timeout=0.5)  # (the web server stands for it: it accepts connections)
    with pytest.raises(engines.RayAddressError, match=r"\(Connection refused\)"):
        engines.check_ray_address(closed_port_address(), timeout=0.5)


@pytest.mark.exhaustive
def test_a_cluster_the_command_starts_says_nothing_of_token_authentication(tmp_path):
    """Ray's default (RAY_AUTH_MODE unset) turned token authentication on with a WARNING on stderr on every run,
    so that an error found on the cluster was two lines. The command asks for it by name: a run says nothing on
    stderr, and an error is its one line (exit 2), the file that made it named."""
    env = {name: value for name, value in os.environ.items() if name not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    env["PYTHONPATH"] = str(REPO)
    (tmp_path / "good.txt").write_text("hello world\n", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"ab\xffcd\n")

    def encode(name):
        return subprocess.run([sys.executable, "-m", "tokenizer", "encode-dataset", name, "--out", f"out_{name}",
                               "--engine", "ray", "--workers", "1"], capture_output=True, text=True, env=env,
                              timeout=300, cwd=tmp_path)

    done = encode("good.txt")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    refused = encode("bad.txt")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("python -m tokenizer: error: bad.txt is not valid UTF-8"), refused.stderr


def test_ray_address_in_the_environment_is_checked_and_named(monkeypatch):
    # Ray joins the cluster RAY_ADDRESS names when given no address (or "auto"): there too ray.init retried an
    # address without a cluster for minutes, where the job was to start a local one
    address = closed_port_address()
    monkeypatch.setenv("RAY_ADDRESS", address)
    assert engines.ray_address_used(None) == engines.ray_address_used("auto") == (address, True)
    assert engines.ray_address_used("h:1") == ("h:1", False)  # one given wins, as in Ray
    with pytest.raises(engines.RayAddressError) as caught:
        engines.start_ray(num_cpus=1)
    assert caught.value.said("--address") == (
        f"RAY_ADDRESS {address}: no Ray cluster answers there (Connection refused); start one with `ray start "
        "--head` and pass the address it prints, or unset RAY_ADDRESS to start a local cluster for the job")
    monkeypatch.setenv("RAY_ADDRESS", "")  # set but empty: Ray starts a local cluster
    assert engines.ray_address_used(None) == (None, False)


def test_the_address_of_a_ray_cluster_passes_the_check(ray_cluster):
    engines.check_ray_address(ray_cluster.get_runtime_context().gcs_address, timeout=30)


@pytest.mark.exhaustive
@pytest.mark.parametrize("command", ["train", "encode-dataset"])
def test_cli_address_without_ray_is_one_line_exit_2_and_nothing_left(tmp_path, web_server, command):
    # ray.init retried such an address for many minutes, deaf to Ctrl-C, and train left DIR.checkpoint behind
    (tmp_path / "t.txt").write_text("hello world " * 50, encoding="utf-8")
    args = {"train": ["--input", "t.txt", "--vocab_size", "300"], "encode-dataset": ["t.txt"]}[command]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for address in (closed_port_address(), web_server):
        run = subprocess.run([sys.executable, "-m", "tokenizer", command, *args, "--out", "out", "--engine", "ray",
                              "--address", address], capture_output=True, text=True, env=env, cwd=tmp_path,
                             timeout=120)  # a guard only: the check's own timeout bounds the wait
        assert run.returncode == 2, run.stderr
        assert run.stderr.count("\n") == 1 and f"error: --address {address}: no Ray cluster answers there (" \
            in run.stderr and "`ray start --head`" in run.stderr, run.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]
