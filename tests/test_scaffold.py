"""rein.ops.scaffold and `rein new`: the generated projects compile, run offline and pass their own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rein.cli import main
from rein.ops.scaffold import available_templates, create_project

FILES = {"main.py", ".env.example", "README.md", ".gitignore", "tests/test_agent.py"}


def files_in(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def offline_env() -> dict[str, str]:
    """This environment without anything that would send the project to a real model or server."""
    env = {k: v for k, v in os.environ.items() if k not in ("REIN_MODEL", "TEMPORAL_ADDRESS", "REIN_TASK_QUEUE")}
    env["REIN_ENGINE"] = "local"
    return env


def test_available_templates() -> None:
    assert available_templates() == ["minimal", "coder"]


def test_templates_are_package_data_files() -> None:
    from importlib import resources

    import rein.ops.scaffold

    root = resources.files("rein") / "templates"
    for template in available_templates():
        assert (root / template / "main.py.tmpl").is_file()
        assert (root / template / "test_agent.py.tmpl").is_file()
    # The code holds no template text: "@agent.tool" appears only in the minimal template's file.
    assert "@agent.tool" in (root / "minimal" / "main.py.tmpl").read_text(encoding="utf-8")
    assert "@agent.tool" not in Path(rein.ops.scaffold.__file__).read_text(encoding="utf-8")


@pytest.mark.parametrize("template", ["minimal", "coder"])
def test_writes_exactly_five_files(tmp_path: Path, template: str) -> None:
    path = create_project("proj", template, tmp_path)
    assert path == tmp_path / "proj"
    assert files_in(path) == FILES
    for name in ("main.py", "tests/test_agent.py"):
        compile((path / name).read_text(encoding="utf-8"), name, "exec")


def test_default_template_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = create_project("here")
    assert path == Path("here")
    assert "from rein import Agent" in (tmp_path / "here" / "main.py").read_text(encoding="utf-8")


def test_minimal_template_content(tmp_path: Path) -> None:
    text = (create_project("My Agent", target_dir=tmp_path) / "main.py").read_text(encoding="utf-8")
    assert "from rein import Agent" in text
    assert "@agent.tool" in text
    assert "print(agent.run(" in text
    assert "name='my-agent'" in text  # the agent is named after the project (a slug of it)
    assert "REIN_MODEL" in text and "MockProvider" in text


def test_coder_template_content(tmp_path: Path) -> None:
    text = (create_project("coder", "coder", tmp_path) / "main.py").read_text(encoding="utf-8")
    assert 'LoopConfig(permission="ask"' in text
    assert "SYSTEM = " in text and "system=SYSTEM" in text
    assert "def read_file(" in text and "def run_shell(" in text
    assert "timeout=timeout_s" in text and "shell=True" not in text
    assert "agent.run_interactive(" in text


def test_other_files(tmp_path: Path) -> None:
    path = create_project("Weather Bot", target_dir=tmp_path)
    env = (path / ".env.example").read_text(encoding="utf-8")
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY", "REIN_MODEL", "TEMPORAL_ADDRESS"):
        assert f"# {key}=" in env  # commented out: an empty TEMPORAL_ADDRESS would be an address
    readme = (path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# Weather Bot\n")
    for text in ("python main.py", "Temporal", "embedded", 'rein run main:agent "', "rein server", "pytest"):
        assert text in readme
    assert ".env\n" in (path / ".gitignore").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["it's \"quoted\"", "{braces} and $dollars", "日本語", "---"])
def test_odd_names_still_compile(tmp_path: Path, name: str) -> None:
    path = create_project(name, target_dir=tmp_path)
    compile((path / "main.py").read_text(encoding="utf-8"), "main.py", "exec")
    assert (path / "README.md").read_text(encoding="utf-8").startswith(f"# {name}\n")


# --------------------------------------------------------------------------- the checks, in order


def test_unknown_template_is_checked_first(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match=r"Unknown template 'nope'\. Available: minimal, coder"):
        create_project("", "nope", tmp_path)
    with pytest.raises(ValueError, match="Unknown template"):
        create_project("taken", "nope", tmp_path)


@pytest.mark.parametrize("name", ["", "a/b", "a\\b", ".", "..", "/abs"])
def test_invalid_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="Invalid project name"):
        create_project(name, target_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_name_is_checked_before_the_target(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Invalid project name"):
        create_project(".", target_dir=tmp_path)  # tmp_path/. exists, but the name is refused first


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_existing_target_is_never_overwritten(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "proj"
    if kind == "dir":
        target.mkdir()
        (target / "main.py").write_text("mine", encoding="utf-8")
    else:
        target.write_text("mine", encoding="utf-8")
    with pytest.raises(FileExistsError, match="already exists"):
        create_project("proj", target_dir=tmp_path)
    assert (target / "main.py" if kind == "dir" else target).read_text(encoding="utf-8") == "mine"


def test_target_dir_is_created_with_parents(tmp_path: Path) -> None:
    path = create_project("proj", target_dir=tmp_path / "a" / "b")
    assert files_in(path) == FILES


# --------------------------------------------------------------------------- the generated projects work


def test_minimal_main_runs_offline(tmp_path: Path) -> None:
    path = create_project("Demo", target_dir=tmp_path)
    done = subprocess.run(
        [sys.executable, "main.py"], cwd=path, env=offline_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The text has 4 words.\n"


def test_minimal_main_runs_through_rein_run(tmp_path: Path) -> None:
    path = create_project("Demo", target_dir=tmp_path)
    rein_bin = str(Path(sys.executable).parent / "rein")
    done = subprocess.run(
        [rein_bin, "run", "main:agent", "count the words"], stdin=subprocess.DEVNULL,
        cwd=path, env=offline_env(), capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The text has 4 words.\n"


def test_coder_main_asks_for_a_model(tmp_path: Path) -> None:
    path = create_project("Coder", "coder", tmp_path)
    done = subprocess.run(
        [sys.executable, "main.py", "hello"], cwd=path, env=offline_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "Set REIN_MODEL" in done.stderr


@pytest.mark.parametrize("template", ["minimal", "coder"])
def test_generated_tests_pass(tmp_path: Path, template: str) -> None:
    """The project's own test: its agent as a workflow on the time-skipping test server."""
    path = create_project("proj", template, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # -p no:phoenix: a plugin of this environment's Phoenix (for tests/test_tracing.py), not of the
    # project; loading it imports the Phoenix server, ~16 s of CPU (see pyproject.toml's addopts).
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix"],
        cwd=path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


# --------------------------------------------------------------------------- rein new


def test_cli_new(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "proj", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert str((tmp_path / "proj").resolve()) in out
    assert "Next steps:" in out and "python main.py" in out and "cp .env.example .env" in out
    assert files_in(tmp_path / "proj") == FILES

    assert main(["new", "proj", "--dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "already exists" in captured.err and captured.out == ""


def test_cli_new_coder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new", "dev-helper", "-t", "coder", "--dir", str(tmp_path)]) == 0
    assert "template: coder" in capsys.readouterr().out
    assert "run_interactive" in (tmp_path / "dev-helper" / "main.py").read_text(encoding="utf-8")


def test_cli_new_in_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "proj", "--template", "minimal"]) == 0
    assert files_in(tmp_path / "proj") == FILES
    assert "cd proj" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["new", "proj", "-t", "nope"], "Unknown template 'nope'"),
        (["new", ".."], "Invalid project name"),
        (["new", "a/b"], "Invalid project name"),
    ],
)
def test_cli_new_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main([*argv, "--dir", str(tmp_path)]) == 2  # a usage error (docs/cli.md exit codes)
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
