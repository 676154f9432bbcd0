"""The session's embedded server (REIN_HOME), held open by the test process.

A `rein run` or a script with no address starts the shared embedded server when none runs (~4 s)
and, as its last user, stops it when it exits. A module that starts several holds it open first,
as a person with `rein server` running in another terminal does: each then uses the running
server. Starting one from nothing is tests/test_embedded.py's subject. The lease lasts until
the session ends (conftest stops the server then), like the in-process engine's.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def embedded_server() -> str:
    """The embedded server's address; this process is one of its users from now on."""
    from rein.durable.embedded_server import ensure_embedded

    return ensure_embedded()
