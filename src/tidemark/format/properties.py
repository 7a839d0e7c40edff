"""``.hoodie/hoodie.properties``: the table's identity and layout, as a typed record.

The file is a Java properties file; values escape ``:``, ``=`` and ``\\`` with a
backslash. Keys tidemark does not use are kept and written back unchanged.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tidemark.errors import CorruptPropertiesError, UnsupportedTableError

PROPERTIES_PATH = ".hoodie/hoodie.properties"
# Hudi keeps the previous file here while it rewrites hoodie.properties; readers fall back to it.
BACKUP_PATH = ".hoodie/hoodie.properties.backup"
TABLE_VERSION = 8
COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"

ALL_ORDERING_FIELDS = "tidemark.table.ordering.fields"

# Hudi's HoodieRecordMerger strategy ids (1.x) per hoodie.record.merge.mode.
MERGE_STRATEGY_IDS = {
    "EVENT_TIME_ORDERING": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
    "COMMIT_TIME_ORDERING": "ce9acb64-bde0-424c-9b91-f6ebba25356d",
    "CUSTOM": "1897ef5f-18bc-4557-939c-9d6a8afd1519",
}


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
    """The key/value pairs of a Java properties text (a new dict each call)."""
    return dict(_parsed_properties(text))


# A write reads hoodie.properties several times (writer settings, checks): the same text is
# parsed once, not character by character on every read.
@functools.lru_cache(maxsize=32)
def _parsed_properties(text: str) -> tuple[tuple[str, str], ...]:
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
    return tuple(props.items())


def format_properties(props: Mapping[str, str]) -> str:
    now = datetime.now(UTC)
    lines = [f"#Properties saved on {now.isoformat()}", f"#{now:%a %b %d %H:%M:%S UTC %Y}"]
    lines += [f"{k}={_escape(v)}" for k, v in sorted(props.items())]
    return "\n".join(lines) + "\n"


def table_checksum(database: str, table_name: str) -> str:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``<database>.<table>`` (UTF-8); a table
    without ``hoodie.database.name`` sums ``.<table>``."""
    return str(zlib.crc32(f"{database}.{table_name}".encode()))


_REQUIRED_KEYS = ("hoodie.table.name", "hoodie.table.type", "hoodie.table.version")


def properties_problem(data: bytes) -> str | None:
    """What makes the bytes of a hoodie.properties file unusable, or None if they are sound.

    Sound means: text, ending with a line break (Hudi and tidemark end every entry with
    one, so a file cut short ends mid-line), with the keys every table has, and, when
    ``hoodie.table.checksum`` is present, a checksum that matches (Hudi's check when it
    loads the file; tables of old Hudi versions have no checksum and pass).
    """
    if not data.strip():
        return "the file is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "the file is not text"
    if not text.endswith("\n"):
        return "the file ends in the middle of a line (truncated)"
    props = parse_properties(text)
    missing = [k for k in _REQUIRED_KEYS if not props.get(k)]
    if missing:
        return f"it lacks {', '.join(missing)}"
    recorded = props.get("hoodie.table.checksum")
    if recorded is not None:
        expected = table_checksum(props.get("hoodie.database.name", ""), props["hoodie.table.name"])
        if recorded.strip() != expected:
            return (
                f"hoodie.table.checksum is {recorded!r} but the table name and database it sums give "
                f"{expected} (the file was edited or damaged)"
            )
    return None


# The file is read at every guard (twice per commit, under the lock): the same bytes are
# checked once (their parse is cached by parse_properties).
_problem_of = functools.lru_cache(maxsize=8)(properties_problem)


def load_properties(read: Callable[[str], bytes]) -> dict[str, str] | None:
    """The table's properties, read as Hudi reads them; None if the table has no such file.

    ``read(path)`` returns a file's bytes or raises FileNotFoundError. hoodie.properties is
    used if sound (:func:`properties_problem`); otherwise ``hoodie.properties.backup``, which
    Hudi leaves while it rewrites the file, if that one is sound. Raises
    CorruptPropertiesError naming hoodie.properties when neither is usable.
    """
    problems: dict[str, str] = {}
    for path in (PROPERTIES_PATH, BACKUP_PATH):
        try:
            data = read(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems[path] = f"it cannot be read ({exc.strerror or exc})"
            continue
        problem = _problem_of(data)
        if problem is None:
            return parse_properties(data.decode("utf-8"))
        problems[path] = problem
    if not problems:
        return None
    path, problem = next(iter(problems.items()))
    if path == PROPERTIES_PATH and BACKUP_PATH in problems:
        problem += f"; {BACKUP_PATH} is no better ({problems[BACKUP_PATH]})"
    elif path == BACKUP_PATH:
        problem = f"{PROPERTIES_PATH} is missing and its backup is unusable: {problem}"
    raise CorruptPropertiesError(path, problem)


def check_fields_exist(config: TableConfig, columns: Sequence[str], *, schema_source: str) -> None:
    """Every record-key, partition and ordering field of the table names one of ``columns``.

    Raises CorruptPropertiesError naming the first field that does not (and hoodie.properties):
    such a table cannot key, partition or merge its records.
    """
    names = set(columns)
    roles = (
        ("record-key", "hoodie.table.recordkey.fields", config.record_key_fields),
        ("partition", "hoodie.table.partition.fields", config.partition_fields),
        ("ordering", "hoodie.table.ordering.fields", config.ordering_fields),
    )
    for role, key, fields in roles:
        for name in fields:
            # Hudi's custom key generator suffixes partition fields with ":<type>"; nested fields use dots.
            top = name.split(":", 1)[0].split(".", 1)[0]
            if top not in names:
                raise CorruptPropertiesError(
                    PROPERTIES_PATH,
                    f"its {role} field {name!r} ({key}) names no column of the table's schema "
                    f"({schema_source}: {sorted(names)})",
                    fix="Correct the field name in the file (or restore it from a backup); the table "
                    "cannot key, partition or merge its records otherwise.",
                    field=name,
                )


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
    partition_url_encode: bool = False  # hoodie.datasource.write.partitionpath.urlencode
    create_schema: str | None = None  # Avro JSON of the user columns
    database: str = "default"
    # Record merging (validated and turned into a merger by tidemark.merge.MergeConfig).
    record_merge_mode: str | None = None  # None: EVENT_TIME_ORDERING with ordering fields, else COMMIT_TIME
    partial_update_mode: str | None = None  # IGNORE_DEFAULTS: null columns of an update keep stored values
    merge_column_groups: str | None = None  # "ts_a:a1,a2;ts_b:b1"
    custom_merger_class: str | None = None  # CUSTOM: "package.module:Class"
    # Index: SIMPLE (look keys up in the base files) or BUCKET (hash of the key picks the file group).
    index_type: str = "SIMPLE"
    bucket_num_buckets: int | None = None
    bucket_hash_fields: tuple[str, ...] = ()  # empty: the record key fields
    extra: Mapping[str, str] = field(default_factory=dict)
    # hoodie.table.version: 8, or 6 for a table tidemark only reads until it is upgraded
    table_version: int = TABLE_VERSION

    @property
    def merge_mode(self) -> str:
        if self.record_merge_mode:
            return self.record_merge_mode
        if self.custom_merger_class:
            return "CUSTOM"
        return "EVENT_TIME_ORDERING" if self.ordering_fields else "COMMIT_TIME_ORDERING"

    @property
    def bucket_index(self) -> bool:
        return self.index_type == "BUCKET"

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
                "hoodie.datasource.write.partitionpath.urlencode": str(self.partition_url_encode).lower(),
                "hoodie.datasource.write.drop.partition.columns": "false",
                "hoodie.record.merge.mode": self.merge_mode,
                "hoodie.record.merge.strategy.id": MERGE_STRATEGY_IDS.get(self.merge_mode, ""),
                "hoodie.table.checksum": table_checksum(self.database, self.name),
            }
        )
        if self.partition_fields:
            props["hoodie.table.partition.fields"] = ",".join(self.partition_fields)
        if self.ordering_fields:
            # hudi-rs (0.5) refuses a table with several ordering fields: Hudi's keys get the first,
            # tidemark keeps the whole list (compared lexicographically) under its own key.
            props["hoodie.table.ordering.fields"] = self.ordering_fields[0]
            props["hoodie.table.precombine.field"] = self.ordering_fields[0]
            if len(self.ordering_fields) > 1:
                props[ALL_ORDERING_FIELDS] = ",".join(self.ordering_fields)
        if self.create_schema:
            props["hoodie.table.create.schema"] = self.create_schema
        optional = {
            "hoodie.table.partial.update.mode": self.partial_update_mode,
            "hoodie.record.merge.column.groups": self.merge_column_groups,
            "hoodie.write.record.merge.custom.implementation.classes": self.custom_merger_class,
        }
        props.update({k: v for k, v in optional.items() if v})
        if self.bucket_index:
            props["hoodie.index.type"] = self.index_type
            props["hoodie.bucket.index.num.buckets"] = str(self.bucket_num_buckets)
            props["hoodie.bucket.index.hash.field"] = ",".join(self.bucket_hash_fields or self.record_key_fields)
        return props

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TableConfig:
        from tidemark.format.properties_v6 import SUPPORTED_OLD_VERSIONS, merge_settings_v6

        version = props.get("hoodie.table.version")
        if version != str(TABLE_VERSION) and version not in SUPPORTED_OLD_VERSIONS:
            raise UnsupportedTableError(
                f"table version {version} is not supported: tidemark reads and writes "
                f"Hudi table version {TABLE_VERSION} (Hudi 1.x), and reads version 6 (Hudi 0.14/0.15) "
                "tables, which `tidemark upgrade` turns into version 8"
            )
        old_merge_mode = merge_settings_v6(props)[0] if version != str(TABLE_VERSION) else None
        ordering = (
            props.get(ALL_ORDERING_FIELDS)
            or props.get("hoodie.table.ordering.fields")
            or props.get("hoodie.table.precombine.field")
        )
        known = {
            "hoodie.table.name",
            "hoodie.table.type",
            "hoodie.table.recordkey.fields",
            "hoodie.table.partition.fields",
            "hoodie.table.ordering.fields",
            "hoodie.table.precombine.field",
            ALL_ORDERING_FIELDS,
            "hoodie.datasource.write.hive_style_partitioning",
            "hoodie.datasource.write.partitionpath.urlencode",
            "hoodie.table.create.schema",
            "hoodie.database.name",
            "hoodie.record.merge.mode",
            "hoodie.record.merge.strategy.id",
            "hoodie.table.partial.update.mode",
            "hoodie.record.merge.column.groups",
            "hoodie.write.record.merge.custom.implementation.classes",
            "hoodie.index.type",
            "hoodie.bucket.index.num.buckets",
            "hoodie.bucket.index.hash.field",
        }
        buckets = props.get("hoodie.bucket.index.num.buckets")
        return cls(
            name=props.get("hoodie.table.name", "table"),
            table_type=props.get("hoodie.table.type", COPY_ON_WRITE),
            record_key_fields=_split(props.get("hoodie.table.recordkey.fields")),
            partition_fields=_split(props.get("hoodie.table.partition.fields")),
            ordering_fields=_split(ordering),
            hive_style_partitioning=props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower()
            == "true",
            partition_url_encode=props.get("hoodie.datasource.write.partitionpath.urlencode", "false").strip().lower()
            == "true",
            create_schema=props.get("hoodie.table.create.schema"),
            database=props.get("hoodie.database.name", "default"),
            record_merge_mode=props.get("hoodie.record.merge.mode") or old_merge_mode,
            partial_update_mode=props.get("hoodie.table.partial.update.mode"),
            merge_column_groups=props.get("hoodie.record.merge.column.groups"),
            custom_merger_class=props.get("hoodie.write.record.merge.custom.implementation.classes"),
            index_type=(props.get("hoodie.index.type") or "SIMPLE").upper(),
            bucket_num_buckets=int(buckets) if buckets and buckets.strip().isdigit() else None,
            bucket_hash_fields=_split(props.get("hoodie.bucket.index.hash.field")),
            extra={k: v for k, v in props.items() if k not in known},
            table_version=int(version or TABLE_VERSION),
        )
