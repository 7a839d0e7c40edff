"""The Spark engine: writes, reads and table services as Spark jobs, and the data source.

Everything below this package imports PySpark (the ``spark`` extra); this module does
not, so the rest of tidemark can ask for it without importing it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tidemark.errors import MissingDependencyError


def require_pyspark(purpose: str) -> None:
    """Return if PySpark can be imported; else raise :class:`MissingDependencyError` saying that
    ``purpose`` needs it and which extra brings it (``pip install 'tidemark[spark]'``)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise MissingDependencyError("pyspark", "spark", purpose) from None


def register(spark: Any) -> None:
    """Make ``format("tidemark")`` available in the session ``spark`` (idempotent): reads,
    ``df.write`` and ``df.writeStream``; ``format("hudi")`` too when no Hudi bundle is loaded.

    :class:`tidemark.Table` calls it when it is given a session; ``tidemark.register`` is the
    same call for a program that reads with the data source before touching any Table.
    """
    from tidemark.engines.spark.datasource import register as register_data_source

    register_data_source(spark)


def arrow_schema_of_any(schema: Any) -> pa.Schema | None:
    """``schema`` as a pyarrow schema: given as one (or None), as is; a Spark ``StructType`` or
    DDL string is converted, which needs PySpark (MissingDependencyError without it)."""
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    require_pyspark("a schema given as a Spark type or DDL string")
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, str):
        schema = StructType.fromDDL(schema)
    return to_arrow_schema(schema, timezone="UTC")
