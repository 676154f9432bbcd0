"""Keep secrets out of anything that reaches Temporal history: errors, tool results, logs.

Two nets, both applied to whatever text leaves a worker:
- by value: the values of the worker's secret-named environment variables (KEY, TOKEN,
  SECRET, PASSWORD, ...), the passwords inside its URL-valued variables (DATABASE_URL), and
  secret-named provider parameters;
- by pattern: common credential formats wherever they come from (vendor API keys such as
  `sk-...`, `AKIA...`, `ghp_...`, `xoxb-...`, JWTs, private key blocks), credentials in URLs
  (`scheme://user:password@host`), bearer tokens and `password=...`-style assignments.
Neither net is perfect; the codec (REIN_CODEC_KEY) is what keeps history unreadable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE|DSN)", re.IGNORECASE)
_URL_NAME = re.compile(r"(URL|URI|DSN|CONN)", re.IGNORECASE)

_PATTERNS: list[tuple[re.Pattern[str], str, tuple[str, ...]]] = [
    # (pattern, replacement, guards): a pattern can only match text holding one of its guards
    # (lowercase guards are looked for in the lowercased text), so most text costs a few
    # substring scans instead of fifteen regular expression passes.
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), REDACTED, ("PRIVATE KEY",)),
    # scheme://user:password@host -> keep the user and host, drop the password
    (re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+(@)"), rf"\g<1>{REDACTED}\g<2>", ("://",)),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9\-._~+/]{8,}=*"), rf"\g<1>{REDACTED}", ("bearer",)),
    (re.compile(r"(?i)(\bbasic\s+)[A-Za-z0-9+/]{12,}=*"), rf"\g<1>{REDACTED}", ("basic",)),
    (re.compile(
        r"(?i)(\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|access[_-]?token"
        r"|auth[_-]?token|refresh[_-]?token|client[_-]?secret|private[_-]?key)\b[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',;&}]{4,}"
    ), rf"\g<1>{REDACTED}", ("passw", "pwd", "secret", "api", "access", "auth", "refresh", "client", "private")),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), REDACTED, ("sk-",)),  # OpenAI, Anthropic (sk-ant-), DeepSeek, ...
    (re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"), REDACTED, ("_live_", "_test_")),  # Stripe
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED, ("AKIA", "ASIA")),  # AWS access key ids
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"), REDACTED, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),  # GitHub
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), REDACTED, ("github_pat_",)),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), REDACTED, ("glpat-",)),  # GitLab
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), REDACTED, ("xox",)),  # Slack
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), REDACTED, ("AIza",)),  # Google API keys
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), REDACTED, ("hf_",)),  # Hugging Face
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), REDACTED, ("eyJ",)),  # JWT
]


_GUARDED = [(p, r, guards, bool(p.flags & re.IGNORECASE)) for p, r, guards in _PATTERNS]


def _url_password(value: str) -> str | None:
    try:
        password = urlsplit(value.strip()).password
    except ValueError:
        return None
    return unquote(password) if password else None


_environment: tuple[dict[Any, Any], list[str]] = ({}, [])
"""The environment last read by `_environment_secrets`, and the secrets found in it."""


def _environment_secrets() -> list[str]:
    """Secret-named environment values and URL passwords; read again only when the environment changed."""
    global _environment
    raw = dict(getattr(os.environ, "_data", os.environ))  # undecoded: comparing it is cheap
    if raw == _environment[0]:
        return _environment[1]
    found = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    for k, v in os.environ.items():
        if _URL_NAME.search(k) and "@" in v:
            password = _url_password(v)
            if password and len(password) >= 4:
                found.add(password)
    _environment = (raw, sorted(found))
    return _environment[1]


def secret_values(params: Mapping[str, Any] | None = None) -> list[str]:
    """Secret-named environment values, URL passwords, rein's secret settings (the settings file's too) and
    secret-named parameter values, longest first."""
    from rein import settings

    found = set(_environment_secrets()) | set(settings.secret_texts())
    found |= {
        v for k, v in (params or {}).items() if isinstance(v, str) and len(v) >= 4 and _SECRET_NAME.search(k)
    }
    return sorted(found, key=len, reverse=True)


def scrub_patterns(text: str) -> str:
    """`text` with every credential-shaped string replaced."""
    folded = text.casefold().replace("\u0131", "i")  # what (?i) patterns match: casefold, plus dotless i
    for pattern, replacement, guards, caseless in _GUARDED:
        within = folded if caseless else text
        if any(guard in within for guard in guards):
            text = pattern.sub(replacement, text)
    return text


def scrub(text: str, params: Mapping[str, Any] | None = None) -> str:
    """`text` with every known secret value and every credential-shaped string replaced."""
    for value in secret_values(params):
        if value in text:
            text = text.replace(value, REDACTED)
    return scrub_patterns(text)


def scrub_exception(exc: BaseException, params: Mapping[str, Any] | None = None) -> None:
    """Redact secrets in place along the exception chain, keeping type and status code intact."""

    def clean(value: Any) -> Any:
        return scrub(value, params) if isinstance(value, str) else value

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(clean(a) for a in current.args)
        for attr in ("message", "detail", "litellm_debug_info"):
            value = getattr(current, attr, None)
            if isinstance(value, str):
                try:
                    setattr(current, attr, clean(value))
                except Exception:  # read-only attribute: args were cleaned already
                    pass
        current = current.__cause__ or current.__context__
