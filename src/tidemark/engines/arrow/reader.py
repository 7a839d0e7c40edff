"""Arrow reads of a read plan: pyarrow's parquet reader over the planned base files,
merged with their log files (merge-on-read) by :func:`tidemark.read.merge.read_slice`."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import COMMIT_TIME
from tidemark.format.parquet_file import read_data_file
from tidemark.format.schema import with_meta_columns
from tidemark.merge import RecordMerger
from tidemark.read.merge import read_slice
from tidemark.read.plan import ReadPlan
from tidemark.storage import Storage


def read_plan(
    storage: Storage,
    plan: ReadPlan,
    user_schema: pa.Schema | None,
    *,
    merger: RecordMerger | None = None,
    delete_ordering_field: str | None = None,
) -> pa.Table:
    """A pyarrow Table of the plan's rows: the five meta columns, then the user columns.

    ``merger`` (the table's) folds file slices with log files; it is required when the
    plan has any (``plan.merges``). ``delete_ordering_field``: see :func:`read_slice`.
    """
    schema = with_meta_columns(user_schema or pa.schema([]))
    if not plan.files:
        return schema.empty_table()
    if plan.merges and merger is None:
        raise ValueError("the read plan merges log files: pass the table's record merger")
    tables = []
    for f in plan.files:
        logs = plan.logs_of(f)
        if logs:
            assert merger is not None
            paths = [storage.open_input(g.path) for g in logs]
            slice_rows = read_slice(
                storage.open_input(f.path), paths, merger, schema, delete_ordering_field=delete_ordering_field,
                base_path=f.path,
            )
            tables.append(slice_rows)
        else:
            tables.append(read_data_file(storage.open_input(f.path), path=f.path, schema=schema))
    table = pa.concat_tables(tables)
    if plan.commit_times is not None:
        table = table.filter(pc.is_in(table.column(COMMIT_TIME), pa.array(sorted(plan.commit_times), pa.string())))
    return table

