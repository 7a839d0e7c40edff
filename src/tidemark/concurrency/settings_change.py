"""Changing the concurrency mode and lock a table records for its writers (``Table.set_concurrency``).

Safe while writers may run: the change holds the *old* settings' lock and the properties
mutex, and is refused while any pending write is alive, so no writer commits under
settings that changed beneath it.
"""

from __future__ import annotations

import contextlib

from tidemark.concurrency import writer_settings
from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.concurrency.transaction import TableLock
from tidemark.concurrency.writer_settings import WriterSettings
from tidemark.config import WriteConfig
from tidemark.errors import WriterSettingsError
from tidemark.storage import Storage
from tidemark.timeline import Timeline
from tidemark.timeline.instant_time import parse_instant_time


def change_writer_settings(storage: Storage, current: WriteConfig, wanted: WriteConfig) -> WriterSettings:
    """Record ``wanted``'s concurrency mode and lock as the table's writer settings.

    ``current`` is the caller's own configuration: its lock options complete the old
    settings' lock, and its heartbeat policy decides which pending writes are alive.
    Returns the new settings (unchanged if the table records them already).
    """
    path = storage.base_path
    new = WriterSettings.of(wanted.concurrency_mode, wanted.lock, path)
    with writer_settings.properties_mutex(storage):
        old = writer_settings.table_settings(storage)
        if old == new:
            return new
        lock = TableLock(old.lock_settings(current.lock), path, storage) if old is not None else None
        try:
            with lock.hold("change the table's writer settings") if lock else contextlib.nullcontext():
                _refuse_if_writes_alive(storage, current, old, new)
                if not writer_settings.write_settings(storage, new, expected=old):
                    raise WriterSettingsError(
                        f"{path}: the table's writer settings changed while they were being "
                        "changed (another set_concurrency); check them and try again. Nothing was written.",
                        recorded={}, given=new.options())
        finally:
            if lock is not None:
                lock.close()
    return new


def _refuse_if_writes_alive(
    storage: Storage, current: WriteConfig, old: WriterSettings | None, new: WriterSettings
) -> None:
    policy = HeartbeatPolicy(current.heartbeat_interval_ms, current.heartbeat_tolerable_misses)
    alive = [
        i.requested_time
        for i in Timeline.load(storage).pending
        if i.action.writes_data and not policy.is_expired(
            storage, i.requested_time,
            requested_ms=int(parse_instant_time(i.requested_time).timestamp() * 1000),
        )
    ]
    if alive:
        recorded = old.options() if old is not None else {}
        raise WriterSettingsError(
            f"cannot change the writer settings of {storage.base_path} while writes are running: pending "
            f"write(s) {alive[:5]} are alive (heartbeat, or requested less than {policy.expiry_ms} ms ago). "
            "Stop every writer, wait for the expiry (or roll failed writes back with `tidemark clean`), "
            "and call it again. Nothing was changed.",
            recorded=recorded,
            given=new.options(),
        )
