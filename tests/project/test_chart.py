"""charts/kueue-tas: the same install as manifests/base, its values documented and checked.

The chart rendered with its default values (release ``kueue-tas`` in ``kueue-tas-system``) is
compared with manifests/base object by object and field by field; the only differences allowed
are the ones listed in ``HELM_ONLY``, ``BASE_ONLY`` and ``normalized`` (Helm's labels, the
namespace, objects the chart creates empty for ``helm uninstall``, the config checksum, the
image tag), and the two ConfigMaps must load as the same Settings. Needs helm (built once into
~/.cache/kueue-tas/bin by e2e/build.py, with the Go toolchain).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifest_files import reader_rules_by_role, served_paths

from e2e import chart_docs, chart_lint
from e2e.helm import CHART_DIR, NAMESPACE, RELEASE, HelmError, template
from e2e.paths import bin_dir
from e2e.rbac import base_documents
from kueue_tas.runtime.config import Settings

REPO = Path(__file__).resolve().parents[2]
Key = tuple[str, str | None, str]
# Labels Helm's conventions add (and the selector label that tells releases apart).
HELM_LABELS = frozenset(
    {"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"}
)
# The chart creates this empty so that `helm uninstall` removes what the controller fills (the
# webhook certificate's Secret is shipped empty by both).
HELM_ONLY: frozenset[Key] = frozenset({("Lease", NAMESPACE, "kueue-tas")})
# Helm's way with namespaces: --namespace --create-namespace.
BASE_ONLY: frozenset[Key] = frozenset({("Namespace", None, NAMESPACE)})
POD_ANNOTATIONS_HELM_ONLY = frozenset({"checksum/config", "kubectl.kubernetes.io/default-container"})


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace"), meta["name"])


def _strip_helm_labels(node: Any, parent: str = "") -> Any:
    if isinstance(node, dict):
        out = {k: _strip_helm_labels(v, k) for k, v in node.items()}
        if parent in ("labels", "matchLabels", "selector"):
            out = {k: v for k, v in out.items() if k not in HELM_LABELS}
        return out
    if isinstance(node, list):
        return [_strip_helm_labels(v, parent) for v in node]
    return node


def settings_of(config_map: dict[str, Any], tmp: Path) -> Settings:
    path = tmp / f"{config_map['metadata']['name']}-{os.getpid()}.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    return Settings.from_file(path)


def normalized(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` less what may differ between the two installs (ConfigMaps are compared apart)."""
    out = _strip_helm_labels(copy.deepcopy(obj))
    if out["kind"] == "ConfigMap":
        out.pop("data")
    if out["kind"] == "Deployment":
        template_meta = out["spec"]["template"]["metadata"]
        kept = {k: v for k, v in template_meta.get("annotations", {}).items() if k not in POD_ANNOTATIONS_HELM_ONLY}
        template_meta.pop("annotations", None)
        if kept:
            template_meta["annotations"] = kept
        for container in out["spec"]["template"]["spec"]["containers"]:
            container.pop("imagePullPolicy", None)
    return out


def differences(a: Any, b: Any, path: str = "") -> Iterator[str]:
    """Paths where ``a`` (the chart) and ``b`` (the base) differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in b:
                yield f"{path}.{k}: only in the chart ({a[k]!r})"
            elif k not in a:
                yield f"{path}.{k}: only in manifests/base ({b[k]!r})"
            else:
                yield from differences(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path}: chart {a!r} != base {b!r}"


def drift(chart: list[dict[str, Any]], base: list[dict[str, Any]], tmp: Path) -> list[str]:
    """Every difference between the two installs that is not the Helm way."""
    charted = {key(o): o for o in chart}
    based = {key(o): o for o in base}
    problems = [f"{k}: only in the chart" for k in sorted(set(charted) - set(based) - HELM_ONLY, key=str)]
    problems += [f"{k}: only in manifests/base" for k in sorted(set(based) - set(charted) - BASE_ONLY, key=str)]
    for k in sorted(set(charted) & set(based), key=str):
        problems += [f"{k[0]} {k[2]}{d}" for d in differences(normalized(charted[k]), normalized(based[k]))]
        if k[0] == "ConfigMap" and settings_of(charted[k], tmp) != settings_of(based[k], tmp):
            problems.append(f"ConfigMap {k[2]}: the chart's settings differ from the base's")
    return problems


@pytest.fixture(scope="module")
def chart() -> list[dict[str, Any]]:
    return template()


KUBECTL = bin_dir() / "kubectl"


def kustomize_build() -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(REPO / "manifests" / "base")], capture_output=True, text=True, check=True
    )
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    """manifests/base as users apply it: `kubectl kustomize` (the e2e build's kubectl), else the
    harness's own reading of it (which the next test holds to kustomize's wherever kubectl is)."""
    return kustomize_build() if KUBECTL.is_file() else base_documents()


@pytest.mark.skipif(not KUBECTL.is_file(), reason="kubectl not built yet (python -m e2e.build kubernetes)")
def test_the_harness_reads_manifests_base_as_kustomize_builds_it() -> None:
    assert {key(d): d for d in base_documents()} == {key(d): d for d in kustomize_build()}


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def config_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    data = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert isinstance(data, dict)
    return data


# ---- the chart and manifests/base are one install -------------------------------------------------


def test_the_chart_with_default_values_is_manifests_base(
    chart: list[dict[str, Any]], base: list[dict[str, Any]], tmp_path: Path
) -> None:
    assert drift(chart, base, tmp_path) == []
    assert {key(o) for o in chart} - {key(o) for o in base} == HELM_ONLY


def _cluster_role(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The controller's own ClusterRole (not the readers')."""
    return one(docs, "ClusterRole", RELEASE)


@pytest.mark.parametrize(
    "change",
    [
        "a ClusterRole rule",
        "a verb",
        "a probe",
        "a container argument",
        "a webhook rule",
        "a securityContext field",
        "a setting",
        "an object",
    ],
)
def test_a_change_to_either_side_alone_is_drift(
    change: str, chart: list[dict[str, Any]], base: list[dict[str, Any]], tmp_path: Path
) -> None:
    """The comparison itself: each of these, made to one install only, is reported."""
    for side in ("chart", "base"):
        changed = copy.deepcopy(chart if side == "chart" else base)
        manager = one(changed, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        if change == "a ClusterRole rule":
            _cluster_role(changed)["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
        elif change == "a verb":
            _cluster_role(changed)["rules"][0]["verbs"].append("get")
        elif change == "a probe":
            manager["readinessProbe"]["periodSeconds"] += 1
        elif change == "a container argument":
            manager["args"].append("--verbose")
        elif change == "a webhook rule":
            one(changed, "MutatingWebhookConfiguration")["webhooks"][0]["rules"][0]["operations"].append("UPDATE")
        elif change == "a securityContext field":
            manager["securityContext"]["readOnlyRootFilesystem"] = False
        elif change == "a setting":
            cm = one(changed, "ConfigMap")
            cm["data"]["config.yaml"] += "\napi_qps: 5\n"
        elif change == "an object":
            changed.append(
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra", "namespace": NAMESPACE}}
            )
        pair = (changed, base) if side == "chart" else (chart, changed)
        assert drift(*pair, tmp_path), f"{change} changed in the {side} only went unnoticed"


def test_every_setting_is_spelled_out_in_the_chart_config(chart: list[dict[str, Any]], tmp_path: Path) -> None:
    assert set(config_of(chart)) == set(Settings.model_fields) - {"kubeconfig"}
    settings = settings_of(one(chart, "ConfigMap"), tmp_path)
    assert settings.kubeconfig is None and settings.webhook_cert_dir is None


# ---- values -----------------------------------------------------------------------------------------


def values() -> dict[str, Any]:
    data = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_config_values_are_the_settings_with_their_defaults() -> None:
    config = values()["config"]
    expected = {
        chart_docs.camel(name): list(f.default) if isinstance(f.default, tuple) else f.default
        for name, f in Settings.model_fields.items()
        if name not in chart_docs.DERIVED_SETTINGS and name != "feature_gates"
    }
    assert {k: v for k, v in config.items() if k != "featureGates"} == expected
    assert config["featureGates"] == {}


def test_config_values_reach_the_controller_as_settings(tmp_path: Path) -> None:
    docs = template(
        {
            "config.featureGates": {"TASBalancedPlacement": True},
            "config.apiQps": 500,
            "config.freeSlotLevels": ["rack"],
            "config.nodeFailurePolicy": "Requeue",
        },
        release="tas",
        namespace="batch-system",
    )
    settings = settings_of(one(docs, "ConfigMap"), tmp_path)
    assert settings.feature_gates == {"TASBalancedPlacement": True}
    assert (settings.api_qps, settings.free_slot_levels, settings.node_failure_policy) == (500, ("rack",), "Requeue")
    # What the release names, the settings name too.
    assert settings.lease_name == one(docs, "Lease")["metadata"]["name"] == "tas-kueue-tas"
    assert settings.lease_namespace == settings.webhook_namespace == "batch-system"
    assert settings.webhook_service == one(docs, "Service", "tas-kueue-tas-webhook")["metadata"]["name"]
    assert settings.webhook_secret == one(docs, "Secret")["metadata"]["name"]
    named = [r for r in one(docs, "ClusterRole", "tas-kueue-tas")["rules"] if "resourceNames" in r]
    assert [r["resourceNames"] for r in named] == [[settings.webhook_configuration]]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        hook = one(docs, kind, settings.webhook_configuration)["webhooks"][0]
        assert hook["clientConfig"]["service"]["namespace"] == "batch-system"
        assert "batch-system" in hook["namespaceSelector"]["matchExpressions"][0]["values"]
    assert one(docs, "Role", "tas-kueue-tas-webhook-cert")["rules"][0]["resourceNames"] == [settings.webhook_secret]


def test_a_changed_setting_rolls_the_pods() -> None:
    def checksum(docs: list[dict[str, Any]]) -> str:
        return str(one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum(template()) != checksum(template({"config.apiQps": 100}))


@pytest.mark.parametrize(
    ("values_set", "complaint"),
    [
        ({"config.apiQps": -1}, "/config/apiQps"),
        ({"config.noSuchSetting": 1}, "noSuchSetting"),
        ({"config.nodeFailurePolicy": "Sometimes"}, "/config/nodeFailurePolicy"),
        ({"config.featureGates": {"NoSuchGate": True}}, "NoSuchGate"),
        ({"config.patchConcurrency": 0}, "/config/patchConcurrency"),
        ({"image.pullPolicy": "Sometimes"}, "/image/pullPolicy"),
        ({"ports.webhook": 70000}, "/ports/webhook"),
        ({"replica": 3}, "replica"),
    ],
)
def test_the_schema_refuses_bad_values_before_anything_is_rendered(values_set: dict[str, Any], complaint: str) -> None:
    with pytest.raises(HelmError, match="values don't meet the specifications") as caught:
        template(values_set)
    assert complaint in str(caught.value)


def test_values_schema_config_is_made_from_the_settings_model() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    assert schema["properties"]["config"] == chart_docs.config_schema(), "run `python -m e2e.chart_docs`"
    assert set(schema["properties"]) == set(values()), "every top-level value has a schema"


def _leaves(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from _leaves(v, f"{path}.{k}" if path else k)
    else:
        yield path


def test_readme_values_table_is_made_from_values_yaml() -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    readme = (CHART_DIR / "README.md").read_text()
    assert chart_docs.values_table(text) in readme, "run `python -m e2e.chart_docs`"
    documented = {k for k, _ in chart_docs.documented_keys(text)}
    undocumented = [
        leaf for leaf in _leaves(values()) if not any(leaf == d or leaf.startswith(d + ".") for d in documented)
    ]
    assert undocumented == []


def test_documented_keys_follow_the_comment_convention() -> None:
    text = "# -- top\na: 1\nb:\n  # -- inner\n  c: 2\n  d: 3\n# plain comment\ne: 4\n"
    assert chart_docs.documented_keys(text) == [("a", "top"), ("b.c", "inner")]


# ---- the chart's own files ---------------------------------------------------------------------------


def test_version_is_one_value() -> None:
    chart_yaml = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert chart_yaml["version"] == chart_yaml["appVersion"]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    if "version" in project:  # a static package version: the chart's is the same
        assert chart_yaml["appVersion"] == project["version"]
        return
    # The version comes from git tags (setuptools-scm): the chart names the newest release, or
    # the fallback before the first tag, so a release is a tag and a Chart.yaml bump together.
    tags = subprocess.run(
        ["git", "tag", "--list", "v[0-9]*", "--sort=-v:refname"], cwd=REPO, capture_output=True, text=True, check=False
    ).stdout.split()
    release = tags[0].removeprefix("v") if tags else pyproject["tool"]["setuptools_scm"]["fallback_version"]
    assert chart_yaml["appVersion"] == release, f"Chart.yaml appVersion {chart_yaml['appVersion']}, release {release}"


def test_the_dashboard_is_the_one_in_manifests_grafana() -> None:
    assert (CHART_DIR / "files" / "kueue-tas-dashboard.json").read_bytes() == (
        REPO / "manifests" / "grafana" / "kueue-tas-dashboard.json"
    ).read_bytes()


# ---- options ---------------------------------------------------------------------------------------


def test_cert_manager_issues_the_certificate_and_the_controller_reads_no_secrets(tmp_path: Path) -> None:
    docs = template({"certManager.enabled": True})
    settings = settings_of(one(docs, "ConfigMap"), tmp_path)
    certificate = one(docs, "Certificate", f"{RELEASE}-webhook")
    serving = one(docs, "Certificate", f"{RELEASE}-metrics")
    # self-signed Issuer -> CA Certificate -> CA Issuer -> both serving Certificates: their
    # renewal keeps the CA (manifests/cert-manager, tests/project/test_kustomize_build.py).
    ca = one(docs, "Certificate", f"{RELEASE}-ca")["spec"]
    assert ca["isCA"] is True
    assert "selfSigned" in one(docs, "Issuer", ca["issuerRef"]["name"])["spec"]
    ca_issuer = one(docs, "Issuer", f"{RELEASE}-ca")
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["secretName"]}}
    issuer = {"kind": "Issuer", "name": ca_issuer["metadata"]["name"]}
    assert certificate["spec"]["issuerRef"] == serving["spec"]["issuerRef"] == issuer
    # cert-manager's CA injector writes the caBundle: no rule for the webhook configurations.
    cluster_role = one(docs, "ClusterRole", RELEASE)
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for r in cluster_role["rules"])
    assert f"{settings.webhook_service}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    # The second certificate: /metrics and the map, named for the metrics Service, as
    # manifests/cert-manager issues it.
    assert f"{RELEASE}-metrics.{NAMESPACE}.svc" in serving["spec"]["dnsNames"]
    assert serving["spec"]["secretName"] == "kueue-tas-metrics-tls"
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    for cert_dir, cert in ((settings.webhook_cert_dir, certificate), (settings.serving_cert_dir, serving)):
        assert cert_dir is not None
        (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if Path(m["mountPath"]) == cert_dir]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        annotations = one(docs, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    rules = [r for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]]
    assert not any("secrets" in r.get("resources", []) for r in rules)
    assert not [d for d in docs if d["kind"] == "Secret"], "cert-manager's Secret is cert-manager's"
    own = template({"certManager.enabled": True, "certManager.issuerRef": {"kind": "ClusterIssuer", "name": "ca"}})
    assert [c["spec"]["issuerRef"] for c in own if c["kind"] == "Certificate"] == [
        {"kind": "ClusterIssuer", "name": "ca"}
    ] * 2
    assert not [d for d in own if d["kind"] == "Issuer"]
    with pytest.raises(HelmError, match=r"config\.servingCertDir"):
        template({"certManager.enabled": True, "config.servingCertDir": "/elsewhere"})


def _prometheus_manifests() -> list[dict[str, Any]]:
    return [
        d
        for f in sorted((REPO / "manifests" / "prometheus").glob("*.yaml"))
        if f.name != "kustomization.yaml"
        for d in yaml.safe_load_all(f.read_text())
        if d
    ]


def test_service_monitor_scrapes_the_metrics_service_as_manifests_prometheus_does() -> None:
    docs = template({"serviceMonitor.enabled": True, "serviceMonitor.labels": {"release": "prom"}})
    monitor = one(docs, "ServiceMonitor")
    service = one(docs, "Service", f"{RELEASE}-metrics")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    defaults = template()
    assert not [d for d in defaults if d["kind"] == "ServiceMonitor"]
    assert not [d for d in defaults if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] != RELEASE]
    # The same scrape and binding as manifests/prometheus (HTTPS, Prometheus's own token, no
    # verification of the self-issued certificate; monitoring/prometheus-k8s may get /metrics).
    kustomized = _prometheus_manifests()
    assert normalized(monitor)["spec"] == one(kustomized, "ServiceMonitor")["spec"]
    binding = one(docs, "ClusterRoleBinding", f"{RELEASE}-metrics-reader")
    assert {k: binding[k] for k in ("roleRef", "subjects")} == {
        k: one(kustomized, "ClusterRoleBinding")[k] for k in ("roleRef", "subjects")
    }
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole", f"{RELEASE}-metrics-reader")["metadata"]["name"]


def test_service_monitor_with_cert_manager_verifies_the_metrics_certificate() -> None:
    docs = template({"serviceMonitor.enabled": True, "certManager.enabled": True})
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    serving = one(docs, "Certificate", f"{RELEASE}-metrics")
    tls = endpoint["tlsConfig"]
    assert tls == {
        "ca": {"secret": {"name": serving["spec"]["secretName"], "key": "ca.crt"}},
        "serverName": f"{RELEASE}-metrics.{NAMESPACE}.svc",
    }
    assert tls["serverName"] in serving["spec"]["dnsNames"]


def test_service_monitor_follows_the_metrics_settings() -> None:
    other = template(
        {
            "serviceMonitor.enabled": True,
            "serviceMonitor.prometheusServiceAccount": {"name": "kps-prometheus", "namespace": "obs"},
            "serviceMonitor.tlsConfig": {"insecureSkipVerify": False, "serverName": "x"},
        },
        release="tas",
        namespace="batch-system",
    )
    (endpoint,) = one(other, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": False, "serverName": "x"}
    binding = one(other, "ClusterRoleBinding", "tas-kueue-tas-metrics-reader")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kps-prometheus", "namespace": "obs"}]
    assert binding["roleRef"]["name"] == "tas-kueue-tas-metrics-reader"
    # /metrics plain and open (config.metricsSecure/metricsAuth off): scraped so, no one bound.
    plain = template({"serviceMonitor.enabled": True, "config.metricsSecure": False, "config.metricsAuth": False})
    (endpoint,) = one(plain, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "http" and "tlsConfig" not in endpoint and "bearerTokenFile" not in endpoint
    assert not [d for d in plain if d["kind"] == "ClusterRoleBinding" and "reader" in d["metadata"]["name"]]


def test_grafana_dashboard_config_map_holds_the_dashboard() -> None:
    docs = template({"grafanaDashboard.enabled": True, "grafanaDashboard.namespace": "monitoring"})
    cm = one(docs, "ConfigMap", f"{RELEASE}-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring" and cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((REPO / "manifests" / "grafana" / "kueue-tas-dashboard.json").read_text())
    assert json.loads(cm["data"]["kueue-tas-dashboard.json"]) == shipped


MONITORING = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]


def _ingress_by_port(policy: dict[str, Any]) -> dict[str, Any]:
    return {p["port"]: rule.get("from") for rule in policy["spec"]["ingress"] for p in rule["ports"]}


def test_network_policy_opens_only_our_ports_and_the_map_to_the_monitoring_namespace() -> None:
    docs = template({"config.mapBind": ":8082", "networkPolicy.egress.enabled": True})
    policy = one(docs, "NetworkPolicy")
    deployment = one(docs, "Deployment")
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    by_port = _ingress_by_port(policy)
    assert by_port == {"webhook": None, "health": None, "metrics": None, "map": MONITORING}
    ports = {p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert set(by_port) <= ports, "every port the policy names is a named container port"
    # Egress when asked for: the API server (anywhere by default) and DNS, nothing else.
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"] == [
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"ipBlock": {"cidr": "::/0"}}]},
        {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]},
    ]
    # By default: ingress only (as Kueue's), the map's port only when it is served.
    default = one(template(), "NetworkPolicy")
    assert default["spec"]["policyTypes"] == ["Ingress"] and "egress" not in default["spec"]
    assert set(_ingress_by_port(default)) == {"webhook", "health", "metrics"}
    assert not [d for d in template({"networkPolicy.enabled": False}) if d["kind"] == "NetworkPolicy"]


def test_network_policy_values_narrow_its_peers() -> None:
    peers = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}}]
    control_plane = [{"ipBlock": {"cidr": "10.0.0.0/28"}}]
    policy = one(
        template(
            {
                "networkPolicy.egress.enabled": True,
                "networkPolicy.metricsFrom": peers,
                "networkPolicy.webhookFrom": control_plane,
                "networkPolicy.egress.apiServerCidrs": ["10.0.0.0/28"],
                "networkPolicy.egress.apiServerPort": 6443,
            }
        ),
        "NetworkPolicy",
    )
    assert _ingress_by_port(policy) == {"webhook": control_plane, "health": None, "metrics": peers}
    assert policy["spec"]["egress"][0] == {
        "to": [{"ipBlock": {"cidr": "10.0.0.0/28"}}],
        "ports": [{"port": 6443, "protocol": "TCP"}],
    }
    open_egress = one(template({"networkPolicy.egress.enabled": False}), "NetworkPolicy")
    assert open_egress["spec"]["policyTypes"] == ["Ingress"] and "egress" not in open_egress["spec"]


def test_pod_placement_values_reach_the_pods() -> None:
    docs = template(
        {
            "priorityClassName": "system-cluster-critical",
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
            "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {}},
            "replicas": 3,
            "image.tag": "v9",
            "podDisruptionBudget.enabled": True,
        }
    )
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["effect"] == "NoSchedule" and pod["affinity"] == {"nodeAffinity": {}}
    assert deployment["spec"]["replicas"] == 3 and pod["containers"][0]["image"].endswith(":v9")
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"] and pdb["spec"]["minAvailable"] == 1


# ---- who may look: /metrics and the map -------------------------------------------------------------


def test_reader_cluster_roles_grant_get_on_exactly_what_the_servers_serve() -> None:
    docs = template(release="tas", namespace="batch-system")
    assert reader_rules_by_role(docs, prefix="tas-kueue-tas-") == served_paths()
    # Bound to no one by default: reading is granted deliberately, per reader.
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding" and "reader" in d["roleRef"]["name"]]


def test_metrics_and_map_are_secured_by_default_the_probes_stay_plain(tmp_path: Path) -> None:
    docs = template({"config.mapBind": ":8082"})
    settings = settings_of(one(docs, "ConfigMap"), tmp_path)
    assert (settings.metrics_secure, settings.metrics_auth, settings.map_secure, settings.map_auth) == (True,) * 4
    assert settings.serving_cert_dir is None and settings.metrics_bind != settings.health_bind
    manager = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    for probe in ("livenessProbe", "readinessProbe"):
        assert manager[probe]["httpGet"]["port"] == "health" and "scheme" not in manager[probe]["httpGet"], probe
    (health,) = [p for p in manager["ports"] if p["name"] == "health"]
    assert settings.health_address() == (None, health["containerPort"])
    # The controller reviews tokens and access: its ClusterRole may create both reviews.
    reviews = {("authentication.k8s.io", "tokenreviews"), ("authorization.k8s.io", "subjectaccessreviews")}

    def review_rules(rendered: list[dict[str, Any]]) -> set[tuple[str, str]]:
        rules = one(rendered, "ClusterRole", RELEASE)["rules"]
        return {(r["apiGroups"][0], r["resources"][0]) for r in rules if r["verbs"] == ["create"]} & reviews

    assert review_rules(docs) == reviews
    off = template({"config.metricsAuth": False, "config.mapAuth": False, "config.metricsSecure": False})
    assert review_rules(off) == set(), "no token reviews without metricsAuth or mapAuth"
    assert settings_of(one(off, "ConfigMap"), tmp_path).metrics_secure is False
    with pytest.raises(HelmError, match=r"ports\.metrics must differ from ports\.health"):
        template({"ports.metrics": 8081})


def test_a_serving_certificate_of_ones_own_is_mounted_and_named(tmp_path: Path) -> None:
    docs = template(
        {
            "config.servingCertDir": "/etc/serving",
            "extraVolumes": [{"name": "serving", "secret": {"secretName": "my-tls"}}],
            "extraVolumeMounts": [{"name": "serving", "mountPath": "/etc/serving", "readOnly": True}],
        }
    )
    assert settings_of(one(docs, "ConfigMap"), tmp_path).serving_cert_dir == Path("/etc/serving")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "serving", "mountPath": "/etc/serving", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert {"name": "serving", "secret": {"secretName": "my-tls"}} in pod["volumes"]


# ---- the lint's validation --------------------------------------------------------------------------


def test_the_offline_validation_refuses_an_unknown_field_and_a_wrong_type(chart: list[dict[str, Any]]) -> None:
    assert chart_lint.validate(chart) == ([], [])
    bad = copy.deepcopy(one(chart, "Deployment"))
    bad["spec"]["replicaz"] = 2
    wrong = copy.deepcopy(one(chart, "Service", f"{RELEASE}-webhook"))
    wrong["spec"]["ports"][0]["port"] = "https"
    problems, _ = chart_lint.validate([bad, wrong])
    assert len(problems) == 2 and "replicaz" in problems[0]
