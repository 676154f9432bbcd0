"""rein.settings: every REIN_* setting in one model, from the environment, the settings file REIN_HOME/settings.env
and defaults (in that order); unknown names warned with the nearest known one; a bad value one line (exit 2);
`rein config` (values, sources, masking); docs/settings.md generated from the model; workflow code never reads it.

The CLI checks run the real `rein` in a process of its own with its own REIN_HOME (and settings file)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rein import settings
from rein.cli.config_command import reference
from tests.support.processes import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent
REIN_BIN = str(Path(sys.executable).parent / "rein")
KEY = "Zm9yLXRlc3RzLW9ubHktMzItYnl0ZXMtb2Yta2V5ISE="  # base64 of 32 bytes
WEBHOOK = "https://hooks.example/services/T000/B000/very-secret-path"


def rein(home: Path, *argv: str, file: str | None = None, **env: str) -> subprocess.CompletedProcess:
    """`rein ARGV` with only the REIN_* variables given (and `file` as REIN_HOME/settings.env)."""
    home.mkdir(parents=True, exist_ok=True)
    if file is not None:
        (home / "settings.env").write_text(file)
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("REIN_")}
    return subprocess.run([REIN_BIN, *argv], env={**base, "REIN_HOME": str(home), **env}, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def rows(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout)["settings"]}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A REIN_HOME of this test's own, and no REIN_* variable but that (in this process)."""
    for name in [n for n in os.environ if n.upper().startswith("REIN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("REIN_HOME", str(tmp_path))
    return tmp_path


# --------------------------------------------------------------------------- where a value comes from


def test_environment_over_file_over_default(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (home / "settings.env").write_text("# rein's settings\nREIN_TASK_QUEUE=from-file\nREIN_QUERY_GRACE_S=7.5\n"
                                       "REIN_WEB_OPEN='true'\n")
    now = settings.current()
    assert (now.task_queue, now.query_grace_s, now.web_open, now.worker_grace_s) == ("from-file", 7.5, True, 3.0)
    monkeypatch.setenv("REIN_TASK_QUEUE", "from-env")
    assert settings.current().task_queue == "from-env"  # read again: set after rein was imported
    sources = {row["name"]: row["source"] for row in settings.describe()}
    assert (sources["REIN_TASK_QUEUE"], sources["REIN_QUERY_GRACE_S"], sources["REIN_WORKER_GRACE_S"]) == (
        "environment", "file", "default")
    monkeypatch.setenv("REIN_TASK_QUEUE", "")  # empty counts as unset: the file's value again
    assert settings.current().task_queue == "from-file"
    (home / "settings.env").write_text("REIN_QUERY_GRACE_S=1\n")  # the file changed: read again
    assert (settings.current().query_grace_s, settings.current().task_queue) == (1.0, None)


def test_override_and_export_check_the_value_and_restore(home: Path) -> None:
    with settings.override(web_open=True, model_queues=("openai", "anthropic")) as inside:
        assert inside.web_open and settings.current().model_queues == ("openai", "anthropic")
        assert os.environ["REIN_MODEL_QUEUES"] == "openai anthropic"
    assert not settings.current().web_open and "REIN_WEB_OPEN" not in os.environ
    with pytest.raises(settings.SettingsError, match=r"^bad setting REIN_WEB_MAX_BODY='12'.*1024 or more$"):
        settings.export(web_max_body=12)
    with pytest.raises(settings.SettingsError, match="no such setting: REIN_NOPE"):
        settings.export(nope=1)
    assert "REIN_WEB_MAX_BODY" not in os.environ


def test_each_value_is_parsed_once_in_the_model(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REIN_WAITING_WEBHOOK", f"{WEBHOOK} tenant:acme=https://a.example/x agent:billing=https://b.example/y")
    monkeypatch.setenv("REIN_MODEL_PRICES", '{"openai/mine": [0.5, 1.5]}')
    monkeypatch.setenv("REIN_MODEL_QUEUES", "openai, anthropic")
    monkeypatch.setenv("REIN_VERSIONING", "AUTO_UPGRADE")
    monkeypatch.setenv("REIN_CODEC_KEY", f"2026b:{KEY}")
    monkeypatch.setenv("REIN_CODEC_AUTH", "None")
    monkeypatch.setenv("REIN_HOME", str(home))
    now = settings.current()
    assert now.waiting_webhook == {"": WEBHOOK, "tenant:acme": "https://a.example/x", "agent:billing": "https://b.example/y"}
    assert now.model_prices == {"openai/mine": (0.5, 1.5)} and now.model_queues == ("openai", "anthropic")
    assert (now.versioning, now.codec_auth) == ("auto-upgrade", "none")
    assert now.codec_key.ids == ["2026b"] and len(now.codec_key[0][1]) == 32 and KEY not in repr(now)


@pytest.mark.parametrize(("name", "value", "said"), [
    ("REIN_QUERY_GRACE_S", "soon", "bad setting REIN_QUERY_GRACE_S='soon'; expected a number of seconds, 0 or more"),
    ("REIN_ENGINE", "cloud", "bad setting REIN_ENGINE='cloud'; expected one of `temporal`, `local`"),
    ("REIN_WEB_READ_KEY", "short", "bad setting REIN_WEB_READ_KEY=(hidden); expected a secret of 32 characters or more"),
    ("REIN_MODEL_PRICES", "{oops", "bad setting REIN_MODEL_PRICES='{oops': it is not JSON; expected a JSON object"),
    ("REIN_CODEC_KEY", "c2hvcnQ=", "bad setting REIN_CODEC_KEY=(hidden): the key decodes to 5 bytes; it must be 32"),
])
def test_a_bad_value_is_one_line_naming_the_variable(home: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                     value: str, said: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(settings.SettingsError) as raised:
        settings.current()
    assert str(raised.value).startswith(said) and "\n" not in str(raised.value)
    assert "c2hvcnQ" not in str(raised.value)  # a secret's value is never repeated


# --------------------------------------------------------------------------- through the real CLI


def test_a_misspelt_variable_is_one_warning_and_the_command_still_works(tmp_path: Path) -> None:
    proc = rein(tmp_path, "config", "--json", REIN_TASK_QEUE="jobs", REIN_PROMOTE_REPLAYS="50",
                file="REIN_WEB_ORIGNS=https://app.example\nOPENAI_API_KEY=sk-x\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "rein: unknown setting REIN_TASK_QEUE is ignored (did you mean REIN_TASK_QUEUE? `rein config` lists them)",
        f"rein: unknown setting REIN_WEB_ORIGNS in {tmp_path / 'settings.env'} is ignored (did you mean "
        "REIN_WEB_ORIGINS? `rein config` lists them)",
        f"rein: OPENAI_API_KEY in {tmp_path / 'settings.env'} is not a rein setting (ignored; the file holds "
        "REIN_* settings only)"]
    out = json.loads(proc.stdout)
    release, why = settings.RETIRED["REIN_PROMOTE_REPLAYS"]
    assert out["retired"] == {"REIN_PROMOTE_REPLAYS": f"retired in {release}: {why}"}  # known: not warned
    assert {row["name"]: row["value"] for row in out["settings"]}["REIN_TASK_QUEUE"] == "(unset)"


def test_a_bad_value_is_one_line_and_exit_2_for_any_command(tmp_path: Path) -> None:
    proc = rein(tmp_path, "list", REIN_WEB_MAX_BODY="lots")
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.splitlines() == ["rein: bad setting REIN_WEB_MAX_BODY='lots'; expected an integer, 1024 or more"]
    proc = rein(tmp_path, "config", file="REIN_VERSIONING=sticky\n")
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"rein: bad setting REIN_VERSIONING='sticky' (in {tmp_path / 'settings.env'}); expected one of `auto-upgrade`, "
        "`pinned`"]
    proc = rein(tmp_path, "config", file="REIN_HOME=/elsewhere\n")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("rein: REIN_HOME cannot be set in") and len(proc.stderr.splitlines()) == 1


def test_rein_config_says_each_value_and_where_it_came_from_masked(tmp_path: Path) -> None:
    file = f"REIN_TASK_QUEUE=from-file\nREIN_CODEC_TOKEN=file-token-1234567\nREIN_WAITING_WEBHOOK={WEBHOOK}\n"
    proc = rein(tmp_path, "config", "--json", file=file, REIN_TASK_QUEUE="from-env", REIN_CODEC_KEY=f"2026b:{KEY}",
                REIN_DECISION_GRACE_S="0.5")
    found = rows(proc)
    assert found["REIN_TASK_QUEUE"] | {"default": None} == {
        "name": "REIN_TASK_QUEUE", "value": "from-env", "source": "environment", "default": None, "secret": False}
    assert (found["REIN_DECISION_GRACE_S"]["value"], found["REIN_DECISION_GRACE_S"]["default"]) == ("0.5", "2.0")
    assert (found["REIN_CODEC_TOKEN"]["value"], found["REIN_CODEC_TOKEN"]["source"]) == ("***", "file")
    assert (found["REIN_CODEC_KEY"]["value"], found["REIN_CODEC_KEY"]["secret"]) == ("*** (keys 2026b)", True)
    assert found["REIN_WAITING_WEBHOOK"]["value"] == "https://hooks.example/***"
    assert (found["REIN_ENGINE"]["value"], found["REIN_ENGINE"]["source"]) == ("temporal", "default")
    for secret in ("file-token-1234567", KEY, "very-secret-path"):
        assert secret not in proc.stdout
    text = rein(tmp_path, "config", REIN_CODEC_KEY=f"2026b:{KEY}")
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert lines["REIN_CODEC_TOKEN"].split()[1:] == ["***", "(file)"]
    assert lines["REIN_WAITING_WEBHOOK"].split()[1:] == ["https://hooks.example/***", "(file)"]
    assert f"settings file: {tmp_path / 'settings.env'}" in text.stdout
    assert "file-token-1234567" not in text.stdout and KEY not in text.stdout


def test_a_worker_logs_its_settings_masked_at_start(dev, tmp_path: Path) -> None:  # noqa: ANN001
    """`rein worker`'s start: one line naming what was set here and where, secrets and webhook URLs masked."""
    log = tmp_path / "worker.log"
    queue = f"settings-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(dev.client.service_client.config.target_host, ["rein.examples.calculator:agent"], queue, log,
                           REIN_CODEC_TOKEN="worker-token-12345", REIN_WAITING_WEBHOOK=WEBHOOK,
                           REIN_DEPLOYMENT="none")
    try:
        worker.start(120)
    finally:
        worker.stop()
    [line] = [line for line in log.read_text().splitlines() if "settings:" in line]
    assert "REIN_CODEC_TOKEN=*** (environment)" in line and "REIN_WAITING_WEBHOOK=https://hooks.example/*** " \
        "(environment)" in line and "REIN_DEPLOYMENT=none (environment)" in line, line
    assert "worker-token-12345" not in log.read_text() and "very-secret-path" not in log.read_text()


# --------------------------------------------------------------------------- the rules around it


def test_secrets_set_in_the_file_are_scrubbed_too(home: Path) -> None:
    from rein.blueprint.secrets import scrub

    (home / "settings.env").write_text("REIN_WAITING_WEBHOOK_SECRET=whsec-from-the-file\n")
    assert scrub("the receiver said whsec-from-the-file") == "the receiver said [redacted]"


def test_docs_settings_md_is_generated_from_the_model() -> None:
    """docs/settings.md is `rein config --markdown`: regenerate it after changing a field."""
    assert (ROOT / "docs" / "settings.md").read_text() == reference()
    for name in settings.field_names():
        assert f"| `{name}` |" in reference()


def test_workflow_code_never_reads_settings() -> None:
    """Nothing under workflows/ imports rein.settings, directly or through what it imports (tests/test_layers.py's
    graph: module and function level): a run's behaviour comes from its history and input."""
    from tests.test_layers import import_graph, reaches

    graph = import_graph()
    reading = {module for module in graph if module.startswith("rein.workflows")
               and {"rein.settings", "rein.core.setting_types"} & (reaches(graph, module) | {module})}
    assert reading == set()
    assert "rein.settings" in reaches(graph, "rein.activities.webhook")  # the check sees a module that does


def reads_outside_settings(source: str) -> list[str]:
    """Where a module reads a REIN_* variable itself: os.environ[...], os.environ.get(...), os.getenv(...) of a
    literal name or a module constant holding one."""
    tree = ast.parse(source)
    names = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
             for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value.value, str)}
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv", "os.environ.pop",
                                                                      "os.environ.setdefault") and node.args:
            key = node.args[0]
        text = key.value if isinstance(key, ast.Constant) else names.get(key.id) if isinstance(key, ast.Name) else None
        if isinstance(text, str) and text.upper().startswith("REIN_"):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_rein_variable_is_read_outside_rein_settings() -> None:
    files = [p for d in ("rein", "workflows", "activities", "examples") for p in (ROOT / d).rglob("*.py")
             if "node_modules" not in p.parts] + [ROOT / "worker.py", *(ROOT / "rein" / "templates").rglob("*.py.tmpl")]
    found = {str(p.relative_to(ROOT)): hits for p in files if p != ROOT / "rein" / "settings.py"
             and (hits := reads_outside_settings(p.read_text()))}
    assert found == {}
    assert reads_outside_settings('import os\nVAR = "REIN_X"\na = os.environ.get(VAR)\nb = os.environ["REIN_Y"]\n') == [
        "line 3: os.environ.get(VAR)", "line 4: os.environ['REIN_Y']"]
