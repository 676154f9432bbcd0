"""`rein codec-server` decrypts only for callers with a valid bearer token: the shared secret
(REIN_CODEC_TOKEN) or a JWT signed by the identity provider whose keys are at REIN_CODEC_JWKS_URL.

The server is the real console script in its own process; the identity provider is a local HTTP
server publishing a JWKS, and the JWTs are signed with PyJWT as an IdP would.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from rein.cli import EXIT_USAGE
from rein.durable.embedded_server import free_port
from tests.support.inbox import IdentityProvider
from tests.support.processes import stop_process, wait_for_text
from tests.test_cli import REIN_BIN, ROOT, assert_one_line_error, rein_cli

KEY = base64.b64encode(os.urandom(32)).decode()
PLAIN = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()},
         "data": base64.b64encode(b'"CODEC-MARKER"').decode()}
UI = "http://localhost:8233"


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    yield provider
    provider.close()


def _codec_server(log: Path, **env: str) -> tuple[subprocess.Popen, str]:
    """The server, once it says it listens: a port that accepts could be another process's."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REIN_CODEC")}
    environ.update(REIN_CODEC_KEY=KEY, **env)
    with open(log, "wb") as out:
        process = subprocess.Popen([REIN_BIN, "codec-server", "--port", str(port)], env=environ, cwd=str(ROOT),
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wait_for_text(log, f"rein codec server on http://127.0.0.1:{port}", process, 60)
    return process, f"http://127.0.0.1:{port}"


def _encode(url: str, token: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Origin": UI}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(f"{url}/encode", json={"payloads": [PLAIN]}, headers=headers, timeout=10)


def _jwt(idp: IdentityProvider, key: rsa.RSAPrivateKey | None = None, **claims: object) -> str:
    """A JWT for the UI's audience, signed with the provider's key (or `key`)."""
    return idp.token(key, **{"aud": "temporal-ui", **claims})


def test_no_token_configured_refuses_to_start() -> None:
    proc = rein_cli("codec-server", "--port", str(free_port()), REIN_CODEC_KEY=KEY, REIN_CODEC_TOKEN="",
                    REIN_CODEC_JWKS_URL="", REIN_CODEC_AUTH="", timeout=60)
    assert_one_line_error(proc, EXIT_USAGE, "REIN_CODEC_TOKEN", "REIN_CODEC_JWKS_URL")


def test_shared_secret(tmp_path: Path) -> None:
    process, url = _codec_server(tmp_path / "codec.log", REIN_CODEC_TOKEN="team-secret-1")
    try:
        for token in (None, "team-secret-2", "team-secret-1x", "team-secret"):
            refused = _encode(url, token)
            assert refused.status_code == 401, (token, refused.text)
            assert "CODEC-MARKER" not in refused.text
        preflight = httpx.options(f"{url}/decode", headers={"Origin": UI, "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == UI
        sealed = _encode(url, "team-secret-1")
        assert sealed.status_code == 200
        assert b"CODEC-MARKER" not in base64.b64decode(sealed.json()["payloads"][0]["data"])
        opened = httpx.post(f"{url}/decode", content=sealed.content, timeout=10, headers={
            "Content-Type": "application/json", "Authorization": "Bearer team-secret-1"})
        assert opened.json()["payloads"] == [PLAIN]
        stranger = httpx.post(f"{url}/decode", content=sealed.content, timeout=10,
                              headers={"Content-Type": "application/json"})
        assert stranger.status_code == 401 and "CODEC-MARKER" not in stranger.text
    finally:
        stop_process(process, 20)


def test_jwt_forwarded_by_the_ui(idp: IdentityProvider, tmp_path: Path) -> None:
    process, url = _codec_server(tmp_path / "codec.log", REIN_CODEC_JWKS_URL=idp.url, REIN_CODEC_JWT_AUDIENCE="temporal-ui")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    try:
        assert _encode(url, _jwt(idp)).status_code == 200
        assert _encode(url, None).status_code == 401
        assert _encode(url, _jwt(idp, other)).status_code == 401  # signed by someone else
        assert _encode(url, _jwt(idp, exp=int(time.time()) - 60)).status_code == 401  # expired
        assert _encode(url, _jwt(idp, aud="another-app")).status_code == 401  # meant for another audience
        assert _encode(url, "not-a-jwt").status_code == 401
        assert _encode(url, idp.token(aud=None)).status_code == 401  # for no audience at all
    finally:
        stop_process(process, 20)


def test_a_jwks_url_without_an_audience_refuses_to_start(idp: IdentityProvider) -> None:
    """Without the audience any JWT the provider signed for any other application would decrypt: the codec server and
    `rein serve` refuse to start, in one line naming the missing setting."""
    free = {"REIN_CODEC_KEY": KEY, "REIN_CODEC_TOKEN": "", "REIN_CODEC_AUTH": "", "REIN_CODEC_JWKS_URL": idp.url,
            "REIN_CODEC_JWT_AUDIENCE": ""}
    for command in (("codec-server", "--port", str(free_port())), ("serve", "--port", str(free_port()))):
        proc = rein_cli(*command, **free, timeout=60)
        assert_one_line_error(proc, EXIT_USAGE, "REIN_CODEC_JWKS_URL is set but REIN_CODEC_JWT_AUDIENCE is not",
                              "set REIN_CODEC_JWT_AUDIENCE")


def test_the_issuer_is_checked_when_set(idp: IdentityProvider, tmp_path: Path) -> None:
    process, url = _codec_server(tmp_path / "codec.log", REIN_CODEC_JWKS_URL=idp.url, REIN_CODEC_JWT_AUDIENCE="temporal-ui",
                                 REIN_CODEC_JWT_ISSUER="https://idp.example")
    try:
        assert _encode(url, _jwt(idp, iss="https://idp.example")).status_code == 200
        assert _encode(url, _jwt(idp, iss="https://evil.example")).status_code == 401
        assert _encode(url, _jwt(idp)).status_code == 401  # no issuer claim
    finally:
        stop_process(process, 20)
