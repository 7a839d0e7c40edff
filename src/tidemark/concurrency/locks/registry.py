"""Lock providers by name: the built-in ones (imported when first asked for, as kazoo is
optional) and those registered with :func:`register_lock_provider`."""

from __future__ import annotations

from collections.abc import Callable

from tidemark.concurrency.locks.base import LockProvider
from tidemark.config.locks import LockSettings, add_provider_name, canonical_provider_name

Factory = Callable[[LockSettings, str], LockProvider]
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
    from tidemark.concurrency.locks.zookeeper import factory as zookeeper

    return zookeeper


def create_lock_provider(settings: LockSettings, table_path: str) -> LockProvider:
    name = canonical_provider_name(settings.provider)
    if name not in _REGISTRY:
        _REGISTRY[name] = _built_in(name)
    return _REGISTRY[name](settings, table_path)
