"""Payload encryption (REIN_CODEC_KEY) and secret scrubbing, checked on real histories.

An encrypting client starts a run that a `python worker.py` subprocess (same key) executes;
the history fetched raw holds only ciphertext, and decoding every payload with the key shows
the conversation but none of the worker's secrets.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import subprocess
import sys
import uuid

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from rein.durable.embedded_server import free_port
from rein.temporal.codec import AesGcmCodec, CodecKeyError, new_key, parse_keys
from tests.support.history import assert_secret_absent, payloads_in
from tests.support.processes import ROOT, WorkerProcess, stop_process, wait_for_text

KEY = new_key()
OLD_KEY = new_key()
KEYS = f"2026b:{KEY},2026a:{OLD_KEY}"
DB_PASSWORD = "pw-" + uuid.uuid4().hex[:12]
API_KEY = "fk-" + uuid.uuid4().hex
SECRETS = [DB_PASSWORD, API_KEY, "sk-proj-" + "Q" * 30, "abcdefghijklmnopqrstuvwx", "AKIAIOSFODNN7EXAMPLE"]


# --------------------------------------------------------------------------- secret patterns


@pytest.mark.parametrize(("text", "kept"), [
    ("key sk-proj-ABCDEFGHIJKLMNOPQRST123 ok", "key [redacted] ok"),
    ("anthropic sk-ant-api03-abcdefghijklmnopqrstuv", "anthropic [redacted]"),
    ("dsn postgres://app:hunter2x@db:5432/x", "dsn postgres://app:[redacted]@db:5432/x"),
    ("https://user:p%40ss@example.com/path", "https://user:[redacted]@example.com/path"),
    ("Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer [redacted]"),
    ('{"password": "s3cr3tvalue", "user": "bob"}', '{"password": "[redacted]", "user": "bob"}'),
    ("API_KEY=abcd1234efgh", "API_KEY=[redacted]"),
    ("aws AKIAIOSFODNN7EXAMPLE", "aws [redacted]"),
    ("gh ghp_" + "a" * 36, "gh [redacted]"),
    ("slack xoxb-1234567890-abcdef", "slack [redacted]"),
    ("stripe sk_live_" + "a" * 24, "stripe [redacted]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmn", "jwt [redacted]"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "[redacted]"),
    ("plain words, sk-short, tokens=3, https://example.com/a@b", "plain words, sk-short, tokens=3, https://example.com/a@b"),
])
def test_secret_patterns_are_scrubbed(text, kept):
    from rein.blueprint.secrets import scrub

    assert scrub(text) == kept


def test_secret_values_from_the_environment(monkeypatch):
    from rein.blueprint.secrets import scrub

    monkeypatch.setenv("DATABASE_URL", "mysql://svc:Zq9-not-a-pattern@h/db")
    monkeypatch.setenv("PAYMENTS_TOKEN", "tok-1234567890")
    assert scrub("pw Zq9-not-a-pattern and tok-1234567890") == "pw [redacted] and [redacted]"



_SAMPLES = [
    "key sk-proj-ABCDEFGHIJKLMNOPQRST123 ok", "dsn postgres://app:hunter2x@db:5432/x",
    "Authorization: Bearer abc.def-ghi_jkl", "auth: basic dXNlcjpwYXNzd29yZA==", '{"password": "s3cr3tvalue"}',
    "API_KEY=abcd1234efgh", "client-secret: 0123456789", "refresh_token=abcdefgh", "aws AKIAIOSFODNN7EXAMPLE",
    "gh ghp_" + "a" * 36, "github_pat_" + "b" * 24, "glpat-" + "c" * 24, "slack xoxb-1234567890-abcdef",
    "stripe sk_live_" + "a" * 24, "rk_test_" + "d" * 20, "AIza" + "e" * 35, "hf_" + "f" * 32,
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmn",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    "pa\u017f\u017fword=hunter22 and PRIVATE_KEY: x9x9x9x9", "ap\u0131_\u212aey=abcdefgh", "plain words, tokens=3",
]


@pytest.mark.parametrize("text", [t for s in _SAMPLES for t in (s, s.upper(), s.title(), s.swapcase())])
def test_pattern_guards_never_skip_a_match(text):
    """scrub_patterns scans for each pattern's guards first; it must redact exactly what the bare patterns do."""
    from rein.blueprint.secrets import _PATTERNS, scrub_patterns

    unguarded = text
    for pattern, replacement, _ in _PATTERNS:
        unguarded = pattern.sub(replacement, unguarded)
    assert scrub_patterns(text) == unguarded


def test_a_changed_environment_is_read_again(monkeypatch):
    from rein.blueprint.secrets import scrub

    monkeypatch.setenv("PAYMENTS_TOKEN", "tok-first-1234")
    assert scrub("a tok-first-1234 b") == "a [redacted] b"
    monkeypatch.setenv("PAYMENTS_TOKEN", "tok-second-5678")
    assert scrub("a tok-first-1234 b tok-second-5678") == "a tok-first-1234 b [redacted]"
    monkeypatch.delenv("PAYMENTS_TOKEN")
    assert scrub("c tok-second-5678") == "c tok-second-5678"

# --------------------------------------------------------------------------- keys


def test_key_formats_and_rotation():
    (single,) = parse_keys(KEY)
    assert single[0].startswith("k-") and len(single[1]) == 32
    assert [k for k, _ in parse_keys(KEYS)] == ["2026b", "2026a"]
    for bad, why in [("notbase64!!", "base64"), (base64.b64encode(b"short").decode(), "32"),
                     (f"a:{KEY},a:{OLD_KEY}", "share an id"), (" , ", "no key")]:
        with pytest.raises(CodecKeyError, match=why):
            parse_keys(bad)
    assert KEY not in repr(AesGcmCodec(parse_keys(KEYS)))


async def test_rotation_old_payloads_stay_readable_and_a_missing_key_is_named():
    old = AesGcmCodec(parse_keys(f"2026a:{OLD_KEY}"))
    rotated = AesGcmCodec(parse_keys(KEYS))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')
    (sealed,) = await old.encode([plain])
    assert b"hello" not in sealed.data and sealed.metadata["encryption-key-id"] == b"2026a"
    assert (await rotated.decode([sealed]))[0] == plain
    (resealed,) = await rotated.encode([plain])
    assert resealed.metadata["encryption-key-id"] == b"2026b"
    with pytest.raises(CodecKeyError, match="2026b"):
        await old.decode([resealed])
    # Payloads written before encryption was enabled are passed through.
    assert (await rotated.decode([plain]))[0] == plain


# --------------------------------------------------------------------------- a real run


@pytest.fixture(scope="module")
def worker(dev, tmp_path_factory: pytest.TempPathFactory):
    logs = tmp_path_factory.mktemp("encryption")
    tq = f"enc-{uuid.uuid4().hex[:6]}"
    proc = WorkerProcess(
        dev.client.service_client.config.target_host, ["tests.agents.faults:leaky"], tq, logs / "worker.log",
        REIN_CODEC_KEY=KEYS, FAULTS_DIR=str(logs), FAULTS_API_KEY=API_KEY,
        DATABASE_URL=f"postgres://app:{DB_PASSWORD}@db.internal:5432/app",
    ).start()
    try:
        yield proc, tq
    finally:
        proc.stop()


async def test_encrypted_run_history_is_unreadable_without_the_key(dev, worker, monkeypatch):
    _, tq = worker
    monkeypatch.setenv("REIN_CODEC_KEY", KEYS)
    monkeypatch.setenv("TEMPORAL_ADDRESS", dev.client.service_client.config.target_host)
    from rein.client import ReinClient, connect

    client = ReinClient(await connect(), tq)
    assert isinstance(client.client.data_converter.payload_codec, AesGcmCodec)
    prompt = f"PROMPT-MARKER-{uuid.uuid4().hex[:6]}"
    handle = await client.start("leaky", prompt)
    result = await client.result(handle.id)
    assert result.output.startswith(f"Report: TOOL-MARKER-{handle.id}")

    raw = await dev.client.get_workflow_handle(handle.id).fetch_history()  # dev has no key: the raw history
    # Search attributes are indexed by the server, so never encrypted by design.
    payloads = list(payloads_in(raw, skip=("search_attributes",)))
    assert len(payloads) >= 8  # input, activity inputs/results, result, summaries
    for payload in payloads:
        assert payload.metadata["encoding"] == b"binary/encrypted", (payload, [
            (e.event_type, str(e)[:300]) for e in raw.events if payload in list(payloads_in(e, skip=("search_attributes",)))])
        assert payload.metadata["encryption-key-id"] == b"2026b"
        assert prompt.encode() not in payload.data and b"TOOL-MARKER" not in payload.data
    # Without the key, rein's client cannot read the result either.
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the decode failure
        await dev.client.get_workflow_handle(handle.id).result()

    # With the key: every payload decodes; the conversation is there, the worker's secrets are not.
    text = await assert_secret_absent(raw, SECRETS, client.client.data_converter,
                                      present=[prompt, f"TOOL-MARKER-{handle.id}"])
    assert "postgres://app:[redacted]@db.internal" in text


async def test_codec_server_decodes_for_the_ui(dev, worker, tmp_path):
    port = free_port()
    log = tmp_path / "codec.log"
    env = {**os.environ, "REIN_CODEC_KEY": KEYS, "REIN_CODEC_TOKEN": "ui-test-token"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rein.temporal.codec_server", "--port", str(port),
             "--ui-origin", "http://localhost:8233"],
            cwd=str(ROOT), env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        wait_for_text(log, "codec server on", proc, 60)
        sealed = await AesGcmCodec(parse_keys(KEYS)).encode(
            [Payload(metadata={"encoding": b"json/plain"}, data=b'"UI-MARKER"')]
        )
        body = json_format.MessageToJson(Payloads(payloads=sealed))
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            preflight = await http.options("/decode", headers={
                "Origin": "http://localhost:8233", "Access-Control-Request-Method": "POST"})
            assert preflight.headers["access-control-allow-origin"] == "http://localhost:8233"
            answer = await http.post("/decode", content=body, headers={
                "Content-Type": "application/json", "Origin": "http://localhost:8233", "X-Namespace": "default",
                "Authorization": "Bearer ui-test-token"})
            assert answer.status_code == 200
            (payload,) = json_format.Parse(answer.text, Payloads()).payloads
            assert payload.data == b'"UI-MARKER"'
            stranger = await http.post("/decode", content=body, headers={
                "Content-Type": "application/json", "Origin": "http://evil.example"})
            assert "access-control-allow-origin" not in stranger.headers
            garbage = await http.post("/decode", content=b'{"payloads": [{"metadata": {"encoding": '
                                      b'"YmluYXJ5L2VuY3J5cHRlZA=="}, "data": "AAAA"}]}',
                                      headers={"Content-Type": "application/json",
                                               "Authorization": "Bearer ui-test-token"})
            assert garbage.status_code == 400
    finally:
        stop_process(proc)


async def test_rein_keeps_a_client_codec(dev):
    """A user's own encrypting Client keeps its codec when rein's client and converter take it over."""
    from temporalio.converter import DataConverter

    from rein.client import ReinClient
    from rein.temporal.converter import ReinPayloadConverter, rein_data_converter

    codec = AesGcmCodec(parse_keys(KEY))
    mine = dataclasses.replace(pydantic_data_converter, payload_codec=codec)
    assert rein_data_converter(mine).payload_codec is codec
    plain = await Client.connect(dev.client.service_client.config.target_host,
                                 data_converter=DataConverter(payload_codec=codec))
    converter = ReinClient(plain).client.data_converter
    assert converter.payload_codec is codec
    assert converter.payload_converter_class is ReinPayloadConverter
