"""Tables on Azure Blob Storage (a real Azurite server) and what can be checked of GCS without one.

Azure: Azurite (tests/azurite_server.py, installed by scripts/install-services.sh) serves the Blob
API with conditional puts, so an ``az://`` / ``abfs://`` table is written, read, raced and
checked against hudi-rs as an S3 one is. GCS: the registries' one emulator, fake-gcs-server,
refuses obstore's XML-API PUTs, so the ``gs://`` checks are those that need no server: URIs, option
mapping, secrets, and a typed error within the configured bound from an endpoint that does not
answer (``gcs_base_url`` of a service-account key, as for any GCS-compatible endpoint).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from server_process import free_port
from tidemark.errors import BucketNotFoundError, ConfigError, StorageAccessDeniedError, StorageUnreachableError
from tidemark.storage.base import CreateOutcome
from tidemark.storage.location import StorageLocation, open_storage
from tidemark.storage.object_store import ObjectStorage, _split_uri, _store_config, verify_conditional_writes

FAST_FAIL = {"timeout": "2s", "connect_timeout": "1s", "max_retries": "1", "retry_timeout": "3s"}


@pytest.fixture(scope="module")
def azurite() -> Iterator[Any]:
    from azurite_server import AzuriteServer

    server = AzuriteServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def container(azurite: Any) -> str:
    return azurite.create_container(f"t{uuid.uuid4().hex[:12]}")


def _batch(*rows: tuple[int, int]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "part": [f"p{r[0] % 2}" for r in rows],
                     "v": [r[1] for r in rows], "ts": [r[1] for r in rows]})


def _rows(table: pa.Table) -> list[tuple[int, int]]:
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


# -- Azure, on Azurite ---------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_table_on_azure_writes_reads_and_agrees_with_hudi_rs(azurite: Any, container: str, table_type: str) -> None:
    opts = azurite.storage_options()
    uri = f"az://{container}/trips"
    table = tidemark.Table.create(uri, spark=None, record_key="id", partition_by="part", ordering_field="ts",
                                  table_type=table_type, storage_options=opts)
    table.bulk_insert(_batch((1, 0), (2, 0), (3, 0), (4, 0)))
    table.upsert(_batch((2, 2), (5, 2)))
    table.delete(_batch((3, 3)))
    if table_type == "MERGE_ON_READ":
        assert table.compact() is not None
    expected = [(1, 0), (2, 2), (4, 0), (5, 2)]
    assert _rows(table.read()) == expected
    assert _rows(hudi_rs_read(uri, storage_options=opts)) == expected
    table.close()
    # The abfs form of the same place opens the same table.
    abfs = f"abfs://{container}@{opts['azure_storage_account_name']}.dfs.core.windows.net/trips"
    assert _rows(tidemark.Table.open(abfs, spark=None, storage_options=opts).read()) == expected


def test_azure_conditional_writes_let_one_writer_win(azurite: Any, container: str) -> None:
    opts = azurite.storage_options()
    one, two = (open_storage(f"az://{container}/t", opts) for _ in range(2))
    verify_conditional_writes(one)  # Azurite honours If-None-Match: *
    assert one.create_if_absent(".hoodie/timeline/x.commit", b"one") is CreateOutcome.CREATED
    assert two.create_if_absent(".hoodie/timeline/x.commit", b"two") is CreateOutcome.ALREADY_EXISTS
    seen = one.read_versioned(".hoodie/timeline/x.commit")
    assert seen is not None and seen.data == b"one"
    assert two.replace_if_match(".hoodie/timeline/x.commit", b"two", seen.version)
    assert not one.replace_if_match(".hoodie/timeline/x.commit", b"late", seen.version)  # stale ETag
    assert one.read_bytes(".hoodie/timeline/x.commit") == b"two"


def test_the_storage_lock_works_on_azure(azurite: Any, container: str) -> None:
    opts = azurite.storage_options()
    lock = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "hoodie.write.lock.provider": "storage"}
    uri = f"az://{container}/locked"
    table = tidemark.Table.create(uri, spark=None, record_key="id", ordering_field="ts", options=lock,
                                  storage_options=opts)
    table.upsert(_batch((1, 1)))
    table.upsert(_batch((1, 2), (2, 2)))
    assert _rows(table.read()) == [(1, 2), (2, 2)]
    assert open_storage(uri, opts).exists(".hoodie/.locks/table_lock.json")
    table.close()


def test_azure_faults_are_typed(azurite: Any, container: str) -> None:
    opts = azurite.storage_options()
    with pytest.raises(BucketNotFoundError):
        open_storage(f"az://missing{uuid.uuid4().hex[:8]}/t", opts).read_bytes("x")
    wrong = dict(opts, azure_storage_account_key="d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXk=")
    with pytest.raises(StorageAccessDeniedError) as denied:
        open_storage(f"az://{container}/t", wrong).read_bytes("x")
    assert wrong["azure_storage_account_key"] not in str(denied.value)


# -- GCS and Azure without a server --------------------------------------------------------------


def test_uris_split_into_scheme_bucket_and_prefix() -> None:
    assert _split_uri("gs://bucket/a/b/") == ("gs", "bucket", "a/b")
    assert _split_uri("GS://bucket") == ("gs", "bucket", "")
    assert _split_uri("az://container/t") == ("az", "container", "t")
    assert _split_uri("abfss://c@acct.dfs.core.windows.net/x/y") == ("abfss", "c@acct.dfs.core.windows.net", "x/y")
    with pytest.raises(ConfigError):
        open_storage("hdfs://namenode/t")


def test_storage_options_map_to_each_store_as_hudi_rs_and_delta_rs_name_them() -> None:
    shared = {"aws_region": "us-east-1", "google_service_account": "/sa.json", "azure_storage_account_name": "acct",
              "timeout": "7s", "max_retries": "2", "retry_timeout": "9s", "allow_http": "true"}
    config, client, retry = _store_config("gs", shared)
    assert config == {"google_service_account": "/sa.json", "allow_http": "true"}  # other stores' keys dropped
    assert client["timeout"] == "7s" and client["connect_timeout"] == "5s"  # default kept
    assert retry["max_retries"] == 2 and retry["retry_timeout"].total_seconds() == 9
    config, _, _ = _store_config("abfss", shared)
    assert config == {"azure_storage_account_name": "acct", "allow_http": "true"}
    config, _, _ = _store_config("s3", shared)
    assert config == {"aws_region": "us-east-1", "allow_http": "true"}


def test_an_unknown_store_option_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="google_no_such_option"):
        ObjectStorage("gs://bucket/t", {"google_no_such_option": "1"})


def _unanswered_gcs_key() -> str:
    # A service-account key pointing obstore at a GCS-compatible endpoint (gcs_base_url) with no
    # OAuth: here, a port nothing listens on.
    return json.dumps({"gcs_base_url": f"http://127.0.0.1:{free_port()}", "disable_oauth": True,
                       "client_email": "tests@example.invalid", "private_key": "", "private_key_id": ""})


@pytest.mark.parametrize("scheme", ["gs", "az"])
def test_an_unreachable_gcs_or_azure_endpoint_is_a_typed_error_within_the_bound(scheme: str) -> None:
    if scheme == "gs":
        uri, opts = "gs://bucket/t", {"google_service_account_key": _unanswered_gcs_key(), "allow_http": "true"}
    else:
        uri, opts = "az://container/t", {"azure_storage_account_name": "devstoreaccount1",
                                         "azure_storage_account_key": "c2VjcmV0LWtleQ==",
                                         "azure_endpoint": f"http://127.0.0.1:{free_port()}/devstoreaccount1",
                                         "azure_allow_http": "true"}
    began = time.monotonic()
    with pytest.raises(StorageUnreachableError) as error:
        tidemark.Table.create(uri, spark=None, record_key="id", storage_options={**opts, **FAST_FAIL})
    assert time.monotonic() - began < 30  # bounded by timeout / retry_timeout, not minutes
    text = str(error.value)
    assert "did not answer" in text and "c2VjcmV0LWtleQ==" not in text and "private_key" not in text
    assert "***" in repr(StorageLocation(uri, opts)) and "c2VjcmV0" not in repr(StorageLocation(uri, opts))
