"""rein.temporal.storage: where large payloads go (files under REIN_HOME, or S3) and how large they may be.

S3 is a real S3 API over HTTP: moto's server in this process (no AWS account, nothing downloaded).
"""

from __future__ import annotations

import dataclasses
import uuid

import boto3
import pytest
from moto.server import ThreadedMotoServer
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.converter import StorageDriverRetrieveContext, StorageDriverStoreContext

import rein
from rein import Agent, Completion, LoopConfig, Message, ToolCall
from rein.durable.embedded_server import free_port
from rein.temporal.converter import rein_data_converter
from rein.temporal.storage import (
    DEFAULT_THRESHOLD,
    INLINE_LIMIT,
    FileStorageDriver,
    PayloadTooLarge,
    max_payload_bytes,
    rein_home,
    storage_from_env,
)
from rein.testing import full_result


async def test_files_round_trip_and_refuse_what_is_too_large(tmp_path):
    driver = FileStorageDriver(tmp_path, max_payload_size=1000)
    payload = Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"a" * 500 + b'"')
    claims = await driver.store(StorageDriverStoreContext(), [payload, payload])
    assert claims[0] == claims[1], "content-addressed: the same payload is stored once"
    assert len(list(tmp_path.rglob("*"))) == 2  # one directory, one file
    (back, _) = await driver.retrieve(StorageDriverRetrieveContext(), claims)
    assert back == payload
    with pytest.raises(PayloadTooLarge, match="1000 bytes"):
        await driver.store(StorageDriverStoreContext(), [Payload(data=b"b" * 2000)])
    (next(tmp_path.rglob(claims[0].claim_data["sha256"]))).unlink()
    with pytest.raises(FileNotFoundError, match="REIN_HOME"):
        await driver.retrieve(StorageDriverRetrieveContext(), claims[:1])


def test_default_store_is_files_under_rein_home(monkeypatch):
    monkeypatch.delenv("REIN_S3_BUCKET", raising=False)
    monkeypatch.setenv("REIN_STORAGE_MAX_BYTES", "12345")
    storage = storage_from_env()
    (driver,) = storage.drivers
    assert isinstance(driver, FileStorageDriver)
    assert driver.root == rein_home() / "payloads"
    assert storage.payload_size_threshold == DEFAULT_THRESHOLD < INLINE_LIMIT
    converter = rein_data_converter()
    assert max_payload_bytes(dataclasses.replace(converter, external_storage=storage)) == 12345
    assert max_payload_bytes(dataclasses.replace(converter, external_storage=None)) == INLINE_LIMIT


@pytest.fixture
def s3(monkeypatch):
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    bucket = f"rein-{uuid.uuid4().hex[:8]}"
    for name, value in {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "REIN_S3_BUCKET": bucket,
    }.items():
        monkeypatch.setenv(name, value)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    try:
        yield s3, bucket
    finally:
        server.stop()


async def test_s3_when_configured_carries_a_large_tool_result(env, s3):
    client_s3, bucket = s3
    storage = storage_from_env()
    assert isinstance(storage.drivers[0], S3StorageDriver)

    def big(n: int) -> str:
        """A 600 KB output."""
        return "z" * 600_000

    class Once:
        seen: list[list[Message]] = []

        async def complete(self, messages, tools=None, **kw):  # noqa: ANN001, ANN201
            self.seen.append(list(messages))
            results = [m for m in messages if m.role == "tool"]
            if not results:
                call = ToolCall(id="b1", name="big", arguments={"n": 1})
                return Completion(message=Message(role="assistant", tool_calls=[call]), finish_reason="tool_calls")
            return Completion(message=Message(role="assistant", content=f"got {len(results[0].content)}"), finish_reason="stop")

    model = Once()
    tq = f"s3-{uuid.uuid4().hex[:6]}"
    client = Client(**{**env.client.config(), "data_converter": rein_data_converter()})
    assert isinstance(client.data_converter.external_storage.drivers[0], S3StorageDriver)
    agent = Agent(provider=model, tools=[big], name="s3-agent", config=LoopConfig(detect_loops=False))
    async with rein.create_worker(client, agents=[agent], task_queue=tq):
        handle = await client.start_workflow(
            "AgentWorkflow", {"agent": "s3-agent", "prompt": "go"}, id=f"s3-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
        result = await full_result(handle)
        history = await handle.fetch_history()
    assert result["output"] == "got 600000"
    assert len(model.seen[-1][-1].content) == 600_000
    assert sum(e.ByteSize() for e in history.events) < 100_000
    stored = client_s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert stored and max(o["Size"] for o in stored) > 600_000


# --------------------------------------------------------------------------- retention of payload files


async def test_a_worker_prunes_payload_files_unused_past_the_retention(dev, tmp_path, monkeypatch):
    """Files nobody wrote or read for REIN_PAYLOAD_RETENTION_DAYS go when a worker starts; a read keeps one."""
    import os
    import time

    from rein import MockProvider
    from tests.support.waiting import poll

    monkeypatch.setenv("REIN_HOME", str(tmp_path))
    monkeypatch.setenv("REIN_PAYLOAD_RETENTION_DAYS", "30")
    driver = FileStorageDriver(tmp_path / "payloads")
    blobs = [Payload(data=f"{name} payload".encode() * 100).SerializeToString() for name in ("stale", "read", "fresh")]
    stale, read, fresh = (driver._path(c.claim_data["sha256"]) for c in driver._store_all(blobs))
    month_ago = time.time() - 31 * 86400
    for path in (stale, read):
        os.utime(path, (month_ago, month_ago))
    assert driver._retrieve_all([StorageDriverClaimOf(read)])[0].data.startswith(b"read payload")  # a read: in use

    client = await Client.connect(dev.client.service_client.config.target_host, data_converter=rein_data_converter())
    agent = Agent(provider=MockProvider(["hi"]), name=f"prune-{uuid.uuid4().hex[:6]}")
    async with rein.create_worker(client, agents=[agent], task_queue=f"prune-{uuid.uuid4().hex[:6]}"):
        await poll(lambda: not stale.exists(), "the stale payload file to be pruned", 30)
    assert read.exists() and fresh.exists()


def StorageDriverClaimOf(path):  # noqa: ANN001, ANN201, N802
    from temporalio.converter import StorageDriverClaim

    return StorageDriverClaim(claim_data={"sha256": path.name})
