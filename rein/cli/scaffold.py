"""`rein new`: create an agent project from a template."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer

from rein.cli.app import EXIT_USAGE, CliError, app


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="The project's directory name (the agent is named after it).",
                                        show_default=False)],
    template: Annotated[str, typer.Option("--template", "-t", help="minimal or coder.")] = "minimal",
    dir: Annotated[str, typer.Option("--dir", help="Where to create the project directory.")] = ".",
) -> None:
    """Create a new agent project from a template."""
    from rein.ops.scaffold import create_project

    try:
        path = create_project(name, template, dir)
    except ValueError as exc:  # an empty or invalid name, an unknown template: a usage error
        raise CliError(str(exc), EXIT_USAGE) from None
    except FileExistsError as exc:
        raise CliError(str(exc)) from None
    print(f"Created project {name!r} in {path.resolve()} (template: {template})")
    print()
    print("Next steps:")
    print(f"  cd {shlex.quote(str(path))}")
    if template == "coder":
        print("  cp .env.example .env    # then set REIN_MODEL and your vendor's API key")
        print('  python main.py "what does this project do?"')
    else:
        print("  python main.py          # offline, with a scripted model")
        print("  cp .env.example .env    # for a real model: set REIN_MODEL and your vendor's API key")
    print("  pytest                  # needs: pip install 'rein[testing]'")

