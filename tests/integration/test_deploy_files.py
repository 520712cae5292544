"""Static checks of the deployment files (no Docker engine here): Dockerfile, entry point,
docker-compose.yml and the Kubernetes manifests. Nothing here starts a server."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "docker-entrypoint.sh"
K8S = ROOT / "deploy" / "k8s"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
SECRET_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")
OWNER_URL = "CTXGATE_DATABASE_URL"
APP_URL = "CTXGATE_APP_DATABASE_URL"
APP_PASSWORD = "CTXGATE_APP_DB_PASSWORD"


# --- a tiny Dockerfile parser -------------------------------------------------------------

@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case
    args: str  # the rest of the logical line, continuations joined

    def words(self) -> list[str]:
        """Arguments as a list: the JSON (exec) form if it is one, else shell-like words."""
        text = self.args.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                pass
            else:
                return [str(p) for p in parsed]
        return shlex.split(text)


def parse_dockerfile(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue  # comments and parser directives; comments inside continuations too
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical = (pending + line).strip()
        pending = ""
        if logical:
            keyword, _, args = logical.partition(" ")
            out.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a line continuation"
    return out


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    out: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def split_flags(words: list[str]) -> tuple[dict[str, str], list[str]]:
    flags: dict[str, str] = {}
    rest = list(words)
    while rest and rest[0].startswith("--"):
        name, _, value = rest.pop(0)[2:].partition("=")
        flags[name] = value
    return flags, rest


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())


def test_parser_handles_continuations_and_comments() -> None:
    got = parse_dockerfile('# syntax=docker/dockerfile:1\nFROM a AS b\nRUN x \\\n# note\n'
                           '  && y\nCMD ["serve"]\n')
    assert got == [Instruction("FROM", "a AS b"), Instruction("RUN", "x  && y"),
                   Instruction("CMD", '["serve"]')]
    assert got[2].words() == ["serve"]


def test_dockerfile_is_multi_stage_on_slim_python(dockerfile: list[Instruction]) -> None:
    froms = [i for i in dockerfile if i.keyword == "FROM"]
    assert len(froms) >= 2
    args = {i.words()[0].partition("=")[0]: i.words()[0].partition("=")[2]
            for i in dockerfile if i.keyword == "ARG" and "=" in i.args}
    for f in froms:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), f.words()[0])
        assert image.startswith("python:3.11"), image
        assert "slim" in image, image


def test_final_stage_runs_as_a_non_root_user(dockerfile: list[Instruction]) -> None:
    users = [i.args.strip() for i in stages(dockerfile)[-1] if i.keyword == "USER"]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0", ""}


def test_healthcheck_hits_healthz(dockerfile: list[Instruction]) -> None:
    final = stages(dockerfile)[-1]
    checks = [i for i in final if i.keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "CMD" in checks[0].args
    assert "/healthz" in checks[0].args
    assert any(i.keyword == "EXPOSE" and "8080" in i.args for i in final)


def _dockerignore() -> list[str]:
    path = ROOT / ".dockerignore"
    lines = path.read_text().splitlines() if path.exists() else []
    return [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith("#")]


def _ignored(rel: str, patterns: list[str]) -> bool:
    parts = Path(rel).parts
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(fnmatch.fnmatch(p, pat.removeprefix("**/")) or fnmatch.fnmatch(p, pat)
               for pat in patterns if not pat.startswith("!") for p in prefixes)


def test_every_copy_source_exists_and_is_in_the_build_context(
        dockerfile: list[Instruction]) -> None:
    ignore = _dockerignore()
    sources: list[str] = []
    for ins in dockerfile:
        if ins.keyword not in {"COPY", "ADD"}:
            continue
        flags, words = split_flags(ins.words())
        assert len(words) >= 2, ins
        if "from" in flags:
            continue  # from another stage, not from the repository
        sources += words[:-1]
    assert {"pyproject.toml", "app/", "alembic/", "alembic.ini",
            "deploy/docker-entrypoint.sh"} <= set(sources)
    for src in sources:
        assert (ROOT / src).exists(), f"COPY source {src} is not in the repository"
        assert not _ignored(src.rstrip("/"), ignore), f"{src} is excluded by .dockerignore"


def _entrypoint_target(dockerfile: list[Instruction]) -> tuple[list[str], list[str]]:
    final = stages(dockerfile)[-1]
    entry = [i.words() for i in final if i.keyword == "ENTRYPOINT"][-1]
    cmd = [i.words() for i in final if i.keyword == "CMD"][-1]
    return entry, cmd


def test_entrypoint_is_the_deploy_script(dockerfile: list[Instruction]) -> None:
    entry, cmd = _entrypoint_target(dockerfile)
    assert cmd == ["serve"]
    copies = [split_flags(i.words())[1] for i in stages(dockerfile)[-1] if i.keyword == "COPY"]
    dest = next(w[-1] for w in copies if w[0] == "deploy/docker-entrypoint.sh")
    assert entry[0] in {dest, Path(dest).name}  # by path, or by name on /usr/local/bin
    assert os.access(ENTRYPOINT, os.X_OK)


def test_entrypoint_is_valid_shell() -> None:
    for shell in ("bash", "sh"):
        subprocess.run([shell, "-n", str(ENTRYPOINT)], check=True)


def _fake_ctxgate(tmp_path: Path) -> tuple[dict[str, str], Path]:
    log = tmp_path / "calls"
    fake = tmp_path / "bin" / "ctxgate"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin"}
    return env, log


def test_entrypoint_serves_on_all_interfaces_without_migrating(tmp_path: Path) -> None:
    # The serving container holds only the app role's URL; the migration is the Job's.
    env, log = _fake_ctxgate(tmp_path)
    env |= {APP_URL: "postgresql+asyncpg://ctxgate_app@db/ctxgate",
            "CTXGATE_REDIS_URL": "redis://r:6379/0"}
    subprocess.run([shutil.which("sh") or "/bin/sh", str(ENTRYPOINT)], env=env, check=True)
    assert log.read_text().splitlines() == ["serve --host 0.0.0.0 --port 8080"]


def test_entrypoint_refuses_to_serve_without_a_database_url(tmp_path: Path) -> None:
    env, log = _fake_ctxgate(tmp_path)
    env["CTXGATE_REDIS_URL"] = "redis://r:6379/0"
    done = subprocess.run(["sh", str(ENTRYPOINT)], env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode != 0 and APP_URL in done.stderr
    assert not log.exists()


def test_entrypoint_migrates_only_with_the_owner_url(tmp_path: Path) -> None:
    env, log = _fake_ctxgate(tmp_path)
    env[APP_URL] = "postgresql+asyncpg://ctxgate_app@db/ctxgate"
    done = subprocess.run(["sh", str(ENTRYPOINT), "migrate"], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode != 0 and OWNER_URL in done.stderr and not log.exists()
    env[OWNER_URL] = "postgresql+asyncpg://o:p@db/ctxgate"
    subprocess.run(["sh", str(ENTRYPOINT), "migrate"], env=env, check=True)
    assert log.read_text().splitlines() == ["migrate"]


def test_entrypoint_refuses_to_serve_without_store_urls(tmp_path: Path) -> None:
    env, log = _fake_ctxgate(tmp_path)
    env["CTXGATE_DATABASE_URL"] = "postgresql+asyncpg://o:p@db/ctxgate"
    done = subprocess.run(["sh", str(ENTRYPOINT), "serve"], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode != 0
    assert "CTXGATE_REDIS_URL" in done.stderr
    assert not log.exists()  # nothing ran, not even the migration


def test_entrypoint_passes_other_commands_through(tmp_path: Path) -> None:
    env, log = _fake_ctxgate(tmp_path)
    subprocess.run(["sh", str(ENTRYPOINT), "ctxgate", "keys", "create", "--tenant", "t"],
                   env=env, check=True)
    assert log.read_text().splitlines() == ["keys create --tenant t"]


# --- docker-compose.yml ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _healthcheck(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return " ".join(test) if isinstance(test, list) else str(test)


def test_compose_services_and_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", "redis", "migrate", "app"} <= set(services)
    assert "pgvector" in services["postgres"]["image"]
    assert services["redis"]["image"].startswith("redis:7")
    assert "pg_isready" in _healthcheck(services["postgres"])
    assert "redis-cli ping" in _healthcheck(services["redis"])
    assert "/readyz" in _healthcheck(services["app"])


def test_compose_migrates_once_then_serves(compose: dict[str, Any]) -> None:
    migrate, app = compose["services"]["migrate"], compose["services"]["app"]
    for service in (migrate, app):
        assert service["build"] in (".", {"context": "."})
    assert migrate["image"] == app["image"]
    assert migrate["command"] == ["migrate"]
    assert migrate["restart"] == "no"  # a one-shot: it exits, the app starts after it
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert app["depends_on"] == {"migrate": {"condition": "service_completed_successfully"},
                                 "redis": {"condition": "service_healthy"}}
    assert any(str(p).endswith("8080:8080") for p in app["ports"])


def test_compose_only_the_migration_holds_the_owner_url(compose: dict[str, Any]) -> None:
    migrate, app = (_env(compose["services"][name]) for name in ("migrate", "app"))
    assert set(migrate) == {OWNER_URL, APP_PASSWORD}  # it sets the app role's password
    assert re.fullmatch(r"postgresql\+asyncpg://ctxgate:\$\{CTXGATE_\w+:\?[^}]*\}"
                        r"@postgres:5432/ctxgate", migrate[OWNER_URL])
    assert all(name.startswith("CTXGATE_") for name in app), sorted(app)
    assert set(app) == {APP_URL, APP_PASSWORD, "CTXGATE_REDIS_URL", "CTXGATE_ADMIN_TOKEN"}
    assert "POSTGRES_PASSWORD" not in yaml.safe_dump(compose["services"]["app"])
    assert app[APP_URL] == "postgresql+asyncpg://ctxgate_app@postgres:5432/ctxgate"
    assert app[APP_PASSWORD] == migrate[APP_PASSWORD]  # one secret, both sides
    assert app["CTXGATE_REDIS_URL"].startswith("redis://redis:6379")


def test_compose_hard_codes_no_secret(compose: dict[str, Any]) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for name in re.findall(r"\$\{(\w+)", text):
        assert name.startswith("CTXGATE_"), name
    assert not re.search(r"\$\{\w+:?-", text), "an interpolated variable has a default"
    for service in compose["services"].values():
        for name, value in _env(service).items():
            if any(word in name for word in SECRET_WORDS):
                assert re.fullmatch(r"\$\{\w+:\?[^}]*\}", value), f"{name} is hard-coded"
    assert _env(compose["services"]["app"])["CTXGATE_ADMIN_TOKEN"].startswith(
        "${CTXGATE_ADMIN_TOKEN:?")


# --- Kubernetes ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def k8s() -> dict[str, dict[str, Any]]:
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                assert {"apiVersion", "kind", "metadata"} <= set(doc), path
                docs[doc["kind"]] = doc
    return docs


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _assert_hardened(doc: dict[str, Any]) -> None:
    pod = doc["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = _container(doc)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert "/tmp" in [m["mountPath"] for m in _container(doc).get("volumeMounts", [])]
    assert _container(doc)["resources"]["requests"]
    assert _container(doc)["resources"]["limits"]


def test_k8s_deployment_probes_and_hardening(k8s: dict[str, dict[str, Any]]) -> None:
    assert {"Deployment", "Service", "Job"} <= set(k8s)
    dep = k8s["Deployment"]
    c = _container(dep)
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["args"] == ["serve"]
    assert {"name": "http", "containerPort": 8080} in c["ports"]
    _assert_hardened(dep)
    assert dep["spec"]["selector"]["matchLabels"].items() <= \
        dep["spec"]["template"]["metadata"]["labels"].items()


def test_k8s_service_targets_the_api_pods(k8s: dict[str, dict[str, Any]]) -> None:
    svc, dep = k8s["Service"], k8s["Deployment"]
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    port_names = {p["name"] for p in _container(dep)["ports"]}
    assert all(p["targetPort"] in port_names | {8080} for p in svc["spec"]["ports"])
    job_labels = k8s["Job"]["spec"]["template"]["metadata"]["labels"]
    assert not svc["spec"]["selector"].items() <= job_labels.items()


def test_k8s_migration_job(k8s: dict[str, dict[str, Any]]) -> None:
    job, dep = k8s["Job"], k8s["Deployment"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in {"Never", "OnFailure"}
    c = _container(job)
    assert c["args"] == ["migrate"]
    assert c["image"] == _container(dep)["image"]
    _assert_hardened(job)


def _secret_refs(doc: dict[str, Any]) -> dict[str, set[str]]:
    """Secret name -> the keys a workload reads from it ("*": all of them, by envFrom)."""
    pod = doc["spec"]["template"]["spec"]
    refs: dict[str, set[str]] = {}
    for container in pod["containers"] + pod.get("initContainers", []):
        for source in container.get("envFrom", []):
            if "secretRef" in source:
                refs.setdefault(source["secretRef"]["name"], set()).add("*")
        for var in container.get("env", []):
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["key"] == var["name"], var  # the key says what the variable is
                refs.setdefault(ref["name"], set()).add(ref["key"])
    for volume in pod.get("volumes", []):
        if "secret" in volume:
            refs.setdefault(volume["secret"]["secretName"], set()).add("*")
    return refs


def _plain_env(doc: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["value"] for v in _container(doc).get("env", []) if "value" in v}


def test_k8s_only_the_job_holds_the_owner_secret(k8s: dict[str, dict[str, Any]]) -> None:
    job, dep = _secret_refs(k8s["Job"]), _secret_refs(k8s["Deployment"])
    assert job == {"ctxgate-owner": {OWNER_URL}, "ctxgate-app-db": {APP_PASSWORD}}
    assert dep == {"ctxgate-app-db": {APP_PASSWORD}, "ctxgate": {"*"}}
    # The Deployment's own URL: the app role, no password in it, no migration at start.
    env = _plain_env(k8s["Deployment"])
    assert set(env) - {"CTXGATE_DRAIN_TIMEOUT_S", "OTEL_EXPORTER_OTLP_ENDPOINT",
                       "OTEL_SERVICE_NAME"} == {APP_URL}
    url = make_url(env[APP_URL])
    assert (url.username, url.password) == ("ctxgate_app", None)
    assert _container(k8s["Deployment"])["args"] == ["serve"]


def test_deploy_doc_creates_exactly_the_secrets_the_manifests_read(
        k8s: dict[str, dict[str, Any]]) -> None:
    made: dict[str, set[str]] = {}
    text = DEPLOY_DOC.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        words = shlex.split(line) if line.startswith("kubectl create secret") else []
        if words:
            keys = {w.split("=", 2)[1] for w in words if w.startswith("--from-literal=")}
            made[words[4]] = keys
    read: dict[str, set[str]] = {}
    for kind in ("Job", "Deployment"):
        for name, keys in _secret_refs(k8s[kind]).items():
            read.setdefault(name, set()).update(keys)
    assert set(made) == set(read)
    for name, keys in read.items():
        assert keys - {"*"} <= made[name], name
    # ctxgate (read whole by the Deployment) must not carry the owner's URL.
    assert OWNER_URL not in made["ctxgate"] and APP_PASSWORD not in made["ctxgate"]
