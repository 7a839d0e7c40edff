"""The in-process Arrow engine: the same write and read plans as Spark, on pyarrow tables."""
