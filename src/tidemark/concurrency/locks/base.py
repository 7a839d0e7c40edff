"""The lock-provider seam: one small protocol, implementations chosen by name.

A provider guards one table. It is **not reentrant**: a holder that asks again
blocks like anyone else. ``try_acquire`` waits at most ``timeout`` seconds and
returns whether the lock is now held by this provider object; it never raises
for "somebody else holds it". ``owner()`` describes the current holder where the
provider can know it (for error messages), else None.

Providers are built by :func:`tidemark.concurrency.locks.registry.create_lock_provider`
from a :class:`~tidemark.config.locks.LockSettings` (resolved options) and the table's base
path; register new ones with :func:`~tidemark.concurrency.locks.registry.register_lock_provider`.

Lease-based providers (``storage``, ``dynamodb``) can lose a lock they hold without releasing
it (they paused past the lease). They expose ``assert_held()``, which the commit protocol calls
right before it publishes a completed instant; it raises
:class:`~tidemark.errors.LockLostError` when the lock is no longer safely held.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Protocol

from tidemark.config.locks import LockSettings, canonical_provider_name


class LockProvider(Protocol):
    def try_acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock; True once held."""
        ...

    def release(self) -> None:
        """Release the lock if held by this provider; a no-op otherwise."""
        ...

    def owner(self) -> str | None:
        """Who holds the lock now, if known."""
        ...

    def close(self) -> None:
        """Free connections and threads (releases the lock if held)."""
        ...


def owner_id() -> str:
    """A readable identity of this process for lock files and ZooKeeper nodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


__all__ = ["LockProvider", "LockSettings", "canonical_provider_name", "owner_id"]
