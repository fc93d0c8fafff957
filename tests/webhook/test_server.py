"""The webhook as the apiserver meets it: HTTPS with the certificate we issue, AdmissionReview
in and out; the certificate's renewal rules; the Secret shared by racing replicas."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from builders import job
from builders import topology as topology_obj
from cryptography import x509
from cryptography.x509.verification import (
    Criticality,
    DNSName,
    ExtensionPolicy,
    PolicyBuilder,
    Store,
    VerificationError,
)
from vocab import REQUIRED
from webhook_harness import HOSTS, NOW, FakeCaches, client_context, pod_review, review, write_cert

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.capacity.creation_checks import TopologyView
from kueue_tas.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from kueue_tas.runtime.certs import RENEW_BEFORE, VALIDITY, CertificateError, ServingCert, issue, renewal_reason
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES
from kueue_tas.webhook import cert_keeper
from kueue_tas.webhook.cert_keeper import FileCerts, SecretCerts
from kueue_tas.webhook.server import PATH, POD_GATE_PATH, REFRESH_SECONDS, WebhookServer


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ServingCert, FakeCaches]]:
    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    topo = TopologyView.of(Topology.model_validate(topology_obj("topo")))
    caches = FakeCaches([topo])
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    server = WebhookServer(settings, FileCerts(tmp_path / "certs"), caches, Metrics(), DEFAULT_GATES)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server, cert, caches
    finally:
        await server.stop()


async def post(server: WebhookServer, ca_pem: bytes, body: Any) -> tuple[int, Any]:
    """POST over TLS, trusting only ``ca_pem`` and checking the host name, as the apiserver does."""
    host, port = server.addresses[0]
    url = f"https://{host}:{port}{PATH}"
    async with aiohttp.ClientSession() as session, session.post(url, json=body, ssl=client_context(ca_pem)) as resp:
        data = await resp.json() if resp.content_type == "application/json" else await resp.text()
        return resp.status, data


async def served_serial(server: WebhookServer, ca_pem: bytes) -> int:
    """The serial number of the certificate a new connection is given."""
    host, port = server.addresses[0]
    _, writer = await asyncio.open_connection(host, port, ssl=client_context(ca_pem), server_hostname=host)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()


async def test_a_malformed_job_is_denied_over_tls_with_the_message(served: Any) -> None:
    server, cert, _ = served
    status, data = await post(server, cert.ca_pem, review(job("train", 4, {REQUIRED: "rakc"})))
    assert status == 200
    response = data["response"]
    assert response["uid"] == "u-1" and response["allowed"] is False
    assert response["status"]["code"] == 403
    assert (
        "Job/team-a/train: spec.template.metadata.annotations[kueue-tas.io/podset-required-topology]: "
        in (response["status"]["message"])
    )
    assert 'unknown topology level "rakc"; Topology "topo" has levels' in response["status"]["message"]
    metrics = server.metrics.render()[0].decode()
    assert 'kueue_tas_webhook_reviews_total{kind="Job",operation="CREATE",result="denied"} 1.0' in metrics


async def test_a_good_job_is_allowed_and_a_typo_comes_back_as_a_warning(served: Any) -> None:
    server, cert, _ = served
    _, data = await post(server, cert.ca_pem, review(job("train", 4, {REQUIRED: "cloud.provider.com/topology-rack"})))
    assert data["response"]["allowed"] is True and "warnings" not in data["response"]
    typo = job("train", 4, {"kueue-tas.io/podset-requried-topology": "x"})
    _, data = await post(server, cert.ca_pem, review(typo))
    assert data["response"]["allowed"] is True
    assert "did you mean kueue-tas.io/podset-required-topology?" in data["response"]["warnings"][0]


async def test_before_the_caches_sync_reviews_are_allowed_and_counted_as_errors(served: Any) -> None:
    server, cert, caches = served
    caches.is_synced = False
    _, data = await post(server, cert.ca_pem, review(job("train", 4, {REQUIRED: "rakc"})))
    assert data["response"]["allowed"] is True
    assert server.readiness() == (False, "webhook caches not synced")
    metrics = server.metrics.render()[0].decode()
    assert 'kueue_tas_webhook_reviews_total{kind="Job",operation="CREATE",result="error"} 1.0' in metrics


async def post_to(server: WebhookServer, ca_pem: bytes, path: str, body: Any) -> Any:
    host, port = server.addresses[0]
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://{host}:{port}{path}", json=body, ssl=client_context(ca_pem)) as resp,
    ):
        assert resp.status == 200
        return await resp.json()


async def test_a_pod_of_a_gated_podset_gets_our_gate_even_before_the_caches_sync(served: Any) -> None:
    server, cert, caches = served
    caches.is_synced = False  # the pod webhook needs no cache: it answers from the start
    data = await post_to(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"}, [{"name": "other"}]))
    response = data["response"]
    assert response["allowed"] is True and response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    assert ops == [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": c.SCHEDULING_GATE}}]
    metrics = server.metrics.render()[0].decode()
    assert 'kueue_tas_webhook_reviews_total{kind="Pod",operation="CREATE",result="gated"} 1.0' in metrics


async def test_pods_not_ours_or_already_gated_are_left_as_they_are(served: Any) -> None:
    server, cert, _ = served
    for body in (
        pod_review({}),
        pod_review({c.GATED_LABEL: "false"}),
        pod_review({c.GATED_LABEL: "true"}, [{"name": c.SCHEDULING_GATE}]),
    ):
        data = await post_to(server, cert.ca_pem, POD_GATE_PATH, body)
        assert data["response"]["allowed"] is True and "patch" not in data["response"]


async def test_a_body_that_is_not_a_review_gets_400(served: Any) -> None:
    server, cert, _ = served
    status, text = await post(server, cert.ca_pem, {"kind": "Pod"})
    assert status == 400 and "not an AdmissionReview" in text


async def test_rotated_files_are_served_to_new_connections(served: Any, tmp_path: Path) -> None:
    server, cert, _ = served
    assert await served_serial(server, cert.ca_pem) == x509.load_pem_x509_certificate(cert.cert_pem).serial_number
    rotated = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", rotated)
    await server.refresh_once()
    assert await served_serial(server, rotated.ca_pem) == x509.load_pem_x509_certificate(rotated.cert_pem).serial_number
    _, data = await post(server, rotated.ca_pem, review(job("a", 1)))
    assert data["response"]["allowed"] is True


async def test_a_missing_certificate_stops_the_start_with_the_path(tmp_path: Path) -> None:
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path)
    server = WebhookServer(settings, FileCerts(tmp_path), FakeCaches([]), Metrics(), DEFAULT_GATES)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"webhook_cert_dir .*No such file or directory: .*tls\.crt"):
        await server.start()


# ---- renewal rules -------------------------------------------------------------------------------


def test_a_fresh_certificate_needs_no_renewal() -> None:
    assert renewal_reason(issue(HOSTS, NOW), HOSTS, NOW) is None


def test_renewal_a_month_before_the_end() -> None:
    cert = issue(HOSTS, NOW)
    assert renewal_reason(cert, HOSTS, NOW + VALIDITY - RENEW_BEFORE - dt.timedelta(days=1)) is None
    reason = renewal_reason(cert, HOSTS, NOW + VALIDITY - RENEW_BEFORE + dt.timedelta(days=1))
    assert reason is not None and reason.startswith("ends ")


def test_renewal_when_a_host_is_not_named_or_the_key_is_another() -> None:
    cert = issue(HOSTS, NOW)
    assert renewal_reason(cert, [*HOSTS, "10.0.0.1"], NOW) == "does not name 10.0.0.1"
    other = issue(HOSTS, NOW)
    assert renewal_reason(ServingCert(cert.ca_pem, cert.cert_pem, other.key_pem), HOSTS, NOW) == (
        "the key is not the certificate's"
    )
    reason = renewal_reason(ServingCert(other.ca_pem, cert.cert_pem, cert.key_pem), HOSTS, NOW)
    assert reason is not None and reason.startswith("not signed by its CA")


# ---- the Secret shared by replicas ---------------------------------------------------------------


class FakeApiServer:
    """Secrets and the two webhook configurations, with resourceVersions and conflicts."""

    def __init__(self) -> None:
        self.secret: dict[str, Any] | None = None
        self.version = 0
        self.writes = 0
        self.vwc: dict[str, Any] = {"webhooks": [{"name": "validate.kueue-tas.io", "clientConfig": {}}]}
        self.mwc: dict[str, Any] | None = {"webhooks": [{"name": "gate.kueue-tas.io", "clientConfig": {}}]}
        self.patches: list[Any] = []
        self.mwc_patches: list[Any] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, api: Any, method: str, path: str, *, body: Any = None, **kw: Any) -> dict[str, Any]:
        for kind, target, patches in (
            ("validatingwebhookconfigurations", self.vwc, self.patches),
            ("mutatingwebhookconfigurations", self.mwc, self.mwc_patches),
        ):
            if kind not in path:
                continue
            if target is None:
                raise NotFound(f"{kind} not found")
            if method == "GET":
                return target
            patches.append(body)
            for op in body:
                if op["op"] == "add":
                    index = int(op["path"].split("/")[2])
                    target["webhooks"][index]["clientConfig"]["caBundle"] = op["value"]
            return target
        if method == "GET":
            if self.secret is None:
                raise NotFound("secrets not found")
            return {**self.secret, "metadata": {**self.secret["metadata"], "resourceVersion": str(self.version)}}
        if self.gate is not None:  # both replicas read before either writes
            await self.gate.wait()
        if method == "POST":
            if self.secret is not None:
                raise AlreadyExists("already exists")
        elif body["metadata"]["resourceVersion"] != str(self.version):
            raise Conflict("the object has been modified")
        elif self.secret is not None and body.get("type", "Opaque") != self.secret.get("type", "Opaque"):
            raise Invalid("Secret: type: field is immutable")
        self.secret, self.version, self.writes = body, self.version + 1, self.writes + 1
        return body


def keeper(clock: dt.datetime = NOW) -> SecretCerts:
    return SecretCerts(
        None, namespace="kueue-tas-system", secret="cert", configuration="kueue-tas", hosts=HOSTS, clock=lambda: clock
    )


async def test_racing_replicas_end_up_serving_one_certificate(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApiServer()
    fake.gate = asyncio.Event()
    monkeypatch.setattr(cert_keeper, "request_json", fake)
    a, b = keeper(), keeper()
    both = asyncio.gather(a.current(), b.current())
    await asyncio.sleep(0.01)
    fake.gate.set()
    first, second = await both
    assert first == second and fake.writes == 1


async def test_a_certificate_due_for_renewal_is_replaced_and_its_ca_published(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApiServer()
    monkeypatch.setattr(cert_keeper, "request_json", fake)
    old = await keeper().current()
    later = NOW + VALIDITY - RENEW_BEFORE + dt.timedelta(days=1)
    renewing = keeper(later)
    new = await renewing.current()
    assert new != old and fake.writes == 2
    assert await keeper(later).current() == new  # another replica takes the renewed one
    await renewing.publish()
    ca = base64.b64decode(fake.vwc["webhooks"][0]["clientConfig"]["caBundle"])
    assert renewal_reason(ServingCert(ca, *new), HOSTS, later) is None
    assert fake.patches[0][0] == {"op": "test", "path": "/webhooks/0/name", "value": "validate.kueue-tas.io"}
    await renewing.publish()
    assert len(fake.patches) == 1  # the bundle is current: nothing written
    # The pod webhook's configuration gets the same CA, once.
    assert fake.mwc is not None and fake.mwc["webhooks"][0]["clientConfig"]["caBundle"] == base64.b64encode(ca).decode()
    assert len(fake.mwc_patches) == 1
    assert fake.mwc_patches[0][0] == {"op": "test", "path": "/webhooks/0/name", "value": "gate.kueue-tas.io"}


async def test_a_missing_mutating_configuration_does_not_stop_the_validating_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeApiServer()
    fake.mwc = None
    monkeypatch.setattr(cert_keeper, "request_json", fake)
    k = keeper()
    await k.current()
    await k.publish()
    assert "caBundle" in fake.vwc["webhooks"][0]["clientConfig"] and len(fake.patches) == 1


async def test_a_secret_the_helm_chart_created_empty_is_filled_keeping_its_type_and_helm_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """charts/kueue-tas creates the Secret (no data, type Opaque) so that `helm uninstall` removes
    it; the keeper fills it in place: a Secret's type cannot change, and Helm's labels and
    annotations are what `helm upgrade` and `uninstall` recognise it by."""
    fake = FakeApiServer()
    helm_meta = {
        "name": "cert",
        "namespace": "kueue-tas-system",
        "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "kueue-tas"},
        "annotations": {"meta.helm.sh/release-name": "kueue-tas", "meta.helm.sh/release-namespace": "kueue-tas-system"},
    }
    fake.secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": dict(helm_meta)}
    monkeypatch.setattr(cert_keeper, "request_json", fake)
    served = await keeper().current()
    assert fake.writes == 1 and fake.secret is not None
    assert fake.secret["type"] == "Opaque"
    assert helm_meta["labels"].items() <= fake.secret["metadata"]["labels"].items()
    assert fake.secret["metadata"]["annotations"] == helm_meta["annotations"]
    assert await keeper().current() == served  # another replica reads it back from the Secret


# ---- renewal without a gap: the other replica serves its old leaf until its next refresh -----------


def trusts(bundle_b64: str, leaf_pem: bytes, at: dt.datetime) -> bool:
    """Whether a client trusting only ``bundle_b64`` (a caBundle) accepts ``leaf_pem`` for the
    webhook Service's name at ``at``, as the apiserver would check it."""
    ee = ExtensionPolicy.permit_all().require_present(x509.SubjectAlternativeName, Criticality.AGNOSTIC, None)
    verifier = (
        PolicyBuilder()
        .store(Store(x509.load_pem_x509_certificates(base64.b64decode(bundle_b64))))
        .time(at)
        .extension_policies(ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=ee)
        .build_server_verifier(DNSName(HOSTS[0]))
    )
    try:
        verifier.verify(x509.load_pem_x509_certificate(leaf_pem), [])
    except VerificationError:
        return False
    return True


async def test_a_renewal_publishes_the_old_and_the_new_ca_until_every_replica_serves_the_new_leaf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each renewal makes a new CA. The replica that renews serves the new leaf at once; the
    other serves its old one until its next refresh (server.REFRESH_SECONDS later). Gated pod
    creations the apiserver sends there must still verify, so the caBundle keeps the previous
    CA beside the new one for a while, then drops it."""
    fake = FakeApiServer()
    monkeypatch.setattr(cert_keeper, "request_json", fake)
    clock = [NOW]

    def replica() -> SecretCerts:
        return SecretCerts(
            None,
            namespace="kueue-tas-system",
            secret="cert",
            configuration="kueue-tas",
            hosts=HOSTS,
            clock=lambda: clock[0],
        )

    other, renewing = replica(), replica()
    old_leaf, _ = await other.current()
    await other.publish()
    renewed_at = NOW + VALIDITY - RENEW_BEFORE + dt.timedelta(days=1)
    clock[0] = renewed_at
    new_leaf, _ = await renewing.current()
    assert new_leaf != old_leaf
    await renewing.publish()
    for config in (fake.vwc, fake.mwc):
        assert config is not None
        bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
        assert trusts(bundle, old_leaf, renewed_at), "the other replica's old leaf is refused"
        assert trusts(bundle, new_leaf, renewed_at)
    # The other replica's next refresh takes the new leaf and publishes the same two CAs.
    clock[0] = renewed_at + dt.timedelta(seconds=REFRESH_SECONDS)
    assert (await other.current())[0] == new_leaf
    await other.publish()
    bundle = fake.vwc["webhooks"][0]["clientConfig"]["caBundle"]
    assert trusts(bundle, old_leaf, clock[0]) and trusts(bundle, new_leaf, clock[0])
    # Kept at least two refresh periods (a refresh that failed once is retried a period later).
    kept = cert_keeper.PREVIOUS_CA_KEPT
    assert kept >= dt.timedelta(seconds=2 * REFRESH_SECONDS)
    # Past that, the next refresh of either replica drops the old CA: only the new leaf is trusted.
    clock[0] = renewed_at + kept + dt.timedelta(seconds=1)
    await other.current()
    await other.publish()
    for config in (fake.vwc, fake.mwc):
        assert config is not None
        bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
        assert not trusts(bundle, old_leaf, clock[0])
        assert trusts(bundle, new_leaf, clock[0])
    # The Secret keeps cert-manager's layout: ca.crt is the one CA that signs tls.crt.
    assert fake.secret is not None
    assert (
        renewal_reason(
            ServingCert(*(base64.b64decode(fake.secret["data"][k]) for k in ("ca.crt", "tls.crt", "tls.key"))),
            HOSTS,
            clock[0],
        )
        is None
    )


async def test_a_missing_secret_the_controller_may_not_create_says_how_to_get_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The manifests ship the Secret empty and the Role grants no create: one deleted by hand is
    a one-line error naming the Secret and the fix, not a bare 403."""
    fake = FakeApiServer()

    async def forbid_create(api: Any, method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method == "POST":
            raise Forbidden(
                'secrets is forbidden: User "system:serviceaccount:kueue-tas-system:kueue-tas" cannot create'
            )
        return await fake(api, method, path, **kw)

    monkeypatch.setattr(cert_keeper, "request_json", forbid_create)
    with pytest.raises(CertificateError) as missing:
        await keeper().current()
    message = str(missing.value)
    assert "kueue-tas-system/cert" in message and "missing" in message and "re-apply" in message
    assert "\n" not in message
