"""Names of ZooKeeper locks: the lock node of a table and kazoo's host string.

Pure functions without kazoo, so the table's recorded writer settings can be compared
(:mod:`tidemark.concurrency.writer_settings`) where kazoo is not installed.
"""

from __future__ import annotations

import hashlib
import os
import re

from tidemark.concurrency.locks.base import LockSettings
from tidemark.concurrency.locks.in_process import normalize_table_path

__all__ = ["default_lock_key", "lock_node_path", "zookeeper_hosts"]


def default_lock_key(table_path: str) -> str:
    """``<table folder name>-<8 hex of sha1(normalized path)>``, safe as a znode name."""
    normalized = normalize_table_path(table_path)
    name = os.path.basename(normalized.rstrip("/")) or "table"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:64]
    if name in (".", ".."):
        name = "table"
    digest = hashlib.sha1(normalized.encode("utf-8")).hexdigest()[:8]
    return f"{name}-{digest}"


def lock_node_path(settings: LockSettings, table_path: str) -> str:
    key = settings.zk_lock_key or default_lock_key(table_path)
    base = settings.zk_base_path.rstrip("/")
    if base and not base.startswith("/"):
        base = "/" + base
    return f"{base}/{key.strip('/')}"


def zookeeper_hosts(url: str, port: int) -> str:
    """kazoo's host string: ``port`` is added to every host that names none (``a,b:2182`` works)."""
    hosts = []
    for host in url.split(","):
        host = host.strip()
        if host.startswith("zk://"):
            host = host[len("zk://") :]
        hosts.append(host if ":" in host.rsplit("]", 1)[-1] else f"{host}:{port}")
    return ",".join(hosts)
