"""A table service, an admin call or a table's creation whose storage fails under it (a full disk:
here the process's file-size limit, which makes ``write`` fail as a full disk does) raises a
typed StorageError that says what to do, never a raw OSError; it leaves no temporary file, the
table stays readable by tidemark and hudi-rs as it was or as far as the service completed, and
the same call succeeds once there is room. Each case runs in a process of its own (the limit is
the process's), at several limits, so that the disk fills at different points of the work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import hudi_rs_read

# Bytes a file may grow to: the first fails on the first timeline file, the last inside data files.
LIMITS = (150, 1_500, 6_000, 25_000)

_SERVICE_ON_A_FULL_DISK = """
    import errno, json, os, resource, shutil, signal, sys
    import pyarrow as pa
    import tidemark
    from tidemark.errors import StorageError
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    base, service, limits = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(",")]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG
    options = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
               "hoodie.compact.inline": "false", "hoodie.parquet.small.file.limit": "0",
               "hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2",
               "hoodie.keep.max.commits": "3"}

    def rows(start, count):
        ids = list(range(start, start + count))
        return pa.table({"id": [f"k{i:06d}" for i in ids], "region": [f"r{i % 3}" for i in ids],
                         "note": [f"note {i} " * 4 for i in ids], "ts": ids})

    def build(path):
        table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="ts",
                                      partition_by=["region"], options=options,
                                      table_type="MERGE_ON_READ" if service == "compact" else "COPY_ON_WRITE")
        for i in range(5):  # overlapping batches: file versions to clean, logs to compact
            (table.upsert if i % 2 else table.bulk_insert)(rows(i * 1_000, 3_000))
        return tidemark.Table.open(path, spark=None, options=options)

    def completed(table):
        return [i.requested_time for i in table.timeline() if i.state.value == "completed"
                and i.action.value in ("commit", "deltacommit", "replacecommit")]

    def run(table, times):  # times: the completed commits before it first ran (a rerun targets the same)
        if service == "compact":
            return table.compact()
        if service == "cluster":
            return table.cluster(small_file_limit=10**9, target_file_size=10**9)
        if service == "clean":
            return table.clean()
        if service == "archive":
            return table.archive()
        if service == "savepoint":
            return table.savepoint(times[-2])
        if service == "rollback":
            return table.rollback(times[-1])
        if service == "restore":
            if not table.savepoints():
                table.savepoint(times[1])  # before the limit: what is tested is the restore
            return table.restore(table.savepoints()[0].requested_time)
        raise ValueError(service)

    def content(path, as_of=None):
        table = tidemark.Table.open(path, spark=None).read(as_of)
        return sorted(zip(table.column("id").to_pylist(), table.column("ts").to_pylist()))

    def pending(path):
        return sorted(f"{i.action.value}.{i.state.value}" for i in Timeline.load(LocalStorage(path)).pending)

    def temporaries(path):
        return [name for _, _, names in os.walk(path) for name in names if name.startswith(".tidemark-")]

    reference = os.path.join(base, "reference")
    table = build(reference)
    before = content(reference)
    setup = (lambda t: t.savepoint(completed(t)[1])) if service == "restore" else (lambda t: None)
    setup(table)
    times = completed(table)
    # A restore rolls the commits after the savepoint back newest first: readers may see the table
    # as of any of them (and a rollback's, as of the one before).
    stages = [content(reference, t) for t in times[1:]] if service in ("restore", "rollback") else []
    run(table, times)
    report = {"before": before, "reference": content(reference), "stages": stages, "cases": []}
    for limit in limits:
        path = os.path.join(base, str(limit))
        table = build(path)
        setup(table)
        times = completed(table)
        case = {"limit": limit}
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)  # the hard limit stays: it may not be raised
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            run(table, times)
            case["raised"] = None
        except StorageError as error:
            case["raised"] = "StorageError"
            case["message"] = str(error)
            case["cause_efbig"] = getattr(error.__cause__, "errno", None) == errno.EFBIG
        except Exception as error:  # what a user must never get
            case["raised"] = type(error).__name__
            case["message"] = str(error)
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        case["temporaries"] = temporaries(path)
        case["content_after_failure"] = content(path)
        shutil.copytree(path, path + "-failed")  # as the failure left it, for hudi-rs
        case["rerun"] = None
        try:  # room again: the same call succeeds
            if case["raised"]:
                run(tidemark.Table.open(path, spark=None, options=options), times)
        except Exception as error:
            case["rerun"] = f"{type(error).__name__}: {error}"
        case["content_after_rerun"] = content(path)
        case["pending_after_rerun"] = pending(path)
        report["cases"].append(case)
    print(json.dumps(report))
"""


def _run_service(tmp_path: Path, service: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_SERVICE_ON_A_FULL_DISK), str(tmp_path), service,
         ",".join(map(str, LIMITS))],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


def _brief(case: dict[str, Any]) -> dict[str, Any]:
    """A case without its rows (a failed assertion's message, not 10,000 rows)."""
    return {key: value for key, value in case.items() if not key.startswith("content")}


def _same(rows: list[Any], expected: list[Any]) -> bool:
    """Whether two lists of rows are equal; called as a function so that pytest does not diff
    ten thousand rows on a failure (which takes it minutes), and says where they part."""
    if rows == expected:
        return True
    at = next((i for i, (a, b) in enumerate(zip(rows, expected, strict=False)) if a != b),
              min(len(rows), len(expected)))
    print(f"{len(rows)} rows against {len(expected)}; first difference at {at}: "
          f"{rows[at:at + 1]} against {expected[at:at + 1]}")
    return False


def _content(path: Path) -> list[tuple[str, int]]:
    table = hudi_rs_read(str(path))
    return sorted(zip(table.column("id").to_pylist(), table.column("ts").to_pylist(), strict=True))


@pytest.mark.parametrize("service", ["compact", "cluster", "clean", "archive", "savepoint", "rollback", "restore"])
def test_a_service_on_a_full_disk_raises_a_typed_error_and_leaves_the_table_readable(
    tmp_path: Path, service: str
) -> None:
    report = _run_service(tmp_path, service)
    as_list = [tuple(row) for row in report["reference"]]
    before = [tuple(row) for row in report["before"]]
    stages = [[tuple(r) for r in stage] for stage in report["stages"]]
    failed = [case for case in report["cases"] if case["raised"]]
    assert failed, f"no limit made the {service} fail: {[_brief(c) for c in report['cases']]}"
    for case in report["cases"]:
        limit, brief = case["limit"], _brief(case)
        assert case["raised"] in (None, "StorageError"), brief
        assert case["temporaries"] == [], brief  # a failed write leaves no temporary file
        # Readers see the table as it was, or as far as the service completed.
        after_failure = [tuple(row) for row in case["content_after_failure"]]
        assert any(after_failure == state for state in (before, as_list, *stages)), brief
        assert _same(_content(tmp_path / f"{limit}-failed"), after_failure), brief  # hudi-rs agrees
        assert case["rerun"] is None, brief
        assert _same([tuple(row) for row in case["content_after_rerun"]], as_list), brief
        assert case["pending_after_rerun"] == [], brief
        assert _same(_content(tmp_path / str(limit)), as_list), brief
    for case in failed:
        assert case["cause_efbig"], case  # the file system's failure, kept as the cause
        message = case["message"].lower()
        assert "free space" in message and "run the" in message and "tidemark timeline" in message, case


_CREATE_ON_A_FULL_DISK = """
    import errno, json, os, resource, signal, sys
    import pyarrow as pa
    import tidemark
    from tidemark.errors import StorageError

    path, limit, metadata = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    outcome = {}
    try:
        tidemark.Table.create(path, spark=None, record_key="id", options={"hoodie.metadata.enable": metadata})
        outcome["raised"] = None
    except StorageError as error:
        outcome["raised"] = "StorageError"
        outcome["message"] = str(error)
        outcome["cause_efbig"] = getattr(error.__cause__, "errno", None) == errno.EFBIG
    except Exception as error:
        outcome["raised"] = type(error).__name__
        outcome["message"] = str(error)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    outcome["left"] = sorted(os.path.relpath(os.path.join(r, n), path) for r, _, ns in os.walk(path) for n in ns)
    if outcome["raised"]:
        table = tidemark.Table.create(path, spark=None, record_key="id",
                                      options={"hoodie.metadata.enable": metadata})
        table.bulk_insert(pa.table({"id": ["a", "b"], "v": [1, 2]}))
        outcome["rows_after_create"] = tidemark.Table.open(path, spark=None).read().num_rows
    print(json.dumps(outcome))
"""


@pytest.mark.parametrize(("limit", "metadata"), [(150, "true"), (150, "false"), (1_500, "true"), (3_000, "true")])
def test_a_table_created_on_a_full_disk_leaves_nothing_and_the_next_create_succeeds(
    tmp_path: Path, limit: int, metadata: str
) -> None:
    path = tmp_path / "t"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CREATE_ON_A_FULL_DISK), str(path), str(limit), metadata],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["raised"] == "StorageError", outcome
    assert outcome["cause_efbig"], outcome
    assert "create the table again" in outcome["message"], outcome
    assert outcome["left"] == [], outcome  # no half-made .hoodie to refuse the next create
    assert outcome["rows_after_create"] == 2
    assert hudi_rs_read(str(path)).num_rows == 2


_ATOMIC_WRITE_ON_A_FULL_DISK = """
    import json, os, resource, signal, sys
    from tidemark.storage import LocalStorage

    root = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    storage = LocalStorage(root)
    storage.write_atomic("kept", b"x" * 10)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    failed = []
    calls = {
        "write_atomic": lambda: storage.write_atomic("a", b"y" * 1000),
        "create_if_absent": lambda: storage.create_if_absent("b", b"y" * 1000),
        "stage": lambda: storage.stage("staged", b"y" * 1000),
        "replace_if_match": lambda: storage.replace_if_match("kept", b"y" * 1000,
                                                             storage.read_versioned("kept").version),
    }
    for name, call in calls.items():
        try:
            call()
        except OSError:
            failed.append(name)
    names = sorted(n for _, _, ns in os.walk(root) for n in ns if not n.endswith(".cas.lock"))
    kept = open(os.path.join(root, "kept"), "rb").read().decode()
    print(json.dumps({"failed": failed, "names": names, "kept": kept}))
"""


def test_a_local_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_ATOMIC_WRITE_ON_A_FULL_DISK), str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["failed"] == ["write_atomic", "create_if_absent", "stage", "replace_if_match"], outcome
    assert outcome["names"] == ["kept"], outcome  # no .tidemark-*.tmp, no partial file
    assert outcome["kept"] == "x" * 10  # the replaced file is untouched


def test_hudi_0x_cleaner_keys_are_accepted_as_hudi_1x_accepts_them(tmp_path: Path) -> None:
    import tidemark
    from tidemark.config.resolve import CleanPolicy, validate_keys
    from tidemark.errors import ConfigError, UnknownOptionError

    old = {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "2",
           "hoodie.cleaner.commits.retained": "4", "hoodie.cleaner.hours.retained": "5",
           "hoodie.cleaner.policy.failed.writes": "LAZY"}
    assert validate_keys(old) == {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
                                  "hoodie.clean.fileversions.retained": "2", "hoodie.clean.commits.retained": "4",
                                  "hoodie.clean.hours.retained": "5", "hoodie.clean.failed.writes.policy": "LAZY"}
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=old)
    clean = table.write_config.clean
    assert (clean.policy, clean.file_versions_retained, clean.commits_retained) == (
        CleanPolicy.KEEP_LATEST_FILE_VERSIONS, 2, 4)
    # The same value under both names is one option; two values are refused, naming both keys.
    assert validate_keys({"hoodie.cleaner.commits.retained": "4", "hoodie.clean.commits.retained": "4"}) == {
        "hoodie.clean.commits.retained": "4"}
    with pytest.raises(ConfigError, match="hoodie.cleaner.commits.retained='4'.*hoodie.clean.commits.retained='6'"):
        validate_keys({"hoodie.cleaner.commits.retained": "4", "hoodie.clean.commits.retained": "6"})
    with pytest.raises(UnknownOptionError):
        validate_keys({"hoodie.cleaner.commit.retained": "4"})
    # Spark's options arrive lower-cased: an old key still reaches the table's options.
    from tidemark.engines.spark.datasource_write import split_options

    _, table_options, _ = split_options({"HOODIE.CLEANER.POLICY": "KEEP_LATEST_COMMITS"})
    assert validate_keys(table_options) == {"hoodie.clean.policy": "KEEP_LATEST_COMMITS"}


_INLINE_COMPACTION_ON_A_FULL_DISK = """
    import json, resource, signal, sys
    import pyarrow as pa
    import tidemark
    from tidemark.errors import StorageError
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    path = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def rows(start, count):
        ids = list(range(start, start + count))
        return pa.table({"id": [f"k{i:06d}" for i in ids], "note": [f"note {i} " * 4 for i in ids], "ts": ids})

    options = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2"}
    table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="ts",
                                  table_type="MERGE_ON_READ", options=options)
    table.bulk_insert(rows(0, 20_000))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Room for the upsert's small log file, not for the base files its inline compaction rewrites.
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, hard))
    outcome = {}
    try:
        table.upsert(rows(19_990, 20))  # the second deltacommit: compaction is due after it
        outcome["raised"] = None
    except StorageError as error:
        outcome["raised"] = "StorageError"
        outcome["message"] = str(error)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    timeline = Timeline.load(LocalStorage(path))
    outcome["deltacommits"] = sum(i.action.value == "deltacommit" and i.is_completed for i in timeline.instants)
    outcome["rows_after_failure"] = tidemark.Table.open(path, spark=None).read().num_rows
    after = tidemark.Table.open(path, spark=None, options=options)
    after.upsert(rows(30_000, 5))  # the next write goes on (its logs land beside the pending compaction)
    after.compact()  # and the compaction, run again, finishes
    timeline = Timeline.load(LocalStorage(path))
    outcome["pending"] = [f"{i.action.value}.{i.state.value}" for i in timeline.pending]
    outcome["compactions"] = sum(i.action.value == "commit" and i.is_completed for i in timeline.instants)
    outcome["rows_after_next_write"] = after.read().num_rows
    print(json.dumps(outcome))
"""


def test_an_inline_compaction_on_a_full_disk_says_the_write_completed(tmp_path: Path) -> None:
    path = tmp_path / "t"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_INLINE_COMPACTION_ON_A_FULL_DISK), str(path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["raised"] == "StorageError", outcome
    # Written again, its inserts would be stored twice: the message says it completed.
    assert "completed; its inline compaction did not" in outcome["message"], outcome
    assert outcome["deltacommits"] == 2 and outcome["rows_after_failure"] == 20_010, outcome
    assert outcome["pending"] == [] and outcome["compactions"] == 1, outcome
    assert outcome["rows_after_next_write"] == 20_015
    assert hudi_rs_read(str(path)).num_rows == 20_015


_CREATE_AT_ONCE = """
    import json, multiprocessing, sys
    import tidemark
    from tidemark.errors import TableExistsError

    def create(path, barrier, results):
        barrier.wait()  # both processes create at the same moment
        try:
            tidemark.Table.create(path, spark=None, record_key="id")
            results.put("created")
        except TableExistsError as error:
            results.put("refused: " + str(error))

    if __name__ == "__main__":
        base, rounds = sys.argv[1], int(sys.argv[2])
        context = multiprocessing.get_context("spawn")
        outcomes = []
        for round_ in range(rounds):
            barrier, results = context.Barrier(2), context.Queue()
            workers = [context.Process(target=create, args=(f"{base}/{round_}", barrier, results)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(120)
            outcomes.append(sorted(results.get(timeout=10) for _ in workers))
        print(json.dumps(outcomes))
"""


def test_two_processes_creating_one_table_at_once_get_one_table(tmp_path: Path) -> None:
    import pyarrow as pa

    import tidemark

    script = tmp_path / "create_at_once.py"
    script.write_text(textwrap.dedent(_CREATE_AT_ONCE))
    rounds = 4
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "tables"), str(rounds)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    for round_, outcome in enumerate(json.loads(result.stdout.strip().splitlines()[-1])):
        # One creates the table; the other is refused (the table exists, or is being created),
        # never both writing it.
        assert outcome[0] == "created" and outcome[1].startswith("refused: "), outcome
        path = str(tmp_path / "tables" / str(round_))
        table = tidemark.Table.open(path, spark=None)
        table.bulk_insert(pa.table({"id": ["a", "b"]}))
        assert hudi_rs_read(path).num_rows == 2
        assert not [n for n in os.listdir(os.path.join(path, ".hoodie")) if n.startswith(".tidemark-")]


_ROLLBACK_INTERRUPTED = """
    import json, resource, shutil, signal, sys
    import pyarrow as pa
    import tidemark
    from tidemark.errors import StorageError
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    base = sys.argv[1]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for limit in range(500, 20_000, 250):  # the first limit at which the rollback stops half done
        path = f"{base}/{limit}"
        table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="ts")
        table.bulk_insert(pa.table({"id": [f"k{i}" for i in range(2_000)], "ts": list(range(2_000))}))
        last = table.upsert(pa.table({"id": [f"k{i}" for i in range(1_000, 3_000)], "ts": [9] * 2_000}))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            table.rollback(last.instant_time)
        except StorageError:
            pass
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        pending = [i.action.value for i in Timeline.load(LocalStorage(path)).pending]
        if pending == ["rollback"]:
            print(json.dumps({"path": path, "instant": last.instant_time}))
            break
        shutil.rmtree(path)
"""


def test_the_cli_finishes_a_rollback_a_full_disk_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidemark.cli.main import main
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_ROLLBACK_INTERRUPTED), str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "no limit left the rollback half done"
    found = json.loads(result.stdout.strip().splitlines()[-1])
    # The rolled-back commit's timeline files are gone already: run again, the rollback finishes.
    code = main(["rollback", found["path"], found["instant"], "--yes"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "finished the interrupted rollback" in out
    timeline = Timeline.load(LocalStorage(found["path"]))
    assert timeline.pending == []
    assert hudi_rs_read(found["path"]).num_rows == 2_000


def test_the_cli_clean_takes_hudi_0x_keys_beside_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    import pyarrow as pa

    import tidemark
    from tidemark.cli.main import main

    path, reference = str(tmp_path / "t"), str(tmp_path / "reference")
    options = {"hoodie.clean.automatic": "false", "hoodie.parquet.small.file.limit": "0"}
    table = tidemark.Table.create(path, spark=None, record_key="id", options=options)
    for i in range(6):
        table.upsert(pa.table({"id": ["a", "b"], "v": [i, i]}))
    shutil.copytree(path, reference)

    def base_files(root: str) -> set[str]:
        return {name for folder, _, names in os.walk(root) for name in names
                if name.endswith(".parquet") and ".hoodie" not in folder}

    # --policy and --retain win over the same options given under their old names.
    code = main(["clean", path, "--options", "hoodie.cleaner.policy=keep_latest_file_versions",
                 "hoodie.cleaner.fileversions.retained=4", "--policy", "commits", "--retain", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    tidemark.Table.open(reference, spark=None, options={
        "hoodie.clean.policy": "KEEP_LATEST_COMMITS", "hoodie.clean.commits.retained": "1"}).clean()
    assert base_files(path) == base_files(reference)
    assert len(base_files(path)) == 2  # the old options' four versions were not kept
    # Two values for one option under its two names are refused.
    code = main(["clean", path, "--options", "hoodie.cleaner.policy=KEEP_LATEST_FILE_VERSIONS",
                 "hoodie.clean.policy=KEEP_LATEST_COMMITS"])
    assert code != 0 and "given twice" in capsys.readouterr().err
    assert tidemark.Table.open(path, spark=None).read().num_rows == 2


def test_a_creator_that_claims_a_folder_another_finished_creating_meanwhile_is_refused(tmp_path: Path) -> None:
    """The folder was empty when this creator looked, and another one created a table and gave its
    claim up before this one claimed: the claim is given up again, the table is left as it is."""
    import pyarrow as pa

    import tidemark
    from tidemark.errors import TableExistsError
    from tidemark.storage import LocalStorage
    from tidemark.write.table_setup import CREATION_CLAIM, _claim_creation

    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id")
    table.bulk_insert(pa.table({"id": ["a"]}))
    storage = LocalStorage(path)
    assert not storage.exists(CREATION_CLAIM)  # a finished creation leaves no claim
    with pytest.raises(TableExistsError, match="already exists"):
        _claim_creation(storage, path)
    assert not storage.exists(CREATION_CLAIM)
    assert hudi_rs_read(path).num_rows == 1


def test_a_creation_a_killed_process_left_is_named_by_the_next_create(tmp_path: Path) -> None:
    import tidemark
    from tidemark.errors import TableExistsError
    from tidemark.write.table_setup import CREATION_CLAIM

    path = tmp_path / "t"
    (path / ".hoodie").mkdir(parents=True)
    (path / CREATION_CLAIM).write_bytes(b"a killed creator's")
    with pytest.raises(TableExistsError, match="remove the folder's .hoodie"):
        tidemark.Table.create(str(path), spark=None, record_key="id")
