"""ZooKeeper lock provider (kazoo's ``Lock`` recipe: ephemeral sequential nodes).

Options as in Hudi: ``hoodie.write.lock.zookeeper.url`` / ``.port`` / ``.base_path`` /
``.lock_key``, plus the session and connection timeouts. The lock node is
``<base_path>/<lock_key>``; without a lock key it is the table folder's name plus a short
hash of the whole table path, so two tables with the same name never share a lock.

* A holder that dies (even by SIGKILL) keeps the lock until its **session expires**
  (``zk_session_timeout_ms``, negotiated within the server's min/max), not when its TCP
  connection drops. Waiters are woken by a watch as soon as the node is gone.
* A live holder whose session expires (a pause longer than the session timeout, a network
  partition) has lost the lock although it never released it; :attr:`ZooKeeperLockProvider.lost`
  turns True, and the holder must not publish anything after that.
* ``owner()`` reads the identifier stored in the first contender's node (the holder).

kazoo is an optional dependency, imported when this module is imported.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout

from tidemark.concurrency.locks.base import LockSettings, owner_id
from tidemark.concurrency.locks.zookeeper_names import default_lock_key as default_lock_key  # re-exported
from tidemark.concurrency.locks.zookeeper_names import lock_node_path, zookeeper_hosts
from tidemark.errors import ConfigError, TidemarkError

log = logging.getLogger(__name__)


class ZooKeeperLockProvider:
    """A ZooKeeper lock for one table; one kazoo client (one session) per provider."""

    def __init__(self, settings: LockSettings, table_path: str) -> None:
        if not settings.zk_url:
            raise ConfigError(
                "the zookeeper lock provider needs the ZooKeeper host: set hoodie.write.lock.zookeeper.url "
                "(and hoodie.write.lock.zookeeper.port, default 2181)",
                key="hoodie.write.lock.zookeeper.url",
            )
        self._settings = settings
        self.hosts = zookeeper_hosts(settings.zk_url, settings.zk_port)
        self.path = lock_node_path(settings, table_path)
        self._id = owner_id()
        self._lost = threading.Event()
        self._closed = False
        self._client = KazooClient(hosts=self.hosts, timeout=settings.zk_session_timeout_ms / 1000)
        try:
            self._client.start(timeout=settings.zk_connection_timeout_ms / 1000)
        except Exception as exc:  # kazoo raises its handler's timeout exception, or socket errors
            self._client.stop()
            self._client.close()
            raise TidemarkError(
                f"cannot reach ZooKeeper at {self.hosts}: {exc or type(exc).__name__}; is the server running? "
                "(hoodie.write.lock.zookeeper.url / .port)"
            ) from exc
        self._lock: Any = self._client.Lock(self.path, identifier=self._id)
        self._client.add_listener(self._on_state)

    @property
    def owner_id(self) -> str:
        return self._id

    @property
    def lost(self) -> bool:
        """True when the session expired while this provider held the lock (it is no longer exclusive)."""
        return self._lost.is_set()

    def _on_state(self, state: str) -> bool | None:
        if state == KazooState.LOST and self._lock.is_acquired:
            self._lost.set()
            log.warning("ZooKeeper session for lock %s expired while holding it: the lock is lost", self.path)
        return None

    def try_acquire(self, timeout: float) -> bool:
        self._check_open()
        if self._lost.is_set() and self._lock.is_acquired:
            self.release()  # a lock lost with the session is not held: forget it before asking again
        try:
            if timeout > 0:
                acquired = bool(self._lock.acquire(blocking=True, timeout=timeout))
            else:
                acquired = bool(self._lock.acquire(blocking=False))
        except LockTimeout:
            return False
        except KazooException as exc:
            raise TidemarkError(f"ZooKeeper lock {self.path} at {self.hosts} failed: {exc!r}") from exc
        if acquired:
            self._lost.clear()
        return acquired

    def release(self) -> None:
        if self._closed or not self._lock.is_acquired:
            return
        try:
            self._lock.release()
        except KazooException as exc:
            # The node is ephemeral: if we cannot delete it, it goes with our session.
            log.warning("could not release ZooKeeper lock %s (%s); it ends with the session", self.path, exc)
            self._lock.is_acquired = False

    def owner(self) -> str | None:
        if self._closed:
            return None
        try:
            contenders = self._lock.contenders()
        except KazooException:
            return None
        return str(contenders[0]) if contenders and contenders[0] else None

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.release()
        finally:
            self._closed = True
            self._client.remove_listener(self._on_state)
            self._client.stop()
            self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise TidemarkError(f"ZooKeeper lock provider for {self.path} is closed")

    def __repr__(self) -> str:
        return f"ZooKeeperLockProvider({self.hosts}{self.path}, held={bool(self._lock.is_acquired)})"


def factory(settings: LockSettings, table_path: str) -> ZooKeeperLockProvider:
    return ZooKeeperLockProvider(settings, table_path)
