"""`rein`: run an agent, answer interrupts, look at runs, start a dev server.

    rein run examples.calculator:agent "what is 2+3?"    in-process (embedded server unless TEMPORAL_ADDRESS)
    rein server                                          a persistent dev server with the UI
    rein start calculator "what is 2+3?"                 start a run served by `python worker.py`
    rein waiting | status ID | approve ID | deny ID | answer ID TEXT | retry ID | cancel ID | result ID
    rein new my-agent [-t minimal|coder] [--dir .]       create a new agent project
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def cmd_run(args: argparse.Namespace) -> int:
    from rein.worker import load_agent

    agent = load_agent(args.agent)
    approver = None if sys.stdin.isatty() and not args.no_input else (lambda _: args.auto_approve)
    try:
        result = agent.run_interactive(args.prompt, approver)
    except Exception as exc:  # a failed run (no key, a rejected key, a fatal model error): one line, exit 1
        print(f"rein run: the run failed: {exc}", file=sys.stderr)
        return 1
    print(result)
    if result.status == "interrupted" and result.interrupt:
        print(f"[interrupted: {result.interrupt.type}] {result.interrupt.message}", file=sys.stderr)
    print(f"[{result.stop_reason} · {result.usage.total_tokens} tokens · run {result.run_id or 'local'}]", file=sys.stderr)
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    from rein.server import start_dev_server

    def stop_on_term(*_: Any) -> None:
        raise KeyboardInterrupt  # so `finally` stops the dev server (it runs in its own session)

    signal.signal(signal.SIGTERM, stop_on_term)
    server = start_dev_server(port=args.port, ui=True, ui_port=args.ui_port, db_filename=args.db_filename, wait_s=120)
    print(f"Temporal dev server: {server.address}  (export TEMPORAL_ADDRESS={server.address})", flush=True)
    print(f"Temporal UI:         {server.ui_url}", flush=True)
    print("Search attributes ReinAgent, ReinStatus, ReinIterations, ReinTokens are registered. Ctrl-C stops.", flush=True)
    try:
        while server.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    from rein.scaffold import create_project

    try:
        path = create_project(args.name, args.template, args.dir)
    except (ValueError, FileExistsError) as exc:
        print(f"rein new: {exc}", file=sys.stderr)
        return 1
    print(f"Created project {args.name!r} in {path.resolve()} (template: {args.template})")
    print()
    print("Next steps:")
    print(f"  cd {shlex.quote(str(path))}")
    if args.template == "coder":
        print("  cp .env.example .env    # then set REIN_MODEL and your vendor's API key")
        print('  python main.py "what does this project do?"')
    else:
        print("  python main.py          # offline, with a scripted model")
        print("  cp .env.example .env    # for a real model: set REIN_MODEL and your vendor's API key")
    print("  pytest                  # needs: pip install 'rein[test]'")
    return 0


def _with_client(action: Callable[[Any, argparse.Namespace], Awaitable[Any]]) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        from rein.client import DecisionRejected, ReinClient, connect

        async def go() -> Any:
            return await action(ReinClient(await connect(args.address, args.namespace), args.task_queue), args)

        try:
            out = asyncio.run(go())
        except DecisionRejected as exc:
            print(f"rein {args.command}: {exc}", file=sys.stderr)
            return 1
        if out is not None:
            _print_json(out)
        return 0

    return command


async def _start(c: Any, a: argparse.Namespace) -> Any:
    handle = await c.start(a.agent, a.prompt)
    return {"run_id": handle.id}


async def _status(c: Any, a: argparse.Namespace) -> Any:
    return (await c.status(a.run_id)).model_dump(mode="json")


async def _result(c: Any, a: argparse.Namespace) -> Any:
    return (await c.result(a.run_id)).model_dump(mode="json", exclude={"session"})


async def _waiting(c: Any, a: argparse.Namespace) -> Any:
    return await c.waiting(a.status)


async def _decide(c: Any, a: argparse.Namespace) -> Any:
    method = c.approve if a.command == "approve" else c.deny
    await method(a.run_id, a.tool_call_id, a.approver, a.reason)
    return {"signalled": a.command, "run_id": a.run_id}


async def _answer(c: Any, a: argparse.Namespace) -> Any:
    await c.answer(a.run_id, a.text, a.approver)
    return {"signalled": "answer", "run_id": a.run_id}


async def _retry(c: Any, a: argparse.Namespace) -> Any:
    await c.retry(a.run_id)
    return {"signalled": "retry", "run_id": a.run_id}


async def _cancel(c: Any, a: argparse.Namespace) -> Any:
    await c.cancel(a.run_id, a.reason)
    return {"signalled": "cancel", "run_id": a.run_id}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rein", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an agent in this process")
    run.add_argument("agent", help="module:attr of a rein.Agent")
    run.add_argument("prompt")
    run.add_argument("--no-input", action="store_true", help="never prompt; use --auto-approve's answer")
    run.add_argument("--auto-approve", action="store_true", help="approve every tool call without asking")
    run.set_defaults(func=cmd_run)

    server = sub.add_parser("server", help="start a persistent Temporal dev server with the UI")
    server.add_argument("--port", type=int, default=7233)
    server.add_argument("--ui-port", type=int, default=8233)
    server.add_argument("--db-filename", default=None, help="keep runs across restarts in this SQLite file")
    server.set_defaults(func=cmd_server)

    new = sub.add_parser("new", help="create a new agent project from a template")
    new.add_argument("name", help="the project's directory name (the agent is named after it)")
    new.add_argument("-t", "--template", default="minimal", help="minimal (default) or coder")
    new.add_argument("--dir", default=".", help="where to create the project directory (default: .)")
    new.set_defaults(func=cmd_new)

    def remote(name: str, help: str, action: Callable, *positional: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        for arg in positional:
            p.add_argument(arg)
        p.add_argument("--address", default=None, help="Temporal address (default TEMPORAL_ADDRESS or localhost:7233)")
        p.add_argument("--namespace", default=None)
        p.add_argument("--task-queue", default=None)
        p.set_defaults(func=_with_client(action))
        return p

    remote("start", "start a run served by a worker", _start, "agent", "prompt")
    remote("status", "show a run's status", _status, "run_id")
    remote("result", "wait for and print a run's result", _result, "run_id")
    remote("waiting", "list runs in a ReinStatus", _waiting).add_argument("--status", default="waiting_approval")
    for name in ("approve", "deny"):
        p = remote(name, f"{name} the pending tool calls of a run", _decide, "run_id")
        p.add_argument("--tool-call-id", default=None, help="only this call (default: the whole batch)")
        p.add_argument("--approver", default="cli")
        p.add_argument("--reason", default="")
    remote("answer", "answer a run waiting for input", _answer, "run_id", "text").add_argument("--approver", default="cli")
    remote("retry", "retry a run waiting after an error", _retry, "run_id")
    remote("cancel", "cancel a run", _cancel, "run_id").add_argument("--reason", default="")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
