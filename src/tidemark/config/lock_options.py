"""Options of the object-store lock providers (``storage`` and ``dynamodb``), with Hudi's keys.

Kept apart from :mod:`tidemark.config.options` (which appends them to ``OPTIONS``) so that
module stays small; :mod:`tidemark.config.resolve` reads them like every other option.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidemark.config.options import Option


def lock_provider_options() -> tuple[Option, ...]:
    # Imported here, not at the top: options.py calls this while it is being imported.
    from tidemark.config.options import Option, choice, parse_positive_int, parse_str

    return (
        Option(
            "hoodie.write.lock.storage.validity.timeout.secs",
            "300",
            parse_positive_int,
            "storage lock provider: seconds each lease of the lock object (.hoodie/.locks/table_lock.json) "
            "is valid; a dead holder's lock is taken over this long after its last renewal, and a holder "
            "needs half of it left to publish a commit. At least 10, and at least 10x the renew interval.",
        ),
        Option(
            "hoodie.write.lock.storage.renew.interval.secs",
            None,
            parse_positive_int,
            "storage lock provider: seconds between renewals of a held lease (default 30).",
        ),
        Option(
            "hoodie.write.lock.storage.heartbeat.poll.secs",
            None,
            parse_positive_int,
            "Hudi's deprecated name of hoodie.write.lock.storage.renew.interval.secs (set one, not both).",
        ),
        Option(
            "hoodie.write.lock.dynamodb.table",
            "hudi_locks",
            parse_str,
            "dynamodb lock provider: the DynamoDB table of lock items (created on first use).",
        ),
        Option(
            "hoodie.write.lock.dynamodb.partition_key",
            None,
            parse_str,
            "dynamodb lock provider: the table's lock item key (default: hoodie.table.name, as in Hudi).",
        ),
        Option(
            "hoodie.write.lock.dynamodb.region",
            None,
            parse_str,
            "dynamodb lock provider: the AWS region (default: $AWS_REGION, else us-east-1).",
        ),
        Option(
            "hoodie.write.lock.dynamodb.endpoint_url",
            None,
            parse_str,
            "dynamodb lock provider: the DynamoDB endpoint (for a local or compatible server).",
        ),
        Option(
            "hoodie.write.lock.dynamodb.billing_mode",
            "PAY_PER_REQUEST",
            choice("PAY_PER_REQUEST", "PROVISIONED"),
            "dynamodb lock provider: billing mode of a lock table it creates.",
        ),
        Option(
            "hoodie.write.lock.dynamodb.read_capacity",
            "20",
            parse_positive_int,
            "dynamodb lock provider: read capacity of a PROVISIONED lock table it creates.",
        ),
        Option(
            "hoodie.write.lock.dynamodb.write_capacity",
            "10",
            parse_positive_int,
            "dynamodb lock provider: write capacity of a PROVISIONED lock table it creates.",
        ),
        Option(
            "hoodie.write.lock.dynamodb.table_creation_timeout",
            "120000",
            parse_positive_int,
            "dynamodb lock provider: milliseconds to wait for a lock table it created to become active.",
        ),
    )
