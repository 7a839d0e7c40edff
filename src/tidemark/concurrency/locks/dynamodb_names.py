"""Names of DynamoDB locks, without boto3: the region and the default partition key.

Used by the provider and by the table's recorded writer settings
(:mod:`tidemark.concurrency.writer_settings`), which must not need boto3 to compare them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tidemark.concurrency.locks.in_process import normalize_table_path


def region_of(region: str | None) -> str:
    """Hudi's rule: the configured region, else ``$AWS_REGION``, else ``us-east-1``."""
    return region or os.environ.get("AWS_REGION") or "us-east-1"


def table_name_key(props: Mapping[str, str], table_path: str) -> str:
    """Hudi's default partition key: the table's ``hoodie.table.name``, else its folder name."""
    name = props.get("hoodie.table.name")
    if name:
        return name
    return normalize_table_path(table_path).rstrip("/").rsplit("/", 1)[-1] or "table"
