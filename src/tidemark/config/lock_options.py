"""Options of the object-store lock providers (``storage`` and ``dynamodb``), with Hudi's keys.

Kept apart from :mod:`tidemark.config.options` so that module stays small: it turns these
declarations (key, default, kind of value, documentation) into ``Option``s and appends them to
``OPTIONS``; :mod:`tidemark.config.resolve` reads them like every other option.
"""

from __future__ import annotations

POSITIVE_INT, TEXT, BILLING_MODE = "positive_int", "text", "billing_mode"
BILLING_MODES = ("PAY_PER_REQUEST", "PROVISIONED")


Declared = tuple[str, str | None, str, str]  # key, default, kind of value, documentation


def _declare(key: str, default: str | None, kind: str, doc: str) -> Declared:
    return (key, default, kind, doc)


def lock_provider_options() -> tuple[Declared, ...]:
    return (
        _declare(
            "hoodie.write.lock.storage.validity.timeout.secs",
            "300",
            POSITIVE_INT,
            "storage lock provider: seconds each lease of the lock object (.hoodie/.locks/table_lock.json) "
            "is valid; a dead holder's lock is taken over this long after its last renewal, and a holder "
            "needs half of it left to publish a commit. At least 10, and at least 10x the renew interval.",
        ),
        _declare(
            "hoodie.write.lock.storage.renew.interval.secs",
            None,
            POSITIVE_INT,
            "storage lock provider: seconds between renewals of a held lease (default 30).",
        ),
        _declare(
            "hoodie.write.lock.storage.heartbeat.poll.secs",
            None,
            POSITIVE_INT,
            "Hudi's deprecated name of hoodie.write.lock.storage.renew.interval.secs (set one, not both).",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.table",
            "hudi_locks",
            TEXT,
            "dynamodb lock provider: the DynamoDB table of lock items (created on first use).",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.partition_key",
            None,
            TEXT,
            "dynamodb lock provider: the table's lock item key (default: hoodie.table.name, as in Hudi).",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.region",
            None,
            TEXT,
            "dynamodb lock provider: the AWS region (default: $AWS_REGION, else us-east-1).",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.endpoint_url",
            None,
            TEXT,
            "dynamodb lock provider: the DynamoDB endpoint (for a local or compatible server).",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.billing_mode",
            "PAY_PER_REQUEST",
            BILLING_MODE,
            "dynamodb lock provider: billing mode of a lock table it creates.",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.read_capacity",
            "20",
            POSITIVE_INT,
            "dynamodb lock provider: read capacity of a PROVISIONED lock table it creates.",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.write_capacity",
            "10",
            POSITIVE_INT,
            "dynamodb lock provider: write capacity of a PROVISIONED lock table it creates.",
        ),
        _declare(
            "hoodie.write.lock.dynamodb.table_creation_timeout",
            "120000",
            POSITIVE_INT,
            "dynamodb lock provider: milliseconds to wait for a lock table it created to become active.",
        ),
    )
