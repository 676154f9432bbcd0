"""The shared history decoder (tests/support/history.py) finds text wherever a payload went.

Every secret check in the suite relies on it, so it is checked here on a history where the
text is neither plain nor base64: the payload is encrypted (REIN_CODEC_KEY) and, being large,
offloaded to external storage, so the history holds only an encrypted reference.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client

import rein
from rein import Agent, MockProvider
from rein.temporal.codec import new_key
from rein.temporal.converter import rein_data_converter
from rein.testing import full_result
from tests.support.history import assert_secret_absent, history_text, payloads_in
from tests.support.tools import tc


async def test_a_needle_in_an_encrypted_offloaded_payload_is_found(env, ids, monkeypatch):
    tq, wf_id = ids
    monkeypatch.setenv("REIN_CODEC_KEY", new_key())
    monkeypatch.setenv("REIN_STORAGE_THRESHOLD", "2048")
    converter = rein_data_converter()
    client = Client(**{**env.client.config(), "data_converter": converter})
    needle = f"NEEDLE-{uuid.uuid4().hex}"  # not secret-shaped, so rein's scrubbing leaves it be

    def dump() -> str:
        """Return a large text with the needle in it."""
        return f"{needle} " + "x" * 8192

    agent = Agent(provider=MockProvider([[tc("dump", "d1")], "dumped"]), tools=[dump], name="dumper")
    async with rein.create_worker(client, agents=[agent], task_queue=tq):
        handle = await client.start_workflow("AgentWorkflow", {"agent": "dumper", "prompt": "go"}, id=wf_id,
                                             task_queue=tq)
        result = await full_result(handle)
        history = await handle.fetch_history()
    assert result["output"] == "dumped"

    # Stored: ciphertext and storage references only; no search of the stored bytes finds it.
    raw = history.to_json() + "".join(p.data.decode("utf-8", "replace") for p in payloads_in(history))
    assert needle not in raw and "dumped" not in raw
    assert any(p.external_payloads for p in payloads_in(history)), "nothing was offloaded: the case tests nothing"

    # Decoded through the converter (reference, storage, codec): found, and the check names the event.
    assert needle in await history_text(history, converter)
    with pytest.raises(AssertionError, match="found in the history, in events .*ACTIVITY_TASK_COMPLETED"):
        await assert_secret_absent(history, needle, converter, present="dumped")
