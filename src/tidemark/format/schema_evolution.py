"""Schema evolution on write, as Hudi 1.x allows it: engine-free decisions on Arrow schemas.

A batch may change the table's schema in the ways Hudi's writers accept out of the box
(its Avro compatibility check, ``AvroSchemaCompatibility``: the new schema must be able to
read every file written with the old one):

* add nullable columns, at the top level or inside a struct (old rows read them as null);
* promote a type: ``int`` to ``long``, ``float`` or ``double``; ``long`` to ``float`` or
  ``double``; ``float`` to ``double`` (also inside structs, lists and maps). ``string`` and
  ``bytes`` read each other: a batch of the other one is cast to the table's type, which
  stays (it would otherwise flip with every batch). Numbers do not become strings: Hudi's
  compatibility check refuses it, and no parquet reader (Spark's, hudi-rs') reads a number
  column as text;
* leave columns out of a batch, filled with null, when
  ``hoodie.write.set.null.for.missing.columns`` is true (else the write is refused).

The table's schema never shrinks and a type never narrows: a batch whose column is
narrower than the table's (an ``int`` for a ``long`` column) is cast up to the table's
type, as Hudi does. The record-key, partition and ordering fields keep their types (their
values name keys, folders and versions). Everything else raises
:class:`~tidemark.errors.SchemaEvolutionError` before anything is written.

:func:`evolve` decides the schema a write records; :func:`union` reconciles two
schemas that writers recorded concurrently (see :mod:`tidemark.concurrency.conflict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tidemark.errors import SchemaEvolutionError
from tidemark.format.names import META_COLUMNS
from tidemark.format.schema import normalize_type

# Old type -> the types its values can be read as (Hudi's Avro promotions), on normalized types.
_PROMOTIONS: dict[pa.DataType, frozenset[pa.DataType]] = {
    pa.int32(): frozenset({pa.int64(), pa.float32(), pa.float64()}),
    pa.int64(): frozenset({pa.float32(), pa.float64()}),
    pa.float32(): frozenset({pa.float64()}),
    pa.string(): frozenset({pa.binary()}),
    pa.binary(): frozenset({pa.string()}),
}


def promotable(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether values of type ``old`` are read as ``new`` by Hudi's rules (equal types included)."""
    return not _differs_beyond_promotion(old, new)


def _differs_beyond_promotion(old: pa.DataType, new: pa.DataType) -> bool:
    """True when reading ``old`` as ``new`` would need ``new`` to narrow or drop something."""
    o, n = normalize_type(old), normalize_type(new)
    if o == n:
        return False
    if pa.types.is_struct(o) and pa.types.is_struct(n):
        names = {f.name for f in n}
        return any(f.name not in names or _differs_beyond_promotion(f.type, n.field(f.name).type) for f in o)
    if (pa.types.is_list(o) and pa.types.is_list(n)) or (pa.types.is_map(o) and pa.types.is_map(n)):
        a = o.item_type if pa.types.is_map(o) else o.value_type
        b = n.item_type if pa.types.is_map(n) else n.value_type
        return _differs_beyond_promotion(a, b)
    return n not in _PROMOTIONS.get(o, frozenset())


def _merged(
    old: pa.DataType, new: pa.DataType, path: str, problems: list[str], *, prefer_old: bool
) -> pa.DataType | None:
    """The type that reads both ``old`` and ``new`` values (None, with a problem, if none does).

    ``old`` wins ties (types equal once normalized, string/bytes) when ``prefer_old``.
    """
    o, n = normalize_type(old), normalize_type(new)
    if o == n or pa.types.is_null(n):
        return old
    if pa.types.is_null(o):
        return new
    if pa.types.is_struct(o) and pa.types.is_struct(n):
        fields: list[pa.Field] = []
        new_names = {f.name: f for f in new}
        ok = True
        for f in old:
            other = new_names.get(f.name)
            if other is None:
                fields.append(f)
                continue
            t = _merged(f.type, other.type, f"{path}.{f.name}", problems, prefer_old=prefer_old)
            ok = ok and t is not None
            fields.append(f.with_type(t) if t is not None else f)
        old_names = {f.name for f in old}
        fields += [f.with_nullable(True) for f in new if f.name not in old_names]
        return pa.struct(fields) if ok else None
    if pa.types.is_list(o) and pa.types.is_list(n):
        t = _merged(old.value_type, new.value_type, f"{path}[]", problems, prefer_old=prefer_old)
        return pa.list_(t) if t is not None else None
    if pa.types.is_map(o) and pa.types.is_map(n):
        if normalize_type(old.key_type) != normalize_type(new.key_type):
            problems.append(f"{path}: map keys {old.key_type} and {new.key_type} differ")
            return None
        t = _merged(old.item_type, new.item_type, f"{path}{{}}", problems, prefer_old=prefer_old)
        return pa.map_(old.key_type, t) if t is not None else None
    up = n in _PROMOTIONS.get(o, frozenset())  # old values read as the new type
    down = o in _PROMOTIONS.get(n, frozenset())  # new values cast to the old type
    if up and (not down or not prefer_old):
        return new
    if down:
        return old
    problems.append(f"{path}: {old} and {new} have no common type (Hudi promotes neither to the other)")
    return None


@dataclass(frozen=True)
class Evolution:
    """The schema a write records, and what changed from the table's."""

    schema: pa.Schema
    added: tuple[str, ...]  # new columns (dotted paths inside structs)
    promoted: tuple[str, ...]  # columns whose table type was promoted

    @property
    def changed(self) -> bool:
        return bool(self.added or self.promoted)


def _paths(t: pa.DataType, prefix: str) -> list[str]:
    if pa.types.is_struct(t):
        out = []
        for f in t:
            out.append(f"{prefix}.{f.name}")
            out += _paths(f.type, f"{prefix}.{f.name}")
        return out
    return []


def _diff(old: pa.DataType, new: pa.DataType, path: str, added: list[str], promoted: list[str]) -> None:
    o, n = normalize_type(old), normalize_type(new)
    if o == n:
        return
    if pa.types.is_struct(o) and pa.types.is_struct(n):
        for f in new:
            name = f"{path}.{f.name}"
            if f.name not in old.names:
                added.append(name)
            else:
                _diff(old.field(f.name).type, f.type, name, added, promoted)
        return
    promoted.append(path)


def evolve(table: pa.Schema, incoming: pa.Schema, *, fixed_fields: Sequence[str] = ()) -> Evolution:
    """The table schema after writing a batch of schema ``incoming`` (Hudi's evolution on write).

    ``fixed_fields`` (record key, partition and ordering fields) must keep their table types.
    Columns of the table that the batch lacks stay in the schema (whether the batch may lack
    them is the writer's check, ``hoodie.write.set.null.for.missing.columns``). Raises
    SchemaEvolutionError listing every disallowed change and saying what is allowed.
    """
    problems: list[str] = []
    by_name = {f.name: f for f in incoming if f.name not in META_COLUMNS}
    fields: list[pa.Field] = []
    added: list[str] = []
    promoted: list[str] = []
    for f in table:
        other = by_name.get(f.name)
        if other is None:
            fields.append(f)
            continue
        t = _merged(f.type, other.type, f.name, problems, prefer_old=True)
        if t is None:
            fields.append(f)
            continue
        if f.name in fixed_fields and normalize_type(t) != normalize_type(f.type):
            problems.append(
                f"{f.name}: a record-key, partition or ordering field keeps its type ({f.type}); the batch has "
                f"{other.type} (cast it to {f.type})"
            )
            continue
        _diff(f.type, t, f.name, added, promoted)
        fields.append(f.with_type(t))
    for name, f in by_name.items():
        if name not in table.names:
            fields.append(f.with_nullable(True))
            added.append(name)
            added += _paths(f.type, name)
    if problems:
        raise SchemaEvolutionError(problems)
    return Evolution(pa.schema(fields), tuple(added), tuple(promoted))


def union(first: pa.Schema, second: pa.Schema) -> tuple[pa.Schema | None, list[str]]:
    """The schema reading what was written with either schema (``first``'s order and ties win).

    Returns (schema, []) or (None, problems) when some column has no common type.
    """
    problems: list[str] = []
    fields: list[pa.Field] = []
    names = {f.name: f for f in second}
    for f in first:
        other = names.get(f.name)
        t = f.type if other is None else _merged(f.type, other.type, f.name, problems, prefer_old=True)
        fields.append(f.with_type(t) if t is not None else f)
    fields += [f for f in second if f.name not in first.names]
    return (None, problems) if problems else (pa.schema(fields), [])


def missing_fields(incoming: pa.Schema, table: pa.Schema) -> list[str]:
    """Columns of ``table`` (dotted inside structs) that ``incoming`` lacks."""
    out: list[str] = []

    def walk(have: pa.DataType, want: pa.DataType, path: str) -> None:
        if pa.types.is_struct(have) and pa.types.is_struct(want):
            for f in want:
                name = f"{path}.{f.name}"
                if f.name not in {g.name for g in have}:
                    out.append(name)
                else:
                    walk(have.field(f.name).type, f.type, name)

    names = {f.name: f for f in incoming}
    for f in table:
        if f.name not in names:
            out.append(f.name)
        else:
            walk(names[f.name].type, f.type, f.name)
    return out
