"""How a record's key is written in ``_hoodie_record_key`` (Hudi's key generators).

* One key field: its value as text. A null or empty value is no key: Hudi refuses the record.
* Several: ``f1:v1,f2:v2``, a null value written ``__null__`` and an empty one ``__empty__``
  (Hudi's complex key generator); a record whose every key field is null or empty has no key.

Writers that disagree on this text store one record twice: it is the key every writer of the
table (Hudi's, tidemark's engines) matches records by, and the bucket index hashes its parts.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"


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


__all__ = ["EMPTY_KEY_PART", "NULL_KEY_PART", "key_part", "missing_key_value"]
