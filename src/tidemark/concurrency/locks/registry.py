"""Lock providers by name: the built-in ones (imported when first asked for, as kazoo is
optional) and those registered with :func:`register_lock_provider`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidemark.concurrency.locks.base import LockProvider
from tidemark.config.locks import LockSettings, add_provider_name, canonical_provider_name

if TYPE_CHECKING:
    from tidemark.storage import Storage

# (settings, table_path) or (settings, table_path, storage): a factory that takes a third
# argument gets the table's open storage (providers that keep their lock in the table use it).
Factory = Callable[..., LockProvider]
_REGISTRY: dict[str, Factory] = {}


def register_lock_provider(name: str, factory: Factory) -> None:
    _REGISTRY[name] = factory
    add_provider_name(name)


def _built_in(name: str) -> Factory:
    if name == "in_process":
        from tidemark.concurrency.locks.in_process import factory as in_process

        return in_process
    if name == "filesystem":
        from tidemark.concurrency.locks.filesystem import factory as filesystem

        return filesystem
    if name == "storage":
        from tidemark.concurrency.locks.storage_lock import factory as storage_lock

        return storage_lock
    if name == "dynamodb":
        from tidemark.concurrency.locks.dynamodb import factory as dynamodb

        return dynamodb
    from tidemark.concurrency.locks.zookeeper import factory as zookeeper

    return zookeeper


def create_lock_provider(settings: LockSettings, table_path: str, storage: Storage | None = None) -> LockProvider:
    """The provider named by ``settings`` for the table at ``table_path`` (``storage``: the table's
    open storage, which providers that keep their lock in the table use instead of opening it)."""
    name = canonical_provider_name(settings.provider)
    if name not in _REGISTRY:
        _REGISTRY[name] = _built_in(name)
    factory = _REGISTRY[name]
    if storage is not None and _takes_storage(factory):
        return factory(settings, table_path, storage)
    return factory(settings, table_path)


def _takes_storage(factory: Any) -> bool:
    try:
        return len(inspect.signature(factory).parameters) >= 3
    except (TypeError, ValueError):
        return False
