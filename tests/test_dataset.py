"""encode_file writes exactly encode(whole file) as a flat array, whatever the workers and chunking, and
never leaves a partial output behind; stats measures files. The oracle is a single ``enc.encode`` call."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS
from tokenizer import get_encoding
from tokenizer.jobs import engines
from tokenizer.jobs.dataset import encode_file, file_stats, format_duration, id_dtype, iter_chunks
from tokenizer.patterns import GPT2_PATTERN


def corpus_bytes(name: str, limit: int) -> bytes:
    data = (CORPUS / name).read_bytes()[:limit]
    return data[: len(data.decode("utf-8", errors="ignore").encode("utf-8"))]  # whole characters only


def read_ids(path: Path, encoding: str) -> list[int]:
    return np.fromfile(path, dtype=id_dtype(get_encoding(encoding).n_vocab)).tolist()


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_two_workers_small_chunks_equal_one_encode(tmp_path, start_method):
    data = corpus_bytes("en_docs.txt", 1_000_000)
    src = tmp_path / "docs.txt"
    src.write_bytes(data)
    stats = encode_file(src, tmp_path / "docs.bin", workers=2, progress=False, chunk_bytes=64 << 10,
                        start_method=start_method)
    assert stats["workers"] == 2
    expected = get_encoding("gpt2").encode(data.decode("utf-8"), allowed_special="all")
    assert read_ids(tmp_path / "docs.bin", "gpt2") == expected
    assert stats["tokens"] == len(expected) and stats["bytes"] == len(data) and stats["dtype"] == "uint16"
    assert expected.count(50256) > 100  # the <|endoftext|> separators became ids, not text


def test_standard_input_starts_no_more_workers_than_it_has_pieces(tmp_path, monkeypatch):
    # stdin's size is not known beforehand: --workers 100000 once started 100,000 processes for a few pieces
    data = corpus_bytes("en_docs.txt", 20_000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    pool_sizes = []
    real_worker_pool = engines.worker_pool

    def recording_pool(context, processes, *args, **options):
        pool_sizes.append(processes)
        return real_worker_pool(context, min(processes, 2), *args, **options)  # never 1,000 here

    monkeypatch.setattr(engines, "worker_pool", recording_pool)
    stats = encode_file("-", tmp_path / "out.bin", workers=1000, progress=False, chunk_bytes=4096)
    assert read_ids(tmp_path / "out.bin", "gpt2") == get_encoding("gpt2").encode(data.decode("utf-8"),
                                                                                   allowed_special="all")
    pieces = -(-len(data) // 4096) + 1  # pieces end at safe cuts: about one per 4,096 bytes
    assert len(pool_sizes) == 1 and pool_sizes[0] <= pieces, (pool_sizes, stats["workers"])
    assert stats["workers"] == pool_sizes[0]  # the workers that ran, not the 1,000 asked for


def test_standard_input_too_short_for_workers_reports_one(tmp_path, monkeypatch):
    # one piece is encoded in this process: no worker starts, and the summary said "8 workers"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hello world")))
    assert encode_file("-", tmp_path / "out.bin", workers=8, progress=False)["workers"] == 1


def test_a_named_pipe_is_encoded_as_it_comes(tmp_path):
    # encode-file <(zcat corpus.txt.gz) --out corpus.bin: a pipe is read once, in order, like standard input
    data = corpus_bytes("en_docs.txt", 30_000)
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)

    def write_once():
        with open(fifo, "wb") as f:  # waits for encode_file to open it
            f.write(data)

    threading.Thread(target=write_once, daemon=True).start()
    stats = encode_file(fifo, tmp_path / "out.bin", workers=4, progress=False, chunk_bytes=4096)
    expected = get_encoding("gpt2").encode(data.decode("utf-8"), allowed_special="all")
    assert read_ids(tmp_path / "out.bin", "gpt2") == expected and stats["bytes"] == len(data)


@pytest.mark.parametrize("name", ["ja_manpages.txt", "ru_manpages.txt", "zh_manpages.txt"])
def test_o200k_multibyte_text_uint32(tmp_path, name):
    data = corpus_bytes(name, 300_000)
    src = tmp_path / name
    src.write_bytes(data)
    stats = encode_file(src, tmp_path / "out.bin", encoding="o200k_base", workers=1, progress=False, chunk_bytes=4096)
    assert stats["dtype"] == "uint32" and (tmp_path / "out.bin").stat().st_size == 4 * stats["tokens"]
    assert read_ids(tmp_path / "out.bin", "o200k_base") == get_encoding("o200k_base").encode(data.decode("utf-8"))


def test_allowed_special_none_encodes_them_as_text(tmp_path):
    text = "first story.\n<|endoftext|>\nsecond story<|endoftext|>"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    encode_file(tmp_path / "in.txt", tmp_path / "out.bin", workers=1, allowed_special="none", progress=False)
    ids = read_ids(tmp_path / "out.bin", "gpt2")
    assert ids == get_encoding("gpt2").encode(text, disallowed_special=()) and 50256 not in ids


fragments = st.sampled_from(
    ["word", " word", "\n", "\n\n", "\r\n", "  ", " ", "!", "'s", "123", "é", "中文", "<|endoftext|>", "x\n", "9 ",
     '{"a":1,', "e\u0301", "!\n", "\t", "😀"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(fragments, max_size=60).map("".join), chunk_bytes=st.integers(1, 40), mode=st.sampled_from(["all", "none"]))
def test_any_chunk_size_gives_the_same_ids(tmp_path, text, chunk_bytes, mode):
    (tmp_path / "in.txt").write_bytes(text.encode("utf-8"))
    encode_file(tmp_path / "in.txt", tmp_path / "out.bin", encoding="cl100k_base", workers=1,  # each example again
                allowed_special=mode, progress=False, chunk_bytes=chunk_bytes, overwrite=True)
    kwargs = {"allowed_special": "all"} if mode == "all" else {"disallowed_special": ()}
    assert read_ids(tmp_path / "out.bin", "cl100k_base") == get_encoding("cl100k_base").encode(text, **kwargs)


@pytest.mark.parametrize("name, encoding", [("en_docs.txt", "gpt2"), ("zh_manpages.txt", "cl100k_base")])
def test_chunks_rejoin_and_encode_alone_like_the_whole(tmp_path, name, encoding):
    enc = get_encoding(encoding)
    data = corpus_bytes(name, 200_000)
    (tmp_path / "in.txt").write_bytes(data)
    with open(tmp_path / "in.txt", "rb") as f:
        chunks = list(iter_chunks(f, enc.special_tokens_set, chunk_bytes=5_000, pattern=enc.pat_str))
    assert b"".join(chunks) == data and len(chunks) > 30
    ids = [i for chunk in chunks for i in enc.encode(chunk.decode("utf-8"), allowed_special="all")]
    assert ids == enc.encode(data.decode("utf-8"), allowed_special="all")


def test_chunks_of_a_pattern_of_ones_own_end_only_at_special_tokens(tmp_path):
    data = b"some words, more words<|endoftext|>and more" * 200
    (tmp_path / "in.txt").write_bytes(data)
    with open(tmp_path / "in.txt", "rb") as f:
        chunks = list(iter_chunks(f, ["<|endoftext|>"], chunk_bytes=100, pattern=r"(?s).{1,2}"))
    assert b"".join(chunks) == data and len(chunks) > 30
    assert all(chunk.startswith(b"<|endoftext|>") for chunk in chunks[1:])


# ---- errors leave nothing behind --------------------------------------------------------------------------


def test_disallowed_special_in_the_middle_leaves_no_file(tmp_path):
    text = "a line of text\n" * 20_000 + "<|fim_prefix|>" + "more text\n" * 20_000
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="fim_prefix"):
        encode_file(tmp_path / "in.txt", tmp_path / "out.bin", encoding="cl100k_base", workers=2,
                    allowed_special={"<|endoftext|>"}, progress=False, chunk_bytes=8192, start_method="spawn")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_text_that_disallowed_special_names_is_refused_wherever_the_chunks_are_cut(tmp_path):
    # disallowed_special may name text that is no special token of the encoding ('<|fim_prefix|>' for gpt2), which
    # encode refuses; a chunk could end inside it (the chunks kept only special tokens whole), and then file_stats,
    # encode_file and parity encoded it as plain text where encode(text) refused it
    from tokenizer.jobs import parity

    text = "hello <|fim_prefix|> world\n"
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    gpt2 = get_encoding("gpt2")
    rule = dict(allowed_special=set(), disallowed_special={"<|fim_prefix|>"})
    with pytest.raises(ValueError, match="no special token of gpt2"):
        gpt2.encode(text, **rule)
    with pytest.raises(ValueError, match="no special token of gpt2"):
        file_stats(tmp_path / "in.txt", gpt2, **rule)
    with pytest.raises(ValueError, match="no special token of gpt2"):
        encode_file(tmp_path / "in.txt", tmp_path / "out.bin", encoding=gpt2, workers=1, progress=False, **rule)
    with pytest.raises(ValueError, match="no special token of gpt2"):
        parity.check_file(tmp_path / "in.txt", gpt2, gpt2, **rule)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_invalid_utf8_names_the_byte(tmp_path):
    (tmp_path / "in.txt").write_bytes(b"fine text\n" * 100 + b"\xff bad")
    with pytest.raises(ValueError, match="byte 1000"):
        encode_file(tmp_path / "in.txt", tmp_path / "out.bin", workers=1, progress=False, chunk_bytes=64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_missing_input_and_missing_or_unwritable_output(tmp_path):
    with pytest.raises(FileNotFoundError, match="input file not found"):
        encode_file(tmp_path / "nope.txt", tmp_path / "out.bin", progress=False)
    (tmp_path / "in.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(PermissionError, match="/proc/tokenizer-test.bin: cannot write in /proc"):
        encode_file(tmp_path / "in.txt", "/proc/tokenizer-test.bin", workers=1, progress=False)
    with pytest.raises(ValueError, match="not special tokens"):
        encode_file(tmp_path / "in.txt", tmp_path / "out.bin", allowed_special={"<|nope|>"}, progress=False)
    (tmp_path / "bad.txt").write_bytes(b"ok \xff")  # fails while encoding: the folders made for it go too
    with pytest.raises(ValueError, match="byte 3"):
        encode_file(tmp_path / "bad.txt", tmp_path / "no" / "out.bin", workers=1, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "in.txt"]
    encode_file(tmp_path / "in.txt", tmp_path / "no" / "out.bin", workers=1, progress=False)  # folders made
    assert np.fromfile(tmp_path / "no" / "out.bin", dtype=np.uint16).tolist() == [31373]


def test_dtype_follows_vocab_size():
    assert id_dtype(50257) == np.dtype("<u2") and id_dtype(65536) == np.dtype("<u2")
    assert id_dtype(65537) == np.dtype("<u4") and id_dtype(200019).byteorder in "<="


def test_format_duration():
    assert [format_duration(s) for s in (5, 600, 7200, 3 * 86400)] == ["5.0 s", "10.0 minutes", "2.0 hours", "3.0 days"]


def test_text_without_newlines_or_spaces_is_still_chunked(tmp_path):
    text = '{"key":"value","n":12345,"list":[1,2,3]}' * 5000  # minified JSON: one 200 KB line
    (tmp_path / "in.json").write_text(text, encoding="utf-8")
    with open(tmp_path / "in.json", "rb") as f:
        assert len(list(iter_chunks(f, (), chunk_bytes=4096, pattern=GPT2_PATTERN))) > 40
    encode_file(tmp_path / "in.json", tmp_path / "out.bin", workers=1, progress=False, chunk_bytes=4096)
    assert read_ids(tmp_path / "out.bin", "gpt2") == get_encoding("gpt2").encode(text)


def test_small_files_start_no_worker_processes(tmp_path):
    (tmp_path / "in.txt").write_text("tiny", encoding="utf-8")
    assert encode_file(tmp_path / "in.txt", tmp_path / "out.bin", workers=8, progress=False)["workers"] == 1


# Ctrl-C arriving while the worker pool is being started (see test_ctrl_c_while_the_pool_starts_...).
_interrupt_at_next_fork: list[bool] = []


def _interrupt_once_after_fork() -> None:
    if _interrupt_at_next_fork:
        _interrupt_at_next_fork.clear()
        # To the main thread, as a terminal's Ctrl-C reaches a command: a process-wide signal could be taken by
        # another thread of the test session (one that does not hold SIGINT back) and arrive at another moment.
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # just after the first worker forked


os.register_at_fork(after_in_parent=_interrupt_once_after_fork)


def test_ctrl_c_while_the_pool_starts_leaves_no_worker(tmp_path):
    """multiprocessing's Pool() abandons the workers it started when Ctrl-C interrupts it (it cleans up only on an
    Exception); encode_file must still stop every worker."""
    import psutil

    path = tmp_path / "in.txt"
    path.write_bytes(corpus_bytes("en_dictionary.txt", 400_000))
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    _interrupt_at_next_fork.append(True)
    try:
        with pytest.raises(KeyboardInterrupt):
            encode_file(path, tmp_path / "out.bin", workers=2, progress=False, chunk_bytes=50_000,
                        start_method="fork")
    finally:
        _interrupt_at_next_fork.clear()
    assert not _interrupt_at_next_fork and not (tmp_path / "out.bin").exists()
    _, alive = psutil.wait_procs([p for p in psutil.Process().children(recursive=True) if p.pid not in before],
                                 timeout=10)
    for p in alive:
        p.kill()
    assert not alive, f"{len(alive)} worker process(es) left running after Ctrl-C"


def test_file_stats_counts_the_bytes_read_as_u_fffd_as_encode_file_does(tmp_path):
    data = "ok \ufffd ".encode("utf-8") + b"\xe2\x82 x\xff" + b" more" * 50_000  # 3 bad bytes, then many pieces
    (tmp_path / "bad.txt").write_bytes(data)
    stats = file_stats(tmp_path / "bad.txt", "gpt2", errors="replace")
    encoded = encode_file(tmp_path / "bad.txt", tmp_path / "bad.bin", encoding="gpt2", errors="replace")
    assert stats["replaced_bytes"] == encoded["replaced_bytes"] == 3 and stats["bytes"] == len(data)
    (tmp_path / "good.txt").write_bytes("ok \ufffd".encode("utf-8"))  # a U+FFFD the file holds is no error
    assert file_stats(tmp_path / "good.txt", "gpt2", errors="replace")["replaced_bytes"] == 0


def test_a_jsonl_input_counts_its_bytes_read_as_u_fffd_as_a_text_file_does(tmp_path):
    # errors="replace": the documents' invalid bytes counted as none, and "bytes" was of their U+FFFD (3 bytes
    # each), not of the bytes read; a .jsonl input of a text file's lines gives the text file's figures, over
    # many pieces, and the invalid bytes of another field are not the text's
    lines = [b"line %d \xff\xfe ok \xe2\x82" % k for k in range(2_000)]  # a run of 2 bytes and a cut character
    (tmp_path / "bad.txt").write_bytes(b"".join(lines))
    (tmp_path / "bad.jsonl").write_bytes(b"".join(b'{"id": "\xc3", "text": "%s"}\n' % line for line in lines))
    for name in ("bad.txt", "bad.jsonl"):
        stats = file_stats(tmp_path / name, "gpt2", errors="replace")
        encoded = encode_file(tmp_path / name, tmp_path / "bad.bin", encoding="gpt2", errors="replace",
                              chunk_bytes=10_000, workers=1, progress=False, overwrite=True)
        figures = (stats["bytes"], stats["replaced_bytes"], encoded["bytes"], encoded["replaced_bytes"])
        assert figures == (sum(map(len, lines)), 8_000) * 2, name


def test_file_stats_times_repeated_passes_after_a_warm_up(tmp_path):
    """min_seconds: the speed is timed over at least that much encoding (the file encoded again, from its start,
    as often as needed) after the counting pass; the counts stay those of one pass."""
    data = corpus_bytes("en_dictionary.txt", 20_000)
    (tmp_path / "small.txt").write_bytes(data)
    tokens = len(get_encoding("gpt2").encode(data.decode("utf-8")))
    once = file_stats(tmp_path / "small.txt", "gpt2")
    assert (once["bytes"], once["tokens"], once["timed_bytes"]) == (len(data), tokens, len(data))
    steady = file_stats(tmp_path / "small.txt", "gpt2", min_seconds=0.2)
    assert (steady["bytes"], steady["tokens"]) == (len(data), tokens)
    assert steady["timed_seconds"] >= 0.2 and steady["timed_bytes"] >= len(data)  # passes until 0.2 s add up
    assert steady["mb_per_s"] == pytest.approx(steady["timed_bytes"] / 1e6 / steady["timed_seconds"])
    (tmp_path / "empty.txt").write_bytes(b"")
    assert file_stats(tmp_path / "empty.txt", "gpt2", min_seconds=5)["timed_seconds"] == 0  # nothing to time


@pytest.mark.parametrize("sizes, first_done, halfway, whole", [
    ([30_000], 15_000, "15.0kB/30.0kB", "30.0kB/30.0kB"),
    ([300, 200], 250, "250B/500B", "500B/500B"),
    ([2_000_000, 500_000], 1_250_000, "1.25MB/2.50MB", "2.50MB/2.50MB"),
    ([None], 15_000, "15.0kB [", "15.0kB ["),  # standard input: no total
])
def test_progress_bar_shows_small_inputs_in_a_unit_that_says_something(capsys, sizes, first_done, halfway, whole):
    """The shared bar counted in MB with one decimal, so an input under 50 KB read "0.0/0.0 MB" from start to end.
    It counts bytes and shows them in B, kB or MB as the figure needs."""
    bar = engines.ProgressBar(sizes, desc="encoding", enabled=True)
    bar.set(0, first_done)
    bar.bar.refresh()  # (tqdm draws at most every 0.1 s: drawn now)
    drawn = capsys.readouterr().err
    assert halfway in drawn, drawn
    for task in range(len(sizes)):
        bar.finish(task)
    bar.close()
    assert whole in capsys.readouterr().err
    assert " MB [" not in drawn and "0.0/0.0" not in drawn
