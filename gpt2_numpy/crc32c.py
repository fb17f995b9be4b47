"""CRC-32C (Castagnoli), the checksum TensorFlow's checkpoints and LevelDB tables store, in NumPy.

A CRC is the remainder of the data, read as one long polynomial over GF(2), divided by a fixed
polynomial (here 0x1EDC6F41, written bit-reversed as 0x82F63B78 because the bytes are read least
significant bit first). The classic way to compute it is a 256-entry table: one lookup per byte,

    crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)

starting from 0xFFFFFFFF and inverting the result. :func:`crc32c_reference` is exactly that loop.

A Python loop over every byte of a 500 MB checkpoint would take minutes, so :func:`crc32c` uses the
fact that a CRC is linear: the register after ``A + B`` is the register after ``A``, pushed through
``len(B)`` zero bytes, XOR the register ``B`` alone would give from zero. So the data is cut into
equal rows and every row is run through at once: NumPy steps down the columns eight bytes at a time,
looking each 16-bit quarter of the word up in its own 65536-entry table (what that quarter adds to the
register after all 8 bytes). The rows' results are then folded together pairwise. "Pushed through k
zero bytes" is a 32x32 bit matrix, kept as its 32 columns; matrices for k = 1, 2, 4, ... are squared up
once.

The masked form (:func:`mask`) is what LevelDB and TF store: a CRC of data that itself holds CRCs
is then not trivially related to them.

It does not compute the other CRC-32 (zlib's, polynomial 0x04C11DB7); use ``zlib.crc32`` for that.
"""

from __future__ import annotations

import functools

import numpy as np

POLYNOMIAL = 0x82F63B78  # Castagnoli's polynomial, bit-reversed
MAX_ROW_BYTES = 65536  # a power of 2 (rows are read as 8-byte words, and folded pairwise)
MIN_ROWS = 2048
MASK_DELTA = 0xA282EAD8


def _byte_table() -> list[int]:
    """TABLE[b]: the register after feeding byte b into a zero register."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (POLYNOMIAL if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = _byte_table()


@functools.cache
def _word_tables() -> tuple[np.ndarray, ...]:
    """WORD_TABLES[q][v]: what the 16-bit value v, as quarter q of an 8-byte little-endian word,
    adds to the register after the word (built by feeding the 8 bytes through TABLE)."""
    table = np.array(TABLE, dtype=np.uint64)
    values = np.arange(65536, dtype=np.uint64)
    tables = []
    for quarter in range(4):
        register = np.zeros(65536, dtype=np.uint64)
        for position in range(8):
            byte = (values >> np.uint64(8 * (position - 2 * quarter))) & np.uint64(0xFF) \
                if position in (2 * quarter, 2 * quarter + 1) else np.zeros_like(values)
            register = table[(register ^ byte) & np.uint64(0xFF)] ^ (register >> np.uint64(8))
        tables.append(register)
    return tuple(tables)


def crc32c_reference(data: bytes) -> int:
    """The textbook loop, one byte at a time (the oracle for :func:`crc32c`).

    >>> hex(crc32c_reference(b"123456789"))
    '0xe3069283'
    """
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data, crc: int = 0) -> int:
    """CRC-32C of ``data`` (bytes, memoryview or a uint8 array); ``crc`` continues an earlier one.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    >>> crc32c(b"6789", crc32c(b"12345")) == crc32c(b"123456789")
    True
    """
    data = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1)
    n = len(data)
    # The CRC with the usual pre/post inversion: the register starts at ~crc, so that part of it
    # is ~crc pushed through n bytes; the data alone adds its "raw" CRC (register starting at 0).
    start = _push_through_zeros(crc ^ 0xFFFFFFFF, n)
    return start ^ _raw_crc(data) ^ 0xFFFFFFFF


def mask(crc: int) -> int:
    """LevelDB's masked CRC: rotate right by 15 bits and add a constant."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF


def unmask(masked: int) -> int:
    rotated = (masked - MASK_DELTA) & 0xFFFFFFFF
    return ((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF


def _raw_crc(data: np.ndarray) -> int:
    """The register after ``data``, starting from 0, without the final inversion."""
    row_bytes = MAX_ROW_BYTES  # long rows: fewer NumPy steps; but enough rows to be worth stepping
    while row_bytes > 8 and len(data) < MIN_ROWS * row_bytes:
        row_bytes //= 2
    n_rows = len(data) // row_bytes
    crc = 0
    if n_rows >= MIN_ROWS:
        words = data[: n_rows * row_bytes].view("<u8").reshape(n_rows, row_bytes // 8)
        quarter_0, quarter_1, quarter_2, quarter_3 = _word_tables()
        low16, rows = np.uint64(0xFFFF), np.zeros(n_rows, dtype=np.uint64)  # every row's register
        for column in range(words.shape[1]):
            word = words[:, column] ^ rows
            rows = (quarter_0[word & low16] ^ quarter_1[(word >> np.uint64(16)) & low16]
                    ^ quarter_2[(word >> np.uint64(32)) & low16] ^ quarter_3[word >> np.uint64(48)])
        crc = _fold_rows(rows.astype(np.uint32), row_bytes)
        data = data[n_rows * row_bytes :]
    for byte in data.tobytes():  # what is left after the rows
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _fold_rows(rows: np.ndarray, row_bytes: int) -> int:
    """Combine the raw CRCs of consecutive equal-length rows into the raw CRC of them all."""
    while len(rows) > 1:
        if len(rows) % 2:  # a leading all-zero row changes nothing: its raw CRC is 0
            rows = np.concatenate([np.zeros(1, dtype=np.uint32), rows])
        rows = _apply(_zeros_operator(row_bytes), rows[0::2]) ^ rows[1::2]
        row_bytes *= 2
    return int(rows[0])


def _apply(matrix: np.ndarray, vectors):
    """The GF(2) matrix (its 32 columns, as uint32) applied to each 32-bit vector."""
    vectors = np.asarray(vectors, dtype=np.uint32)
    result = np.zeros_like(vectors)
    for bit in range(32):
        result ^= matrix[bit] * ((vectors >> np.uint32(bit)) & np.uint32(1))
    return result


_ZEROS_OPERATORS: dict[int, np.ndarray] = {}  # k (a power of 2) -> the matrix of k zero bytes


def _zeros_operator(n_bytes: int) -> np.ndarray:
    """The matrix taking a register to the register after ``n_bytes`` (a power of 2) zero bytes."""
    if n_bytes not in _ZEROS_OPERATORS:
        if n_bytes == 1:
            columns = []
            for bit in range(32):
                crc = 1 << bit
                columns.append(TABLE[crc & 0xFF] ^ (crc >> 8))
            _ZEROS_OPERATORS[1] = np.array(columns, dtype=np.uint32)
        else:
            half = _zeros_operator(n_bytes // 2)
            _ZEROS_OPERATORS[n_bytes] = _apply(half, half)  # M(k) = M(k/2) applied to M(k/2)'s columns
    return _ZEROS_OPERATORS[n_bytes]


def _push_through_zeros(register: int, n_bytes: int) -> int:
    power = 1
    while n_bytes:
        if n_bytes & 1:
            register = int(_apply(_zeros_operator(power), register))
        n_bytes >>= 1
        power *= 2
    return register
