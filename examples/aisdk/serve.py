"""The React page that chats with the calculator agent through the AI SDK's `useChat`, served with what it needs.

    cd examples/aisdk && npm ci && npm run build     # once: react, @ai-sdk/react and ai, bundled with the page
    python examples/aisdk/serve.py                    # then open the link it prints (its token signs you in)

One process: a worker for the calculator agent (rein.examples.calculator, offline by default) and the planner
(rein.examples.planner: a to-do list in the thread's shared state, `/?agent=planner`), rein's AI SDK
endpoint mounted at /ai-sdk (rein.web.ai_sdk.app: the way to put it into your own Starlette or FastAPI app), and
the page. The chats are rein threads in Temporal (the embedded server of REIN_HOME, or TEMPORAL_ADDRESS), not in
this process: `rein serve` with a worker serves the same endpoint.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

import rein
from rein.client import connect
from rein.examples.calculator import agent
from rein.examples.planner import agent as planner
from rein.web import ai_sdk

HERE = Path(__file__).resolve().parent


def site(endpoint: Starlette) -> Starlette:
    """The endpoint at /ai-sdk beside the page's files (index.html, page.css, dist/app.js)."""
    return Starlette(routes=[Mount("/ai-sdk", app=endpoint), Mount("/", app=StaticFiles(directory=HERE, html=True))],
                     lifespan=lambda _: endpoint.router.lifespan_context(endpoint))


async def main(port: int, host: str) -> None:
    client = await connect()
    endpoint = ai_sdk.app(client, agents=[agent, planner])  # signs people in with `rein serve`'s own token (REIN_HOME)
    page = site(endpoint)
    token = endpoint.state.ai_sdk.auth.local
    fragment = f"#token={token}" if token else ""
    async with rein.create_worker(client, agents=[agent, planner]):
        listening = socket.create_server((host, port))  # bound before its link is printed: a click connects
        print(f"the calculator page on http://{host}:{port}/{fragment} (the planner's: /?agent=planner{fragment})",
              flush=True)
        await uvicorn.Server(uvicorn.Config(page, host=host, port=port, log_level="warning")).serve(sockets=[listening])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    arguments = parser.parse_args()
    if not (HERE / "dist" / "app.js").exists():
        raise SystemExit("build the page's script first: cd examples/aisdk && npm ci && npm run build")
    asyncio.run(main(arguments.port, arguments.host))
