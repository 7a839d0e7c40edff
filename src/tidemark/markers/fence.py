"""The rollback fence: no file of a rolled-back write is left behind by a task that outlived it.

A Spark job that fails (a task stopped at an early conflict, a lost executor) returns to
the driver while its other tasks may still run: Spark cancels them, and kills a Python
worker only ``spark.python.task.killTimeout`` later. The driver then rolls the write back,
deleting the files its markers name. A task that finishes a file after that listing would
leave it behind: invisible to readers (its instant is gone), but never deleted.

The fence closes that window::

    rollback                                  task of the write (WriteFence)
    raise the fence (a file in the            check before creating each marker
      write's marker folder)                  write the file
    list markers, delete their files          check again; if fenced: delete the file
    delete the instant's timeline files
    delete the marker folder (the fence)

A task is fenced while the fence stands or once the instant's requested file is gone (the
rollback finished). A task whose check after writing finds neither finished its file before
the fence rose, so before the listing, and its marker (created before the file) is listed:
the rollback deletes the file. Every other task deletes its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tidemark.errors import WriteRolledBackError
from tidemark.format.names import TIMELINE_DIR, marker_dir
from tidemark.storage import Storage
from tidemark.timeline import Action, State, instant_file_name

ROLLBACK_FENCE = "ROLLBACK"


def fence_path(instant_time: str) -> str:
    return f"{marker_dir(instant_time)}/{ROLLBACK_FENCE}"


def raise_fence(storage: Storage, instant_time: str) -> None:
    """Start fencing the tasks of ``instant_time``; call before listing its markers. Lowered
    with the marker folder, once the instant's timeline files are deleted."""
    storage.create_if_absent(fence_path(instant_time))


@dataclass(frozen=True)
class WriteFence:
    """What a task checks to learn that its write was rolled back (picklable, in the spec).

    ``action`` is the instant's action: its requested file stays on the timeline from the
    write's start until a rollback removes it.
    """

    instant_time: str
    action: Action

    def fenced(self, storage: Storage) -> bool:
        if storage.exists(fence_path(self.instant_time)):
            return True
        requested = instant_file_name(self.instant_time, self.action, State.REQUESTED)
        return not storage.exists(f"{TIMELINE_DIR}/{requested}")

    def check(self, storage: Storage, data_file: str) -> None:
        """Before a file is started: raise WriteRolledBackError if the write was rolled back."""
        if self.fenced(storage):
            raise WriteRolledBackError(self.instant_time, [data_file])

    def confirm(self, storage: Storage, data_files: Iterable[str]) -> None:
        """After files are finished: if the write was rolled back meanwhile, delete them and
        raise WriteRolledBackError (the rollback may have listed their markers too early)."""
        files = [f for f in data_files if f]
        if not files or not self.fenced(storage):
            return
        for path in files:
            storage.delete(path)
        raise WriteRolledBackError(self.instant_time, files)
