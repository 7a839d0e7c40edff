"""Heartbeats: proof that the writer of a pending instant is alive.

Each writer keeps ``.hoodie/.heartbeat/<instant>`` fresh from a background
thread (every ``interval``). The instant is *expired* once its heartbeat is
older than ``interval * tolerable_misses``: only then may another writer (or
``tidemark clean``) roll it back. A writer whose own heartbeat expired — its
thread was starved, the machine slept — aborts instead of committing, because
someone may already be rolling it back.

The file is empty and its age is its modification time, exactly as Apache Hudi's
heartbeat client writes and judges it: a live Hudi writer on the same table looks
alive to tidemark and a live tidemark writer looks alive to Hudi.
"""

from __future__ import annotations

import threading
import time

from tidemark.storage import Storage

HEARTBEAT_DIR = ".hoodie/.heartbeat"


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_DIR}/{instant_time}"


def now_ms() -> int:
    return int(time.time() * 1000)


def last_heartbeat_ms(storage: Storage, instant_time: str) -> int | None:
    """Epoch ms of the instant's last heartbeat (its file's modification time), or None if it has none.

    Hudi reads the modification time, not the content (its files are empty), so
    tidemark does too: the same file means the same liveness for both.
    """
    return storage.modified_ms(heartbeat_path(instant_time))


class HeartbeatPolicy:
    def __init__(self, interval_ms: int, tolerable_misses: int) -> None:
        self.interval_ms = interval_ms
        self.tolerable_misses = tolerable_misses

    @property
    def expiry_ms(self) -> int:
        return self.interval_ms * self.tolerable_misses

    def is_expired(self, storage: Storage, instant_time: str, *, requested_ms: int | None = None) -> bool:
        """Whether the writer of ``instant_time`` counts as dead.

        An instant without a heartbeat file counts as dead once its requested
        time is older than the expiry (its writer never started one, or it was
        cleaned already).
        """
        beat = last_heartbeat_ms(storage, instant_time)
        reference = beat if beat is not None else requested_ms
        if reference is None:
            return True
        return now_ms() - reference > self.expiry_ms


class Heartbeat:
    """A running heartbeat for one instant; ``stop()`` ends it and deletes the file."""

    def __init__(self, storage: Storage, instant_time: str, policy: HeartbeatPolicy) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.policy = policy
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tidemark-heartbeat-{instant_time}", daemon=True)

    def start(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        # An empty file, rewritten each beat: its modification time is the heartbeat (as in Hudi).
        self.storage.write_atomic(heartbeat_path(self.instant_time), b"")

    def _run(self) -> None:
        while not self._stop.wait(self.policy.interval_ms / 1000):
            try:
                self.beat()
            except OSError:  # a transient storage error: the next beat may succeed
                continue

    def is_alive(self) -> bool:
        """Whether this writer may still commit: its own heartbeat has not expired on storage."""
        beat = last_heartbeat_ms(self.storage, self.instant_time)
        return beat is not None and now_ms() - beat <= self.policy.expiry_ms

    def stop(self, *, delete: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if delete:
            self.storage.delete(heartbeat_path(self.instant_time))
