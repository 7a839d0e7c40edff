"""Partition paths: how partition values become folders, and which folders are allowed.

A partition path is one folder per partition field, joined by ``/``; each folder is
``field=value`` (hive-style) or ``value``. A null or empty value is Hudi's
``__HIVE_DEFAULT_PARTITION__``. With ``hoodie.datasource.write.partitionpath.urlencode``
the value is escaped first as Hudi does: the characters of :data:`ESCAPED` become
``%XX`` (two upper-case hex digits), everything else stays as it is.

Whatever the setting, :func:`check_partition_path` refuses a path that is not exactly
one folder per field, or whose folder is empty, ``.``/``..``, hidden (starts with ``.``:
``.hoodie`` is the metadata folder), holds a control character, or is longer than a
file name may be. Values are never rewritten silently: what is not refused is readable
back, value for value, by :func:`partition_values`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from tidemark.errors import InvalidPartitionValueError
from tidemark.format.names import DEFAULT_PARTITION

URL_ENCODE_KEY = "hoodie.datasource.write.partitionpath.urlencode"

# Hudi's set (PartitionPathEncodeUtils): ASCII controls, and characters that mean something in
# paths, URIs or Hive partition specs. '%' comes first so escaping is applied once.
ESCAPED = "%" + "".join(chr(c) for c in range(0x20)) + "\"#'*/:=?\\\x7f{[]^"
_ESCAPES = {c: f"%{ord(c):02X}" for c in ESCAPED}
_UNESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

MAX_NAME_BYTES = 255  # the file-name limit of common file systems (ext4, xfs, APFS, NTFS)


def escape_value(value: str) -> str:
    """``value`` as Hudi writes it into a folder name when url-encoding is on."""
    if not any(c in _ESCAPES for c in value):
        return value
    return "".join(_ESCAPES.get(c, c) for c in value)


def unescape_value(text: str) -> str:
    """The value an url-encoded folder name stands for (``%XX`` back to the character)."""
    return _UNESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text) if "%" in text else text


def check_partition_path(path: str, fields: Sequence[str], *, hive_style: bool, url_encode: bool) -> None:
    """Raise InvalidPartitionValueError unless ``path`` is one safe folder per partition field."""
    if not fields:
        return
    folders = path.split("/")
    hint = (
        "" if url_encode
        else f"; create the table with {URL_ENCODE_KEY}=true to store such values (encoded as Hudi does)"
    )
    if len(folders) != len(fields):
        raise InvalidPartitionValueError(
            path,
            f"it has {len(folders)} folder(s) for {len(fields)} partition field(s) {list(fields)}: "
            f"a partition value contains '/'{hint}",
        )
    for name, folder in zip(fields, folders, strict=True):
        value = folder
        if hive_style:
            prefix = f"{name}="
            if not folder.startswith(prefix):  # pragma: no cover - the engines always write the prefix
                raise InvalidPartitionValueError(path, f"folder {folder!r} does not start with {prefix!r}")
            value = folder[len(prefix):]
        if value in ("", ".", ".."):
            raise InvalidPartitionValueError(path, f"the value {value!r} of {name!r} is not a folder name")
        if folder.startswith("."):
            raise InvalidPartitionValueError(
                path,
                f"the value {value!r} of {name!r} would make a hidden folder (names starting with '.' are "
                "Hudi's metadata or skipped by readers); change the value or use hive-style partitioning",
            )
        if _CONTROL.search(folder):
            raise InvalidPartitionValueError(
                path, f"the value of {name!r} contains a control character (tab, newline, ...){hint}"
            )
        size = len(folder.encode("utf-8", "surrogatepass"))
        if size > MAX_NAME_BYTES:
            raise InvalidPartitionValueError(
                path,
                f"the folder of {name!r} would be {size} bytes, longer than a file name may be "
                f"({MAX_NAME_BYTES}); shorten or hash the value",
            )


def check_partition_paths(
    paths: Iterable[str | None], fields: Sequence[str], *, hive_style: bool, url_encode: bool
) -> None:
    """:func:`check_partition_path` for each distinct path of a batch (None: no partition columns)."""
    for path in paths:
        if path is not None:
            check_partition_path(path, fields, hive_style=hive_style, url_encode=url_encode)


def partition_values(
    partition_path: str, fields: Sequence[str], hive_style: bool, *, url_encode: bool = False
) -> dict[str, str]:
    """The value of each partition field that ``partition_path`` holds, decoded.

    A null or empty value reads back as ``__HIVE_DEFAULT_PARTITION__`` (as in Hudi).
    """
    parts = partition_path.split("/") if partition_path else []
    values = {}
    for i, name in enumerate(fields):
        raw = parts[i] if i < len(parts) else ""
        if hive_style and "=" in raw:
            raw = raw.split("=", 1)[1]
        values[name] = unescape_value(raw) if url_encode else raw
    return values


__all__ = [
    "DEFAULT_PARTITION",
    "ESCAPED",
    "MAX_NAME_BYTES",
    "URL_ENCODE_KEY",
    "check_partition_path",
    "check_partition_paths",
    "escape_value",
    "partition_values",
    "unescape_value",
]
