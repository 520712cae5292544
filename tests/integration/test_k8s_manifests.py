"""The Kubernetes manifests checked as a cluster would use them, without a cluster: every
document loads and is of a current API version with its required fields; the objects refer
to each other correctly (selectors match the pods they mean and no others, the HPA and PDB
target the Deployment, probes hit routes the app serves on a port the container names); the
stop sequence fits in the grace period; the NetworkPolicy lets out exactly the stores, the
collector and DNS. kubeconform (not a Debian package) or the kubernetes-validate package
adds a full schema check when present; the checks here run either way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from sqlalchemy.engine import make_url

from app.api.routes import ROUTERS
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
Doc = dict[str, Any]

# kind -> (apiVersion, required paths under the document): the current, non-deprecated
# versions (PDB policy/v1beta1 and HPA autoscaling/v2beta2 are gone since 1.25/1.26).
KINDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Deployment": ("apps/v1", ("spec.selector.matchLabels", "spec.template.metadata.labels",
                               "spec.template.spec.containers")),
    "Service": ("v1", ("spec.selector", "spec.ports")),
    "Job": ("batch/v1", ("spec.template.spec.containers",
                         "spec.template.spec.restartPolicy")),
    "HorizontalPodAutoscaler": ("autoscaling/v2", ("spec.scaleTargetRef", "spec.maxReplicas",
                                                   "spec.metrics")),
    "PodDisruptionBudget": ("policy/v1", ("spec.selector.matchLabels",)),
    "NetworkPolicy": ("networking.k8s.io/v1", ("spec.podSelector", "spec.policyTypes")),
}
DNS_PORT = 53
STOP_MARGIN_S = 5  # closing the pools and workers after the drain


def _docs() -> list[tuple[Path, Doc]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        out += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


def _get(doc: Doc, dotted: str) -> Any:
    value: Any = doc
    for part in dotted.split("."):
        assert isinstance(value, dict) and part in value, f"missing {dotted}"
        value = value[part]
    return value


@pytest.fixture(scope="module")
def docs() -> dict[str, list[Doc]]:
    by_kind: dict[str, list[Doc]] = {}
    for _, doc in _docs():
        by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def _one(docs: dict[str, list[Doc]], kind: str) -> Doc:
    (doc,) = docs[kind]
    return doc


def _pod_labels(doc: Doc) -> dict[str, str]:
    return dict(doc["spec"]["template"]["metadata"]["labels"])


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def _container(doc: Doc) -> Doc:
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env(doc: Doc) -> dict[str, str]:
    return {v["name"]: v["value"] for v in _container(doc).get("env", []) if "value" in v}


def _routes() -> set[str]:
    return {route.path for router in ROUTERS for route in router.routes
            if hasattr(route, "path")}


def test_every_document_is_a_known_kind_at_a_current_version() -> None:
    found = _docs()
    assert {doc["kind"] for _, doc in found} >= set(KINDS)
    names: set[tuple[str, str]] = set()
    for path, doc in found:
        api_version, required = KINDS[doc["kind"]]
        assert doc["apiVersion"] == api_version, (path, doc["kind"])
        name = _get(doc, "metadata.name")
        assert (doc["kind"], name) not in names, f"two {doc['kind']} named {name}"
        names.add((doc["kind"], name))
        assert "namespace" not in doc["metadata"], "applied into the operator's namespace"
        for dotted in required:
            _get(doc, dotted)


def test_selectors_pick_the_api_pods_and_only_them(docs: dict[str, list[Doc]]) -> None:
    dep, job = _one(docs, "Deployment"), _one(docs, "Job")
    api, migrate = _pod_labels(dep), _pod_labels(job)
    selectors = {
        "Deployment": dep["spec"]["selector"]["matchLabels"],
        "Service": _one(docs, "Service")["spec"]["selector"],
        "PodDisruptionBudget": _one(docs, "PodDisruptionBudget")["spec"]["selector"][
            "matchLabels"],
    }
    selectors |= {f"spread {c['topologyKey']}": c["labelSelector"]["matchLabels"]
                  for c in dep["spec"]["template"]["spec"]["topologySpreadConstraints"]}
    for what, selector in selectors.items():
        assert _selects(selector, api), what
        assert not _selects(selector, migrate), f"{what} also selects the migration Job"


def test_hpa_scales_the_deployment_on_cpu(docs: dict[str, list[Doc]]) -> None:
    hpa, dep, pdb = (_one(docs, k) for k in ("HorizontalPodAutoscaler", "Deployment",
                                             "PodDisruptionBudget"))
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        dep["apiVersion"], dep["kind"], dep["metadata"]["name"])
    assert "replicas" not in dep["spec"], "the HPA owns the count; an apply would reset it"
    low, high = hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]
    assert 2 <= low < high
    (cpu,) = [m for m in hpa["spec"]["metrics"]
              if m["type"] == "Resource" and m["resource"]["name"] == "cpu"]
    assert cpu["resource"]["target"]["type"] == "Utilization"
    assert 0 < cpu["resource"]["target"]["averageUtilization"] <= 100
    # Utilization is a share of the request: without one the HPA cannot compute it.
    assert _container(dep)["resources"]["requests"]["cpu"]
    # The PDB still lets a node drain proceed at the HPA's floor.
    assert pdb["spec"]["maxUnavailable"] >= 1 or pdb["spec"]["minAvailable"] < low


def test_the_optional_shed_metric_in_the_docs_is_one_the_app_exports(
        docs: dict[str, list[Doc]]) -> None:
    from app.observability import Metrics

    text = (ROOT / "docs" / "deploy.md").read_text()
    block = text.split("**Scaling on shed turns too**", 1)[1].split("```yaml\n", 1)[1]
    (metric,) = yaml.safe_load(block.split("```", 1)[0])
    hpa = _one(docs, "HorizontalPodAutoscaler")
    assert metric["type"] == "Pods"
    # Served by an adapter as a rate of the counter the app exports.
    counter = metric["pods"]["metric"]["name"].removesuffix("_per_second")
    exported = {m.name for m in Metrics().registry.collect()}
    assert counter in exported, sorted(exported)
    assert metric not in hpa["spec"]["metrics"]  # optional: not in the manifest


def test_pdb_targets_the_deployment(docs: dict[str, list[Doc]]) -> None:
    pdb = _one(docs, "PodDisruptionBudget")
    assert ("maxUnavailable" in pdb["spec"]) != ("minAvailable" in pdb["spec"])
    assert pdb["spec"]["selector"]["matchLabels"] == \
        _one(docs, "Deployment")["spec"]["selector"]["matchLabels"]


def test_probes_hit_routes_the_app_serves(docs: dict[str, list[Doc]]) -> None:
    c = _container(_one(docs, "Deployment"))
    ports = {p["name"] for p in c["ports"]} | {p["containerPort"] for p in c["ports"]}
    routes = _routes()
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] in routes, (probe, get["path"])
        assert get["port"] in ports, probe
    # Liveness must not depend on the stores (a PostgreSQL outage would restart every
    # pod); readiness must (and goes 503 while the pod drains).
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"


def _prestop_sleep_s(container: Doc) -> int:
    pre = container["lifecycle"]["preStop"]
    if "sleep" in pre:
        return int(pre["sleep"]["seconds"])
    command = pre["exec"]["command"]
    assert command[0] in {"sleep", "/bin/sleep"} and len(command) == 2, command
    return int(command[1])


def test_grace_period_covers_prestop_delay_and_drain(docs: dict[str, list[Doc]]) -> None:
    dep = _one(docs, "Deployment")
    env, defaults = _env(dep), Settings.model_fields
    setting = {name: float(env.get(f"CTXGATE_{name.upper()}", defaults[name].default))
               for name in ("drain_timeout_s", "shutdown_delay_s")}
    grace = dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    needed = (_prestop_sleep_s(_container(dep)) + setting["shutdown_delay_s"]
              + setting["drain_timeout_s"] + STOP_MARGIN_S)
    assert grace >= needed, f"SIGKILL after {grace} s, the stop takes up to {needed} s"
    assert setting["drain_timeout_s"] > 0
    for name in env:  # a misspelt setting would be ignored silently
        if name.startswith("CTXGATE_"):
            assert name.removeprefix("CTXGATE_").lower() in defaults, name


def test_pods_are_spread_over_zones_and_nodes(docs: dict[str, list[Doc]]) -> None:
    spread = _one(docs, "Deployment")["spec"]["template"]["spec"]["topologySpreadConstraints"]
    by_key = {c["topologyKey"]: c for c in spread}
    assert set(by_key) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for c in spread:
        assert c["maxSkew"] == 1
        assert c["whenUnsatisfiable"] in {"ScheduleAnyway", "DoNotSchedule"}
    # A single-zone cluster must still schedule.
    assert by_key["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"


@pytest.mark.parametrize("kind", ["Deployment", "Job"])
def test_pods_are_hardened_and_bounded(docs: dict[str, list[Doc]], kind: str) -> None:
    doc = _one(docs, kind)
    pod, c = doc["spec"]["template"]["spec"], _container(doc)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["automountServiceAccountToken"] is False
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"]
    assert "privileged" not in sc or sc["privileged"] is False
    assert {"cpu", "memory"} <= set(c["resources"]["requests"])
    assert "memory" in c["resources"]["limits"]


def _policy(docs: dict[str, list[Doc]], component: str) -> Doc:
    (policy,) = [p for p in docs["NetworkPolicy"]
                 if p["spec"]["podSelector"]["matchLabels"].get(
                     "app.kubernetes.io/component") == component]
    return policy


def _egress_ports(policy: Doc) -> set[tuple[str, int]]:
    out = set()
    for rule in policy["spec"].get("egress", []):
        assert rule.get("to"), "an egress rule without peers lets out to anywhere"
        assert rule.get("ports"), "an egress rule without ports lets out on every port"
        for peer in rule["to"]:
            assert "ipBlock" not in peer, "peers by label, not by address"
        out |= {(p["protocol"], p["port"]) for p in rule["ports"]}
    return out


def test_api_network_policy(docs: dict[str, list[Doc]]) -> None:
    dep, svc = _one(docs, "Deployment"), _one(docs, "Service")
    policy = _policy(docs, "api")
    assert _selects(policy["spec"]["podSelector"]["matchLabels"], _pod_labels(dep))
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}

    # In: only the container's port, only from selected namespaces.
    named = {p["name"]: p["containerPort"] for p in _container(dep)["ports"]}
    for rule in policy["spec"]["ingress"]:
        assert rule["from"], "an ingress rule without peers lets anyone in"
        for peer in rule["from"]:
            assert set(peer) <= {"namespaceSelector", "podSelector"} and peer[
                "namespaceSelector"]["matchLabels"], peer
        for port in rule["ports"]:
            assert named.get(port["port"], port["port"]) in named.values()
    assert all(p["targetPort"] in named for p in svc["spec"]["ports"])

    # Out: the stores at the ports the configuration names, the collector, DNS; no more.
    env = _env(dep)
    database = make_url(env["CTXGATE_APP_DATABASE_URL"]).port or 5432
    collector = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"]).port
    redis = 6379  # CTXGATE_REDIS_URL is in a Secret; docs/deploy.md creates it on 6379
    assert "redis://redis:6379/" in (ROOT / "docs" / "deploy.md").read_text()
    assert _egress_ports(policy) == {("TCP", database), ("TCP", redis), ("TCP", collector),
                                     ("UDP", DNS_PORT), ("TCP", DNS_PORT)}


def test_migration_job_network_policy(docs: dict[str, list[Doc]]) -> None:
    policy = _policy(docs, "migrate")
    assert _selects(policy["spec"]["podSelector"]["matchLabels"],
                    _pod_labels(_one(docs, "Job")))
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in policy["spec"]  # nothing comes in
    assert _egress_ports(policy) == {("TCP", 5432), ("UDP", DNS_PORT), ("TCP", DNS_PORT)}


def test_full_schema_validation_when_a_validator_is_installed() -> None:
    files = [str(p) for p in sorted(K8S.glob("*.yaml"))]
    kubeconform = shutil.which("kubeconform")
    if kubeconform:
        done = subprocess.run([kubeconform, "-strict", "-summary", *files],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return
    validate = pytest.importorskip(
        "kubernetes_validate", reason="neither kubeconform nor kubernetes-validate installed")
    for _, doc in _docs():
        # 1.30: the oldest version with every field used here (matchLabelKeys,
        # unhealthyPodEvictionPolicy); strict rejects misspelt fields.
        validate.validate(doc, "1.30.0", strict=True)
