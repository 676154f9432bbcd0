"""Every setting rein reads, in one typed model: `REIN_*` environment variables (the names earlier releases
read), an optional file under REIN_HOME, and defaults.

Read through `current()`: it reads the environment again on each call, so a process (or a test) that sets a
variable after importing rein sees it. Workflow code never reads settings: a run's behaviour comes from its
history and input only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

SECRET = {"secret": True}
"""Marks a field whose value is masked wherever settings are shown (the worker's start line)."""


class Settings(BaseSettings):
    """rein's settings; each field is the environment variable `REIN_<FIELD>` (upper case)."""

    model_config = SettingsConfigDict(env_prefix="REIN_", extra="ignore", case_sensitive=False)

    # ---------------------------------------------------------------- where things are
    home: Path = Field(default_factory=lambda: Path.home() / ".rein",
                       description="Where the embedded server, payloads and the web token live.")
    task_queue: str | None = Field(default=None, description="The task queue runs start on (default `rein`).")
    engine: str = Field(default="temporal", description="Where `Agent.run` sends runs: `temporal` or `local`.")
    debug: bool = Field(default=False, description="Tracebacks and temporalio's core logs on the terminal.")

    # ---------------------------------------------------------------- the web surfaces (`rein serve`)
    web_origins: str = Field(default="", description=(
        "Other origins (scheme://host[:port], space or comma separated) whose pages may call `rein serve` "
        "(answered with CORS)."))
    web_public_host: str = Field(default="", description=(
        "The host name (with :port when not 80/443) people reach `rein serve` under, beside the loopback names."))
    web_open: bool = Field(default=False, description=(
        "Serve without sign-in (loopback only; every page says so)."))
    web_token_name: str = Field(default="", description=(
        "Who the shared token (REIN_CODEC_TOKEN) is, as recorded on decisions (default: `token`)."))
    web_max_body: int = Field(default=4 * 1024 * 1024, ge=1024, description=(
        "The largest request body a web surface reads, in bytes (a larger one is refused, 413)."))
    web_read_token_s: int = Field(default=300, ge=5, le=3600, description=(
        "How long a read token (for an EventSource stream, which cannot send headers) stays valid, in seconds."))
    identity: str = Field(default_factory=lambda: user_at_host(), description=(
        "Who the CLI and scripts decide as: the approver recorded on their decisions and the identity of the "
        "Temporal client `rein.client.connect()` makes (default USER@HOST)."))

    # ---------------------------------------------------------------- rules (rein policy)
    rules_recheck_s: float = Field(default=3.0, ge=0, le=600, description=(
        "After a rule is added, how long the policy workflow's activity waits before it tells the waiting runs a "
        "second time (a run whose wait reached visibility late is told then)."))

    # ---------------------------------------------------------------- deploys (docs/deploys.md)
    promote_timeout_s: float = Field(default=300.0, gt=0, description=(
        "How long a build's replay check of the runs that would move to it may take (a new build's promotion, "
        "`rein deployment set-current`); past it the build is not made current. REIN_PROMOTE_REPLAYS, which "
        "bounded earlier builds' check by a number of runs, is accepted and ignored: every run is checked."))

    @field_validator("identity", mode="after")
    @classmethod
    def _someone(cls, value: str) -> str:
        return value.strip()[:256] or user_at_host()


def user_at_host() -> str:
    """The person at this machine, as `rein` names them by default: the login name and the host (never a process)."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def current() -> Settings:
    """The settings as the environment (and the settings file) give them now."""
    return Settings()


def field_names() -> list[str]:
    """The environment variable of every setting."""
    return [f"REIN_{name.upper()}" for name in Settings.model_fields]


def describe() -> dict[str, Any]:
    """Each setting's effective value (secrets masked)."""
    values = current()
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        value = getattr(values, name)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        out[f"REIN_{name.upper()}"] = "***" if extra.get("secret") and value else value
    return out
