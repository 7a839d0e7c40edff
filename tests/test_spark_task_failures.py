"""A Spark job of tidemark's failing in its workers gives a typed error that says what to do,
and changes nothing readers see.

* Workers whose Python lacks tidemark (a session created without ``PYSPARK_PYTHON``, workers it
  was not installed on): ``WorkerDependencyError`` from writes, clustering and compaction, the
  table as it was, and the same calls succeed once the workers run the right Python. The
  workers are made to run a bare virtual environment's Python by the session's own setting
  (``SparkContext.pythonExec``: the Python each of its jobs' functions names), so real worker
  processes of that Python fail to import tidemark.
* A damaged base file read by a Spark job (the JVM's parquet reader in the index lookup) or by
  a Python task (a clustering's rewrite): ``CorruptDataFileError`` naming the file, as the Arrow
  engine raises it, the table as it was, and writes succeed once the file is restored.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.engines.base import missing_data_files, read_failure_problem
from tidemark.engines.spark.task_failures import typed_task_failure
from tidemark.errors import CorruptDataFileError, DataFileNotFoundError, WorkerDependencyError
from tidemark.recovery.named_files import table_file_named, unreadable_data_file
from tidemark.services.inline import run_after_write
from tidemark.storage.location import open_storage
from tidemark.timeline import Timeline

COLS = ["id", "part", "v"]


def _rows(ids: range, v: int) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [f"p{i % 2}" for i in ids],
                     "v": pa.array([v] * len(ids), pa.int64())})


def _frame(spark: Any, rows: pa.Table) -> Any:
    return spark.createDataFrame(rows.to_pandas())


def _completed(table: Table) -> set[str]:
    """The completed instants but rollbacks (a failed write's rollback is the one change allowed)."""
    return {i.file_name for i in Timeline.load(table.storage).completed if i.action.value != "rollback"}


def _state(table: Table) -> tuple[set[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What readers see: the completed instants, and the rows tidemark and hudi-rs read."""
    return (_completed(table), rows_of(Table.open(table.path, spark=None).read(), COLS),
            rows_of(hudi_rs_read(table.path), COLS))


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python of the same version with no packages at all: tidemark is not importable."""
    folder = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(folder)], check=True)  # type: ignore[attr-defined]
    python = str(folder / "bin" / "python")
    probe = subprocess.run([python, "-c", "import tidemark"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'tidemark'" in probe.stderr
    return python


@pytest.fixture
def workers_run(spark: Any) -> Iterator[Callable[[str], None]]:
    """Point the session's Python workers at another Python (for the jobs started meanwhile)."""
    context = spark.sparkContext
    own = context.pythonExec

    def point(python: str) -> None:
        context.pythonExec = python

    yield point
    context.pythonExec = own


def _mor_with_logs(spark: Any, path: str) -> Table:
    table = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="v",
                         table_type="MERGE_ON_READ")
    table.upsert(_frame(spark, _rows(range(40), 1)))
    table.upsert(_frame(spark, _rows(range(0, 40, 3), 2)))
    return table


@pytest.mark.parametrize("work", ["bulk_insert", "upsert", "delete", "cluster", "compact"])
def test_workers_without_tidemark_get_a_typed_error_and_the_table_is_unchanged(
    spark: Any, tmp_path: Path, bare_python: str, workers_run: Callable[[str], None], work: str
) -> None:
    path = str(tmp_path / "t")
    if work == "compact":
        table = _mor_with_logs(spark, path)
    else:
        table = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="v")
        table.upsert(_frame(spark, _rows(range(40), 1)))
        table.bulk_insert(_frame(spark, _rows(range(40, 60), 1)))  # files of their own: clustering has work
    calls: dict[str, Callable[[], Any]] = {
        "bulk_insert": lambda: table.bulk_insert(_frame(spark, _rows(range(100, 120), 5))),
        "upsert": lambda: table.upsert(_frame(spark, _rows(range(10, 70), 5))),
        "delete": lambda: table.delete(_frame(spark, _rows(range(0, 30), 9))),
        "cluster": lambda: table.cluster(),
        "compact": lambda: table.compact(),
    }
    before = _state(table)
    workers_run(bare_python)
    with pytest.raises(WorkerDependencyError) as error:
        calls[work]()
    message = str(error.value)
    assert error.value.package == "tidemark" and f"PYSPARK_PYTHON={sys.executable}" in message
    assert "install 'tidemark[spark]'" in message
    assert _state(table) == before
    workers_run(sys.executable)
    done = calls[work]()  # the same call, once the workers can import tidemark
    assert done is not None and _completed(table) > before[0]
    assert rows_of(Table.open(path, spark=None).read(), COLS) == rows_of(hudi_rs_read(path), COLS)


def _damage(file: Path, how: str) -> bytes:
    good = file.read_bytes()
    if how == "garbage":
        file.write_bytes(b"AAAA" * (len(good) // 4))
    elif how == "truncated":
        file.write_bytes(good[: len(good) // 2])
    else:  # the pages zeroed, the footer kept: the file opens, its column chunks do not decode
        half = len(good) // 2
        file.write_bytes(good[:4] + bytes(half - 4) + good[half:])
    return good


def _refused_as_damage(table: Table, damaged: Path, how: str, call: Callable[[], Any]) -> CorruptDataFileError:
    """``call`` run with ``damaged`` damaged ``how``: the CorruptDataFileError it raised (its
    message saying to restore the file), no instant completed by it; the file restored after."""
    before = _completed(table)
    good = _damage(damaged, how)
    try:
        with pytest.raises(CorruptDataFileError) as error:
            call()
    finally:
        damaged.write_bytes(good)
    assert "Restore the file" in str(error.value) and _completed(table) == before
    return error.value


@pytest.mark.parametrize("how", ["garbage", "truncated", "pages"])
def test_a_damaged_base_file_fails_spark_writes_with_corrupt_data_file_error(
    spark: Any, tmp_path: Path, how: str
) -> None:
    path = str(tmp_path / "t")
    table = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="v")
    table.upsert(_frame(spark, _rows(range(40), 1)))
    (damaged,) = [f for f in Path(path).rglob("*.parquet") if "p0" in f.parent.name and ".hoodie" not in f.parts]
    before = _completed(table)
    good = _damage(damaged, how)
    relative = str(damaged.relative_to(path))
    for attempt in (lambda: table.upsert(_frame(spark, _rows(range(0, 10), 2))),
                    lambda: table.delete(_frame(spark, _rows(range(0, 4), 9)))):
        with pytest.raises(CorruptDataFileError) as error:
            attempt()
        assert error.value.path == relative and "Restore the file" in str(error.value)
    assert _completed(table) == before
    damaged.write_bytes(good)
    table.upsert(_frame(spark, _rows(range(0, 10), 2)))
    expected = sorted([(i, f"p{i % 2}", 2 if i < 10 else 1) for i in range(40)])
    assert rows_of(Table.open(path, spark=None).read(), COLS) == expected
    assert rows_of(hudi_rs_read(path), COLS) == expected


def test_a_damaged_file_a_clustering_task_reads_is_corrupt_data_file_error(spark: Any, tmp_path: Path) -> None:
    """The rewrite reads the file in a Python task: its CorruptDataFileError comes back as text."""
    path = str(tmp_path / "t")
    table = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="v")
    table.upsert(_frame(spark, _rows(range(40), 1)))
    table.bulk_insert(_frame(spark, _rows(range(40, 60), 1)))
    damaged = sorted(f for f in Path(path).rglob("*.parquet") if ".hoodie" not in f.parts)[0]
    assert _refused_as_damage(table, damaged, "garbage", table.cluster).path == str(damaged.relative_to(path))
    assert table.cluster().clustered
    expected = sorted([(i, f"p{i % 2}", 1) for i in range(60)])
    assert rows_of(Table.open(path, spark=None).read(), COLS) == expected == rows_of(hudi_rs_read(path), COLS)


def test_damage_is_named_in_folders_and_partitions_with_spaces(spark: Any, tmp_path: Path) -> None:
    """Spark names the file by its URI (``%20`` for a space, ``%25`` for a ``%``): the error still
    names the table's file, from the JVM's lookup and from a clustering task."""
    path = str(tmp_path / "lake with space" / "t")
    table = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="v")
    rows = pa.table({"id": pa.array(range(30), pa.int64()), "part": ["a b" if i % 2 else "c%d" for i in range(30)],
                     "v": pa.array([1] * 30, pa.int64())})
    table.upsert(_frame(spark, rows))
    for folder in ("part=a b", "part=c%d"):
        damaged = next(f for f in Path(path).rglob("*.parquet") if f.parent.name == folder)
        error = _refused_as_damage(table, damaged, "garbage", lambda: table.upsert(_frame(spark, rows.slice(0, 6))))
        assert error.path == f"{folder}/{damaged.name}"
        assert str(tmp_path) not in error.problem and "not a Parquet file" in error.problem
    table.bulk_insert(_frame(spark, rows.slice(10, 10)))  # a second file in each partition: clustering's work
    damaged = sorted(f for f in Path(path).rglob("*.parquet") if f.parent.name == "part=a b")[-1]
    assert _refused_as_damage(table, damaged, "truncated", table.cluster).path == f"part=a b/{damaged.name}"
    assert table.cluster().clustered
    assert rows_of(Table.open(path, spark=None).read(), COLS) == rows_of(hudi_rs_read(path), COLS)


@pytest.mark.parametrize("engine", ["spark", "arrow"])
def test_a_damaged_base_file_fails_compaction_with_its_table_path(spark: Any, tmp_path: Path, engine: str) -> None:
    path = str(tmp_path / "t")
    _mor_with_logs(spark, path)
    table = Table.open(path, spark=spark if engine == "spark" else None)
    damaged = next(f for f in Path(path).rglob("*.parquet") if ".hoodie" not in f.parts)
    assert _refused_as_damage(table, damaged, "truncated", table.compact).path == str(damaged.relative_to(path))
    assert table.compact() is not None
    expected = sorted([(i, f"p{i % 2}", 2 if i % 3 == 0 else 1) for i in range(40)])
    assert rows_of(Table.open(path, spark=None).read(), COLS) == expected == rows_of(hudi_rs_read(path), COLS)


# -- the words recognised, alone --------------------------------------------------------------------

_READ_FAILED = (
    "An error occurred while calling o281.localCheckpoint.\n: org.apache.spark.SparkException: "
    "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/t/part=p0/f1_0-8-10_1.parquet. "
    " SQLSTATE: KD001\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError\n"
    "Caused by: java.lang.RuntimeException: file:/data/t/part=p0/f1_0-8-10_1.parquet is not a Parquet file. "
    "Expected magic number at tail, but found [65, 65, 65, 65]\n\tat org.apache.parquet.hadoop.ParquetFileReader"
)


def test_read_failure_problem_is_the_root_cause_without_the_path() -> None:
    assert read_failure_problem(RuntimeError(_READ_FAILED)) == (
        "is not a Parquet file. Expected magic number at tail, but found [65, 65, 65, 65]")
    gone = _READ_FAILED.replace("NO_HINT", "FILE_NOT_EXIST")
    assert read_failure_problem(RuntimeError(gone)) is None  # gone, not damaged
    assert read_failure_problem(RuntimeError(
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///x/y.parquet. SQLSTATE: KD001")) == (
        "FAILED_READ_FILE.NO_HINT")
    assert read_failure_problem(RuntimeError("Job aborted: task 3 failed (OutOfMemoryError)")) is None
    # A file that is there but does not match the schema read, or a connection that failed, is not damage.
    mismatch = _READ_FAILED.replace("NO_HINT", "PARQUET_COLUMN_DATA_TYPE_MISMATCH")
    assert read_failure_problem(RuntimeError(mismatch)) is None
    reset = _READ_FAILED.split("Caused by:")[0] + "Caused by: java.net.SocketException: Connection reset\n\tat x"
    assert read_failure_problem(RuntimeError(reset)) is None
    # Named by its URI (a space as %20) and by its path in the cause: neither stays in the problem.
    spaced = _READ_FAILED.replace("file:///data/t/", "file:///data/my%20lake/t/").replace(
        "file:/data/t/", "file:/data/my lake/t/")
    assert read_failure_problem(RuntimeError(spaced)) == (
        "is not a Parquet file. Expected magic number at tail, but found [65, 65, 65, 65]")
    assert missing_data_files(RuntimeError(spaced))[0] == "file:///data/my lake/t/part=p0/f1_0-8-10_1.parquet"


def test_a_file_spark_names_is_the_table_file_whatever_its_scheme(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "t"))
    base = str(tmp_path / "t")
    for name in (f"file://{base}/p=1/f.parquet", f"file:{base}/p=1/f.parquet", f"{base}/p=1/f.parquet",
                 f"/{base}/p=1/f.parquet"):
        assert table_file_named(storage, name) == "p=1/f.parquet", name
    assert table_file_named(storage, f"{base}-other/p=1/f.parquet") is None
    assert table_file_named(storage, str(tmp_path / "elsewhere.parquet")) is None
    assert table_file_named(storage, f"s3://{base}/p=1/f.parquet") is None  # another store

    class OnS3:
        def full_path(self, path: str) -> str:
            return f"s3://bucket/t/{path}" if path else "s3://bucket/t"

    s3: Any = OnS3()
    for name in ("s3a://bucket/t/p=1/f.parquet", "s3://bucket/t/p=1/f.parquet", "//bucket/t/p=1/f.parquet"):
        assert table_file_named(s3, name) == "p=1/f.parquet", name
    assert table_file_named(s3, "gs://bucket/t/p=1/f.parquet") is None
    assert table_file_named(s3, "s3a://bucket/other/p=1/f.parquet") is None


def test_only_a_damaged_file_of_the_table_that_is_there_is_corrupt(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", ordering_field="v")
    table.upsert(_rows(range(4), 1))
    file = next(f for f in Path(table.path).rglob("*.parquet") if ".hoodie" not in f.parts)
    text = _READ_FAILED.replace("/data/t/part=p0/f1_0-8-10_1.parquet", str(file))
    failure = RuntimeError(text)
    named = DataFileNotFoundError((f"file://{file}",), failure, read_failure_problem(failure))
    damaged = unreadable_data_file(table.storage, named)
    assert damaged is not None and damaged.path == str(file.relative_to(table.path))
    assert unreadable_data_file(table.storage, DataFileNotFoundError(named.paths, failure)) is None  # no read failure
    file.unlink()
    assert unreadable_data_file(table.storage, named) is None  # gone: not damage


def test_task_failures_recognised_in_sparks_words() -> None:
    missing = RuntimeError(
        "PythonException: ...\n  File \"worker.py\", line 75\nModuleNotFoundError: No module named 'tidemark'")
    typed = typed_task_failure(missing)
    assert isinstance(typed, WorkerDependencyError) and typed.package == "tidemark"
    another = typed_task_failure(RuntimeError("ModuleNotFoundError: No module named 'tidemark.write.newer'"))
    assert isinstance(another, WorkerDependencyError) and another.module == "tidemark.write.newer"
    assert "another version" in str(another) and "PYSPARK_PYTHON" not in str(another)
    assert isinstance(typed_task_failure(RuntimeError("ModuleNotFoundError: No module named 'pyarrow.parquet'")),
                      WorkerDependencyError)
    # A user's function missing its own module is the user's to fix: left as Spark raised it.
    assert typed_task_failure(RuntimeError("ModuleNotFoundError: No module named 'mylib'")) is None
    corrupt = RuntimeError(
        "Traceback (most recent call last):\ntidemark.errors.CorruptDataFileError: the data file p=a b/f.parquet is "
        "corrupt (Parquet magic bytes not found in footer (or so)). Restore the file from a backup; or roll back")
    typed = typed_task_failure(corrupt)
    assert isinstance(typed, CorruptDataFileError) and typed.path == "p=a b/f.parquet"
    assert typed.problem == "Parquet magic bytes not found in footer (or so)"


def test_an_inline_compaction_failing_so_says_the_write_completed(tmp_path: Path) -> None:
    """The write committed before its inline compaction's job failed: written again, its inserts
    would be stored twice, so the error must not say to run it again."""
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="v",
                         table_type="MERGE_ON_READ")
    written = table.upsert(_rows(range(3), 1))
    config = replace(table.write_config, compact_inline=True, compact_inline_max_delta_commits=1)

    def compact() -> None:
        raise WorkerDependencyError("tidemark", "/venv/bin/python")

    with pytest.raises(WorkerDependencyError) as error:
        run_after_write(table.storage, config, delta_commit=True, compact=compact, clean=lambda _: None,
                        archive=lambda: None, cluster=lambda: None,
                        written=next(i for i in Timeline.load(table.storage).completed
                                     if i.requested_time == written.instant_time))
    message = str(error.value)
    assert f"the write {written.instant_time} completed; its inline compaction did not" in message
    assert "do not write it again" in message and "run it again" not in message
