"""gpt2_numpy/tfcheckpoint.py and gpt2_numpy/crc32c.py against TensorFlow: every tensor equal to tf.train.load_variable, on
GPT-2's layout and on an index big enough to need several blocks; damaged files refused by name."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gpt2_numpy import crc32c, tfcheckpoint  # noqa: E402
from gpt2_numpy.tfcheckpoint import CheckpointError  # noqa: E402
from tiny_checkpoint import write_tiny_checkpoint  # noqa: E402

DATA = "model.ckpt.data-00000-of-00001"


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    model_dir = tmp_path_factory.mktemp("tiny")
    write_tiny_checkpoint(model_dir)
    return model_dir / "model.ckpt"


@pytest.fixture(scope="session")
def many(tmp_path_factory):
    """A checkpoint of 5000 small tensors of mixed dtypes and ranks: its index spans several of TF's
    256 KiB blocks (long names, mostly unlike each other so prefix compression saves little), and
    has many restart points (one name in seven shares a long prefix with its neighbours)."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    dtypes = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.int16, np.float16, np.bool_]
    tensors = {}
    for i in range(5000):
        shape = tuple(rng.integers(0, 4, size=i % 4))
        dtype = dtypes[i % len(dtypes)]
        values = rng.standard_normal(shape) * 100
        head = "model/shared" if i % 7 == 0 else f"{rng.integers(1 << 62):016x}"
        name = f"{head}/{'very_long_scope_name/' * 4}layer{i}/" + "x" * (i % 13)
        tensors[name] = (values > 0) if dtype is np.bool_ else values.astype(dtype)
    prefix = tmp_path_factory.mktemp("many") / "model.ckpt"
    names = sorted(tensors)
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(tensors[name]) for name in names])
    return prefix


def assert_equal_to_tensorflow(prefix):
    import tensorflow as tf

    ours = tfcheckpoint.read_checkpoint(prefix)
    reader = tf.train.load_checkpoint(str(prefix))  # what tf.train.load_variable uses, opened once
    assert sorted(ours) == sorted(reader.get_variable_to_shape_map())
    for name, array in ours.items():
        expected = reader.get_tensor(name)
        assert array.dtype == expected.dtype and array.shape == expected.shape, name
        np.testing.assert_array_equal(array, expected)
        assert not array.flags.writeable
    return ours


def test_gpt2_layout_equals_tensorflow(tiny):
    tensors = assert_equal_to_tensorflow(tiny)
    assert tensors["model/h1/attn/c_attn/w"].shape == (1, 16, 48)
    assert isinstance(tensors["model/wte"], np.memmap)  # mapped from the file, not copied


def test_many_blocks_equal_tensorflow(many):
    index = Path(f"{many}.index").read_bytes()
    footer = index[-tfcheckpoint.FOOTER_BYTES:]
    _, position = tfcheckpoint.read_block_handle(footer, 0)
    index_handle, _ = tfcheckpoint.read_block_handle(footer, position)
    n_blocks = len(tfcheckpoint.read_block_entries(tfcheckpoint.read_block(index, index_handle)))
    assert n_blocks >= 3  # the point of this test: several data blocks
    tensors = assert_equal_to_tensorflow(many)
    assert len(tensors) == 5000 and {a.dtype for a in tensors.values()} >= {np.dtype(np.float16), np.dtype(bool)}


def copy_checkpoint(prefix, tmp_path):
    for path in prefix.parent.glob(prefix.name + ".*"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    return tmp_path / prefix.name


def damage(path, how):
    body = bytearray(path.read_bytes())
    if how == "truncated":
        body = body[: len(body) * 2 // 3]
    elif how == "flipped byte":
        body[len(body) // 3] ^= 0x04
    elif how == "wrong magic":
        body[-1] ^= 0xFF
    path.write_bytes(bytes(body))


def test_written_checkpoints_read_back_in_tensorflow_and_here(tiny, many, tmp_path):
    """write_checkpoint is read_checkpoint's inverse, and TF reads what it writes: the 5000 mixed tensors
    (every dtype, scalars, empty ones) and GPT-2's layout, written again by it, equal TF's own files."""
    for source in (tiny, many):
        written = tmp_path / source.parent.name / "model.ckpt"
        written.parent.mkdir()
        tensors = tfcheckpoint.read_checkpoint(source)
        tfcheckpoint.write_checkpoint(written, tensors)
        back = assert_equal_to_tensorflow(written)
        assert sorted(back) == sorted(tensors)
        for name, array in tensors.items():
            assert back[name].dtype == array.dtype and np.array_equal(back[name], array), name
    scalar = tmp_path / "scalar.ckpt"
    tfcheckpoint.write_checkpoint(scalar, {"pi": np.float64(3.5), "column": np.asfortranarray(np.eye(3)[:, :2])})
    back = assert_equal_to_tensorflow(scalar)
    assert back["pi"].shape == () and np.array_equal(back["column"], np.eye(3)[:, :2])


def test_write_checkpoint_refuses_what_tensorflow_cannot_read(tmp_path):
    with pytest.raises(ValueError, match="cannot write tensor 'text' of dtype <U1: give it .*float32"):
        tfcheckpoint.write_checkpoint(tmp_path / "model.ckpt", {"text": np.array(["a"])})
    with pytest.raises(ValueError, match="non-empty name"):
        tfcheckpoint.write_checkpoint(tmp_path / "model.ckpt", {"": np.zeros(2)})
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.parametrize("how", ["truncated", "flipped byte", "wrong magic"])
@pytest.mark.parametrize("checkpoint", ["tiny", "many"])
def test_damaged_index_is_one_error_naming_it(checkpoint, how, request, tmp_path):
    prefix = copy_checkpoint(request.getfixturevalue(checkpoint), tmp_path)
    damage(Path(f"{prefix}.index"), how)
    with pytest.raises(CheckpointError) as info:
        tfcheckpoint.read_checkpoint(prefix)
    message = str(info.value)
    assert f"{prefix}.index" in message and "\n" not in message
    if how == "wrong magic":
        assert "magic" in message
    elif how == "flipped byte":
        assert "CRC" in message


@pytest.mark.parametrize("how", ["truncated", "flipped byte"])
def test_damaged_data_is_one_error_naming_it(tiny, how, tmp_path):
    prefix = copy_checkpoint(tiny, tmp_path)
    damage(tmp_path / DATA, how)
    with pytest.raises(CheckpointError) as info:
        tfcheckpoint.read_checkpoint(prefix)
    message = str(info.value)
    assert str(tmp_path / DATA) in message and "\n" not in message
    assert ("truncated" if how == "truncated" else "fails its CRC-32C") in message
    if how == "flipped byte":  # unchecked, the damage goes unnoticed: which is why the first load checks
        tfcheckpoint.read_checkpoint(prefix, verify_data=False)


def test_missing_files_are_named(tiny, tmp_path):
    with pytest.raises(CheckpointError, match="model.ckpt.index"):
        tfcheckpoint.read_checkpoint(tmp_path / "model.ckpt")
    prefix = copy_checkpoint(tiny, tmp_path)
    (tmp_path / DATA).unlink()
    with pytest.raises(CheckpointError, match=DATA):
        tfcheckpoint.read_checkpoint(prefix)


# ----------------------------------------------------------------------------- crc32c
@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 4096, 65536 * 2048 // 1024 + 5, 3 * 2048 * 64 + 13])
def test_crc32c_equals_the_byte_loop(size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert crc32c.crc32c(data) == crc32c.crc32c_reference(data)
    cut = size // 3
    assert crc32c.crc32c(data[cut:], crc32c.crc32c(data[:cut])) == crc32c.crc32c(data)


def test_crc32c_known_values():
    # RFC 3720 (iSCSI) test vectors, B.4
    assert crc32c.crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c.crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c.unmask(crc32c.mask(0x12345678)) == 0x12345678 and crc32c.mask(0) != 0


def test_crc32c_agrees_with_tensorflow(tmp_path):
    import tensorflow as tf

    data = os.urandom(10_000)
    # TF's checkpoint writer stores mask(crc32c(bytes)): a one-tensor checkpoint holds it.
    prefix = tmp_path / "one"
    tf.raw_ops.SaveV2(prefix=str(prefix), tensor_names=["x"], shape_and_slices=[""],
                      tensors=[tf.constant(np.frombuffer(data, dtype=np.uint8))])
    _, entries = tfcheckpoint.read_index(f"{prefix}.index")
    assert crc32c.unmask(entries["x"].crc32c) == crc32c.crc32c(data)
