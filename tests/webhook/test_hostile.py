"""The webhook port under hostile traffic (issue 30 findings 1 and 7): anyone on the pod network
can reach it, so what a request carries must not grow the metrics, a body must not be larger
than an apiserver review can be, judging must not stall the event loop the leader elector and
the reconcilers share, and no body may end in a 500 and a traceback."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from builders import job
from builders import topology as topology_obj
from loop_watch import loop_gaps
from vocab import REQUIRED
from webhook_harness import HOSTS, FakeCaches, pod_review, review, write_cert
from webhook_harness import client_context as new_client_context

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.capacity.creation_checks import TopologyView
from kueue_tas.runtime.certs import ServingCert, issue
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES
from kueue_tas.webhook import server as server_module
from kueue_tas.webhook.cert_keeper import FileCerts
from kueue_tas.webhook.intake import ByteBudget
from kueue_tas.webhook.server import PATH, POD_GATE_PATH, WebhookServer

MiB = 1024 * 1024
# One TLS context per CA: a context per request would cost a handshake per request too.
client_context = functools.lru_cache(new_client_context)
REVIEWS = "kueue_tas_webhook_reviews_total"
UNIQUE = 4_000


class RecordingExecutor(ThreadPoolExecutor):
    """A thread pool that notes the thread each call ran on."""

    def __init__(self) -> None:
        super().__init__(max_workers=2, thread_name_prefix="test-judge")
        self.threads: list[int] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        def noted() -> Any:
            self.threads.append(threading.get_ident())
            return fn(*args, **kwargs)

        return super().submit(noted)


Served = tuple[WebhookServer, ServingCert, RecordingExecutor]


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    caches = FakeCaches([TopologyView.of(Topology.model_validate(topology_obj("topo")))])
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    judges = RecordingExecutor()
    server = WebhookServer(settings, FileCerts(tmp_path / "certs"), caches, Metrics(), DEFAULT_GATES, judges=judges)  # type: ignore[arg-type]
    await server.start()
    try:
        yield server, cert, judges
    finally:
        await server.stop()
        judges.shutdown()


async def send(
    session: aiohttp.ClientSession, server: WebhookServer, ca: bytes, path: str, body: bytes | Any
) -> tuple[int, str]:
    host, port = server.addresses[0]
    data = body if isinstance(body, bytes | bytearray) or hasattr(body, "__aiter__") else json.dumps(body).encode()
    async with session.post(
        f"https://{host}:{port}{path}",
        data=data,
        headers={"Content-Type": "application/json"},
        ssl=client_context(ca),
    ) as resp:
        return resp.status, await resp.text()


async def send_one(server: WebhookServer, ca: bytes, path: str, body: bytes | Any) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session:
        return await send(session, server, ca, path, body)


def review_series(server: WebhookServer) -> dict[tuple[str, ...], float]:
    out = {}
    for family in server.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == REVIEWS:
                out[tuple(sample.labels[k] for k in ("kind", "operation", "result"))] = sample.value
    return out


def with_kind(body: dict[str, Any], group: str, kind: str, resource: str | None = None) -> dict[str, Any]:
    body["request"]["kind"] = {"group": group, "version": "v1", "kind": kind}
    if resource is not None:
        body["request"]["resource"] = {"group": group, "version": "v1", "resource": resource}
    return body


# ---- label values from a closed set --------------------------------------------------------------


async def test_unique_kinds_and_operations_from_anyone_leave_the_series_bounded(served: Served) -> None:
    """Anonymous reviews, each with a kind or an operation never seen before: before the fix each
    became a series of its own (the review's 20,000 made 20,001 series, an 82 MB /metrics).
    4,000 here (seconds); benchmarks/webhook_hostile.py sends 20,000."""
    server, cert, _ = served
    job_body = review(job("train", 1))
    pod_body = pod_review({})
    sem = asyncio.Semaphore(16)

    def variant(i: int) -> tuple[str, bytes]:
        if i % 4 == 0:
            body = dict(job_body, request={**job_body["request"], "operation": f"OP-{i}"})
            return PATH, json.dumps(body).encode()
        if i % 4 == 1:
            body = dict(pod_body, request={**pod_body["request"], "operation": f"OP-{i}"})
            return POD_GATE_PATH, json.dumps(body).encode()
        kind = {"group": "batch", "version": "v1", "kind": f"Kind{i}"}
        body = dict(job_body, request={**job_body["request"], "kind": kind})
        return (PATH if i % 4 == 2 else POD_GATE_PATH), json.dumps(body).encode()

    statuses: dict[int, int] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as session:

        async def one(i: int) -> None:
            async with sem:
                status, _ = await send(session, server, cert.ca_pem, *variant(i))
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(one(i) for i in range(UNIQUE)))
    series = review_series(server)
    assert sum(statuses.values()) == UNIQUE and set(statuses) <= {200, 400}, statuses
    assert len(series) <= 12, sorted(series)[:20]
    assert sum(series.values()) == UNIQUE  # every request is counted, under a fixed value
    assert {k for k, _, _ in series} <= {"Job", "JobSet", "Workload", "Pod", "other"}
    assert {op for _, op, _ in series} <= {"CREATE", "UPDATE", "DELETE", "CONNECT", "other"}
    assert series[("Job", "other", "allowed")] == UNIQUE // 4
    assert series[("Pod", "other", "allowed")] == UNIQUE // 4
    assert series[("other", "CREATE", "rejected")] == UNIQUE // 2


async def test_a_huge_kind_value_is_not_a_label(served: Served) -> None:
    server, cert, _ = served
    body = with_kind(review(job("train", 1)), "batch", "J" * 400_000)
    status, text = await send_one(server, cert.ca_pem, PATH, body)
    assert status == 400
    assert len(text) < 500 and "\n" not in text.rstrip("\n")
    assert all(len(v) < 20 for labels in review_series(server) for v in labels)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"apiVersion": "v\n" * 100_000, "kind": "AdmissionReview", "request": {"uid": "u"}},
            'expected admission.k8s.io/v1 AdmissionReview, got "v\\nv\\n',
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "kind": {"k\n" * 100_000: 1}},
            },
            'not an AdmissionReview: request.kind."k\\nk\\n',
        ),
    ],
)
async def test_what_a_body_holds_is_quoted_back_short_and_on_one_line(
    served: Served, body: dict[str, Any], message: str
) -> None:
    server, cert, _ = served
    for path in (PATH, POD_GATE_PATH):
        status, text = await send_one(server, cert.ca_pem, path, body)
        assert status == 400 and text.startswith(message) and text.count("\n") == 1 and len(text) < 300, text[:400]


# ---- the kind must be the endpoint's --------------------------------------------------------------


SERVED = "(batch/Job, jobset.x-k8s.io/JobSet, kueue.x-k8s.io/Workload)"


@pytest.mark.parametrize(
    ("path", "group", "kind", "resource", "message"),
    [
        (PATH, "", "Pod", "pods", f'request.kind: "Pod" is not a kind /validate serves {SERVED}'),
        (PATH, "apps", "Job", "jobs", f'request.kind: "apps/Job" is not a kind /validate serves {SERVED}'),
        (
            PATH,
            "batch",
            "Job",
            "cronjobs",
            'request.resource: "batch/cronjobs" is not the resource of batch/Job (jobs)',
        ),
        (POD_GATE_PATH, "batch", "Job", "jobs", 'request.kind: "batch/Job" is not a kind /mutate-pod serves (Pod)'),
        (POD_GATE_PATH, "", "", None, 'request.kind: "" is not a kind /mutate-pod serves (Pod)'),
        (POD_GATE_PATH, "", "P\nod" * 100, None, 'request.kind: "P\\nodP\\nod' + "P\\nod" * 18 + '..." is not'),
    ],
)
async def test_a_review_of_a_kind_the_endpoint_does_not_serve_gets_400(
    served: Served, path: str, group: str, kind: str, resource: str | None, message: str
) -> None:
    """One line naming the field, what came and what the path serves (a long value cut short)."""
    server, cert, _ = served
    body = with_kind(review(job("train", 1, {REQUIRED: "rakc"})), group, kind, resource)
    status, text = await send_one(server, cert.ca_pem, path, body)
    assert status == 400 and text.startswith(message) and text.count("\n") == 1, text
    assert review_series(server) == {(kind if kind in ("Job", "Pod") else "other", "CREATE", "rejected"): 1}


async def test_the_kinds_each_endpoint_serves_are_answered(served: Served) -> None:
    server, cert, _ = served
    for group, kind, resource in (("batch", "Job", "jobs"), ("jobset.x-k8s.io", "JobSet", "jobsets")):
        body = with_kind(review(job("train", 1)), group, kind, resource)
        assert (await send_one(server, cert.ca_pem, PATH, body))[0] == 200
    body = with_kind(pod_review({c.GATED_LABEL: "true"}), "", "Pod", "pods")
    status, text = await send_one(server, cert.ca_pem, POD_GATE_PATH, body)
    assert status == 200 and json.loads(text)["response"]["patchType"] == "JSONPatch"


# ---- body limits -----------------------------------------------------------------------------------


def padded_job_update(size: int) -> dict[str, Any]:
    """A Job UPDATE review whose object and oldObject each carry ``size // 2`` bytes of env."""
    obj = job("train", 1)
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "PAD", "value": "x" * (size // 2)}]
    return review(obj, "UPDATE", old=obj)


async def test_a_large_review_an_apiserver_can_send_is_judged(served: Served) -> None:
    """object and oldObject of a Job near the apiserver's 3 MiB request limit each."""
    server, cert, _ = served
    status, text = await send_one(server, cert.ca_pem, PATH, padded_job_update(5 * MiB))
    assert status == 200 and json.loads(text)["response"]["allowed"] is True


async def test_bodies_over_the_endpoint_limit_get_413(served: Served) -> None:
    server, cert, _ = served
    status, text = await send_one(server, cert.ca_pem, PATH, padded_job_update(9 * MiB))
    assert status == 413 and "/validate" in text and "\n" not in text.rstrip("\n")
    pod = pod_review({c.GATED_LABEL: "true"})
    pod["request"]["object"]["metadata"]["annotations"] = {"pad": "x" * (5 * MiB)}
    status, text = await send_one(server, cert.ca_pem, POD_GATE_PATH, pod)
    assert status == 413 and "/mutate-pod" in text

    async def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(9):
            yield b" " * MiB

    status, _ = await send_one(server, cert.ca_pem, POD_GATE_PATH, chunks())
    assert status == 413
    assert review_series(server) == {("other", "other", "rejected"): 3}


async def test_bodies_beyond_the_shared_budget_wait_for_none_and_get_503(tmp_path: Path) -> None:
    """Bodies are charged as their bytes arrive; a request declaring more than the budget has
    left is refused at once, and the slow one is served when its bytes come."""
    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    raw = json.dumps(pod_review({c.GATED_LABEL: "true"})).encode()
    budget = ByteBudget(len(raw) + 1000)
    server = WebhookServer(
        settings, FileCerts(tmp_path / "certs"), FakeCaches([]), Metrics(), DEFAULT_GATES, budget=budget
    )  # type: ignore[arg-type]
    await server.start()
    try:
        more = asyncio.Event()

        async def slowly() -> Any:
            yield raw[:-10]
            await more.wait()
            yield raw[-10:]

        first = asyncio.create_task(send_one(server, cert.ca_pem, POD_GATE_PATH, slowly()))
        while budget.held == 0:
            await asyncio.sleep(0.01)
        status, text = await send_one(server, cert.ca_pem, POD_GATE_PATH, raw + b" " * 2000)
        assert (status, text.startswith("busy: ")) == (503, True)
        more.set()
        assert (await first)[0] == 200
        assert budget.held == 0
        assert (await send_one(server, cert.ca_pem, POD_GATE_PATH, raw))[0] == 200
    finally:
        await server.stop()


# ---- off the event loop -----------------------------------------------------------------------------


def typo_job(keys: int) -> dict[str, Any]:
    """A Job whose template has ``keys`` misspelt keys under our prefix: seconds of typo hints."""
    return job("train", 1, {f"kueue-tas.io/podset-requried-topology-{i}": "x" for i in range(keys)})


async def test_judging_runs_in_a_thread_and_the_loop_keeps_ticking(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix the review below held the event loop for seconds (the whole judging). The
    misspelt keys' hints are bounded now (test_review30_webhook), so a judge that computes for a
    second stands in for whatever else a judging may cost."""
    real_judge = server_module.judge

    def slow_judge(*args: Any) -> Any:
        until = time.monotonic() + 1.0
        while time.monotonic() < until:  # computes, holding the GIL as judging does
            pass
        return real_judge(*args)

    monkeypatch.setattr(server_module, "judge", slow_judge)
    server, cert, judges = served
    loop_thread = threading.get_ident()
    async with loop_gaps() as gaps:
        started = time.monotonic()
        statuses = await asyncio.gather(
            send_one(server, cert.ca_pem, PATH, review(typo_job(3000))),
            send_one(server, cert.ca_pem, PATH, review(typo_job(3000))),
        )
        judged = time.monotonic() - started
    assert [s for s, _ in statuses] == [200, 200]
    assert judges.threads and loop_thread not in judges.threads
    # Generous: the judging takes seconds; the loop must never wait for it as a whole.
    assert max(gaps) < min(1.0, judged / 2), (max(gaps), judged)


async def test_the_pod_gate_is_judged_in_a_thread_too(served: Served) -> None:
    server, cert, judges = served
    status, _ = await send_one(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"}))
    assert status == 200 and judges.threads and threading.get_ident() not in judges.threads


# ---- deep JSON ----------------------------------------------------------------------------------------


def deep(levels: int) -> Iterator[bytes]:
    yield b"[" * levels
    yield b"]" * levels


@pytest.mark.parametrize("path", [PATH, POD_GATE_PATH])
@pytest.mark.parametrize("where", ["body", "object"])
async def test_deeply_nested_json_gets_400_not_a_traceback(served: Served, path: str, where: str) -> None:
    server, cert, _ = served
    nested = b"".join(deep(100_000))
    if where == "body":
        raw = nested
    else:
        head = json.dumps(pod_review({c.GATED_LABEL: "true"}) if path == POD_GATE_PATH else review(job("a", 1)))
        raw = head.replace('"spec": {', '"deep": ' + nested.decode() + ', "spec": {', 1).encode()
    status, text = await send_one(server, cert.ca_pem, path, raw)
    assert status == 400, text[:300]
    assert "nested" in text and "Traceback" not in text and "\n" not in text.rstrip("\n")
