"""Record-key and partition-path columns as Spark expressions (Hudi's key generators).

* record key: one field -> its value as a string; several -> ``f1:v1,f2:v2``
  (Hudi's complex key generator, nulls and empty values as placeholders: format/record_key.py);
* partition path: values joined by ``/``, each ``field=value`` when hive-style;
  a null or empty value becomes ``__HIVE_DEFAULT_PARTITION__``; with url-encoding
  each value is escaped as Hudi does (:mod:`tidemark.format.partition_path`).

The Arrow engine (:mod:`tidemark.engines.arrow.keys`) computes the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tidemark.engines.spark.expressions import name, named, sql_text
from tidemark.errors import NullRecordKeyError
from tidemark.format.names import DEFAULT_PARTITION
from tidemark.format.partition_path import ESCAPED, escape_value
from tidemark.format.record_key import EMPTY_KEY_PART, NULL_KEY_PART
from tidemark.write.validate import ambiguous_key_error

# Each is SQL text parsed once (see :mod:`.expressions`); the functions returning a Column wrap it.


def value_text_sql(field: str, timestamp: str | None = None) -> str:
    """A key field's values as key text (format/record_key.py); ``timestamp``: ``"ltz"`` for a
    TIMESTAMP field (its instant's microseconds since the epoch), ``"ntz"`` for TIMESTAMP_NTZ (its
    wall-clock time read as UTC), never by the session's time zone (nor its default type)."""
    column = name(field)
    if timestamp == "ltz":
        return f"CAST(unix_micros({column}) AS STRING)"
    if timestamp == "ntz":
        wall_clock_as_utc = (f"make_timestamp_ltz(year({column}), month({column}), day({column}), "
                             f"hour({column}), minute({column}), date_part('SECOND', {column}), 'UTC')")
        return f"CAST(unix_micros({wall_clock_as_utc}) AS STRING)"
    return f"CAST({column} AS STRING)"


def record_key_sql(fields: Sequence[str], timestamps: Mapping[str, str] | None = None) -> str:
    """Each row's ``_hoodie_record_key`` (format/record_key.py); ``timestamps``: the timestamp
    fields among them, each ``"ltz"`` or ``"ntz"`` (its Spark type)."""
    kinds = timestamps or {}
    if len(fields) == 1:
        return value_text_sql(fields[0], kinds.get(fields[0]))
    parts = []
    for field in fields:
        text = value_text_sql(field, kinds.get(field))
        part = (f"CASE WHEN {text} IS NULL THEN {sql_text(NULL_KEY_PART)} WHEN {text} = '' "
                f"THEN {sql_text(EMPTY_KEY_PART)} ELSE {text} END")
        parts.append(f"concat({sql_text(f'{field}:')}, {part})")
    return f"concat_ws(',', {', '.join(parts)})"


def record_key_column(fields: Sequence[str], timestamps: Mapping[str, str] | None = None) -> Column:
    return F.expr(record_key_sql(fields, timestamps))


def timestamp_kinds(schema: Any, fields: Sequence[str]) -> dict[str, str]:
    """``"ltz"`` / ``"ntz"`` for each of ``fields`` that is a timestamp in the Spark ``schema``."""
    kinds = {}
    for field in fields:
        type_name = schema[field].dataType.typeName() if field in schema.fieldNames() else ""
        if type_name in ("timestamp", "timestamp_ntz"):
            kinds[field] = "ntz" if type_name == "timestamp_ntz" else "ltz"
    return kinds


def null_key_sql(fields: Sequence[str]) -> str:
    """A row has no record key: its key field null or empty; of several, every one (SQL text)."""
    if not fields:
        return "false"
    return "(" + " AND ".join(f"({name(f)} IS NULL OR CAST({name(f)} AS STRING) = '')" for f in fields) + ")"


def null_key_condition(fields: Sequence[str]) -> Column:
    return F.expr(null_key_sql(fields))


def _escaped(value: str) -> str:
    """Hudi's url-encoding: each character of ESCAPED replaced by its ``%XX`` ('%' first)."""
    for char in ESCAPED:
        value = f"replace({value}, {sql_text(char)}, {sql_text(escape_value(char))})"
    return value


def partition_path_sql(fields: Sequence[str], *, hive_style: bool, url_encode: bool = False) -> str:
    if not fields:
        return "''"
    parts = []
    for field in fields:
        text = f"CAST({name(field)} AS STRING)"
        value = f"CASE WHEN {text} IS NULL OR {text} = '' THEN {sql_text(DEFAULT_PARTITION)} ELSE {text} END"
        if url_encode:
            value = _escaped(value)
        parts.append(f"concat({sql_text(f'{field}=')}, {value})" if hive_style else value)
    return f"concat_ws('/', {', '.join(parts)})"


def partition_path_column(fields: Sequence[str], *, hive_style: bool, url_encode: bool = False) -> Column:
    return F.expr(partition_path_sql(fields, hive_style=hive_style, url_encode=url_encode))


def key_checks(fields: Sequence[str], text_fields: Sequence[str]) -> list[Column]:
    """The aggregates that count rows without a record key (``nulls``) and, of a key of several
    fields, a ``text_fields`` value holding a ',' (``ambiguous``: its key would read as two)."""
    ambiguous = " OR ".join(
        ["false", *(f"coalesce(contains(CAST({name(f)} AS STRING), ','), false)" for f in text_fields)])
    return [named(f"sum(CAST({null_key_sql(fields)} AS BIGINT))", "nulls"),
            named(f"sum(CAST(({ambiguous}) AS BIGINT))", "ambiguous")]


def raise_for_bad_keys(df: DataFrame, fields: Sequence[str], text_fields: Sequence[str],
                       nulls: int, ambiguous: int) -> None:
    """Raise NullRecordKeyError (``nulls`` rows) or the error naming an ambiguous key value of
    ``df`` (one more small job, only then), as :func:`key_checks` counted them."""
    if nulls:
        raise NullRecordKeyError(fields, nulls)
    if ambiguous:
        for field in text_fields:
            found = df.filter(F.col(field).cast("string").contains(",")).select(field).limit(1).collect()
            if found:
                raise ambiguous_key_error(field, found[0][0])
