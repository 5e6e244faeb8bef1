"""SST index blocks (the first key and offset of every data block, slatedb's `SsTableIndex`),
decoded to place splits by where an SST's keys really lie (RFC 0014): the manifest gives only
an SST's first and last key, and SSTs that overlap and span the whole key range leave splits
equal in bytes but far apart in rows. Pure decoding here; sst_blocks.py reads the bytes.

An index region is a flatbuffer (`SsTableIndex { block_meta: [BlockMeta { offset: ulong,
first_key: [ubyte] }] }`), compressed with the SST's codec (LZ4 blocks with their size
prepended, or zlib; others are not decoded here), then a big-endian CRC-32 of the stored bytes.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from opendata_kv.errors import StoreDataError

#: at most this many block entries are taken from one index (evenly spaced): a split needs
#: no finer picture, and the work stays bounded for SSTs of many blocks
MAX_ENTRIES = 1024

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")


def _bad(sst: str, what: str, data: bytes) -> StoreDataError:
    return StoreDataError(
        f"SST {sst}: its index block {what} ({len(data)} bytes, starting {data[:16].hex()})",
        field="index",
        value=sst,
    )


def arrow_lz4() -> bool:
    """Whether lz4_block decodes through pyarrow (installed) rather than in Python."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def lz4_block(data: bytes, size: int, sst: str) -> bytes:
    """An LZ4 block (no frame) decoded to exactly `size` bytes, by pyarrow's LZ4 where it is
    installed (~30x faster), else here; malformed input raises."""
    try:
        import pyarrow as pa
    except ImportError:
        return lz4_python(data, size, sst)
    try:
        out = pa.decompress(data, decompressed_size=size, codec="lz4_raw", asbytes=True)
    except (OSError, ValueError, pa.ArrowException):
        raise _bad(sst, "is not an LZ4 block", data) from None
    if len(out) != size:
        raise _bad(sst, f"decodes to {len(out)} bytes, not its stated {size}", data)
    return bytes(out)


def _extended(data: bytes, at: int, length: int, sst: str, what: str) -> tuple[int, int]:
    """An LZ4 length of 15 continued by bytes while they are 255: (the length, where after)."""
    while True:
        if at >= len(data):
            raise _bad(sst, f"has a {what} length past its end", data)
        more = data[at]
        at += 1
        length += more
        if more != 255:
            return length, at


def lz4_python(data: bytes, size: int, sst: str) -> bytes:
    """lz4_block without pyarrow."""
    out = bytearray()
    at, end = 0, len(data)
    while at < end:
        token = data[at]
        at += 1
        length = token >> 4
        if length == 15:
            length, at = _extended(data, at, length, sst, "literal")
        if at + length > end:
            raise _bad(sst, "has literals past its end", data)
        out += data[at : at + length]
        at += length
        if at == end:
            break  # the last sequence has literals only
        if at + 2 > end:
            raise _bad(sst, "has a match offset past its end", data)
        offset = data[at] | data[at + 1] << 8
        at += 2
        match = token & 15
        if match == 15:
            match, at = _extended(data, at, match, sst, "match")
        match += 4
        if offset == 0 or offset > len(out):
            raise _bad(sst, f"has a match offset {offset} before its start", data)
        if len(out) + match > size:
            raise _bad(sst, "decodes past its stated size", data)
        start = len(out) - offset
        if offset >= match:
            out += out[start : start + match]
        else:  # an overlapping match repeats the last `offset` bytes
            piece = out[start:]
            out += (piece * (match // offset + 1))[:match]
    if len(out) != size:
        raise _bad(sst, f"decodes to {len(out)} bytes, not its stated {size}", data)
    return bytes(out)


def unwrap(region: bytes, codec: str | None, sst: str) -> bytes | None:
    """The index flatbuffer inside a stored region: its checksum checked, decompressed;
    None for a codec not decoded here (snappy, zstd)."""
    if len(region) < 4:
        raise _bad(sst, "is shorter than its checksum", region)
    body, (stored,) = region[:-4], struct.unpack(">I", region[-4:])
    if zlib.crc32(body) != stored:
        raise _bad(sst, f"fails its checksum (stored {stored:08x})", region)
    if codec is None:
        return body
    if codec == "LZ4":
        if len(body) < 4:
            raise _bad(sst, "is shorter than its LZ4 size prefix", region)
        (size,) = _U32.unpack_from(body, 0)
        if size > 64 * len(body) + 64:
            raise _bad(sst, f"states an LZ4 size {size} no block this long decodes to", region)
        return lz4_block(body[4:], size, sst)
    if codec == "ZLIB":
        try:
            return zlib.decompress(body)
        except zlib.error:
            raise _bad(sst, "is not zlib data", region) from None
    return None


def _u(fmt: struct.Struct, data: bytes, at: int, sst: str) -> int:
    if at < 0 or at + fmt.size > len(data):
        raise _bad(sst, f"points outside itself (at {at})", data)
    return int(fmt.unpack_from(data, at)[0])


def _field(data: bytes, table: int, slot: int, sst: str) -> int:
    """The position of field `slot` of the table at `table`, 0 when absent."""
    vtable = table - _u(_I32, data, table, sst)
    vsize = _u(_U16, data, vtable, sst)
    if vsize < 4 or vsize % 2:
        raise _bad(sst, f"has a vtable of {vsize} bytes", data)
    if 4 + 2 * slot >= vsize:
        return 0
    offset = _u(_U16, data, vtable + 4 + 2 * slot, sst)
    return table + offset if offset else 0


def _deref(data: bytes, at: int, sst: str) -> int:
    return at + _u(_U32, data, at, sst)


def block_entries(data: bytes, sst: str, limit: int = MAX_ENTRIES) -> list[tuple[int, bytes]]:
    """(data block offset, first key) of every block an index flatbuffer lists, in order, or
    of `limit` of them evenly spaced (the first and last among them); malformed bytes raise
    StoreDataError."""
    root = _deref(data, 0, sst)
    where = _field(data, root, 0, sst)
    if not where:
        raise _bad(sst, "has no block_meta", data)
    vector = _deref(data, where, sst)
    count = _u(_U32, data, vector, sst)
    if vector + 4 + 4 * count > len(data):
        raise _bad(sst, f"lists {count} blocks, more than it holds", data)
    picks: Sequence[int] = range(count)
    if count > limit:
        picks = sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})
    out: list[tuple[int, bytes]] = []
    for i in picks:
        slot = vector + 4 + 4 * i
        meta = _deref(data, slot, sst)
        at = _field(data, meta, 0, sst)
        offset = _u(_U64, data, at, sst) if at else 0
        key_at = _field(data, meta, 1, sst)
        if not key_at:
            raise _bad(sst, f"block {i} has no first key", data)
        key_vec = _deref(data, key_at, sst)
        size = _u(_U32, data, key_vec, sst)
        if key_vec + 4 + size > len(data):
            raise _bad(sst, f"block {i}'s first key runs past its end", data)
        key = bytes(data[key_vec + 4 : key_vec + 4 + size])
        if out and (offset < out[-1][0] or key < out[-1][1]):
            raise _bad(sst, f"block {i} is out of order", data)
        out.append((offset, key))
    return out
