"""The least any AdmissionCheck controller must do: the ``floor`` variant's check.

    python -m benchmarks.vs_kueue.floor_check --kubeconfig K --namespace NS --check AC

Watches the Workloads of one namespace and sets check ``AC`` Ready (one server-side apply,
the admitter's own ``apply_entry``, guarded by the resourceVersion it saw) as soon as Kueue
has reserved quota, with no placement, no pod or node watch, no gate, no annotation and no
Event. Not a TAS: its pods go wherever the
scheduler puts them. Run beside Kueue's own TAS on the same trace, it measures what the
AdmissionCheck protocol alone costs Kueue and the apiserver on this machine, which bounds from
below what kueue-tas (or any check controller) can reach end to end. A process of its own, so
the benchmark counts its CPU.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from kueue_tas.api.workload import Workload
from kueue_tas.controllers.check_entry_writes import apply_entry, now_rfc3339
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.client import make_api_client
from kueue_tas.kube.informer import Informer

WRITERS = 16  # writes in flight at once, as kueue-tas's admission_workers


def wants_ready(raw: dict[str, Any], check: str) -> bool:
    """Kueue reserved quota and our entry is not Ready yet."""
    status = raw.get("status") or {}
    reserved = any(
        cond.get("type") == "QuotaReserved" and cond.get("status") == "True" for cond in status.get("conditions") or []
    )
    entry = next((e for e in status.get("admissionChecks") or [] if e.get("name") == check), None)
    return reserved and entry is not None and entry.get("state") == "Pending"


async def serve(kubeconfig: str, namespace: str, check: str) -> None:
    api, _ = await make_api_client(kubeconfig, pool=WRITERS + 4, qps=300, burst=500)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    sent: set[str] = set()
    latest: dict[str, dict[str, Any]] = {}  # uid -> the newest copy seen

    def on(raw: dict[str, Any]) -> None:
        uid = str((raw.get("metadata") or {}).get("uid", ""))
        latest[uid] = raw
        if uid not in sent and wants_ready(raw, check):
            sent.add(uid)
            queue.put_nowait(raw)

    async def writer() -> None:
        while True:
            raw = await queue.get()
            entry = {
                "name": check,
                "state": "Ready",
                "message": "floor",
                "lastTransitionTime": now_rfc3339(),
            }
            try:
                # The very write kueue-tas's admitter makes for a Ready decision.
                await apply_entry(api, Workload.model_validate(raw), entry)
            except Exception:
                uid = str(raw["metadata"]["uid"])
                sent.discard(uid)  # decided again on its next event, or now on a newer copy
                if latest.get(uid) is not raw:
                    on(latest[uid])

    informer: Informer[dict[str, Any]] = Informer(
        api, cat.WORKLOADS, lambda raw: raw, namespace=namespace, name="floor"
    )
    informer.add_handler(on, lambda _old, new: on(new))
    informer.start()
    await asyncio.gather(*(writer() for _ in range(WRITERS)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--check", required=True)
    args = p.parse_args(argv)
    asyncio.run(serve(args.kubeconfig, args.namespace, args.check))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
