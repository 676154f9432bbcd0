"""Session stores: keep a Session between turns or processes (as JSON).

With the durable engine the workflow already persists every run; stores are for
Chat-style applications that own their conversation history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from rein.core.session import Session


@runtime_checkable
class SessionStore(Protocol):
    def save(self, id: str, session: Session) -> None: ...

    def load(self, id: str) -> Session | None: ...


class MemorySessionStore:
    """Holds JSON, so every load is a fresh copy that nobody else mutates."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    def save(self, id: str, session: Session) -> None:
        self._data[id] = session.model_dump_json()

    def load(self, id: str) -> Session | None:
        raw = self._data.get(id)
        return None if raw is None else Session.model_validate_json(raw)

    def delete(self, id: str) -> None:
        self._data.pop(id, None)

    def __contains__(self, id: object) -> bool:
        return id in self._data


class FileSessionStore:
    """One `<id>.json` file per session in `directory`."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, id: str) -> Path:
        if not id or id in (".", "..") or "/" in id or "\\" in id:
            raise ValueError(f"invalid session id {id!r}: it must be a plain file name")
        return self.directory / f"{id}.json"

    def save(self, id: str, session: Session) -> None:
        self._path(id).write_text(session.model_dump_json(), encoding="utf-8")

    def load(self, id: str) -> Session | None:
        path = self._path(id)
        return Session.model_validate_json(path.read_text(encoding="utf-8")) if path.exists() else None

    def delete(self, id: str) -> None:
        self._path(id).unlink(missing_ok=True)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, str) and self._path(id).exists()
