"""DynamoDB lock provider (Hudi's ``DynamoDBBasedLockProvider``), through boto3.

``hoodie.write.lock.provider=dynamodb`` (or ``org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider``)
with Hudi's keys: ``hoodie.write.lock.dynamodb.table`` (default ``hudi_locks``, created on first
use with ``.billing_mode`` / ``.read_capacity`` / ``.write_capacity``, waiting up to
``.table_creation_timeout`` ms for it to become active), ``.partition_key`` (default: the table's
``hoodie.table.name``), ``.region`` (default ``$AWS_REGION``, else ``us-east-1``) and
``.endpoint_url``. Credentials come from boto3's usual chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, profiles, instance roles). As in Hudi, the lease lasts
``hoodie.write.lock.wait_time_ms`` and is renewed every third of it.

The lock is one item keyed ``key = <partition key>``, laid out as AWS's DynamoDB lock client
(which Hudi uses) lays it out: ``ownerName``, ``leaseDuration`` (milliseconds, as Hudi configures
the client) and ``recordVersionNumber`` (a fresh UUID on every write). Every write is conditional:

* **acquire**: a consistent GetItem; no item: PutItem if ``attribute_not_exists(key)``; a
  released item (``isReleased``): PutItem if its version is unchanged. An item somebody holds
  is taken over only after this waiter has seen **the same** ``recordVersionNumber`` for a whole
  ``leaseDuration`` on its own monotonic clock: no wall clocks are compared across hosts.
* **renew**: UpdateItem to a new version, if the version and owner are still this holder's.
* **release**: DeleteItem, if the version and owner are still this holder's.
* **fence**: :mod:`tidemark.concurrency.locks.lease` (the holder's deadline counts from before it
  sent its last successful write; a waiter's count starts after it read that write).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from tidemark.concurrency.locks.dynamodb_names import region_of, table_name_key
from tidemark.concurrency.locks.lease import Lease, LeaseLockProvider, LeaseUnknown
from tidemark.config.locks import LockSettings
from tidemark.errors import LockServiceError, MissingDependencyError
from tidemark.format.properties import load_properties
from tidemark.storage import Storage
from tidemark.storage.location import open_storage

KEY = "key"  # the partition key attribute, as Hudi creates the table
_CONDITION_FAILED = "ConditionalCheckFailedException"
_TRANSIENT = {"ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError",
              "ServiceUnavailable", "RequestLimitExceeded", "TransactionConflictException"}

log = logging.getLogger(__name__)


def default_partition_key(storage: Storage) -> str:
    """Hudi's default partition key: the table's name (``hoodie.table.name``), else its folder name."""
    try:
        props = load_properties(storage.read_bytes) or {}
    except Exception:  # noqa: BLE001 - an unreadable table is reported by the write itself
        props = {}
    return table_name_key(props, storage.base_path)


class DynamoDBLockProvider(LeaseLockProvider):
    """A lease on one DynamoDB item; see the module docstring."""

    provider_name = "dynamodb"

    def __init__(self, settings: LockSettings, table_path: str, storage: Storage | None = None) -> None:
        try:
            import boto3
            import botocore.config
            import botocore.exceptions
        except ImportError as exc:  # pragma: no cover - boto3 is a dependency
            raise MissingDependencyError("boto3", "aws", "the dynamodb lock provider") from exc
        self._botocore_errors = botocore.exceptions
        self.table = settings.dynamodb_table
        self.region = region_of(settings.dynamodb_region)
        self.endpoint_url = settings.dynamodb_endpoint_url
        key = settings.dynamodb_partition_key
        if not key:
            key = default_partition_key(storage if storage is not None else open_storage(table_path))
        self.partition_key = key
        lease_s = settings.wait_time_ms / 1000
        super().__init__(validity_s=lease_s, renew_interval_s=lease_s / 3,
                         where=f"dynamodb://{self.table}/{self.partition_key}")
        self._settings = settings
        # Bounded requests: a dead endpoint is a LockServiceError within seconds, not minutes.
        config = botocore.config.Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2,
                                                                                     "mode": "standard"})
        self._client: Any = boto3.session.Session().client(
            "dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=config)
        self._seen: tuple[str, float, float] | None = None  # (version, first seen monotonic, lease s)
        self._ensure_table()

    # -- requests ----------------------------------------------------------------------------------
    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any] | None:
        """Run one request; None when its condition failed. Transient errors raise LeaseUnknown,
        errors a retry cannot fix (credentials, permissions, a missing table) LockServiceError."""
        errors = self._botocore_errors
        try:
            result: dict[str, Any] = getattr(self._client, operation)(**kwargs)
            return result
        except errors.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == _CONDITION_FAILED:
                return None
            if code in _TRANSIENT:
                raise LeaseUnknown(f"{operation}: {code}") from exc
            raise self._service_error(f"{operation} failed: {code}: {exc}") from exc
        except (errors.EndpointConnectionError, errors.ConnectTimeoutError, errors.ReadTimeoutError,
                errors.ConnectionClosedError) as exc:
            raise LeaseUnknown(f"{operation}: {exc}") from exc
        except errors.NoCredentialsError as exc:
            raise self._service_error("no AWS credentials found (set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                                      "or a profile)") from exc

    def _service_error(self, detail: str) -> LockServiceError:
        where = self.endpoint_url or f"region {self.region}"
        return LockServiceError(
            f"DynamoDB lock table {self.table!r} at {where}: {detail}. Check hoodie.write.lock.dynamodb.region / "
            ".endpoint_url and the AWS credentials (boto3's chain: AWS_ACCESS_KEY_ID, profiles, roles)",
            provider="dynamodb")

    def _ensure_table(self) -> None:
        errors = self._botocore_errors
        try:
            status = self._describe_status()
        except (errors.EndpointConnectionError, errors.ConnectTimeoutError, errors.ReadTimeoutError,
                errors.ConnectionClosedError) as exc:
            raise self._service_error(f"cannot connect ({exc})") from exc
        if status is None:
            self._create_table()
            status = self._describe_status()
        deadline = time.monotonic() + self._settings.dynamodb_table_creation_timeout_ms / 1000
        while status != "ACTIVE":
            if time.monotonic() > deadline:
                raise self._service_error(f"the table is {status}, not ACTIVE, after "
                                          f"{self._settings.dynamodb_table_creation_timeout_ms} ms "
                                          "(hoodie.write.lock.dynamodb.table_creation_timeout)")
            time.sleep(0.5)
            status = self._describe_status()

    def _describe_status(self) -> str | None:
        try:
            answer = self._client.describe_table(TableName=self.table)
        except self._botocore_errors.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return None
            raise self._service_error(f"DescribeTable failed: {exc}") from exc
        except self._botocore_errors.NoCredentialsError as exc:
            raise self._service_error("no AWS credentials found") from exc
        return str(answer["Table"]["TableStatus"])

    def _create_table(self) -> None:
        mode = self._settings.dynamodb_billing_mode
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeySchema": [{"AttributeName": KEY, "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": KEY, "AttributeType": "S"}],
            "BillingMode": mode,
        }
        if mode == "PROVISIONED":
            request["ProvisionedThroughput"] = {"ReadCapacityUnits": self._settings.dynamodb_read_capacity,
                                                "WriteCapacityUnits": self._settings.dynamodb_write_capacity}
        try:
            self._client.create_table(**request)
            log.info("created DynamoDB lock table %s", self.table)
        except self._botocore_errors.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":  # created by another writer
                raise self._service_error(f"CreateTable failed: {exc}") from exc

    def _get(self) -> dict[str, Any] | None:
        answer = self._call("get_item", TableName=self.table, Key={KEY: {"S": self.partition_key}},
                            ConsistentRead=True)
        return (answer or {}).get("Item")

    def _put(self, condition: str, values: dict[str, Any] | None = None) -> Lease | None:
        started = time.monotonic()
        version = str(uuid.uuid4())
        item = {KEY: {"S": self.partition_key}, "ownerName": {"S": self.owner_id},
                "leaseDuration": {"S": str(int(self.validity_s * 1000))}, "recordVersionNumber": {"S": version}}
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": item, "ConditionExpression": condition,
                                  "ExpressionAttributeNames": {"#k": KEY, "#rvn": "recordVersionNumber",
                                                               "#ir": "isReleased"}}
        if values:
            kwargs["ExpressionAttributeValues"] = values
        names = kwargs["ExpressionAttributeNames"]
        kwargs["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in condition}
        if self._call("put_item", **kwargs) is None:
            return None
        return Lease(version, started + self.validity_s)

    # -- the lease -------------------------------------------------------------------------------
    def _attempt(self) -> Lease | None:
        item = self._get()
        if item is None:
            self._seen = None
            return self._put("attribute_not_exists(#k)")
        version = item.get("recordVersionNumber", {}).get("S", "")
        if "isReleased" in item:
            self._seen = None
            return self._put("attribute_exists(#k) AND #rvn = :rvn AND attribute_exists(#ir)",
                             {":rvn": {"S": version}})
        now = time.monotonic()
        try:
            lease_s = int(item.get("leaseDuration", {}).get("S", "0")) / 1000
        except ValueError:
            lease_s = self.validity_s
        if self._seen is None or self._seen[0] != version:
            self._seen = (version, now, lease_s)  # a new holder, or a renewal: start counting again
            return None
        if now - self._seen[1] < self._seen[2]:
            return None  # held, and renewed or not, its lease has not run out on our clock yet
        lease = self._put("attribute_exists(#k) AND #rvn = :rvn", {":rvn": {"S": version}})
        if lease is not None:
            log.warning("took over DynamoDB lock %s from %s: its lease of %.1f s ran out unrenewed",
                        self.where, item.get("ownerName", {}).get("S"), lease_s)
        self._seen = None
        return lease

    def _extend(self, lease: Lease) -> Lease | None:
        started = time.monotonic()
        version = str(uuid.uuid4())
        answer = self._call(
            "update_item", TableName=self.table, Key={KEY: {"S": self.partition_key}},
            UpdateExpression="SET #ld = :ld, #rvn = :new",
            ConditionExpression="attribute_exists(#k) AND #rvn = :rvn AND #on = :on",
            ExpressionAttributeNames={"#k": KEY, "#ld": "leaseDuration", "#rvn": "recordVersionNumber",
                                      "#on": "ownerName"},
            ExpressionAttributeValues={":ld": {"S": str(int(self.validity_s * 1000))}, ":new": {"S": version},
                                       ":rvn": {"S": lease.token}, ":on": {"S": self.owner_id}})
        return None if answer is None else Lease(version, started + self.validity_s)

    def _give_up(self, lease: Lease) -> None:
        answer = self._call(
            "delete_item", TableName=self.table, Key={KEY: {"S": self.partition_key}},
            ConditionExpression="attribute_exists(#k) AND #rvn = :rvn AND #on = :on",
            ExpressionAttributeNames={"#k": KEY, "#rvn": "recordVersionNumber", "#on": "ownerName"},
            ExpressionAttributeValues={":rvn": {"S": lease.token}, ":on": {"S": self.owner_id}})
        if answer is None:
            log.warning("DynamoDB lock %s was taken over before this holder released it", self.where)

    def _describe_holder(self) -> str | None:
        item = self._get()
        if item is None or "isReleased" in item:
            return None
        owner = item.get("ownerName", {}).get("S")
        lease = item.get("leaseDuration", {}).get("S")
        return f"{owner} (lease {lease} ms, renewed while alive; lock {self.where})"

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._client.close()


def factory(settings: LockSettings, table_path: str, storage: Storage | None = None) -> DynamoDBLockProvider:
    return DynamoDBLockProvider(settings, table_path, storage)
