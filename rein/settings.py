"""Every setting rein reads, in one typed model: `REIN_*` environment variables (the names earlier releases
read), the optional settings file `REIN_HOME/settings.env` (the same `REIN_NAME=value` lines), and defaults.
The environment wins over the file, the file over the default (docs/settings.md, generated from this model).

Read through `current()`: it looks at the environment (and the file's modification time) on every call, so a
process, or a test, that sets a variable after importing rein sees it; the model is built again only when one
of them changed. Each value is parsed here, once: a bad one is a SettingsError of one line naming the variable
and what it expects (`rein` prints it, exit 2). Workflow code never reads settings: a run's behaviour comes from
its history and input only (tests/test_settings.py checks that nothing under workflows/ imports this module).
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from rein.core.setting_types import (
    Choice,
    CodecKeys,
    Expect,
    Keys,
    Prices,
    Routes,
    Seconds,
    Words,
    expects,
    is_secret,
    routes_text,
    shown,
)

PREFIX = "REIN_"
FILE_NAME = "settings.env"
RETIRED = {
    "REIN_LEAN_START": ("0.5.0", "every new conversation starts lean"),
    "REIN_UI_WAIT_TIMER": ("0.5.0", "the waiting timer is the patch rein-waiting-timer, asked at a run's first wait"),
    "REIN_ADOPT_INTERVAL_S": ("0.5.0", "no adoption loop: routing changes by a deploy or a person (docs/deploys.md)"),
    "REIN_PROMOTE_REPLAYS": ("0.5.0", "a promotion checks every run that would move, bounded by REIN_PROMOTE_TIMEOUT_S"),
}
"""Names earlier builds read, by the release that retired them and why: set, they are ignored without a warning
(`rein config` lists them)."""


class SettingsError(ValueError):
    """A setting holds a value rein cannot use: one line naming the variable and what it expects."""


def setting(default: Any = None, doc: str = "", *, group: str, secret: bool = False, url: bool = False,
            default_text: str | None = None, **constraints: Any) -> Any:
    """A field of Settings: `group` orders docs/settings.md; `secret` and `url` values are masked where shown;
    `default_text` says what a computed default is."""
    extra: Any = {"group": group, **({"secret": True} if secret else {}), **({"url": True} if url else {}),
             **({"default": default_text} if default_text else {})}
    if "default_factory" in constraints:
        return Field(description=doc, json_schema_extra=extra, **constraints)
    return Field(default, description=doc, json_schema_extra=extra, **constraints)


PLACES, SERVER, PAYLOADS, DEPLOYS, CLIENTS, FLEET, WEB, RULES = (
    "Where things are", "The embedded server", "Payloads", "Deploys", "Clients and decisions", "The fleet",
    "Web surfaces and sign-in", "Rules and notices")


class Settings(BaseSettings):
    """rein's settings; each field is the environment variable `REIN_<FIELD>` (upper case)."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", case_sensitive=False, env_ignore_empty=True,
                                      frozen=True)

    # ---------------------------------------------------------------- where things are
    home: Path = setting(doc="Where the embedded server, payload files, the web token and the settings file live "
                         "(read from the environment only: the settings file is in it).", group=PLACES,
                         default_factory=lambda: Path.home() / ".rein", default_text="~/.rein")
    task_queue: str | None = setting(None, "The shared task queue runs start on and `rein worker` polls (unset: "
                                     "`rein`; a worker of another deployment then polls only its agents' queues).",
                                     group=PLACES)
    engine: Annotated[Literal["temporal", "local"], Choice] = setting(
        "temporal", "Where `Agent.run` sends runs: `temporal` (durable) or `local` (in-process).", group=PLACES)
    debug: bool = setting(False, "Tracebacks for expected failures too, and temporalio's core logs on the terminal "
                          "(also `--debug` on any `rein` command).", group=PLACES)
    identity: str = setting(doc=(
        "Who the CLI and scripts decide as: the approver recorded on their decisions and the identity of the "
        "Temporal client `rein.client.connect()` makes."), group=PLACES,
        default_factory=lambda: user_at_host(), default_text="USER@HOST")
    model: str | None = setting(None, "The LiteLLM model id (`openai/gpt-4o`) the example agents and the projects "
                                "`rein new` makes use; unset: their offline scripted model.", group=PLACES)

    # ---------------------------------------------------------------- the embedded server
    server_port: int = setting(0, "The embedded server's frontend port (0: a free one; `rein server --port`).",
                               group=SERVER, ge=0, le=65535)
    ui_port: int = setting(0, "The embedded server's web UI port (0: a free one; `rein server --ui-port`).",
                           group=SERVER, ge=0, le=65535)
    server_start_timeout_s: Seconds = setting(60.0, "How long a process waits for the embedded server to become "
                                            "healthy, in seconds.", group=SERVER, gt=0)
    server_idle_s: Seconds = setting(0.0, "How long the embedded server stays up after its last user left, in "
                                     "seconds (0: it stops at once); the process that starts it decides.",
                                     group=SERVER, ge=0)

    # ---------------------------------------------------------------- payloads (docs/payloads.md)
    codec_key: Keys = setting(CodecKeys(), "Encrypt every payload with AES-256-GCM (docs/operations.md); workers, "
                                     "clients and the codec server need the same keys.", group=PAYLOADS, secret=True)
    storage_threshold: int = setting(128 * 1024, "Payloads above this many bytes are stored outside the history "
                                     "(files under REIN_HOME, or S3).", group=PAYLOADS, ge=0)
    storage_max_bytes: int = setting(50 * 1024 * 1024, "The largest payload the store takes, in bytes; a larger "
                                     "one fails the run.", group=PAYLOADS, ge=1)
    s3_bucket: str | None = setting(None, "Store large payloads in this S3 bucket (`rein[s3]`) instead of files "
                                    "under REIN_HOME.", group=PAYLOADS)
    payload_retention_days: float = setting(30.0, "A worker deletes payload files nobody read or wrote for this "
                                            "many days (0: keep them forever).", group=PAYLOADS, ge=0)

    # ---------------------------------------------------------------- deploys (docs/deploys.md)
    deployment: str | None = setting(None, "The Worker Deployment (the application) a worker joins (unset: `rein` "
                                     "for `rein worker` and the engine; `none`: versioning off).", group=DEPLOYS)
    build_id: str | None = setting(None, "This build's id (unset: a digest of rein's workflow-side code and "
                                   "activities).", group=DEPLOYS)
    versioning: Annotated[Literal["auto-upgrade", "pinned"], Choice] = setting(
        "auto-upgrade", "How a worker's runs behave: `auto-upgrade` (they move to the current build at their next "
        "task) or `pinned` (a run finishes on the build it started on).", group=DEPLOYS)
    promote: Annotated[Literal["new", "manual"], Choice] = setting(
        "new", "`new`: a new build makes itself current once, as its first worker starts; `manual`: only a "
        "deployment's first build does.", group=DEPLOYS)
    promote_timeout_s: Seconds = setting(300.0, (
        "How long a build's replay check of the runs that would move to it may take (a new build's promotion, "
        "`rein deployment set-current`); past it the build is not made current."), group=DEPLOYS, gt=0)
    poller_fresh_s: Seconds = setting(70.0, "A worker that polled within this many seconds counts as live (workers "
                                    "long-poll for 60 s; lower it for a server that polls shorter).", group=DEPLOYS,
                                    ge=0)

    # ---------------------------------------------------------------- clients and decisions (docs/cli.md)
    worker_grace_s: Seconds = setting(3.0, "How long a client looks again for a worker when none polls yet, before "
                                    "it refuses (`rein start`, a decision).", group=CLIENTS, ge=0)
    query_grace_s: Seconds = setting(3.0, "How long a worker gets to answer a query before the history is replayed "
                                   "instead.", group=CLIENTS, ge=0)
    decision_grace_s: Seconds = setting(2.0, "How long a decision waits for a worker to take it before the caller "
                                      "hears that none has yet (queued).", group=CLIENTS, ge=0)

    # ---------------------------------------------------------------- the fleet (docs/fleet.md)
    model_queues: Words = setting((), "Providers whose model calls a worker schedules on their own queue "
                                  "(`openai anthropic`, or `*` for all).", group=FLEET)
    model_prices: Prices = setting({}, "Prices for models LiteLLM's table lacks (or overrides), so budgets "
                                   "count them.", group=FLEET)

    # ---------------------------------------------------------------- the web surfaces (`rein serve`)
    web_origins: Words = setting((), (
        "Other origins (scheme://host[:port]) whose pages may call `rein serve` (answered with CORS)."), group=WEB)
    web_public_host: Words = setting((), (
        "The host names (with :port when not 80/443) people reach `rein serve` under, beside the loopback names."),
        group=WEB)
    web_open: bool = setting(False, "Serve without sign-in (loopback only; every page says so).", group=WEB)
    web_token_name: str = setting("token", "Who the shared token (REIN_CODEC_TOKEN) is, as recorded on decisions.",
                                  group=WEB)
    web_max_body: int = setting(4 * 1024 * 1024, (
        "The largest request body a web surface reads, in bytes (a larger one is refused, 413)."), group=WEB, ge=1024)
    web_read_token_s: int = setting(300, (
        "How long a read token (for an EventSource stream, which cannot send headers) stays valid, in seconds."),
        group=WEB, ge=5, le=3600)
    web_read_key: Annotated[SecretStr | None, Expect("a secret of 32 characters or more")] = setting(None, (
        "The key read tokens are signed with: the same on every `rein serve` behind one address, so a stream opened "
        "on one with a token another minted is let in (unset: a key made once under REIN_HOME, shared by the "
        "servers of this machine); 32 characters or more."), group=WEB, secret=True, min_length=32)
    tenant_claim: str = setting("tenant", "The JWT claim naming a caller's tenant (`*` in it: every tenant).",
                                group=WEB)
    ui_url: str | None = setting(None, "The Temporal UI the inbox links runs to (`rein serve --ui`; unset: the "
                                 "embedded server's own UI).", group=WEB)
    codec_token: SecretStr | None = setting(None, "A shared secret callers of the codec server and `rein serve` "
                                            "send as `Authorization: Bearer ...` (an operator: every tenant).",
                                            group=WEB, secret=True)
    codec_jwks_url: str | None = setting(None, "Let in callers with a JWT signed by the identity provider whose "
                                         "keys are at this URL (REIN_CODEC_JWT_AUDIENCE required).", group=WEB)
    codec_jwt_audience: str | None = setting(None, "The audience a JWT must name (`aud`): this service's.",
                                             group=WEB)
    codec_jwt_issuer: str | None = setting(None, "The issuer a JWT must name (`iss`), checked when set.", group=WEB)
    codec_auth: Annotated[Literal["none"] | None, Choice] = setting(
        None, "`none`: the codec server lets anyone in (a local UI that cannot send a token); never a web surface.",
        group=WEB)

    # ---------------------------------------------------------------- rules and waiting notices (docs/inbox.md)
    rules_recheck_s: Seconds = setting(3.0, (
        "After a rule is added, how long the policy workflow's activity waits before it tells the waiting runs a "
        "second time (a run whose wait reached visibility late is told then)."), group=RULES, ge=0, le=600)
    waiting_webhook: Routes = setting({}, "Where a worker posts a message when a run starts to wait (Slack or "
                                      "Teams JSON), by tenant or agent.", group=RULES, url=True)
    waiting_webhook_secret: Routes = setting({}, "The HMAC-SHA256 secret signing those posts (the same form, by "
                                             "tenant or agent).", group=RULES, secret=True)
    waiting_webhook_retry_s: Seconds = setting(5.0, "The first retry's delay when a post fails (doubling, at most 5 "
                                             "minutes).", group=RULES, ge=0.01)
    inbox_url: str = setting("", "The inbox page those messages link to (`rein serve`'s `/inbox`).", group=RULES)

    @field_validator("identity", mode="after")
    @classmethod
    def _someone(cls, value: str) -> str:
        return value.strip()[:256] or user_at_host()

    @field_validator("home", mode="after")
    @classmethod
    def _expanded(cls, value: Path) -> Path:
        return value.expanduser()

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Arguments, then the environment, then the settings file: each wins over the ones after it."""
        return init_settings, env_settings, FileSource(settings_cls, file_values(settings_file()))


class FileSource(EnvSettingsSource):
    """The settings file's lines, matched to fields as the environment's are (the same names)."""

    def __init__(self, settings_cls: type[BaseSettings], values: Mapping[str, str]):
        self.values = {name.lower(): value for name, value in values.items() if value}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return self.values


def user_at_host() -> str:
    """The person at this machine, as `rein` names them by default: the login name and the host (never a process)."""
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


# ----------------------------------------------------------------------------- reading them


def environment() -> dict[str, str]:
    """This process's `REIN_*` variables (names upper case), the empty ones left out (they count as unset)."""
    return {name.upper(): value for name, value in _named() if value}


def _named() -> list[tuple[str, str]]:
    env = os.environ
    return [(name, env[name]) for name in env if name[:5].upper() == PREFIX]  # names only are decoded: cheaper


def settings_file() -> Path:
    """`REIN_HOME/settings.env` (REIN_HOME from the environment only: the file cannot move itself)."""
    return Path(_file_name()).expanduser()


def _file_name() -> str:
    home = os.environ.get("REIN_HOME") or os.environ.get("rein_home")
    return os.path.join(home or os.path.expanduser("~/.rein"), FILE_NAME)


def file_values(path: Path) -> dict[str, str]:
    """The settings file's `NAME=value` lines ({} when there is none); REIN_HOME in it is a SettingsError."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    values = {name.upper(): value for name, value in dotenv_values(path).items() if value}
    if "REIN_HOME" in values:
        raise SettingsError(f"REIN_HOME cannot be set in {path} (it says where that file is): set it in the environment")
    return values


_seen: list[Any] = [None]
"""[(what the last model was built from, that model)]: `current()` builds again only when it changed."""
_told: list[bool] = []
"""Non-empty once this process has named its unknown settings."""
_WHO = ("HOME", "USER", "LOGNAME")
"""What the defaults of REIN_HOME and REIN_IDENTITY come from."""


def current() -> Settings:
    """The settings as the environment and the settings file give them now (SettingsError: a bad value).

    Cheap: the model is built again only when a `REIN_*` variable, the settings file (its modification time) or
    what a default comes from changed since the last call (bench/settings_read.py measures both). The first
    build in a process names unknown `REIN_*` variables on stderr, once."""
    name = _file_name()
    try:
        stat = os.stat(name)
        mark: Any = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    except OSError:
        mark = None
    key = (_named(), name, mark, [os.environ.get(who) for who in _WHO])
    seen = _seen[0]
    if seen is not None and seen[0] == key:
        return seen[1]
    return _build(key, Path(name).expanduser())


def _build(key: Any, path: Path) -> Settings:
    env, values = environment(), file_values(path)
    if not _told:
        _told.append(True)
        for line in unknown_lines(env, values, path):
            print(f"rein: {line}", file=sys.stderr, flush=True)
    try:
        built = Settings()
    except ValidationError as error:
        raise SettingsError(bad_value_line(error, env, values, path)) from None
    _seen[0] = (key, built)
    return built


def known_names() -> list[str]:
    """Every variable name rein knows: its settings and the retired ones."""
    return [*field_names(), *RETIRED]


def field_names() -> list[str]:
    """The environment variable of every setting."""
    return [f"{PREFIX}{name.upper()}" for name in Settings.model_fields]


def unknown_lines(env: Mapping[str, str], values: Mapping[str, str], path: Path) -> list[str]:
    """One warning per `REIN_*` name no setting has (environment and file), with the nearest known name."""
    known = known_names()
    lines = []
    for name, where in [*((n, "") for n in env), *((n, f" in {path}") for n in values)]:
        if name in known:
            continue
        if not name.startswith(PREFIX):
            lines.append(f"{name}{where} is not a rein setting (ignored; the file holds REIN_* settings only)")
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean {near[0]}?" if near else "no setting has a similar name"
        lines.append(f"unknown setting {name}{where} is ignored ({hint} `rein config` lists them)")
    return lines


def bad_value_line(error: ValidationError, env: Mapping[str, str], values: Mapping[str, str], path: Path) -> str:
    """The refused values as one line: each variable, where it came from, what it holds and what it expects."""
    parts = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else ""
        info = Settings.model_fields.get(field)
        if info is None:
            parts.append(str(problem.get("msg")))
            continue
        name = f"{PREFIX}{field.upper()}"
        raw = env.get(name, values.get(name, ""))
        value = "(hidden)" if is_secret(info) else repr(raw)
        where = "" if name in env or name not in values else f" (in {path})"
        said = (problem.get("ctx") or {}).get("error") if problem.get("type") == "value_error" else None
        reason = f": {said}" if said else ""
        parts.append(f"{name}={value}{where}{reason}; expected {expects(info)}")
    return "bad setting " + "; ".join(dict.fromkeys(parts))


# ----------------------------------------------------------------------------- describing them


def describe() -> list[dict[str, Any]]:
    """Every setting: its variable, effective value (masked, as text), where it came from, and its default."""
    values, env, path = current(), environment(), settings_file()
    in_file = file_values(path)
    rows = []
    for field, info in Settings.model_fields.items():
        name = f"{PREFIX}{field.upper()}"
        source = "environment" if name in env else "file" if name in in_file else "default"
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        default = str(extra.get("default") or shown(info, info.default))
        rows.append({"name": name, "value": shown(info, getattr(values, field)), "source": source,
                     "default": default, "secret": is_secret(info)})
    return rows


def summary() -> str:
    """One line for a worker's log: the settings given here (masked) and where from; the rest are defaults."""
    rows, path = describe(), settings_file()
    given = [f"{row['name']}={row['value']} ({row['source']})" for row in rows if row["source"] != "default"]
    return (f"settings: {', '.join(given) or 'all defaults'}; {len(rows) - len(given)} others at their defaults; "
            f"file {path}{'' if path.is_file() else ' (none)'} (`rein config` shows them all)")


def retired_set() -> dict[str, str]:
    """Retired variables set here (environment or file), each with why it is ignored."""
    set_here = {**file_values(settings_file()), **environment()}
    return {name: f"retired in {release}: {why}" for name, (release, why) in RETIRED.items() if name in set_here}


def secret_texts() -> list[str]:
    """The secret settings' values (and the waiting webhook's URLs) as text, each 8 characters or more: what
    rein.blueprint.secrets scrubs from what runs record, wherever the value was set."""
    now = current()
    found = [*now.waiting_webhook_secret.values(), *now.waiting_webhook.values(),
             *(base64.b64encode(key).decode() for _, key in now.codec_key)]
    found += [secret.get_secret_value() for secret in (now.codec_token, now.web_read_key) if secret is not None]
    return [text for text in found if len(text) >= 8]


# ----------------------------------------------------------------------------- changing them


def export(**values: Any) -> None:
    """Set settings (by field name) for this process and the processes it starts, checked first (SettingsError)."""
    text = {f"{PREFIX}{field.upper()}": _as_text(field, value) for field, value in values.items()}
    unknown = [name for name in text if name.removeprefix(PREFIX).lower() not in Settings.model_fields]
    if unknown:
        raise SettingsError(f"no such setting: {', '.join(unknown)}")
    try:
        Settings(**{field: value for field, value in values.items() if value is not None})
    except ValidationError as error:
        given = {name: value for name, value in text.items() if value is not None}
        raise SettingsError(bad_value_line(error, given, {}, settings_file())) from None
    os.environ.update({name: value for name, value in text.items() if value is not None})
    for name in [name for name, value in text.items() if value is None]:
        os.environ.pop(name, None)


@contextmanager
def override(**values: Any) -> Iterator[Settings]:
    """Settings changed for the block (tests): `with override(web_open=True): ...`; None unsets one. The earlier
    environment comes back after, whatever happened in the block."""
    names = [f"{PREFIX}{field.upper()}" for field in values]
    before = {name: os.environ.get(name) for name in names}
    try:
        export(**values)
        yield current()
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


ROUTED = ("waiting_webhook", "waiting_webhook_secret")
"""The settings whose value is a table of routes (`URL tenant:NAME=URL ...`)."""


def _as_text(field: str, value: Any) -> str | None:
    """A value as its variable's text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, CodecKeys):
        return ",".join(f"{key_id}:{base64.b64encode(key).decode()}" for key_id, key in value)
    if isinstance(value, (tuple, list)):
        return " ".join(map(str, value))
    if isinstance(value, dict):
        return routes_text(value) if field in ROUTED else json.dumps(value)
    return str(value.get_secret_value() if isinstance(value, SecretStr) else value)
