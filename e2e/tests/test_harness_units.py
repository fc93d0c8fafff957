"""Checks of the harness's own pieces that need no running cluster."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

from cryptography import x509

from e2e import build, manifests, pki, procs
from e2e.nodes import BLOCK_LABEL, RACK_LABEL, NodePool
from kueue_tas.api.constants import HOSTNAME_LABEL


def test_pki_chain_and_admin_group(tmp_path: Path) -> None:
    p = pki.generate(tmp_path, webhook_servers=("kueue",))
    ctx = ssl.create_default_context(cafile=str(p.ca_crt))
    ctx.load_cert_chain(str(p.admin_crt), str(p.admin_key))  # key matches cert
    admin = x509.load_pem_x509_certificate(p.admin_crt.read_bytes())
    orgs = [a.value for a in admin.subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    serving = x509.load_pem_x509_certificate((p.serving_dir("kueue") / "tls.crt").read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    ca = x509.load_pem_x509_certificate(p.ca_crt.read_bytes())
    serving.verify_directly_issued_by(ca)


def test_node_pool_layout() -> None:
    pool = NodePool(name="p", blocks=2, racks_per_block=3, hosts_per_rack=4)
    nodes = pool.node_objects()
    assert len(nodes) == pool.size == 24
    assert len({n["metadata"]["name"] for n in nodes}) == 24
    last = nodes[-1]["metadata"]["labels"]
    assert (last[BLOCK_LABEL], last[RACK_LABEL], last[HOSTNAME_LABEL]) == ("b2", "b2-r3", "p-b2-r3-h4")
    assert all("taints" not in n["spec"] for n in nodes)


def test_free_ports_are_distinct() -> None:
    ports = procs.free_ports(["a", "b", "c", "d"])
    assert len(set(ports.values())) == 4


def test_stamp_changes_with_version() -> None:
    etcd = next(c for c in build.components() if c.name == "etcd")
    bumped = build.Component(**{**etcd.__dict__, "version": "v3.6.0"})
    assert etcd.stamp_key("go1.26") != bumped.stamp_key("go1.26")
    assert etcd.stamp_key("go1.26") == etcd.stamp_key("go1.26")


def test_webhooks_point_at_loopback_with_ca() -> None:
    docs = manifests.kueue_webhooks(12345, b"CA") + manifests.jobset_webhooks(23456, b"CA")
    hooks = [wh for d in docs for wh in d["webhooks"]]
    assert hooks
    assert all(
        wh["clientConfig"]["url"].startswith(("https://127.0.0.1:12345/", "https://127.0.0.1:23456/")) for wh in hooks
    )
    assert all(wh["clientConfig"]["caBundle"] == "Q0E=" for wh in hooks)
    job_hook = next(wh for wh in hooks if wh["name"] == "mjob.kb.io")
    assert "kueue-system" in job_hook["namespaceSelector"]["matchExpressions"][0]["values"]


def test_a_custom_gate_goes_into_the_controller_policy_only() -> None:
    """Every identity document with a non-default gate (chaos profiles use one): the controller
    writes policy names the gate, the records policy and the other kinds are left as they are."""
    from e2e.rbac import IDENTITY_KINDS, base_documents, gate_policies

    docs = [d for d in base_documents() if d["kind"] in IDENTITY_KINDS]
    POLICY = "kueue-tas-controller-writes"
    records = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] != POLICY)
    before = json.dumps(records, sort_keys=True)
    gate_policies(docs, "example.com/hold")
    (writes,) = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == POLICY]
    assert {v["name"]: v["expression"] for v in writes["spec"]["variables"]}["gate"] == "'example.com/hold'"
    assert json.dumps(records, sort_keys=True) == before
