"""A streaming query in its own OS process, for the kill-and-restart test.

Run as ``python streaming_process.py SOURCE_DIR TABLE CHECKPOINT``: reads the JSON files of
SOURCE_DIR one per micro-batch (``availableNow``) and bulk-inserts them into TABLE with the
tidemark sink; exits 0 when every file is written. bulk_insert looks no key up, so a replayed
micro-batch that the sink wrote twice would show as duplicate rows.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

import tidemark


def main(source: str, table: str, checkpoint: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tidemark.register(spark)
    query = (
        spark.readStream.schema("id long, batch long").option("maxFilesPerTrigger", 1).json(source)
        .writeStream.format("tidemark")
        .option("checkpointLocation", checkpoint)
        .option("hoodie.table.name", "stream")
        .option("hoodie.datasource.write.recordkey.field", "id")
        .option("hoodie.datasource.write.operation", "bulk_insert")
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
