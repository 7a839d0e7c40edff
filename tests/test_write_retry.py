"""The one retry loop of a write (tidemark.write.retry): which losses run the write again, how
often, each attempt in a session of its own, and the attempts counted across all of them.

The attempts here raise the typed errors the layers below raise; the loop decides by class."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemark.config.resolve import resolve_write_config
from tidemark.errors import (
    ClusteringConflictError,
    DataFileNotFoundError,
    SchemaConflictError,
    WriteConflictError,
)
from tidemark.storage.local import LocalStorage
from tidemark.write.retry import CLUSTERING_RERUNS, run_with_retries


class Attempts:
    """Raises the given losses in turn, then returns "done"; counts the sessions it ran in."""

    def __init__(self, *losses: BaseException) -> None:
        self.losses = list(losses)
        self.sessions = 0
        self.inside = False

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        self.sessions += 1
        self.inside = True
        try:
            yield
        finally:
            self.inside = False

    def __call__(self) -> str:
        assert self.inside, "every attempt runs inside the engine's write session"
        if self.losses:
            raise self.losses.pop(0)
        return "done"


def conflict(n: int = 1) -> WriteConflictError:
    return WriteConflictError(instant_time=f"00{n}", conflicting_instant="000", file_groups=[("", "f")])


def clustering(*, rejected: bool = False) -> ClusteringConflictError:
    return ClusteringConflictError(instant_time="001", clustering_instant="000", file_groups=[("", "f")],
                                   rejected=rejected)


def run(tmp_path: Path, attempts: Attempts, retries: int = 0) -> tuple[str, int]:
    config = resolve_write_config({"hoodie.write.num.retries.on.conflict.failures": retries})
    return run_with_retries(attempts, attempts.session, LocalStorage(str(tmp_path)), config)


def test_conflicts_run_again_up_to_the_configured_retries_each_in_a_new_session(tmp_path: Path) -> None:
    attempts = Attempts(conflict(1), conflict(2))
    assert run(tmp_path, attempts, retries=2) == ("done", 3)
    assert attempts.sessions == 3
    with pytest.raises(WriteConflictError):
        run(tmp_path, Attempts(conflict(1), conflict(2)), retries=1)
    with pytest.raises(WriteConflictError):
        run(tmp_path, Attempts(conflict()), retries=0)


def test_a_schema_conflict_is_never_run_again(tmp_path: Path) -> None:
    schema = SchemaConflictError(instant_time="001", conflicting_instant="000", problems=["c: int vs string"])
    attempts = Attempts(schema)
    with pytest.raises(SchemaConflictError):
        run(tmp_path, attempts, retries=3)
    assert attempts.sessions == 1


def test_clustering_losses_rerun_without_retries_and_count_as_attempts(tmp_path: Path) -> None:
    assert run(tmp_path, Attempts(clustering(), conflict(), clustering()), retries=1) == ("done", 4)
    with pytest.raises(ClusteringConflictError):  # the reject strategy: a conflict like any other
        run(tmp_path, Attempts(clustering(rejected=True)), retries=0)
    too_many = Attempts(*[clustering() for _ in range(CLUSTERING_RERUNS + 1)])
    with pytest.raises(ClusteringConflictError):
        run(tmp_path, too_many, retries=0)
    assert too_many.sessions == CLUSTERING_RERUNS + 1


def test_a_data_file_gone_for_another_reason_raises_the_engines_own_error(tmp_path: Path) -> None:
    """Not a file of this table superseded by a commit: no retry, the original error."""
    original = FileNotFoundError(2, "No such file", str(tmp_path / "elsewhere.parquet"))
    attempts = Attempts(DataFileNotFoundError((str(tmp_path / "elsewhere.parquet"),), original))
    with pytest.raises(FileNotFoundError) as info:
        run(tmp_path, attempts, retries=3)
    assert info.value is original
    assert attempts.sessions == 1
