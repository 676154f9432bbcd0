"""Large payloads offloaded with temporalio's ExternalStorage, so no run wedges on Temporal's 2 MB limit.

Every payload above `REIN_STORAGE_THRESHOLD` bytes (default 128 KiB) is written to a store
and the history keeps a small reference. The store:

- S3 (temporalio.contrib.aws.s3driver) when `REIN_S3_BUCKET` is set: for clusters whose
  workers and clients run on several machines. Credentials, region and endpoint come from
  boto3's usual environment (`AWS_*`, `AWS_ENDPOINT_URL_S3`); needs `pip install rein[s3]`.
- otherwise files under `$REIN_HOME/payloads` (default ~/.rein): for the embedded server
  and for workers and clients that share one machine's disk.

Files are content-addressed (the SHA-256 of the payload), so a payload stored twice takes
the space once. Each write and read refreshes a file's modification time; a worker deletes files
nobody wrote or read for `REIN_PAYLOAD_RETENTION_DAYS` days (default 30; 0 keeps them forever)
when it starts and once a day while it runs (docs/payloads.md). S3 buckets use S3 lifecycle rules.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from rein import settings

DEFAULT_THRESHOLD: int = settings.Settings.model_fields["storage_threshold"].default
"""REIN_STORAGE_THRESHOLD's default: well below Temporal's 2 MB payload limit, so even many payloads in one
workflow task fit."""
DEFAULT_MAX_BYTES: int = settings.Settings.model_fields["storage_max_bytes"].default
PRUNE_EVERY_S = 24 * 3600.0
log = logging.getLogger("rein")
INLINE_LIMIT = 2 * 1024 * 1024 - 64 * 1024
"""The largest payload that fits in a history without external storage (2 MB minus headroom)."""


class PayloadTooLarge(ValueError):
    """A payload exceeds what the configured store (or Temporal, without one) accepts."""


def rein_home() -> Path:
    return settings.current().home


class FileStorageDriver(StorageDriver):
    """Payloads as files named by their SHA-256, under one directory on this machine's disk."""

    def __init__(self, root: Path, max_payload_size: int = DEFAULT_MAX_BYTES, driver_name: str = "rein.files"):
        self.root = Path(root)
        self.max_payload_size = max_payload_size
        self._name = driver_name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return "rein.files"

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._store_all, [p.SerializeToString() for p in payloads])

    def _store_all(self, blobs: list[bytes]) -> list[StorageDriverClaim]:
        claims = []
        for data in blobs:
            if len(data) > self.max_payload_size:
                raise PayloadTooLarge(
                    f"payload of {len(data)} bytes exceeds the store's limit of {self.max_payload_size} bytes "
                    "(REIN_STORAGE_MAX_BYTES)"
                )
            digest = hashlib.sha256(data).hexdigest()
            path = self._path(digest)
            if not _touched(path):
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_name(f"{digest}.{os.getpid()}.{id(data)}.tmp")
                partial.write_bytes(data)
                os.replace(partial, path)  # atomic: readers never see a partial file
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return await asyncio.to_thread(self._retrieve_all, list(claims))

    def _retrieve_all(self, claims: list[StorageDriverClaim]) -> list[Payload]:
        payloads = []
        for claim in claims:
            digest = claim.claim_data["sha256"]
            path = self._path(digest)
            try:
                data = path.read_bytes()
                _touched(path)  # in use: kept for another retention period
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"stored payload {digest} is missing from {self.root}: this process must share the "
                    "workers' REIN_HOME (one machine), or configure S3 (REIN_S3_BUCKET) for several"
                ) from None
            payloads.append(Payload.FromString(data))
        return payloads


    def prune(self, older_than_s: float) -> tuple[int, int]:
        """Delete payload files neither written nor read for `older_than_s` seconds: (files, bytes)."""
        cutoff = time.time() - older_than_s
        files = size = 0
        for path in self.root.glob("??/*"):
            try:
                stat = path.stat()
                if stat.st_mtime < cutoff:
                    path.unlink()
                    files, size = files + 1, size + stat.st_size
            except FileNotFoundError:
                continue  # another worker pruned it meanwhile
        return files, size


def _touched(path: Path) -> bool:
    """Refresh an existing file's modification time (its last use); False when there is none."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False


def retention_s() -> float | None:
    """REIN_PAYLOAD_RETENTION_DAYS in seconds (default 30 days); None: keep payload files forever."""
    days = settings.current().payload_retention_days
    return days * 86400 if days > 0 else None


async def prune_periodically(converter: DataConverter) -> None:
    """A worker's housekeeping: prune its file store now and every PRUNE_EVERY_S (until cancelled)."""
    storage = converter.external_storage
    drivers = [d for d in (storage.drivers if storage else []) if isinstance(d, FileStorageDriver)]
    keep = retention_s()
    if not drivers or keep is None:
        return
    while True:
        for driver in drivers:
            try:
                files, size = await asyncio.to_thread(driver.prune, keep)
            except OSError as exc:
                log.warning("could not prune payload files under %s: %s", driver.root, exc)
                continue
            if files:
                log.info("pruned %d payload files (%d bytes) unused for %g days under %s",
                         files, size, keep / 86400, driver.root)
        await asyncio.sleep(PRUNE_EVERY_S)


class Boto3S3Client(S3StorageDriverClient):
    """temporalio's S3 driver client over plain boto3 (its calls run in a thread).

    Not temporalio's own client (`s3driver.aioboto3.new_aioboto3_client`): it needs aioboto3, whose
    newest release (15.5.0) pins aiobotocore 2.25.1 and so botocore <1.40.62, while litellm (a core
    dependency) needs boto3 >=1.43.117: pip finds no install with both. When aioboto3 allows a current
    botocore, the switch is small: one aioboto3 client per event loop, closed at that loop's shutdown.
    """

    def __init__(self, s3):  # noqa: ANN001
        self.s3 = s3

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(self.s3.put_object, Bucket=bucket, Key=key, Body=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            await asyncio.to_thread(self.s3.head_object, Bucket=bucket, Key=key)
            return True
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        def get() -> bytes:
            return self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()

        return await asyncio.to_thread(get)

    def describe(self) -> dict[str, str]:
        region = self.s3.meta.region_name
        return {"client_region": region} if region else {}


def _s3_driver(bucket: str, max_bytes: int) -> StorageDriver:
    try:
        import boto3
    except ImportError:
        raise RuntimeError("REIN_S3_BUCKET is set but boto3 is missing: pip install 'rein[s3]'") from None
    return S3StorageDriver(client=Boto3S3Client(boto3.client("s3")), bucket=bucket, max_payload_size=max_bytes)


def storage_from_env() -> ExternalStorage:
    """S3 when REIN_S3_BUCKET is set, else files under REIN_HOME; payloads above the threshold go there."""
    now = settings.current()
    max_bytes = now.storage_max_bytes
    driver = _s3_driver(now.s3_bucket, max_bytes) if now.s3_bucket else FileStorageDriver(now.home / "payloads", max_bytes)
    return ExternalStorage(drivers=[driver], payload_size_threshold=now.storage_threshold)


def max_payload_bytes(converter: DataConverter) -> int:
    """The largest payload `converter` can record: its store's limit, or Temporal's without one."""
    storage = converter.external_storage
    if storage is None:
        return INLINE_LIMIT
    limits = [
        getattr(d, "max_payload_size", None) or getattr(d, "_max_payload_size", None) or DEFAULT_MAX_BYTES
        for d in storage.drivers
    ]
    return min(limits)
