"""Arrow reads of a read plan: pyarrow's parquet reader over the planned base files."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.names import COMMIT_TIME
from tidemark.format.schema import with_meta_columns
from tidemark.read.plan import ReadPlan
from tidemark.storage import Storage


def read_plan(storage: Storage, plan: ReadPlan, user_schema: pa.Schema | None) -> pa.Table:
    """A pyarrow Table of the plan's rows: the five meta columns, then the user columns."""
    schema = with_meta_columns(user_schema or pa.schema([]))
    if not plan.files:
        return schema.empty_table()
    tables = [pq.read_table(storage.full_path(f.path), schema=schema) for f in plan.files]
    table = pa.concat_tables(tables)
    if plan.commit_times is not None:
        table = table.filter(pc.is_in(table.column(COMMIT_TIME), pa.array(sorted(plan.commit_times), pa.string())))
    return table
