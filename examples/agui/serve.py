"""The page that chats with the calculator agent through @ag-ui/client, served with everything it needs.

    cd examples/agui && npm ci && npm run build     # once: @ag-ui/client, bundled with the page's script
    python examples/agui/serve.py                    # then open the link it prints (its token signs you in)

One process: a worker for the calculator agent (rein.examples.calculator, offline by default), rein's AG-UI
endpoint mounted at /agui (rein.web.agui.app: the way to put it into your own Starlette or FastAPI app), and the
page. The threads live in Temporal (the embedded server of REIN_HOME, or TEMPORAL_ADDRESS), not in this process.
"""

from __future__ import annotations

if __name__ == "__main__":  # Ctrl-C, at any moment (these imports take a second or more): one line, exit 130
    from rein.cli import interrupt  # the standard library only

    interrupt.install()
    interrupt.fate("the page stopped; its threads stay in Temporal (`rein threads` lists them)")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import socket  # noqa: E402
from pathlib import Path  # noqa: E402

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402
from starlette.staticfiles import StaticFiles  # noqa: E402

import rein  # noqa: E402
from rein.client import connect  # noqa: E402
from rein.examples.calculator import agent  # noqa: E402
from rein.web import agui  # noqa: E402

HERE = Path(__file__).resolve().parent


async def main(port: int, host: str) -> None:
    client = await connect()
    endpoint = agui.app(client, agents=[agent])  # signs people in with `rein serve`'s own token (REIN_HOME)
    page = Starlette(routes=[Mount("/agui", app=endpoint), Mount("/", app=StaticFiles(directory=HERE, html=True))],
                     lifespan=lambda _: endpoint.router.lifespan_context(endpoint))
    token = endpoint.state.agui.auth.local
    async with rein.create_worker(client, agents=[agent]):
        listening = socket.create_server((host, port))  # bound before its link is printed: a click connects
        print(f"the calculator page on http://{host}:{port}/" + (f"#token={token}" if token else ""), flush=True)
        await uvicorn.Server(uvicorn.Config(page, host=host, port=port, log_level="warning")).serve(sockets=[listening])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    arguments = parser.parse_args()
    if not (HERE / "dist" / "app.js").exists():
        raise SystemExit("build the page's script first: cd examples/agui && npm ci && npm run build")
    asyncio.run(main(arguments.port, arguments.host))
