"""The dev servers rein starts (the embedded one, `rein server`, the tests') answer loopback names only on their
HTTP API: a web page whose name an attacker rebinds to 127.0.0.1 reads no run and sends no update through it."""

from __future__ import annotations

import httpx

from rein.temporal.dev_server import DevServer

LIST = "/api/v1/namespaces/default/workflows"


async def test_a_dns_rebound_name_gets_nothing_from_the_http_api(private_server: DevServer) -> None:
    base = f"http://127.0.0.1:{private_server.http_port}"
    async with httpx.AsyncClient(timeout=30) as http:
        own = await http.get(base + LIST)
        rebound = await http.get(base + LIST, headers={"Host": f"rebound.example:{private_server.http_port}"})
        update = await http.post(base + "/api/v1/namespaces/default/workflows/run-1/update/rein.approve",
                                 content=b'{"request": {}}', headers={"Host": "rebound.example", "Content-Type": "text/plain"})
    assert own.status_code == 200, own.text  # loopback: served
    assert (rebound.status_code, update.status_code) == (403, 403)
    assert "Host not allowed" in rebound.text
