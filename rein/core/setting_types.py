"""The value types of rein's settings (rein.settings), each parsed from its variable's text once, and how a value
is said and shown: what it expects (the bad-value line, docs/settings.md) and masked (secrets, webhook URLs).
Pure: no I/O, no environment; rein.settings reads the variables."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import NoDecode


class Expect:
    """What a setting's value looks like, in words (annotated on a type)."""

    def __init__(self, text: str):
        self.text = text


def _words(value: Any) -> Any:
    return tuple(w for w in value.replace(",", " ").split() if w) if isinstance(value, str) else value


def _routes(value: Any) -> Any:
    """`URL tenant:NAME=URL agent:NAME=URL` -> {"": default, "tenant:NAME": URL, "agent:NAME": URL}."""
    if not isinstance(value, str):
        return value
    found: dict[str, str] = {}
    for entry in value.replace(";", " ").split():
        key, eq, target = entry.partition("=")
        if eq and key.startswith(("tenant:", "agent:")):
            found[key] = target
        else:
            found[""] = entry
    return found


def routes_text(routes: dict[str, str]) -> str:
    """A Routes value as its variable's text again."""
    return " ".join(f"{key}={url}" if key else url for key, url in routes.items())


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        raise ValueError("it is not JSON") from None


class CodecKeys(tuple[tuple[str, bytes], ...]):
    """The payload codec's keys, (id, 32 bytes) each, the encrypting one first (empty: payloads unencrypted);
    its repr never shows a key."""

    def __repr__(self) -> str:
        return f"CodecKeys({', '.join(self.ids)})"

    @property
    def ids(self) -> list[str]:
        return [key_id for key_id, _ in self]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)


def derived_id(key: bytes) -> str:
    """A stable, non-secret id for a key given without one."""
    return "k-" + hashlib.sha256(b"rein-codec-key-id" + key).hexdigest()[:12]


def parse_keys(value: str) -> CodecKeys:
    """`base64` or `id:base64[,id:base64...]` -> CodecKeys; a ValueError says what is wrong (never the key)."""
    keys: list[tuple[str, bytes]] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        key_id, sep, encoded = item.rpartition(":") if ":" in item else ("", "", item)
        try:
            key = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{key_id or 'the key'} is not valid base64") from None
        if len(key) != 32:
            raise ValueError(f"{key_id or 'the key'} decodes to {len(key)} bytes; it must be 32")
        keys.append((key_id if sep else derived_id(key), key))
    if not keys:
        raise ValueError("it holds no key")
    if len({key_id for key_id, _ in keys}) != len(keys):
        raise ValueError("two keys share an id")
    return CodecKeys(keys)


def _codec_keys(value: Any) -> Any:
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return parse_keys(value) if isinstance(value, str) else value


def _lower_dashed(value: Any) -> Any:
    return value.strip().lower().replace("_", "-") if isinstance(value, str) else value


Words = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_words), Expect("words separated by spaces or commas")]
Routes = Annotated[dict[str, str], NoDecode, BeforeValidator(_routes),
                   Expect("`URL`, and `tenant:NAME=URL` / `agent:NAME=URL` entries, separated by spaces")]
Price = Annotated[float, Field(ge=0)]
Prices = Annotated[dict[str, tuple[Price, Price]], NoDecode, BeforeValidator(_json),
                   Expect('a JSON object of model -> [input, output] USD per million tokens, e.g. {"openai/m": [0.5, 1.5]}')]
Keys = Annotated[CodecKeys, NoDecode, BeforeValidator(_codec_keys),
                 Expect("base64 of 32 bytes, or `ID:BASE64,ID:BASE64...` (the first encrypts, all decrypt)")]
Seconds = Annotated[float, Expect("a number of seconds")]
Choice = BeforeValidator(_lower_dashed)
"""A choice among words, case and `_`/`-` aside (`AUTO_UPGRADE` is `auto-upgrade`)."""


# ----------------------------------------------------------------------------- saying and showing a value


def extra_of(info: FieldInfo) -> dict[str, Any]:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


def is_secret(info: FieldInfo) -> bool:
    return bool(extra_of(info).get("secret"))


def expects(info: FieldInfo) -> str:
    """What the field's value looks like, in words (from its type and bounds)."""
    said = [m.text for m in info.metadata if isinstance(m, Expect)]
    bounds = {kind: getattr(m, kind.lower()) for m in info.metadata if (kind := type(m).__name__) in ("Ge", "Gt", "Le")}
    text = said[0] if said else _kind(info.annotation)
    low = f"{bounds['Ge']:g}" if "Ge" in bounds else f"more than {bounds['Gt']:g}" if "Gt" in bounds else None
    if low is not None and "Le" in bounds:
        return f"{text} from {low} to {bounds['Le']:g}" if "Ge" in bounds else f"{text}, {low}, at most {bounds['Le']:g}"
    if low is not None:
        return f"{text}, {low} or more" if "Ge" in bounds else f"{text}, {low}"
    return text


def _kind(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is not None and len(args) == 1:  # X | None
        return _kind(args[0])
    kinds = {bool: "true or false (1/0, yes/no, on/off)", int: "an integer", float: "a number", Path: "a path",
             SecretStr: "text (a secret)"}
    return kinds.get(annotation, "text")


def masked(info: FieldInfo, value: Any) -> Any:
    """`value` as it may be shown: a secret as `***` (a codec key's ids kept), a webhook URL as its scheme and host."""
    if value in (None, "", {}, ()):
        return value
    if is_secret(info):
        return f"*** (keys {', '.join(value.ids)})" if isinstance(value, CodecKeys) else "***"
    if extra_of(info).get("url"):
        if isinstance(value, dict):
            return routes_text({key: _host(url) for key, url in value.items()})
        return _host(str(value))
    return value


def _host(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/***" if sep else "***"


def shown(info: FieldInfo, value: Any) -> str:
    """A value as one line of text, masked."""
    value = masked(info, value)
    if value is None:
        return "(unset)"
    if isinstance(value, tuple):
        return " ".join(value) or "(none)"
    if isinstance(value, dict):
        return (routes_text(value) if all(isinstance(v, str) for v in value.values()) else json.dumps(value)) \
            if value else "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if value != "" else "(empty)"
