"""``tidemark clean`` (file versions), ``savepoint`` and ``restore``, through exit codes and output."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from test_cli import assert_clean_error, run
from tidemark import Table
from tidemark.timeline import Action, State, Timeline

NO_INLINE = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


@pytest.fixture
def versions(tmp_path: Path) -> tuple[str, list[str]]:
    """A table whose one file group has six versions; returns its path and the commit times."""
    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id", options=NO_INLINE)
    times = [table.upsert(pa.table({"id": [1, 2], "v": [i, i]})).instant_time for i in range(6)]
    return path, times


def _parquet_files(path: str) -> int:
    return sum(1 for f in Path(path).glob("*.parquet"))


def test_clean_deletes_old_versions_with_the_chosen_policy(
    capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]
) -> None:
    path, _ = versions
    code, out, err = run(capsys, "clean", path, "--policy", "file-versions", "--retain", "2")
    assert code == 0, err
    assert "cleaned 4 old file version(s)" in out
    assert _parquet_files(path) == 2
    done = Timeline.load(Table.open(path, spark=None).storage).filter(actions=[Action.CLEAN],
                                                                       states=[State.COMPLETED])
    assert len(done) == 1 and f"clean instant {done[0].requested_time}" in out


def test_clean_failed_writes_only_deletes_no_versions(
    capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]
) -> None:
    path, _ = versions
    code, out, _ = run(capsys, "clean", path, "--failed-writes-only", "--policy", "file-versions", "--retain", "1")
    assert code == 0
    assert "cleaned" not in out
    assert _parquet_files(path) == 6


def test_clean_rejects_a_bad_retain_value(capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]) -> None:
    code, _, err = run(capsys, "clean", versions[0], "--retain", "0")
    assert code == 2
    assert_clean_error(err, "--retain")


def test_savepoint_then_restore(capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]) -> None:
    path, times = versions
    code, out, err = run(capsys, "savepoint", path, times[2], "--comment", "before the fix")
    assert code == 0, err
    assert f"savepoint {times[2]}" in out and "1 base file(s) pinned" in out
    code, out, _ = run(capsys, "savepoint", path)
    assert code == 0 and f"savepoint {times[2]}" in out

    code, out, _ = run(capsys, "clean", path, "--policy", "file-versions", "--retain", "1")
    assert code == 0 and "cleaned 4 old file version(s)" in out  # 6 versions: the latest and the pinned stay

    code, out, err = run(capsys, "restore", path, times[2], "--yes")
    assert code == 0, err
    assert "3 later write(s) will be rolled back" in out
    assert f"restored to {times[2]}" in out
    rows = Table.open(path, spark=None).read().to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, 2), (2, 2)]


def test_restore_without_a_savepoint_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]
) -> None:
    path, times = versions
    code, _, err = run(capsys, "restore", path, times[1], "--yes")
    assert code == 2
    assert_clean_error(err, times[1], "no savepoint")
    assert _parquet_files(path) == 6  # nothing changed


def test_savepoint_of_an_unknown_instant_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], versions: tuple[str, list[str]]
) -> None:
    code, _, err = run(capsys, "savepoint", versions[0], "20200101000000000")
    assert code == 2
    assert_clean_error(err, "20200101000000000")


def test_clean_archive_flag_archives_the_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id", options=NO_INLINE)
    for i in range(8):
        table.upsert(pa.table({"id": [i], "v": [i]}))
    options = ["hoodie.keep.min.commits=3", "hoodie.keep.max.commits=4", "hoodie.clean.commits.retained=2"]
    code, out, err = run(capsys, "clean", path, "--archive", "--options", *options)
    assert code == 0, err
    assert "archived " in out and "into .hoodie/timeline/history" in out
    assert len(Timeline.load(table.storage).completed_data_instants) <= 4
