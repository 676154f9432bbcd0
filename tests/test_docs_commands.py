"""Every `rein ...` command line the docs show and every hint the CLI prints names commands and options that
exist (a newcomer met `rein waiting`, `rein fork ticket-1 --step 2`, and `rein send` saying "pass --no-check",
which it does not take).

Nothing is run: each command line is resolved against the real command tree (typer's click commands: a group's
subcommand by name, then the options of the command it names, the way click parses them, and click's
`make_context` with resilient parsing on what the line gives that command). Read from:

- README.md and docs/*.md: shell code blocks, and inline code spans that start with `rein `;
- rein/: every string that holds a backticked `rein ...` or starts with `rein ` (f-string fields read as a
  placeholder), and the command list in rein/cli/__init__.py's docstring;
- rein/cli/*.py: every bare `--option` in a string (a hint, a help text, a docstring) must be an option of each
  command that can print it: the command whose code holds the string, or the commands that call the helper
  that holds it (followed through the module's own functions and names).

Synopses read as the docs write them: `[--id RUN_ID]` and `(--cron EXPR | --every 10m)` are options of the
command, `rein schedule list | describe ID | pause ID` names sibling subcommands, and UPPERCASE words,
`...` and f-string fields are placeholders.
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_COMMANDS = {("differences.md", "rein dev")}
"""Named as what rein does *not* have (the predecessor's `rein dev` file watcher)."""
SHELL = {"", "bash", "sh", "shell", "console", "text"}
PLACEHOLDER = "X"


@pytest.fixture(scope="module")
def root() -> Any:
    import rein.cli.commands  # noqa: F401  (registers every command group on `app`)
    from rein.cli.app import app

    group = get_command(app)
    assert is_group(group)
    return group


# typer (0.29) carries its own copy of click: its classes are told apart by what they do, not imported.
def is_group(command: Any) -> bool:
    return hasattr(command, "get_command") and hasattr(command, "list_commands")


def context(command: Any, name: str | None = None, parent: Any = None) -> Any:
    return command.context_class(command, info_name=name, parent=parent)


# --------------------------------------------------------------------------- resolving a command line


@dataclass
class Resolved:
    path: list[str] = field(default_factory=list)
    """The subcommands named, from the root."""
    command: Any = None
    ctx: Any = None
    container: tuple[Any, Any, list[str]] | None = None
    """The group holding `command`: where a `| sibling` segment is looked up."""
    args: list[str] = field(default_factory=list)
    """What the line gives the command it names (its options and arguments)."""
    problems: list[str] = field(default_factory=list)


def options_of(command: Any, ctx: Any) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for param in command.get_params(ctx):
        if param.param_type_name == "option":
            for name in [*param.opts, *param.secondary_opts]:
                names[name] = param
    return names


def tokens_of(line: str) -> list[str]:
    line = line.replace("\\|", " | ")
    try:
        words = shlex.split(line)
    except ValueError:  # an unbalanced quote in a synopsis
        words = line.split()
    out = []
    for word in words:
        word = word.strip("[]()").rstrip(",;.:")
        if word:
            out.append(word)
    return out


def resolve(root: Any, line: str) -> Resolved:
    """The command `line` names (`rein ...`, env assignments before it allowed) and what in it does not exist."""
    words = tokens_of(line)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words.pop(0)
    assert words and words[0] == "rein", line
    segments: list[list[str]] = [[]]
    for word in words[1:]:
        if word == "|":
            segments.append([])
        else:
            segments[-1].append(word)
    found = Resolved(command=root, ctx=context(root, "rein"))
    for number, segment in enumerate(segments):
        if number and segment and segment[0] == "rein":  # `rein a | rein b`: the second from the root
            _parse(found)
            found.command, found.ctx, found.path, found.container, found.args = root, context(root, "rein"), [], None, []
            segment = segment[1:]
        elif number and segment and found.container is not None:
            group, ctx, path = found.container
            if group.get_command(ctx, segment[0]) is not None:  # a sibling: `schedule list | describe ID`
                _parse(found)
                found.command, found.ctx, found.path, found.args = group, ctx, list(path), []
        _walk(found, segment)
    _parse(found)
    return found


def _walk(found: Resolved, words: list[str]) -> None:
    """Down the tree along `words`: subcommands of groups; each option checked on the command it is given to."""
    skip = False
    for word in words:
        assert found.command is not None and found.ctx is not None
        if skip:
            found.args.append(word)
            skip = False
            continue
        if word.startswith("-") and word not in ("-", "--"):
            name = word.split("=", 1)[0]
            known = {**options_of(found.ctx.find_root().command, found.ctx.find_root()),
                     **options_of(found.command, found.ctx)}
            if name not in known:
                found.problems.append(f"`rein {' '.join(found.path)}` has no option {name}")
            else:
                found.args.append(word)
                param = known[name]
                skip = "=" not in word and not getattr(param, "is_flag", False) and not getattr(param, "count", False)
            continue
        if is_group(found.command) and not _placeholder(word):
            *others, word = re.split(r"[|/]", word)  # `rein approve|deny RUN_ID`: each must exist; the last goes on
            missing = [w for w in [*others, word] if found.command.get_command(found.ctx, w) is None]
            found.problems += [f"`rein {' '.join([*found.path, w])}`: no such command" for w in missing]
            sub = found.command.get_command(found.ctx, word)
            if sub is None:
                continue
            found.container = (found.command, found.ctx, list(found.path))
            found.path.append(word)
            found.ctx = context(sub, word, found.ctx)
            found.command, found.args = sub, []
            continue
        found.args.append(word)


def _parse(found: Resolved) -> None:
    """click's own parse of what the line gives the command (resilient: placeholders, missing values)."""
    assert found.command is not None and found.ctx is not None
    try:
        found.command.make_context(found.ctx.info_name, list(found.args), parent=found.ctx.parent, resilient_parsing=True)
    except Exception as err:  # click's UsageError and the like
        found.problems.append(f"`rein {' '.join(found.path)}`: {getattr(err, 'format_message', err.__str__)()}")


def _placeholder(word: str) -> bool:
    return word == PLACEHOLDER or word.isupper() or "..." in word or word.startswith(("<", "{", "'", '"'))


# --------------------------------------------------------------------------- the docs


def doc_lines(page: Path) -> list[str]:
    """The `rein ...` command lines of a markdown page: from shell code blocks and inline code spans."""
    text = page.read_text()
    lines: list[str] = []
    for language, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if language in SHELL:
            lines += [cmd for raw in body.splitlines() for cmd in shell_commands(raw)]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`]+)`", prose):
        span = " ".join(span.split())
        words = span.split()
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words.pop(0)
        if len(words) > 1 and words[0] == "rein" and re.match(r"[a-z-]", words[1]):
            lines.append(" ".join(words))
    return lines


def shell_commands(raw: str) -> list[str]:
    """`rein ...` commands on one shell line (after `&&`, `;`, env assignments; without a comment)."""
    line = re.sub(r"(^|\s)#.*$", "", raw).strip().removeprefix("$ ")
    found = []
    for part in re.split(r"&&|\|\||;", line):
        words = part.split()
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words.pop(0)
        if len(words) > 1 and words[0] == "rein":
            found.append(" ".join(words).split(" > ")[0])
    return found


def test_every_command_line_in_the_docs_names_what_exists(root: Any) -> None:
    checked, problems = 0, []
    for page in PAGES:
        for line in doc_lines(page):
            if (page.name, " ".join(line.split()[:2])) in NOT_COMMANDS:
                continue
            checked += 1
            problems += [f"{page.name}: {line!r}: {p}" for p in resolve(root, line).problems]
    assert checked > 150, checked  # the pages' command lines were found
    assert problems == [], "\n".join(problems)


# --------------------------------------------------------------------------- the CLI's own hints


def strings_in(node: ast.AST) -> list[str]:
    """Every string in `node`: constants, and f-strings with each field read as a placeholder."""
    found = []
    parts = {id(v) for child in ast.walk(node) if isinstance(child, ast.JoinedStr) for v in child.values}
    for child in ast.walk(node):
        if id(child) in parts:  # a piece of an f-string, read whole below
            continue
        if isinstance(child, ast.JoinedStr):
            found.append("".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else PLACEHOLDER
                                 for v in child.values))
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            found.append(child.value)
    return found


def command_lines_in(text: str, commands: set[str] | None) -> list[str]:
    """`rein ...` command lines in a string: backticked, or (`commands` given: the CLI's own hints) the whole string
    when it starts with `rein COMMAND` (elsewhere "rein deployment %s: ..." is a log line)."""
    lines = [span for span in re.findall(r"`(rein [^`]+)`", text)]
    words = text.split()
    if commands and len(words) > 1 and words[0] == "rein" and words[1] in commands and "`" not in text:
        lines.append(text.split("  ")[0])
    return lines


def code_lines(root: Any) -> list[tuple[str, str]]:
    """(where, command line) for the hints and help in rein/ that name a `rein` command."""
    found = []
    commands = set(root.list_commands(context(root)))
    for path in sorted((ROOT / "rein").rglob("*.py")):
        tree = ast.parse(path.read_text())
        hints = commands if path.parent.name == "cli" else None
        for text in strings_in(tree):
            found += [(str(path.relative_to(ROOT)), line) for line in command_lines_in(text, hints)]
    doc = ast.get_docstring(ast.parse((ROOT / "rein/cli/__init__.py").read_text())) or ""
    found += [("rein/cli/__init__.py", re.split(r"\s{2,}", line.strip())[0])
              for line in doc.splitlines() if line.strip().startswith("rein ")]
    return found


def test_every_command_line_the_cli_prints_names_what_exists(root: Any) -> None:
    lines = code_lines(root)
    assert len(lines) > 60, len(lines)
    problems = [f"{where}: {line!r}: {p}" for where, line in lines for p in resolve(root, line).problems]
    assert problems == [], "\n".join(problems)


def test_every_option_a_command_names_is_its_own(root: Any) -> None:
    """A bare `--option` in a hint, a help text or a docstring of rein/cli belongs to each command that prints it."""
    commands = commands_by_function(root)
    problems = []
    for path in sorted((ROOT / "rein" / "cli").glob("*.py")):
        module = f"rein.cli.{path.stem}"
        symbols = top_level(ast.parse(path.read_text()))
        mine = {name for name in symbols if (module, name) in commands}
        for name, node in symbols.items():
            users = [commands[(module, c)] for c in sorted(mine) if name in reaches(c, symbols)]
            for text in strings_in(node):
                for option in sorted(set(re.findall(r"(?<![\w`-])--[a-z][a-z0-9-]*", re.sub(r"`[^`]*`", "", text)))):
                    if not users:  # a helper other modules call: some command must take it
                        if not any(option in opts for opts, _ in commands.values()):
                            problems.append(f"{path.name}:{name}: {option} is no command's option")
                        continue
                    problems += [f"{path.name}:{name}: `rein {where}` has no option {option}"
                                 for opts, where in users if option not in opts]
    assert problems == [], "\n".join(problems)


def commands_by_function(root: Any) -> dict[tuple[str, str], tuple[set[str], str]]:
    """(module, function name) → (the options of the command it is, and the command's path), for every command
    and group callback (a group's options are its subcommands' too)."""
    from rein.cli.app import app

    found: dict[tuple[str, str], tuple[set[str], str]] = {}
    top = set(options_of(root, context(root)))

    def visit(typer_app: Any, group: Any, ctx: Any, path: list[str], inherited: set[str]) -> None:
        for info in typer_app.registered_commands:
            name = info.name or info.callback.__name__.replace("_", "-")
            command = group.get_command(ctx, name) or group.get_command(ctx, info.callback.__name__)
            assert command is not None, (path, name)
            opts = set(options_of(command, context(command, name, ctx))) | inherited
            found[(info.callback.__module__, info.callback.__name__)] = (opts, " ".join([*path, name]))
        if typer_app.registered_callback is not None and path:
            callback = typer_app.registered_callback.callback
            found[(callback.__module__, callback.__name__)] = (set(options_of(group, ctx)) | inherited, " ".join(path))
        for info in typer_app.registered_groups:
            sub = group.get_command(ctx, info.name)
            assert is_group(sub), info.name
            sub_ctx = context(sub, info.name, ctx)
            visit(info.typer_instance, sub, sub_ctx, [*path, info.name], inherited | set(options_of(sub, sub_ctx)))

    visit(app, root, context(root), [], top)
    return found


def top_level(tree: ast.Module) -> dict[str, ast.AST]:
    """The module's functions, classes and assigned names."""
    symbols: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            symbols[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    symbols[target.id] = node
    return symbols


def reaches(start: str, symbols: dict[str, ast.AST]) -> set[str]:
    """The module's names `start` uses, directly or through the module's other names."""
    seen, todo = {start}, [start]
    while todo:
        node = symbols[todo.pop()]
        for child in ast.walk(node):
            name = child.id if isinstance(child, ast.Name) else child.attr if isinstance(child, ast.Attribute) else None
            if name in symbols and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def cli_tree() -> Any:
    """The `rein` command tree (for tests elsewhere that check a line the CLI printed: `hint_problems`)."""
    import rein.cli.commands  # noqa: F401
    from rein.cli.app import app

    return get_command(app)


def hint_problems(root: Any, line: str, command: str) -> list[str]:
    """What a line `rein COMMAND` printed names that does not exist: a backticked command line, or a bare --option
    that `rein COMMAND` does not take."""
    problems = [p for span in command_lines_in(line, None) for p in resolve(root, span).problems]
    bare = re.findall(r"(?<![\w`-])--[a-z][a-z0-9-]*", re.sub(r"`[^`]*`", "", line))
    return problems + [p for option in bare for p in resolve(root, f"rein {command} {option}").problems]


# --------------------------------------------------------------------------- the checker catches what it should


@pytest.mark.parametrize(("line", "problem"), [
    ("rein fork ticket-1 --step 2", "has no option --step"),
    ("rein list --query 'x'", "has no option --query"),
    ("rein send t hi --agent a --no-check", "has no option --no-check"),
    ("rein waiting", "no such command"),
    ("rein schedule list | describe ID | pause ID [--nope]", "has no option --nope"),
])
def test_the_checker_finds_what_does_not_exist(root: Any, line: str, problem: str) -> None:
    assert any(problem in p for p in resolve(root, line).problems), resolve(root, line).problems


def test_a_printed_hint_is_checked_against_the_command_that_printed_it(root: Any) -> None:
    before = "rein: no worker serves agent 'x'; start one with `rein worker --agent MODULE:ATTR`, or pass --no-check"
    assert hint_problems(root, before, "start") == []
    assert hint_problems(root, before, "send") == ["`rein send` has no option --no-check"]
    assert hint_problems(root, "rein: see `rein fork t --step 2`", "send") == ["`rein fork` has no option --step"]


@pytest.mark.parametrize("line", [
    "rein fork ticket-1 --at-step 2",
    "rein schedule create ID --agent NAME --prompt TEXT (--cron EXPR \\| --every 10m) [--catchup 1h]",
    "rein schedule list | describe ID | pause ID [--note] | unpause ID",
    "rein limits --model openai/gpt-4o",
    "REIN_MODEL_QUEUES=openai rein worker --agent mod:agent --task-queue rein.model.openai",
    "rein send THREAD TEXT --agent NAME [--mode queue\\|steer\\|interrupt\\|reject] [--id MESSAGE_ID] [--no-wait]",
    "rein --debug status RUN_ID",
])
def test_the_checker_takes_what_exists(root: Any, line: str) -> None:
    assert resolve(root, line).problems == []
