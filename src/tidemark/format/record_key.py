"""How a record's key is written in ``_hoodie_record_key`` (Hudi's key generators).

* One key field: its value as text. A null or empty value is no key: Hudi refuses the record.
* Several: ``f1:v1,f2:v2``, a null value written ``__null__`` and an empty one ``__empty__``
  (Hudi's complex key generator); a record whose every key field is null or empty has no key.

A value's text is Hudi's for its Avro type (``HoodieAvroUtils``, its default settings): a
timestamp is its count of microseconds since the epoch (of a timestamp without a zone, its
wall-clock time read as UTC), a double or float Java's ``Double.toString`` / ``Float.toString``
(``1.0``, ``1.0E10``), a date ``2024-01-02``, a decimal its plain digits, a boolean
``true``/``false``. Writers that disagree on this text store one record twice: it is the key
every writer of the table (Hudi's, tidemark's engines) matches records by, and the bucket index
hashes its parts.
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"


def value_text(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray | None:
    """The key text of a column of the types whose text needs more than a cast (timestamps,
    floating point), or None for the others (their cast to string is their key text)."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        micros = pc.cast(column, pa.timestamp("us", tz=kind.tz))
        return pc.cast(pc.cast(micros, pa.int64()), pa.string())
    if pa.types.is_floating(kind):
        single = pa.types.is_float32(kind) or pa.types.is_float16(kind)
        values = column.to_numpy(zero_copy_only=False) if isinstance(column, pa.Array) else \
            column.combine_chunks().to_numpy(zero_copy_only=False)
        nulls = pc.is_null(column).to_numpy(zero_copy_only=False) if column.null_count else None
        texts = [None if nulls is not None and nulls[i] else java_float_text(float(v), single=single)
                 for i, v in enumerate(values)]
        return pa.array(texts, pa.string())
    return None


def java_float_text(value: float, *, single: bool = False) -> str:
    """Java's ``Double.toString`` (``Float.toString`` for a ``single``-precision value) of
    ``value``: the shortest digits that read back as it (as Java 19 and later give them),
    ``ddd.ddd`` from 10^-3 up to 10^7, else ``d.dddE<exponent>``; ``NaN``, ``Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0.0"
    shortest = str(np.float32(value)) if single else repr(value)
    digits_tuple = decimal.Decimal(shortest).as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent) + len(digits) - 1  # of the first digit
    digits = digits.rstrip("0") or "0"
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[:exponent + 1].ljust(exponent + 1, "0")
            return f"{sign}{whole}.{digits[exponent + 1:] or '0'}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


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


__all__ = ["EMPTY_KEY_PART", "NULL_KEY_PART", "java_float_text", "key_part", "missing_key_value", "value_text"]
