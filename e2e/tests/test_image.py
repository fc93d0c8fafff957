"""Issue 28: the controller image a user builds runs, and does what the venv's controller does.

The OCI archive ``make image`` writes (built here first when missing: ``e2e/image.py``) is
unpacked and its entrypoint run as its user (65532), read-only root, no capabilities, with the
ServiceAccount of ``manifests/base`` mounted where a pod has it (``e2e/image_controller.py``).
What a user would check: the replica takes the Lease, its webhooks answer (a malformed Job is
refused at ``kubectl create``, a pod labelled for the ungater is gated at creation), and a Job
with a required topology is admitted and its pods are placed in the assigned domains.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import image, jobs, procs, workloads
from e2e import stack as st
from e2e.cluster_state import State
from e2e.controller import LEASE_NAMESPACE, ControllerGroup, metric_value, parse_metrics
from e2e.image_controller import (
    ImageRuntime,
    can_run_here,
    process_status,
    root_mount_options,
    unpacked_root,
    write_service_account,
)
from e2e.kube import Kube, as_body, eventually
from e2e.nodes import BLOCK_LABEL, RACK_LABEL, NodePool
from e2e.oci import ImageConfig, OciArchive
from e2e.paths import bin_dir, run_dir
from e2e.rbac import _admin_cluster, reset_webhook_secret
from e2e.tests.test_ungater import JOB_NAME, assert_exact, node_labels, wait_placed
from e2e.webhooks import install_pod_gate, localized, remove_pod_gate, webhook_env
from kueue_tas.api.constants import GATED_LABEL, GATED_LABEL_VALUE, SCHEDULING_GATE

CONFIGURATION = "kueue-tas"
VALIDATING_FILE = image.REPO_ROOT / "manifests" / "base" / "webhook.yaml"
DENIED = 'admission webhook "validate.kueue-tas.io" denied the request: '
IMAGE_USER = "65532:65532"


@pytest.fixture(scope="module")
def archive() -> Path:
    """The archive of this checkout's version, built when missing (as ``make image`` does)."""
    path = image.archive_path(image.project_version())
    if not path.exists():
        why_not = image.cannot_build_here()
        if why_not is not None:
            pytest.skip(f"no image archive at {path} and it cannot be built here: {why_not}")
        image.build()
    return path


@pytest.fixture(scope="module")
def rootfs(archive: Path) -> tuple[Path, ImageConfig]:
    """The archive's root filesystem, unpacked once per image, and its config."""
    why_not = can_run_here()
    if why_not is not None:
        pytest.skip(f"cannot run the image's root filesystem here: {why_not}")
    # Not in the run directory, which a cluster start empties.
    return unpacked_root(archive, image.image_cache_dir() / "rootfs")


def test_the_image_is_what_users_are_told(archive: Path) -> None:
    with OciArchive(archive) as oci:
        config = oci.config()
        ref = oci.ref_name()
    version = image.project_version()
    assert config.user == IMAGE_USER
    assert config.argv == ["kueue-tas", "run"]
    assert config.labels["org.opencontainers.image.version"] == version
    assert ref == f"kueue-tas:{image.image_tag(version)}"


def test_no_pip_setuptools_or_build_tools_in_the_image(rootfs: tuple[Path, ImageConfig]) -> None:
    root, _ = rootfs
    found = [
        str(p.relative_to(root))
        for pattern in (
            "opt/kueue-tas/lib/python3*/site-packages/pip",
            "opt/kueue-tas/lib/python3*/site-packages/setuptools",
            "opt/kueue-tas/lib/python3*/site-packages/setuptools_scm",
            "usr/lib/python3/dist-packages/pip",
            "usr/lib/python3*/ensurepip",
            "usr/bin/pip*",
            "usr/bin/gcc*",
            "usr/bin/cc",
            "usr/bin/make",
            "opt/kueue-tas/bin/pip*",
        )
        for p in root.glob(pattern)
    ]
    assert found == []
    assert (root / "opt/kueue-tas/bin/kueue-tas").exists()  # the globs do look in the right place


def test_the_ca_bundle_given_to_pip_is_not_in_the_image(rootfs: tuple[Path, ImageConfig]) -> None:
    """The build secret reaches pip only: no file of the image is (or is named like) the bundle."""
    if not image.CA_BUNDLE.exists():
        pytest.skip(f"no {image.CA_BUNDLE} on this machine: the build had no CA to pass")
    root, _ = rootfs
    bundle = image.CA_BUNDLE.read_bytes()
    copies = [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (p.name == "pip-ca" or (p.stat().st_size == len(bundle) and p.read_bytes() == bundle))
    ]
    assert copies == []


def _service_account_token(controller_kubeconfig: str) -> str:
    cfg = yaml.safe_load(Path(controller_kubeconfig).read_text())
    return str(cfg["users"][0]["user"]["token"])


@pytest_asyncio.fixture(loop_scope="session")
async def image_tas(
    rootfs: tuple[Path, ImageConfig], api_client: client.ApiClient, controller_kubeconfig: str, cluster_state: State
) -> AsyncIterator[ControllerGroup]:
    """One replica from the image, serving both webhooks on the configurations of manifests/base."""
    root, config = rootfs
    cluster = _admin_cluster(cluster_state.kubeconfig)
    sa_dir = write_service_account(
        run_dir() / "image-serviceaccount",
        _service_account_token(controller_kubeconfig),
        Path(cluster["certificate-authority"]).read_bytes(),
        LEASE_NAMESPACE,
    )
    runtime = ImageRuntime(root, config, sa_dir, cluster["server"])
    reg = client.AdmissionregistrationV1Api(api_client)
    await reset_webhook_secret(api_client)
    try:
        await reg.delete_validating_webhook_configuration(CONFIGURATION)
    except ApiException as e:
        if e.status != 404:
            raise
    port = procs.free_port()
    await reg.create_validating_webhook_configuration(as_body(localized(VALIDATING_FILE, port)))
    await install_pod_gate(api_client, port)
    group = ControllerGroup(
        controller_kubeconfig,
        Path(cluster_state.kubeconfig).parent / "logs" / "kueue-tas-image",
        replicas=1,
        extra_env=webhook_env(port),
        image=runtime,
    )
    try:
        await group.start()
        yield group
    finally:
        group.stop()
        with contextlib.suppress(ApiException):
            await reg.delete_validating_webhook_configuration(CONFIGURATION)
        await remove_pod_gate(api_client)


async def _kubectl(kubeconfig: str, namespace: str, *args: str, stdin: object) -> subprocess.CompletedProcess[str]:
    command = [str(bin_dir() / "kubectl"), "--kubeconfig", kubeconfig, *args, "-n", namespace, "-f", "-"]
    return await asyncio.to_thread(
        subprocess.run, command, input=yaml.safe_dump(stdin), capture_output=True, text=True, timeout=60, check=False
    )


async def test_the_controller_from_the_image_leads_answers_and_places(
    image_tas: ControllerGroup, kube: Kube, namespace: str, unique: str, cluster_state: State
) -> None:
    (replica,) = image_tas.processes
    assert replica.proc is not None
    pid = replica.proc.pid

    # As the Deployment runs it: the image's user, no capabilities, read-only root.
    status = process_status(pid)
    assert status["Uid"].split()[:2] == ["65532", "65532"] and status["Gid"].split()[:2] == ["65532", "65532"]
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == 0, status
    assert status["NoNewPrivs"] == "1"
    assert "ro" in root_mount_options(pid)

    # It took the Lease under its own identity.
    lease = await client.CoordinationV1Api(kube.api).read_namespaced_lease(image_tas.lease_name, LEASE_NAMESPACE)
    assert str(lease.spec.holder_identity).startswith(replica.identity_prefix), lease.spec.holder_identity

    # The validating webhook answers kubectl with its message (once its caches hold the stack).
    pool = NodePool(name=f"im{unique}", blocks=1, racks_per_block=2, hosts_per_rack=1)
    s = await st.tas_stack(kube, namespace, image_tas.controller_name, pool)
    bad = jobs.job("bad", 2, required="rakc")

    async def refused() -> str | None:
        out = await _kubectl(cluster_state.kubeconfig, namespace, "create", "--dry-run=server", stdin=bad)
        return out.stderr if out.returncode != 0 and DENIED in out.stderr else None

    message = await eventually("the image's webhook refuses a malformed Job", refused, 30, interval_s=0.5)
    assert f'unknown topology level "rakc"; Topology "{s.topology}"' in message, message

    # A Job with a required block spanning both racks: admitted, its pods ungated into the
    # assigned hosts.
    await jobs.create_job(kube, namespace, jobs.job("j", 12, required=BLOCK_LABEL, indexed=False))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    await workloads.wait_admitted(kube, s, "j")
    nodes = await node_labels(kube, pool)
    pods = await wait_placed(kube, namespace, f"{JOB_NAME}=j", 12, timeout_s=60)
    assert_exact(pods, wl, "main", nodes)
    assert len(Counter(nodes[p["spec"]["nodeName"]][RACK_LABEL] for p in pods)) == 2

    # The pod webhook answers: a new pod labelled for the ungater gets our gate at creation.
    labelled = {
        "metadata": {"name": "labelled", "labels": {GATED_LABEL: GATED_LABEL_VALUE}},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause:1"}]},
    }
    created = await kube.core.create_namespaced_pod(namespace, as_body(labelled))
    assert [g.name for g in created.spec.scheduling_gates or []] == [SCHEDULING_GATE]
    metrics = replica.metrics()
    gated = metric_value(metrics, "kueue_tas_webhook_reviews_total", kind="Pod", operation="CREATE", result="gated")
    assert gated == 1, metrics
    # The version the image's label names is the one the controller reports.
    (build_info,) = [(lbl, v) for name, lbl, v in parse_metrics(metrics) if name == "kueue_tas_build_info"]
    assert build_info[0]["version"] == image_version(image.archive_path(image.project_version()))
    assert build_info[0]["python_version"].startswith("3.11.") and build_info[1] == 1


def image_version(archive: Path) -> str:
    with OciArchive(archive) as oci:
        return oci.config().labels["org.opencontainers.image.version"]
