"""``.hoodie/hoodie.properties``: the table's identity and layout, as a typed record.

The file is a Java properties file; values escape ``:``, ``=`` and ``\\`` with a
backslash. Keys tidemark does not use are kept and written back unchanged.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tidemark.errors import UnsupportedTableError

PROPERTIES_PATH = ".hoodie/hoodie.properties"
TABLE_VERSION = 8
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"


def _escape(value: str) -> str:
    out = []
    for ch in value:
        if ch in "\\:=#!":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    return "".join(out)


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        # split at the first unescaped '=' or ':'
        i = 0
        while i < len(line):
            if line[i] == "\\":
                i += 2
                continue
            if line[i] in "=:":
                break
            i += 1
        props[_unescape(line[:i].strip())] = _unescape(line[i + 1 :].strip())
    return props


def format_properties(props: Mapping[str, str]) -> str:
    now = datetime.now(UTC)
    lines = [f"#Properties saved on {now.isoformat()}", f"#{now:%a %b %d %H:%M:%S UTC %Y}"]
    lines += [f"{k}={_escape(v)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def table_checksum(database: str, table_name: str) -> str:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``<database>.<table>``."""
    return str(zlib.crc32(f"{database}.{table_name}".encode()))


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class TableConfig:
    """The facts of ``hoodie.properties`` that tidemark reads and writes."""

    name: str
    table_type: str
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    ordering_fields: tuple[str, ...] = ()
    hive_style_partitioning: bool = True
    create_schema: str | None = None  # Avro JSON of the user columns
    database: str = "default"
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def merge_mode(self) -> str:
        return "EVENT_TIME_ORDERING" if self.ordering_fields else "COMMIT_TIME_ORDERING"

    def to_properties(self) -> dict[str, str]:
        props = dict(self.extra)
        simple = len(self.record_key_fields) == 1 and len(self.partition_fields) <= 1
        keygen = "SIMPLE" if simple else "COMPLEX"
        props.update(
            {
                "hoodie.table.name": self.name,
                "hoodie.database.name": self.database,
                "hoodie.table.type": self.table_type,
                "hoodie.table.version": str(TABLE_VERSION),
                "hoodie.table.initial.version": str(TABLE_VERSION),
                "hoodie.timeline.layout.version": "2",
                "hoodie.timeline.path": "timeline",
                "hoodie.timeline.history.path": "history",
                "hoodie.table.timeline.timezone": "UTC",
                "hoodie.table.base.file.format": "PARQUET",
                "hoodie.populate.meta.fields": "true",
                "hoodie.table.recordkey.fields": ",".join(self.record_key_fields),
                "hoodie.table.keygenerator.type": keygen,
                "hoodie.datasource.write.hive_style_partitioning": str(self.hive_style_partitioning).lower(),
                "hoodie.datasource.write.partitionpath.urlencode": "false",
                "hoodie.datasource.write.drop.partition.columns": "false",
                "hoodie.record.merge.mode": self.merge_mode,
                "hoodie.table.checksum": table_checksum(self.database, self.name),
            }
        )
        if self.partition_fields:
            props["hoodie.table.partition.fields"] = ",".join(self.partition_fields)
        if self.ordering_fields:
            joined = ",".join(self.ordering_fields)
            props["hoodie.table.ordering.fields"] = joined
            props["hoodie.table.precombine.field"] = joined
        if self.create_schema:
            props["hoodie.table.create.schema"] = self.create_schema
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TableConfig:
        version = props.get("hoodie.table.version")
        if version != str(TABLE_VERSION):
            raise UnsupportedTableError(
                f"table version {version} is not supported: tidemark reads and writes "
                f"Hudi table version {TABLE_VERSION} (Hudi 1.x) only"
            )
        ordering = props.get("hoodie.table.ordering.fields") or props.get("hoodie.table.precombine.field")
        known = {
            "hoodie.table.name",
            "hoodie.table.type",
            "hoodie.table.recordkey.fields",
            "hoodie.table.partition.fields",
            "hoodie.table.ordering.fields",
            "hoodie.table.precombine.field",
            "hoodie.datasource.write.hive_style_partitioning",
            "hoodie.table.create.schema",
            "hoodie.database.name",
        }
        return cls(
            name=props.get("hoodie.table.name", "table"),
            table_type=props.get("hoodie.table.type", COPY_ON_WRITE),
            record_key_fields=_split(props.get("hoodie.table.recordkey.fields")),
            partition_fields=_split(props.get("hoodie.table.partition.fields")),
            ordering_fields=_split(ordering),
            hive_style_partitioning=props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower()
            == "true",
            create_schema=props.get("hoodie.table.create.schema"),
            database=props.get("hoodie.database.name", "default"),
            extra={k: v for k, v in props.items() if k not in known},
        )
