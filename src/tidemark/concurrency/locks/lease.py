"""Leases: a lock held for a validity period that its holder keeps renewing, and the fence.

The ``storage`` and ``dynamodb`` providers keep their lock in a shared record (an object in the
table's storage, a DynamoDB item) that says who holds it and for how long. Nobody can take a
lease away from a live holder, but a holder that stops renewing (it died, it paused, it lost
the network) loses it once the validity runs out, and a waiter takes it over. So a holder can
lose the lock *without noticing*; that is what the fence is for:

* The holder computes its own deadline on its **monotonic clock**, from the moment *before* it
  sent the write that granted or renewed the lease. A waiter's clock starts later than that
  (it must first see the record), so the holder's deadline comes first.
* :meth:`LeaseLockProvider.assert_held` (called by the commit protocol right before it
  publishes a completed instant) requires at least ``margin`` of the lease to remain; when
  less remains it renews at once, and when that fails it raises
  :class:`~tidemark.errors.LockLostError`. A renewal is a compare-and-swap on the record this
  holder wrote last, so a successful one also proves that nobody took the lock meanwhile.
* A background thread renews every ``renew_interval``; a renewal that finds the record
  changed by someone else marks the lease lost for good. Errors it cannot interpret (a
  timeout, a dropped connection) are retried at the next interval; the deadline decides.

What remains is the time between the check and the publish itself (one request): a pause
longer than ``margin`` exactly there is not fenced. That is inherent to leases on stores
without multi-object transactions (Hudi's lock providers share it); ``margin`` is half the
validity, so the window is seconds wide, not milliseconds.

Subclasses implement the record: :meth:`_attempt` (one try to take the lock),
:meth:`_extend` (renew by compare-and-swap), :meth:`_give_up` (release) and
:meth:`_describe_holder`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from tidemark.concurrency.locks.base import owner_id
from tidemark.errors import LockLostError

log = logging.getLogger(__name__)

_POLL_MIN_S = 0.02
_POLL_MAX_S = 0.25


class LeaseUnknown(Exception):
    """The outcome of a request on the lock record is unknown (timeout, connection): retry later."""


@dataclass(frozen=True)
class Lease:
    """A lease this process holds: the record's version token and the holder's own deadline."""

    token: str  # the record's version (ETag, file version, DynamoDB record version number)
    deadline: float  # time.monotonic() after which the holder must assume the lease is gone
    detail: Any = None  # what the provider needs to renew or release (the record it wrote)


class LeaseLockProvider:
    """The shared part of lease-based lock providers; see the module docstring."""

    provider_name = "lease"

    def __init__(self, *, validity_s: float, renew_interval_s: float, where: str) -> None:
        self._validity_s = validity_s
        self._renew_s = renew_interval_s
        self.margin_s = validity_s / 2
        self.where = where
        self._id = owner_id()
        self._mutex = threading.RLock()
        self._lease: Lease | None = None
        self._lost: str | None = None  # why the lease was lost while held (None: not lost)
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._closed = False

    @property
    def owner_id(self) -> str:
        return self._id

    @property
    def validity_s(self) -> float:
        return self._validity_s

    # -- what subclasses implement ------------------------------------------------------------
    def _attempt(self) -> Lease | None:
        """One try to take the lock (create it, or take over a released or expired one)."""
        raise NotImplementedError

    def _extend(self, lease: Lease) -> Lease | None:
        """Renew by compare-and-swap on ``lease``; None when someone else changed the record."""
        raise NotImplementedError

    def _give_up(self, lease: Lease) -> None:
        """Release by compare-and-swap on ``lease`` (a no-op when someone took it over)."""
        raise NotImplementedError

    def _describe_holder(self) -> str | None:
        """Who holds the lock now and for how long, or None when nobody validly holds it."""
        raise NotImplementedError

    # -- the LockProvider protocol -----------------------------------------------------------
    def try_acquire(self, timeout: float) -> bool:
        if self._closed:
            raise RuntimeError(f"{self.provider_name} lock provider for {self.where} is closed")
        thread = None
        with self._mutex:
            stale = self._lease is not None and (self._lost is not None or self._lease.deadline < time.monotonic())
            if stale:  # a lost lease: forget it (the record is not ours any more) before asking again
                self._lease, self._lost = None, None
                thread = self._stop_renewer()
        self._join(thread)
        deadline = time.monotonic() + max(timeout, 0.0)
        pause = _POLL_MIN_S
        while True:
            lease = self._attempt_quietly()
            if lease is not None:
                with self._mutex:
                    self._lease, self._lost = lease, None
                self._start_renewer()
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # Jittered backoff: waiters on one record do not poll it in lock step.
            time.sleep(min(remaining, pause * random.uniform(0.5, 1.0)))
            pause = min(pause * 2, _POLL_MAX_S)

    def _attempt_quietly(self) -> Lease | None:
        try:
            return self._attempt()
        except LeaseUnknown as exc:
            log.info("%s lock %s: attempt failed (%s); trying again", self.provider_name, self.where, exc)
            return None

    def release(self) -> None:
        with self._mutex:
            lease = self._lease
            thread = self._stop_renewer()
            self._lease, self._lost = None, None
        self._join(thread)
        if lease is None:
            return
        try:
            self._give_up(lease)
        except LeaseUnknown as exc:  # it expires by itself
            log.warning("%s lock %s: release failed (%s); it expires within %.0f s",
                        self.provider_name, self.where, exc, self._validity_s)

    def owner(self) -> str | None:
        with self._mutex:
            if self._lease is not None and self._lost is None:
                return f"{self._id} (this process; lock {self.where})"
        try:
            return self._describe_holder()
        except LeaseUnknown:
            return None

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.release()
        finally:
            self._closed = True

    # -- the fence -----------------------------------------------------------------------------
    @property
    def held(self) -> bool:
        """Whether this provider holds a lease it has not lost (its deadline may have passed)."""
        with self._mutex:
            return self._lease is not None and self._lost is None

    def remaining_s(self) -> float | None:
        """Seconds left on this holder's lease by its own clock (None when not held)."""
        with self._mutex:
            if self._lease is None or self._lost is not None:
                return None
            return self._lease.deadline - time.monotonic()

    def assert_held(self) -> None:
        """Raise LockLostError unless at least ``margin_s`` of the lease remains (renewing first if needed)."""
        with self._mutex:
            if self._lease is None:
                self._raise_lost("this writer does not hold it")
            if self._lost is not None:
                self._raise_lost(self._lost)
            assert self._lease is not None
            if self._lease.deadline - time.monotonic() >= self.margin_s:
                return
            lease = self._renew_locked()
            if lease is None or lease.deadline - time.monotonic() < self.margin_s:
                self._raise_lost(self._lost or "its lease ran out and could not be renewed in time")

    def _raise_lost(self, detail: str) -> None:
        raise LockLostError(provider=self.provider_name, lock=self.where, detail=detail)

    # -- renewal ---------------------------------------------------------------------------------
    def _renew_locked(self) -> Lease | None:
        """Renew now (caller holds the mutex); marks the lease lost when it was taken over."""
        lease = self._lease
        if lease is None or self._lost is not None:
            return None
        try:
            renewed = self._extend(lease)
        except Exception as exc:  # noqa: BLE001 - any failure to renew: the deadline decides, not the error
            log.warning("%s lock %s: renewal failed (%s); %.1f s of the lease left", self.provider_name,
                        self.where, exc, lease.deadline - time.monotonic())
            return None
        if renewed is None:
            self._lost = "another writer took it over after its lease ran out (this writer paused or its " \
                "renewals failed)"
            log.error("%s lock %s: %s", self.provider_name, self.where, self._lost)
            return None
        self._lease = renewed
        return renewed

    def _start_renewer(self) -> None:
        self._stop = threading.Event()
        thread = threading.Thread(target=self._renew_loop, args=(self._stop,), name=f"tidemark-lease-{self._id}",
                                  daemon=True)
        self._renewer = thread
        thread.start()

    def _stop_renewer(self) -> threading.Thread | None:
        """Tell the renewal thread to stop (under the mutex); join it with :meth:`_join` after."""
        self._stop.set()
        thread, self._renewer = self._renewer, None
        return thread

    @staticmethod
    def _join(thread: threading.Thread | None) -> None:
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _renew_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self._renew_s):
            with self._mutex:
                if stop.is_set() or self._lease is None or self._lost is not None:
                    return
                self._renew_locked()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r}, held={self.held})"
