"""How a record's key is written in ``_hoodie_record_key`` (Hudi's key generators).

* One key field: its value as text. A null or empty value is no key: Hudi refuses the record.
* Several: ``f1:v1,f2:v2``, a null value written ``__null__`` and an empty one ``__empty__``
  (Hudi's complex key generator); a record whose every key field is null or empty has no key.

A value's text is Hudi's for its Avro type (``HoodieAvroUtils``, its default settings): a
timestamp is its count of microseconds since the epoch (of a timestamp without a zone, its
wall-clock time read as UTC), a date ``2024-01-02``, a decimal its plain digits (Hudi's own
``BigDecimal`` text puts one under 10^-6 in E notation), a boolean ``true``/``false``.
Floating-point key fields are refused (``write/validate.py``): Java's text of them (Hudi's,
Spark's) changed with Java 19 and differs from Arrow's.

Writers that disagree on this text store one record twice: it is the key every writer of the
table (Hudi's, tidemark's engines) matches records by, and the bucket index hashes its parts.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"


def value_text(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray | None:
    """The key text of a timestamp column (microseconds since the epoch), or None for the other
    types (their cast to string is their key text)."""
    kind = column.type
    if not pa.types.is_timestamp(kind):
        return None
    micros = pc.cast(column, pa.timestamp("us", tz=kind.tz))
    return pc.cast(pc.cast(micros, pa.int64()), pa.string())


def key_part(text: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A key field's values (as text) as they stand in a key of several fields."""
    empty = pc.equal(pc.binary_length(text), 0)
    if text.null_count == 0 and not pc.any(empty).as_py():
        return text  # nothing to replace: the values as they are, not a copy
    return pc.if_else(pc.fill_null(empty, False), EMPTY_KEY_PART, pc.fill_null(text, NULL_KEY_PART))


def missing_key_value(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Whether each value of a key field is null or empty (no value for the key)."""
    nulls = pc.is_null(column)
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind):
        return pc.or_(nulls, pc.fill_null(pc.equal(pc.binary_length(column), 0), False))
    return nulls  # other types' text is never empty


__all__ = ["EMPTY_KEY_PART", "NULL_KEY_PART", "key_part", "missing_key_value", "value_text"]
