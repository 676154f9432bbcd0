"""Large payloads offloaded with temporalio's ExternalStorage (issue 7)."""

from __future__ import annotations

from temporalio.converter import ExternalStorage


def storage_from_env() -> ExternalStorage | None:
    """The external storage the environment configures, or None (payloads inline)."""
    return None
