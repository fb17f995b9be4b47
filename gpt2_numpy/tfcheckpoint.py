"""Read a TensorFlow checkpoint (a "tensor bundle") with NumPy alone, no TensorFlow, and write one.

A checkpoint ``model.ckpt`` is two kinds of file:

``model.ckpt.data-00000-of-00001`` (one per shard)
    the tensors' raw bytes, one after another, little-endian, nothing else.

``model.ckpt.index``
    a LevelDB-format table (a sorted, immutable key -> value file) saying where each tensor is.
    Its key ``""`` holds a header (number of shards, byte order); every other key is a tensor's name
    and its value a ``BundleEntryProto``: dtype, shape, shard id, offset and size in the data file,
    and the masked CRC-32C of those bytes.

The table, read from the end:

* **Footer**, the last 48 bytes: two block handles (each an (offset, size) pair of varints), for the
  metaindex block (unused by TF) and the index block, zero-padded to 40 bytes, then the magic number
  0xdb4775248b80fb57 as 8 little-endian bytes.
* **Index block**: one entry per data block, whose value is that block's handle, in key order.
* **Data blocks** (up to 256 KiB each, so a checkpoint with many variables has several): entries
  ``shared, non_shared, value_size`` (varints), then the key's last ``non_shared`` bytes (the first
  ``shared`` come from the previous key: keys are prefix-compressed), then the value. Every 16th
  entry is a *restart point* storing its key whole; the block ends with the restart offsets
  (uint32 each) and their count (uint32).
* Every block is followed by a 5-byte **trailer**: its compression type (0 = none) and the masked
  CRC-32C of the block plus that type byte.

Values are protocol buffers, decoded here by a small reader (:func:`read_fields`): each field is a
varint key ``field_number << 3 | wire_type``, then a varint (type 0), 8 bytes (1), a varint length
and that many bytes (2, also nested messages), or 4 bytes (5).

The data file is memory-mapped, so every array is a read-only view of the file (no copy; pages are
read from disk when first touched). :func:`read_checkpoint` checks every block CRC of the index and,
with ``verify_data=True``, every tensor's CRC too; any damage is one :class:`CheckpointError` naming
the file.

:func:`write_checkpoint` writes the same format (one data file, one data block, keys stored whole), so a
GPT-2 in OpenAI's layout can be made without TensorFlow, as the walkthrough docs/07 does.

It does NOT read compressed (Snappy) tables, partitioned variables (``slices``), string tensors, or
TF1's older V1 checkpoint format; each is refused with an error saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenizer.outputs import replaced_file

from .crc32c import crc32c, mask, unmask

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_BYTES = 48
BLOCK_TRAILER_BYTES = 5
# TensorFlow's DataType enum (types.proto) for the dtypes a tensor bundle stores as plain bytes.
DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 4: "u1", 5: "<i2", 6: "i1", 9: "<i8", 10: "?",
          17: "<u2", 19: "<f2", 22: "<u4", 23: "<u8"}


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read; the message names the file, ``path`` is it (None: not one file)."""

    def __init__(self, message: str, *, path: Path | None = None):
        super().__init__(message)
        self.path = path


class DamagedFile(CheckpointError):
    """A weights file whose bytes are wrong (a failed CRC, a truncated file, an index or header that cannot be
    parsed): a file to fetch again, where a CheckpointError of another kind is a folder that holds no whole,
    consistent model (a file missing, a config that contradicts the weights), a mistake in what was passed."""


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: ``size`` bytes at ``offset`` in data shard ``shard_id``."""

    dtype: np.dtype
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int  # masked, as stored


# ---------------------------------------------------------------------- protocol buffers
def read_varint(buffer: bytes, position: int) -> tuple[int, int]:
    """The varint at ``position`` (7 bits a byte, least significant first; a set top bit means
    more follow) and the position after it."""
    value = shift = 0
    while True:
        byte = buffer[position]  # an IndexError here means the buffer ended mid-varint
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def read_fields(message: bytes) -> dict[int, list]:
    """A protobuf message as {field number: [values in order]}: ints for varint and fixed-width
    fields, bytes for length-delimited ones (strings, nested messages)."""
    fields: dict[int, list] = {}
    position = 0
    while position < len(message):
        key, position = read_varint(message, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = read_varint(message, position)
        elif wire_type == 1:
            value, position = int.from_bytes(message[position : position + 8], "little"), position + 8
        elif wire_type == 2:
            length, position = read_varint(message, position)
            value, position = message[position : position + length], position + length
        elif wire_type == 5:
            value, position = int.from_bytes(message[position : position + 4], "little"), position + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        if position > len(message):
            raise ValueError("protobuf message ends inside a field")
        fields.setdefault(number, []).append(value)
    return fields


def parse_entry(value: bytes) -> TensorEntry:
    """A ``BundleEntryProto``: dtype=1, shape=2 (TensorShapeProto: dim=2 {size=1}), shard_id=3,
    offset=4, size=5, crc32c=6 (fixed32), slices=7."""
    fields = read_fields(value)
    if 7 in fields:
        raise ValueError("a partitioned variable (slices), which this reader does not support")
    dtype_enum = fields.get(1, [0])[-1]
    if dtype_enum not in DTYPES:
        raise ValueError(f"TensorFlow dtype number {dtype_enum}, which this reader does not support")
    shape_fields = read_fields(fields[2][-1]) if 2 in fields else {}
    if shape_fields.get(3, [0])[-1]:
        raise ValueError("a tensor of unknown rank")
    shape = tuple(read_fields(dim).get(1, [0])[-1] for dim in shape_fields.get(2, []))
    return TensorEntry(dtype=np.dtype(DTYPES[dtype_enum]), shape=shape, shard_id=fields.get(3, [0])[-1],
                       offset=fields.get(4, [0])[-1], size=fields.get(5, [0])[-1], crc32c=fields.get(6, [0])[-1])


# ------------------------------------------------------------------------- the table
def read_block_handle(buffer: bytes, position: int) -> tuple[tuple[int, int], int]:
    """An (offset, size) pair of varints and the position after it."""
    offset, position = read_varint(buffer, position)
    size, position = read_varint(buffer, position)
    return (offset, size), position


def read_block(table: bytes, handle: tuple[int, int]) -> bytes:
    """The block at ``handle`` after checking its trailer (no compression, masked CRC-32C)."""
    offset, size = handle
    end = offset + size + BLOCK_TRAILER_BYTES
    if end > len(table) - FOOTER_BYTES:
        raise ValueError(f"block at byte {offset} runs past the end of the table")
    block, compression = table[offset : offset + size], table[offset + size]
    stored = int.from_bytes(table[offset + size + 1 : end], "little")
    if crc32c(table[offset : offset + size + 1]) != unmask(stored):
        raise ValueError(f"the block at byte {offset} fails its CRC check (the file is damaged)")
    if compression != 0:
        raise ValueError(f"block at byte {offset} is compressed (type {compression}), "
                         "which this reader does not support")
    return block


def read_block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of one block, with the prefix-compressed keys rebuilt in full and the
    restart points checked (each must start an entry whose key is stored whole)."""
    if len(block) < 4:
        raise ValueError("block shorter than its restart count")
    n_restarts = int.from_bytes(block[-4:], "little")
    entries_end = len(block) - 4 - 4 * n_restarts
    if n_restarts < 1 or entries_end < 0:
        raise ValueError(f"block claims {n_restarts} restart points")
    restarts = np.frombuffer(block, dtype="<u4", count=n_restarts, offset=entries_end).tolist()
    entries, whole_keys = [], set()
    key, position = b"", 0
    while position < entries_end:
        start = position
        shared, position = read_varint(block, position)
        non_shared, position = read_varint(block, position)
        value_size, position = read_varint(block, position)
        if shared > len(key) or position + non_shared + value_size > entries_end:
            raise ValueError(f"block entry at byte {start} is malformed")
        if shared == 0:
            whole_keys.add(start)
        key = key[:shared] + block[position : position + non_shared]
        position += non_shared
        entries.append((key, block[position : position + value_size]))
        position += value_size
    if not set(restarts) <= whole_keys:
        raise ValueError(f"block restart points {sorted(set(restarts) - whole_keys)} are not entry starts")
    return entries


def read_table(table: bytes) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table, in key order, all blocks read."""
    if len(table) < FOOTER_BYTES:
        raise ValueError(f"{len(table)} bytes is shorter than a table footer ({FOOTER_BYTES})")
    footer = table[-FOOTER_BYTES:]
    if int.from_bytes(footer[-8:], "little") != TABLE_MAGIC:
        raise ValueError("the footer lacks the table magic number (not a TensorFlow V2 checkpoint index?)")
    _metaindex, position = read_block_handle(footer, 0)
    index_handle, _ = read_block_handle(footer, position)
    entries = []
    for _separator, handle_bytes in read_block_entries(read_block(table, index_handle)):
        handle, _ = read_block_handle(handle_bytes, 0)
        entries += read_block_entries(read_block(table, handle))
    keys = [key for key, _ in entries]
    if keys != sorted(keys) or len(set(keys)) != len(keys):
        raise ValueError("keys are out of order or repeated")
    return entries


# ------------------------------------------------------------------------ checkpoints
def read_index(index_path) -> tuple[int, dict[str, TensorEntry]]:
    """``(number of data shards, {tensor name: TensorEntry})`` from a ``.index`` file."""
    index_path = Path(index_path)
    try:
        entries = read_table(index_path.read_bytes())
        header = read_fields(entries[0][1]) if entries and entries[0][0] == b"" else None
        if header is None:
            raise ValueError("no bundle header (the empty key)")
        if header.get(2, [0])[-1] != 0:
            raise ValueError("tensors stored big-endian, which this reader does not support")
        tensors = {key.decode("utf-8"): parse_entry(value) for key, value in entries[1:]}
    except CheckpointError:
        raise
    except OSError as exc:
        raise CheckpointError(f"cannot read the checkpoint index {index_path} ({exc.strerror or exc})") from exc
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read the checkpoint index {index_path}: {exc or 'it ends too early'}; "
                              f"the file is damaged or not a TensorFlow checkpoint", path=index_path) from exc
    return header.get(1, [1])[-1], tensors


def data_path(prefix, shard_id: int, n_shards: int) -> Path:
    """``{prefix}.data-00000-of-00001`` and its siblings."""
    prefix = Path(prefix)
    return prefix.with_name(f"{prefix.name}.data-{shard_id:05d}-of-{n_shards:05d}")


def read_checkpoint(prefix, *, verify_data: bool = True, checked=None) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint ``prefix`` (e.g. ``models/124M/model.ckpt``) as a read-only
    array mapped from its data file, by name. ``verify_data`` checks each tensor's CRC-32C (which
    reads the whole file; ``checked(n_bytes, total_bytes)`` is called after each tensor, for a
    progress bar); the index is always checked.

    >>> params = read_checkpoint("models/124M/model.ckpt")  # doctest: +SKIP
    >>> params["model/wte"].shape  # doctest: +SKIP
    (50257, 768)
    """
    index_path = Path(f"{prefix}.index")
    n_shards, entries = read_index(index_path)
    shards: dict[int, np.memmap] = {}
    tensors = {}
    total_bytes = sum(entry.size for entry in entries.values())
    for name, entry in entries.items():
        path = data_path(prefix, entry.shard_id, n_shards)
        if entry.shard_id not in shards:
            try:
                shards[entry.shard_id] = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else \
                    np.zeros(0, dtype=np.uint8)
            except (OSError, ValueError) as exc:
                raise CheckpointError(f"cannot read the checkpoint data file {path} ({exc})", path=path) from exc
        shard = shards[entry.shard_id]
        n_values = int(np.prod(entry.shape, dtype=np.int64))
        if entry.size != n_values * entry.dtype.itemsize:
            raise CheckpointError(f"{index_path}: tensor {name} is {entry.size} bytes, but {entry.dtype}"
                                  f"{list(entry.shape)} needs {n_values * entry.dtype.itemsize}; the file is damaged",
                                  path=index_path)
        if entry.offset + entry.size > len(shard):
            raise CheckpointError(f"the checkpoint data file {path} is {len(shard)} bytes, too short for tensor "
                                  f"{name} (bytes {entry.offset}..{entry.offset + entry.size}); it is truncated",
                                  path=path)
        raw = shard[entry.offset : entry.offset + entry.size]
        if verify_data and crc32c(raw) != unmask(entry.crc32c):
            raise CheckpointError(f"the checkpoint data file {path} is damaged: tensor {name} fails its CRC-32C "
                                  "check", path=path)
        if verify_data and checked is not None:
            checked(entry.size, total_bytes)
        tensors[name] = raw.view(entry.dtype).reshape(entry.shape)
    return tensors


# -------------------------------------------------------------------------------- writing
# The inverse of the reader above, for what makes a checkpoint TF reads: the same table with one data
# block (every key stored whole, so every entry is a restart point), an index block naming it, an
# empty metaindex block, and the footer. TF writes the same records; it only compresses the keys.
def write_varint(value: int) -> bytes:
    """``value`` 7 bits a byte, least significant first, the top bit set on every byte but the last."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def write_fields(fields: list[tuple[int, int | bytes]]) -> bytes:
    """A protobuf message from (field number, value) pairs: an int as a varint, bytes length-delimited."""
    out = b""
    for number, value in fields:
        if isinstance(value, bytes):
            out += write_varint(number << 3 | 2) + write_varint(len(value)) + value
        else:
            out += write_varint(number << 3) + write_varint(value)
    return out


def write_block(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A block of (key, value) entries, each key whole (0 bytes shared), and its restart offsets."""
    body, restarts = b"", []
    for key, value in entries:
        restarts.append(len(body))
        body += write_varint(0) + write_varint(len(key)) + write_varint(len(value)) + key + value
    restarts = restarts or [0]  # an empty block still has one restart point
    return body + np.array(restarts + [len(restarts)], dtype="<u4").tobytes()


def is_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (a lone surrogate cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def write_checkpoint(prefix, tensors: dict[str, np.ndarray]) -> None:
    """Write ``tensors`` (name -> array) as the TensorFlow checkpoint ``prefix``: ``{prefix}.index`` and
    ``{prefix}.data-00000-of-00001``, which TF (``tf.train.load_checkpoint``) and :func:`read_checkpoint`
    read back. Names must be non-empty UTF-8; dtypes those :data:`DTYPES` lists.

    >>> write_checkpoint("/tmp/tiny/model.ckpt", {"model/wte": np.zeros((4, 2), np.float32)})  # doctest: +SKIP
    """
    dtype_numbers = {np.dtype(code): number for number, code in DTYPES.items()}
    entries, data = [(b"", write_fields([(1, 1), (3, write_fields([(1, 1)]))]))], bytearray()  # header:
    for name in sorted(tensors):  # 1 shard, little-endian (the default 0), version {producer 1}
        array = np.asarray(tensors[name])
        if not name or not is_utf8(name) or array.dtype.newbyteorder("<") not in dtype_numbers:
            raise ValueError(f"cannot write tensor {name!r} of dtype {array.dtype}: give it a non-empty name, in "
                             f"UTF-8, and one of the dtypes {sorted(str(np.dtype(c)) for c in DTYPES.values())}")
        raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()  # row-major, as TF stores
        shape = write_fields([(2, write_fields([(1, size)])) for size in array.shape])
        entry = [(1, dtype_numbers[array.dtype.newbyteorder("<")]), (2, shape), (4, len(data)), (5, len(raw))]
        crc = mask(crc32c(raw)).to_bytes(4, "little")  # field 6 is a fixed32: key, then 4 bytes
        entries.append((name.encode("utf-8"), write_fields(entry) + write_varint(6 << 3 | 5) + crc))
        data += raw
    table = bytearray()

    def append_block(block: bytes) -> bytes:  # the block and its trailer; returns its handle
        handle = write_varint(len(table)) + write_varint(len(block))
        table.extend(block + b"\0" + mask(crc32c(block + b"\0")).to_bytes(4, "little"))
        return handle

    data_handle = append_block(write_block(entries))
    metaindex_handle = append_block(write_block([]))
    index_handle = append_block(write_block([(entries[-1][0], data_handle)]))  # the data block's last key
    footer = (metaindex_handle + index_handle).ljust(FOOTER_BYTES - 8, b"\0") + TABLE_MAGIC.to_bytes(8, "little")
    # the data first and the index last, each whole or not at all: an index never names data that is not there
    with replaced_file(data_path(prefix, 0, 1)) as out:
        out.write(bytes(data))
    with replaced_file(Path(f"{prefix}.index")) as out:
        out.write(bytes(table) + footer)
