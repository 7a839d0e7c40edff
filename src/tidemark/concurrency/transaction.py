"""The table lock around the protocol's critical sections, with timeout, retries and backoff.

The lock is held only to generate instant times, to publish a commit (after the
conflict checks) and to roll back a dead writer, never while data is written.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tidemark.concurrency.locks.base import LockProvider, LockSettings, canonical_provider_name
from tidemark.concurrency.locks.registry import create_lock_provider
from tidemark.errors import LockLostError, LockTimeoutError

if TYPE_CHECKING:
    from tidemark.storage import Storage


class TableLock:
    def __init__(self, settings: LockSettings, table_path: str, storage: Storage | None = None) -> None:
        self.settings = settings
        self.name = canonical_provider_name(settings.provider)
        self.table_path = table_path
        self._storage = storage  # the table's storage, for providers that keep their lock in it
        self._provider: LockProvider | None = None
        self.held = False  # whether this TableLock holds the lock now (the lock is not reentrant)

    @property
    def provider(self) -> LockProvider:
        if self._provider is None:
            self._provider = create_lock_provider(self.settings, self.table_path, self._storage)
        return self._provider

    def assert_held(self) -> None:
        """The fence: raise LockLostError unless the lock is still safely held. Called right before
        a completed instant is published; providers that cannot lose a held lock pass."""
        check = getattr(self.provider, "assert_held", None)
        if check is not None:
            check()
        elif getattr(self.provider, "lost", False):  # ZooKeeper: the session (and the lock) expired
            raise LockLostError(provider=self.name, lock=self.table_path,
                                detail="the ZooKeeper session expired while holding it")

    def acquire(self, purpose: str) -> None:
        """Acquire or raise LockTimeoutError; waits up to (num_retries + 1) attempts with backoff."""
        s = self.settings
        started = time.monotonic()
        pause = s.retry_wait_ms / 1000
        for attempt in range(s.num_retries + 1):
            if self.provider.try_acquire(s.wait_time_ms / 1000):
                self.held = True
                return
            if attempt < s.num_retries:
                time.sleep(pause)
                pause = min(pause * 2, s.max_retry_wait_ms / 1000)
        raise LockTimeoutError(
            provider=self.name,
            holder=self.provider.owner(),
            waited_ms=int((time.monotonic() - started) * 1000),
            purpose=purpose,
        )

    def release(self) -> None:
        self.held = False
        self.provider.release()

    @contextlib.contextmanager
    def hold(self, purpose: str) -> Iterator[None]:
        self.acquire(purpose)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()
            self._provider = None


class NoLock:
    """Single-writer mode: nothing to exclude."""

    name = "none"
    held = False

    @contextlib.contextmanager
    def hold(self, purpose: str) -> Iterator[None]:
        yield

    def assert_held(self) -> None:
        return None

    def close(self) -> None:
        return None
