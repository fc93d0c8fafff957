"""The admission webhook under hostile traffic (issue 30): memory, metric series, event-loop stalls.

    python benchmarks/webhook_hostile.py [--unique 20000] [--huge 300] [--big 16] [--json]

The controller's webhook server (``kueue_tas/webhook/server.py``) in this process, on 127.0.0.1
with a certificate of its own and a synced cache of one Topology, as every replica serves it. A
client in the same process (so its buffers count too: the figures are upper bounds) sends, over
16 TLS connections, what anyone on the pod network could:

- unique: anonymous reviews each with a kind or an operation never seen before, half to
  ``/validate``, half to ``/mutate-pod`` (what made 20,001 series and an 82 MB ``/metrics``);
- huge: reviews whose kind or operation is 400 kB long;
- big: ``/validate`` reviews of 7 MiB (a Job UPDATE near the API server's request limit) and
  Jobs with 3,000 misspelt keys under our prefix (seconds of typo hints each), 8 at a time.

For each: the answers by HTTP status, the time, the process's RSS growth after a garbage
collection and its peak growth, the number of ``kueue_tas_webhook_reviews_total`` series and
the size of ``/metrics``, the longest the event loop went without running a 5 ms ticker, and
the longest pass of the garbage collector meanwhile (it stops every thread).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import gc
import json
import ssl
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.capacity.creation_checks import TopologyView
from kueue_tas.runtime.certs import issue
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.logging import configure_logging
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES
from kueue_tas.webhook.cert_keeper import FileCerts
from kueue_tas.webhook.server import PATH, POD_GATE_PATH, WebhookServer

TICK = 0.005
CONNECTIONS = 16
SERIES = "kueue_tas_webhook_reviews_total"
MiB = 1024 * 1024


class Caches:
    """The webhook's caches, synced, every queue leading to one Topology."""

    def __init__(self, views: Sequence[TopologyView]) -> None:
        self.views = list(views)

    def synced(self) -> bool:
        return True

    def topologies_for(self, obj: KubeObject) -> Sequence[TopologyView]:
        return self.views

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def topology() -> TopologyView:
    levels = [{"nodeLabel": f"cloud.provider.com/topology-{lv}"} for lv in ("block", "rack")]
    levels.append({"nodeLabel": "kubernetes.io/hostname"})
    obj = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "topo"}}
    return TopologyView.of(Topology.model_validate({**obj, "spec": {"levels": levels}}))


def job(annotations: dict[str, str] | None = None, pad: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "x"}
    if pad:
        container["env"] = [{"name": "PAD", "value": "x" * pad}]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "template": {
                "metadata": {"annotations": annotations or {}},
                "spec": {"containers": [container], "restartPolicy": "Never"},
            },
        },
    }


def pod() -> dict[str, Any]:
    meta = {"generateName": "train-", "namespace": "team-a", "labels": {"kueue-tas.io/gated": "true"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "x"}]}}


def review(obj: dict[str, Any], group: str, kind: str, operation: str, old: dict[str, Any] | None = None) -> bytes:
    request: dict[str, Any] = {
        "uid": "u",
        "kind": {"group": group, "version": "v1", "kind": kind},
        "operation": operation,
        "object": obj,
    }
    if old is not None:
        request["oldObject"] = old
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}).encode()


def unique(i: int) -> tuple[str, bytes]:
    path = PATH if i % 2 == 0 else POD_GATE_PATH
    obj, group, kind = (job(), "batch", "Job") if path == PATH else (pod(), "", "Pod")
    if i % 4 < 2:
        return path, review(obj, group, kind, f"OP-{i}")
    return path, review(obj, group, f"Kind{i}", "CREATE")


def huge(i: int) -> tuple[str, bytes]:
    value = f"{i}-" + "x" * 400_000
    if i % 2 == 0:
        return PATH, review(job(), "batch", "Job", value)
    return POD_GATE_PATH, review(pod(), "", value, "CREATE")


@functools.cache
def big_bodies() -> tuple[bytes, bytes]:
    """Built once, so the client does not encode 7 MiB of JSON on the loop for each request."""
    typos = {f"kueue-tas.io/podset-requried-topology-{k}": "x" for k in range(3000)}
    padded = job(pad=int(3.5 * MiB))
    return review(padded, "batch", "Job", "UPDATE", old=padded), review(job(typos), "batch", "Job", "CREATE")


def big(i: int) -> tuple[str, bytes]:
    padded, typos = big_bodies()
    return PATH, typos if i % 4 == 3 else padded


def memory() -> dict[str, int]:
    """VmRSS and VmHWM (peak) of this process, in bytes."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def series(server: WebhookServer) -> int:
    return sum(1 for f in server.metrics.registry.collect() for s in f.samples if s.name == SERIES)


async def attack(
    server: WebhookServer, ca: bytes, requests: int, make: Callable[[int], tuple[str, bytes]], parallel: int
) -> dict[str, Any]:
    host, port = server.addresses[0]
    context = ssl.create_default_context(cadata=ca.decode())
    statuses: Counter[int] = Counter()
    stalls: list[float] = [0.0]
    done = asyncio.Event()
    passes: list[float] = [0.0]
    started_gc: list[float] = []

    def gc_pass(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started_gc.append(time.perf_counter())
        elif started_gc:
            passes.append(time.perf_counter() - started_gc.pop())

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            stalls.append(now - last - TICK)
            last = now

    gc.collect()
    before = memory()
    gc.callbacks.append(gc_pass)
    tick = asyncio.create_task(ticker())
    started = time.perf_counter()
    numbers = iter(range(requests))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=context)) as session:

        async def worker() -> None:  # a few workers, not a task per request: the client stays small
            for i in numbers:
                path, body = make(i)
                headers = {"Content-Type": "application/json"}
                async with session.post(f"https://{host}:{port}{path}", data=body, headers=headers) as resp:
                    await resp.read()
                    statuses[resp.status] += 1

        await asyncio.gather(*(worker() for _ in range(parallel)))
    seconds = time.perf_counter() - started
    done.set()
    await tick
    gc.callbacks.remove(gc_pass)
    gc.collect()
    after = memory()
    return {
        "requests": requests,
        "statuses": dict(sorted(statuses.items())),
        "seconds": round(seconds, 2),
        "rss_growth_mib": round((after["VmRSS"] - before["VmRSS"]) / MiB, 1),
        "peak_rss_growth_mib": round((after["VmHWM"] - before["VmHWM"]) / MiB, 1),
        "series": series(server),
        "metrics_bytes": len(server.metrics.render()[0]),
        "longest_loop_stall_seconds": round(max(stalls), 3),
        "longest_gc_pass_seconds": round(max(passes), 3),
    }


# The flood's client runs in a process of its own, so that its sockets count against its memory,
# not the server's: it opens N TLS connections, sends half a request head on each, then waits.
FLOOD_CLIENT = """
import asyncio, ssl, sys
async def main(host, port, ca, n):
    ctx = ssl.create_default_context(cafile=ca)
    writers = []
    for _ in range(n):
        try:
            _, w = await asyncio.open_connection(host, int(port), ssl=ctx)
            w.write(b"POST /mutate-pod HTTP/1.1\\r\\nHost: x\\r\\n")
            writers.append(w)
        except OSError:
            pass
    print("opened", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main(*sys.argv[1:4], int(sys.argv[4])))
"""


async def flood(server: WebhookServer, ca_file: Path, connections: int) -> dict[str, Any]:
    """``connections`` TLS connections with half-sent heads from another process."""
    host, port = server.addresses[0]
    gc.collect()
    before = memory()
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        FLOOD_CLIENT,
        host,
        str(port),
        str(ca_file),
        str(connections),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert client.stdout is not None and client.stdin is not None
    await client.stdout.readline()
    held = server.limits.open
    during = memory()
    await asyncio.sleep(server.limits.head_seconds + 1)
    after = server.limits.open
    client.stdin.close()
    await client.wait()
    return {
        "connections": connections,
        "held": held,
        "refused": server.limits.refused,
        "closed_for_dawdling": server.limits.expired,
        "held_after_deadline": after,
        "rss_growth_mib": round((during["VmRSS"] - before["VmRSS"]) / MiB, 1),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cert = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
        (Path(tmp) / "tls.crt").write_bytes(cert.cert_pem)
        (Path(tmp) / "tls.key").write_bytes(cert.key_pem)
        settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=Path(tmp))
        server = WebhookServer(settings, FileCerts(Path(tmp)), Caches([topology()]), Metrics(), DEFAULT_GATES)  # type: ignore[arg-type]
        await server.start()
        try:
            big_bodies()
            result["start_rss_mib"] = round(memory()["VmRSS"] / MiB, 1)
            result["unique"] = await attack(server, cert.ca_pem, args.unique, unique, CONNECTIONS)
            result["huge"] = await attack(server, cert.ca_pem, args.huge, huge, CONNECTIONS)
            result["big"] = await attack(server, cert.ca_pem, args.big, big, 8)
            (Path(tmp) / "ca.crt").write_bytes(cert.ca_pem)
            result["flood"] = await flood(server, Path(tmp) / "ca.crt", args.flood)
        finally:
            await server.stop()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unique", type=int, default=20_000, help="reviews with a kind or operation never seen before")
    ap.add_argument("--huge", type=int, default=300, help="reviews with a 400 kB kind or operation")
    ap.add_argument("--big", type=int, default=16, help="7 MiB reviews and typo-heavy Jobs (one in four)")
    ap.add_argument("--flood", type=int, default=2000, help="connections with half-sent heads (another process)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    configure_logging("warning", "console", stream=sys.stderr)  # as the controller: no per-request lines
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
        return
    print(f"RSS at start {result['start_rss_mib']} MiB")
    for name in ("unique", "huge", "big"):
        r = result[name]
        print(
            f"{name:6} {r['requests']:6} requests {r['statuses']} in {r['seconds']} s: "
            f"RSS +{r['rss_growth_mib']} MiB (peak +{r['peak_rss_growth_mib']} MiB), "
            f"{r['series']} series, /metrics {r['metrics_bytes'] / 1024:.1f} KiB, "
            f"longest event-loop stall {r['longest_loop_stall_seconds']:.3f} s "
            f"(longest GC pass {r['longest_gc_pass_seconds']:.3f} s)"
        )
    f = result["flood"]
    print(
        f"flood  {f['connections']:6} connections with half-sent heads (another process): {f['held']} held, "
        f"{f['refused']} refused, RSS +{f['rss_growth_mib']} MiB; after the head deadline "
        f"{f['held_after_deadline']} held ({f['closed_for_dawdling']} closed for dawdling)"
    )


if __name__ == "__main__":
    main()
