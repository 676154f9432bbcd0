"""The tokens rein's web surfaces make themselves: the local sign-in token and short-lived read tokens.

- The local token: with no sign-in configured, `rein serve` (and `rein.web.agui.app`) still serves nobody without
  a token. It makes one (random, in REIN_HOME/web-token, readable by its owner only) and reuses it on every start,
  so a link printed yesterday still signs in. Whoever holds it acts as the local person (the `identity` setting,
  rein.settings: REIN_IDENTITY, default USER@HOST).
- Read tokens: an EventSource cannot send an `Authorization` header, so a signed-in page mints a read token
  (PyJWT, HS256) and opens the stream with `?read_token=...`. It is good for reads only (GET), for
  REIN_WEB_READ_TOKEN_S seconds at most, never past the token it was minted with, and on every server that shares
  the key: REIN_WEB_READ_KEY (set it alike on the servers behind one address), else a key made once in
  REIN_HOME/web-read-key like the local token (the servers of this machine).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path
from typing import Any

import jwt

from rein import settings  # noqa: I001

TOKEN_FILE, READ_KEY_FILE = "web-token", "web-read-key"
READ_AUDIENCE = "rein-read"


def token_path(home: Path | None = None, name: str = TOKEN_FILE) -> Path:
    return (home or settings.current().home).expanduser() / name


def local_token(home: Path | None = None, *, create: bool = True, name: str = TOKEN_FILE) -> str | None:
    """The local sign-in token (or another secret `name`) under REIN_HOME: made once (0600), then reused; None when
    absent and not `create`."""
    path = token_path(home, name)
    if path.exists():
        with contextlib.suppress(OSError):
            path.chmod(0o600)  # a copy restored with looser permissions is closed again
        text = path.read_text().strip()
        if text:
            return text
    if not create:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f"{name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")
    try:
        os.link(tmp, path)  # the first of two starting servers wins; the other reads its token
    except FileExistsError:
        return local_token(home, create=False, name=name) or token
    finally:
        tmp.unlink(missing_ok=True)
    return token


def sign_in_link(base_url: str, token: str) -> str:
    """The inbox's sign-in link: the token in the fragment (never sent to a server, never in a Referer)."""
    return f"{base_url.rstrip('/')}/inbox#token={token}"


def read_key() -> bytes:
    """REIN_WEB_READ_KEY, else REIN_HOME's read-token key (made once)."""
    configured = settings.current().web_read_key
    return (configured.get_secret_value() if configured is not None else local_token(name=READ_KEY_FILE) or "").encode()


class ReadTokens:
    """Mints and checks read tokens with the shared key (read_key), each good for `ttl_s` (REIN_WEB_READ_TOKEN_S)."""

    def __init__(self, ttl_s: float | None = None) -> None:
        self._key = read_key()
        self.ttl_s = ttl_s if ttl_s is not None else settings.current().web_read_token_s

    def mint(self, subject: str, tenant: str | None, expires: float | None) -> tuple[str, float]:
        """(token, its expiry as a Unix time): `ttl_s` from now, or sooner if `expires` is sooner."""
        until = time.time() + self.ttl_s
        if expires is not None:
            until = min(until, expires)
        claims: dict[str, Any] = {"sub": subject, "aud": READ_AUDIENCE, "exp": int(until), "scope": "read"}
        if tenant is not None:
            claims["tenant"] = tenant
        return jwt.encode(claims, self._key, algorithm="HS256"), float(int(until))

    def check(self, token: str) -> dict[str, Any] | None:
        """The token's claims, or None (not ours, tampered with, or expired)."""
        try:
            claims = jwt.decode(token, self._key, algorithms=["HS256"], audience=READ_AUDIENCE,
                                options={"require": ["exp", "sub"]})
        except jwt.PyJWTError:
            return None
        return claims if claims.get("scope") == "read" else None
