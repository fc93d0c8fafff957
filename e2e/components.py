"""Command lines and configuration files of every cluster component (all on 127.0.0.1)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import manifests
from e2e.paths import bin_dir
from e2e.pki import Pki

PORT_NAMES = (
    "etcd",
    "etcd_peer",
    "apiserver",
    "kcm",
    "scheduler",
    "kwok",
    "kueue_webhook",
    "kueue_health",
    "jobset_webhook",
    "jobset_health",
)

# Controllers Jobs and JobSets need (canonical 1.36 names), and the DaemonSet controller (the
# DaemonSet race test needs real daemon pods). No node-lifecycle controller: kwok nodes have no
# heartbeats, so nodes stay Ready for the whole run.
KCM_CONTROLLERS = (
    "job-controller",
    "daemonset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "pod-garbage-collector-controller",
    "ttl-after-finished-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "endpointslice-controller",
)

KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")


@dataclass(frozen=True)
class Layout:
    """Where one cluster run keeps its files."""

    run: Path

    @property
    def pki_dir(self) -> Path:
        return self.run / "pki"

    @property
    def logs(self) -> Path:
        return self.run / "logs"

    @property
    def config(self) -> Path:
        return self.run / "config"

    @property
    def etcd_data(self) -> Path:
        return self.run / "etcd-data"

    @property
    def kubeconfig(self) -> Path:
        return self.run / "kubeconfig"

    @property
    def state(self) -> Path:
        return self.run / "state.json"

    @property
    def home(self) -> Path:
        """HOME for kwok, so it never picks up ``~/.kwok/kwok.yaml``."""
        return self.run / "home"


def _bin(name: str) -> str:
    return str(bin_dir() / name)


def write_kubeconfig(layout: Layout, pki: Pki, api_port: int) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kueue-tas-e2e",
                "cluster": {"server": f"https://127.0.0.1:{api_port}", "certificate-authority": str(pki.ca_crt)},
            }
        ],
        "users": [
            {"name": "admin", "user": {"client-certificate": str(pki.admin_crt), "client-key": str(pki.admin_key)}}
        ],
        "contexts": [{"name": "kueue-tas-e2e", "context": {"cluster": "kueue-tas-e2e", "user": "admin"}}],
        "current-context": "kueue-tas-e2e",
    }
    layout.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))
    layout.kubeconfig.chmod(0o600)
    return layout.kubeconfig


def etcd_argv(layout: Layout, ports: dict[str, int]) -> list[str]:
    client = f"http://127.0.0.1:{ports['etcd']}"
    peer = f"http://127.0.0.1:{ports['etcd_peer']}"
    return [
        _bin("etcd"),
        "--name=e2e",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=e2e={peer}",
        "--listen-metrics-urls=",
        "--unsafe-no-fsync",
        "--auto-compaction-retention=1",
        "--quota-backend-bytes=8589934592",
        "--log-level=warn",
    ]


def apiserver_argv(pki: Pki, ports: dict[str, int]) -> list[str]:
    return [
        _bin("kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports['apiserver']}",
        "--advertise-address=127.0.0.1",
        f"--tls-cert-file={pki.apiserver_crt}",
        f"--tls-private-key-file={pki.apiserver_key}",
        f"--client-ca-file={pki.ca_crt}",
        # Published in kube-system/extension-apiserver-authentication for delegated authn (kcm,
        # scheduler); also what an aggregated API server would need.
        f"--requestheader-client-ca-file={pki.ca_crt}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none",
        "--service-cluster-ip-range=10.0.0.0/24",
        # ServiceAccount: pods need no SA token mount; TaintNodesByCondition: kwok nodes are born
        # untainted (no node-lifecycle controller runs to clear the not-ready taint).
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
        "--allow-privileged=true",
        "--max-requests-inflight=2000",
        "--max-mutating-requests-inflight=1000",
        "--profiling=false",
    ]


def kcm_argv(pki: Pki, kubeconfig: Path, ports: dict[str, int]) -> list[str]:
    return [
        _bin("kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports['kcm']}",
        f"--controllers={','.join(KCM_CONTROLLERS)}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_crt}",
        "--use-service-account-credentials=false",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--concurrent-job-syncs=10",
        "--profiling=false",
    ]


def scheduler_argv(layout: Layout, kubeconfig: Path, ports: dict[str, int]) -> list[str]:
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
    }
    path = layout.config / "scheduler.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return [
        _bin("kube-scheduler"),
        f"--config={path}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports['scheduler']}",
        "--profiling=false",
    ]


KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"


def kwok_argv(layout: Layout, kubeconfig: Path, ports: dict[str, int], complete_delay_ms: int) -> list[str]:
    # Stages only: a KwokConfiguration document read from a file is not defaulted (kwok v0.8.0
    # then fails with "playStageParallelism must be greater than 0"); without one kwok uses its
    # defaulted built-in configuration and the flags below.
    docs: list[dict[str, Any]] = manifests.kwok_stages(complete_delay_ms)
    path = layout.config / "kwok.yaml"
    path.write_text(manifests.dump_yaml_docs(docs))
    return [
        _bin("kwok"),
        f"--kubeconfig={kubeconfig}",
        f"--config={path}",
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
        "--node-lease-duration-seconds=0",
        "--cidr=10.128.0.0/12",
        "--node-ip=127.0.0.1",
        f"--server-address=127.0.0.1:{ports['kwok']}",
    ]


def jobset_argv(layout: Layout, pki: Pki, ports: dict[str, int]) -> list[str]:
    cfg = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["jobset_webhook"], "certDir": str(pki.serving_dir("jobset"))},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset_health']}"},
        "metrics": {"bindAddress": "0"},
        "clientConnection": {"qps": 200, "burst": 400},
    }
    path = layout.config / "jobset.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return [_bin("jobset"), f"--config={path}", "--metrics-bind-address=0", "--zap-log-level=info"]


def kueue_argv(layout: Layout, pki: Pki, ports: dict[str, int]) -> list[str]:
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue_health']}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue_webhook"], "certDir": str(pki.serving_dir("kueue"))},
        "internalCertManagement": {"enable": False},
        "clientConnection": {"qps": 300, "burst": 500},
        # As Kueue ships it (config/components/manager/controller_manager_config.yaml): without
        # it every Kueue controller runs one reconcile at a time, which no installation does.
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "featureGates": {"VisibilityOnDemand": False},
    }
    path = layout.config / "kueue.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return [_bin("kueue"), f"--config={path}", "--zap-log-level=info"]
