"""HFiles (version 3), the base-file and log-block format of Hudi's metadata table.

Only what Hudi's metadata table uses. Reading: the data blocks, one after the other from
the start of the file (``DATABLK*``, each whole or gzip-compressed, followed by CRC32C
checksums of every 16 KB of header and data), and the file-info block (``FILEINF2``) that
holds the Avro schema of the values. Writing (:func:`write_hfile`): the layout Hudi's own
HFile writer produces: gzip data blocks, a one-level root data index (``IDXROOT2``), an
empty meta index, the file info (``PBUF`` + protobuf pairs) and the protobuf trailer
(``TRABLK"$``) padded to 4096 bytes with the version last. Each cell
is ``key length (int32) | value length (int32) | key | value | MVCC version (1 byte, 0)``;
the key is ``row length (int16) | row | family length (0) | timestamp (8) | type (1)`` and
the row is the record key. An empty value marks a deleted record. Hudi serializes a whole
HFile as the content of an HFile data block in a log file.
"""

from __future__ import annotations

import gzip
import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tidemark.errors import CorruptDataFileError

DATA_MAGIC = b"DATABLK*"
FILE_INFO_MAGIC = b"FILEINF2"
_HEADER = struct.Struct(">8sIIqBII")  # magic, on-disk size w/o header, uncompressed size, prev offset, checksum
_HEADER_SIZE = _HEADER.size  # 33 bytes (HFile v3 with checksums)
_TRAILER_SIZE = 4096
SCHEMA_KEY = b"schema"


@dataclass(frozen=True)
class HFileRecord:
    key: str
    value: bytes  # empty: the record was deleted

    @property
    def deleted(self) -> bool:
        return not self.value


def _block(data: bytes, offset: int, path: str) -> tuple[bytes, bytes, int]:
    """(magic, uncompressed payload, offset of the next block)."""
    if offset + _HEADER_SIZE > len(data):
        raise CorruptDataFileError(path, f"an HFile block header at byte {offset} runs past the end")
    magic, on_disk, uncompressed, _prev, _ctype, _per_checksum, data_with_header = _HEADER.unpack_from(data, offset)
    payload = data[offset + _HEADER_SIZE : offset + data_with_header]
    if payload[:2] == b"\x1f\x8b":
        payload = gzip.decompress(payload)
    if len(payload) != uncompressed:
        raise CorruptDataFileError(path, f"HFile block at byte {offset} holds {len(payload)} bytes, its header says "
                                     f"{uncompressed}")
    return magic, payload, offset + _HEADER_SIZE + on_disk


def _cells(payload: bytes) -> Iterator[HFileRecord]:
    pos = 0
    while pos + 8 <= len(payload):
        key_len, value_len = struct.unpack_from(">II", payload, pos)
        key = payload[pos + 8 : pos + 8 + key_len]
        (row_len,) = struct.unpack_from(">H", key, 0)
        value = payload[pos + 8 + key_len : pos + 8 + key_len + value_len]
        yield HFileRecord(key[2 : 2 + row_len].decode("utf-8"), bytes(value))
        pos += 8 + key_len + value_len + 1  # + the MVCC version byte


def read_records(data: bytes, path: str = "<hfile>") -> list[HFileRecord]:
    """Every cell of the HFile, in key order (as written)."""
    # The trailer ends with the version: minor version in the top byte, major in the lower three.
    if len(data) < _TRAILER_SIZE or data[-3:] != b"\x00\x00\x03":
        raise CorruptDataFileError(path, "not an HFile of version 3 (the last 4 bytes name the version)")
    out: list[HFileRecord] = []
    offset = 0
    while data[offset : offset + 8] == DATA_MAGIC:
        _magic, payload, offset = _block(data, offset, path)
        out.extend(_cells(payload))
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _protobuf_fields(buf: bytes) -> Iterator[tuple[int, bytes]]:
    """Length-delimited fields (wire type 2) of a protobuf message; others skipped."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        wire = tag & 7
        if wire == 2:
            length, pos = _varint(buf, pos)
            yield tag >> 3, buf[pos : pos + length]
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            return


def file_info(data: bytes, path: str = "<hfile>") -> dict[bytes, bytes]:
    """The file-info map (Hudi keeps the values' Avro schema under ``schema``)."""
    start = data.find(FILE_INFO_MAGIC)
    if start < 0:
        return {}
    _magic, payload, _next = _block(data, start, path)
    if payload[:4] != b"PBUF":
        return {}
    length, pos = _varint(payload, 4)
    out: dict[bytes, bytes] = {}
    for number, pair in _protobuf_fields(payload[pos : pos + length]):
        if number == 1:  # BytesBytesPair map_entry
            fields = dict(_protobuf_fields(pair))
            out[fields.get(1, b"")] = fields.get(2, b"")
    return out


# -- writing ------------------------------------------------------------------------------------
_BYTES_PER_CHECKSUM = 16384
_CRC32C_TYPE = 2  # HBase ChecksumType.CRC32C
_GZ = 1  # HBase Compression.Algorithm.GZ
_PUT = 4  # KeyValue.Type.Put
_LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
_BLOCK_SIZE = 64 * 1024
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _checksums(chunked: bytes) -> bytes:
    return b"".join(
        struct.pack(">I", crc32c(chunked[i : i + _BYTES_PER_CHECKSUM]))
        for i in range(0, len(chunked), _BYTES_PER_CHECKSUM)
    )


def _encode_block(magic: bytes, payload: bytes, prev_offset: int) -> bytes:
    compressed = gzip.compress(payload, mtime=0)
    data_with_header = _HEADER_SIZE + len(compressed)
    checksum_len = 4 * -(-data_with_header // _BYTES_PER_CHECKSUM)
    header = _HEADER.pack(magic, len(compressed) + checksum_len, len(payload), prev_offset, _CRC32C_TYPE,
                          _BYTES_PER_CHECKSUM, data_with_header)
    return header + compressed + _checksums(header + compressed)


def _key(row: bytes) -> bytes:
    return struct.pack(">H", len(row)) + row + b"\x00" + struct.pack(">qB", _LATEST_TIMESTAMP, _PUT)


def _write_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _proto_bytes(number: int, value: bytes) -> bytes:
    return _write_varint(number << 3 | 2) + _write_varint(len(value)) + value


def _proto_int(number: int, value: int) -> bytes:
    return _write_varint(number << 3) + _write_varint(value)


def _hadoop_vint(value: int) -> bytes:
    """Hadoop's WritableUtils.writeVInt (lengths in index entries)."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    raw = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return struct.pack(">b", -112 - len(raw)) + raw


def write_hfile(records: Iterable[tuple[str, bytes]], file_info: dict[bytes, bytes]) -> bytes:
    """An HFile of ``(key, value)`` records (sorted here by key; keys must be unique) and the
    given file-info entries (Hudi's: ``schema``, ``minRecordKey``, ``maxRecordKey``, ...);
    the bookkeeping entries HBase readers expect are added."""
    rows = sorted((k.encode("utf-8"), v) for k, v in records)
    if len({k for k, _ in rows}) != len(rows):
        raise ValueError("HFile keys must be unique")
    out = bytearray()
    index: list[tuple[int, int, bytes]] = []
    cells = bytearray()
    first_key = b""
    total_uncompressed = 0
    prev_data = -1

    def flush() -> None:
        nonlocal cells, prev_data, total_uncompressed
        block = _encode_block(DATA_MAGIC, bytes(cells), prev_data)
        index.append((len(out), len(block), first_key))
        prev_data = len(out)
        total_uncompressed += _HEADER_SIZE + len(cells)
        out.extend(block)
        cells = bytearray()

    key_total = value_total = 0
    last_key = b""
    for row, value in rows:
        key = _key(row)
        if not cells:
            first_key = key
        cells += struct.pack(">II", len(key), len(value)) + key + value + b"\x00"
        key_total, value_total, last_key = key_total + len(key), value_total + len(value), key
        if len(cells) >= _BLOCK_SIZE:
            flush()
    if cells or not index:
        flush()
    last_data = index[-1][0]

    root = b"".join(struct.pack(">qi", off, size) + _hadoop_vint(len(k)) + k for off, size, k in index)
    load_on_open = len(out)
    out += _encode_block(b"IDXROOT2", root, -1)
    out += _encode_block(b"IDXROOT2", b"", load_on_open)  # the meta index: no meta blocks
    n = max(len(rows), 1)
    info = {
        b"KEY_VALUE_VERSION": struct.pack(">i", 1),
        b"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0),
        b"hfile.AVG_KEY_LEN": struct.pack(">i", key_total // n),
        b"hfile.AVG_VALUE_LEN": struct.pack(">i", value_total // n),
        b"hfile.CREATE_TIME_TS": struct.pack(">q", int(time.time() * 1000)),
        b"hfile.LASTKEY": last_key,
        **file_info,
    }
    pairs = b"".join(_proto_bytes(1, _proto_bytes(1, k) + _proto_bytes(2, v)) for k, v in sorted(info.items()))
    file_info_offset = len(out)
    out += _encode_block(FILE_INFO_MAGIC, b"PBUF" + _write_varint(len(pairs)) + pairs, -1)
    total_uncompressed += 3 * _HEADER_SIZE + len(root) + len(pairs) + 4

    trailer = b"".join([
        _proto_int(1, file_info_offset),
        _proto_int(2, load_on_open),
        _proto_int(3, len(root)),
        _proto_int(4, total_uncompressed),
        _proto_int(5, len(index)),
        _proto_int(6, 0),
        _proto_int(7, len(rows)),
        _proto_int(8, 1),
        _proto_int(9, 0),
        _proto_int(10, last_data),
        _proto_bytes(11, COMPARATOR.encode()),
        _proto_int(12, _GZ),
    ])
    body = b'TRABLK"$' + _write_varint(len(trailer)) + trailer
    out += body + bytes(_TRAILER_SIZE - 4 - len(body)) + struct.pack(">i", 3 << 24 | 3)
    return bytes(out)
