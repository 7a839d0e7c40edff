"""Reading HFiles (version 3), the base-file and log-block format of Hudi's metadata table.

Only what Hudi's metadata table uses: the data blocks, read one after the other from the
start of the file (``DATABLK*``, each whole or gzip-compressed, followed by its checksums),
and the file-info block (``FILEINF2``) that holds the Avro schema of the values. Each cell
is ``key length (int32) | value length (int32) | key | value | MVCC version (1 byte, 0)``;
the key is ``row length (int16) | row | family length (0) | timestamp (8) | type (1)`` and
the row is the record key. An empty value marks a deleted record. Hudi serializes a whole
HFile as the content of an HFile data block in a log file.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
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
