"""bench/bench_generate.py's same-moment sweep: the bytes it reads are exactly the matrices' own."""
import numpy as np

from conftest import REPO


def bench_generate(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import bench_generate

    return bench_generate


def flat_bytes(matrices):
    return b"".join(m.tobytes() for m in matrices)


def test_matrices_one_after_another_are_read_in_one_sweep_of_the_same_bytes(monkeypatch):
    bench = bench_generate(monkeypatch)
    rng = np.random.default_rng(0)
    memory = rng.standard_normal(3 * 2304 * 768 + 3 * 768 * 768 + 5, dtype=np.float32)  # like mapped rows, and a rest
    layers = [memory[: 3 * 2304 * 768].reshape(3 * 768, 2304),  # shapes as they lie, one after another
              memory[3 * 2304 * 768: 3 * 2304 * 768 + 3 * 768 * 768].reshape(2304, 768),
              memory[3 * 2304 * 768 + 3 * 768 * 768:].reshape(1, 5)]
    head = rng.standard_normal((50, 768), dtype=np.float32)  # elsewhere in memory
    swept = bench.in_one_sweep(layers + [head])
    assert len(swept) == 3  # the layers' run as one matrix and its rest, then the head as it is
    assert swept[0].shape[1] == bench.SWEEP_WIDTH and swept[1].shape[0] == 1 and swept[2] is head
    assert flat_bytes(swept) == flat_bytes(layers + [head])
    assert all(not m.flags.writeable and m.flags.c_contiguous for m in swept[:2])


def test_matrices_apart_or_not_in_one_piece_stay_as_they_are(monkeypatch):
    bench = bench_generate(monkeypatch)
    memory = np.arange(64, dtype=np.float32)
    turned = memory[:32].reshape(4, 8).T  # not in one piece: nothing joins it, though its memory abuts the next
    apart = [np.ones((4, 8), np.float32), np.zeros((2, 8), np.float32), turned, memory[32:].reshape(4, 8)]
    assert [m is a for m, a in zip(bench.in_one_sweep(apart), apart)] == [True] * 4
