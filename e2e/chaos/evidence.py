"""What a failed chaos run leaves behind for diagnosis, taken before its teardown deletes it.

Seeds 653 and 832 failed once and passed on replay; the namespace was gone and the replicas'
logs overwritten by later runs, so their cause could not be read. A failed run now keeps, next
to its event log: every controller replica's log, and the namespace's pods, Jobs, Workloads and
Events as the API server held them at the end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube


async def keep(kube: Kube, namespace: str, logs: list[Path], dest: Path) -> list[str]:
    """Write the evidence into ``dest``; what could not be kept, as lines (never raises)."""
    dest.mkdir(parents=True, exist_ok=True)
    missed = []
    for path in logs:
        try:
            shutil.copyfile(path, dest / path.name)
        except OSError as e:
            missed.append(f"{path}: {e}")
    sanitize = kube.api.sanitize_for_serialization
    reads: dict[str, Any] = {
        "pods": lambda: kube.core.list_namespaced_pod(namespace),
        "jobs": lambda: kube.batch.list_namespaced_job(namespace),
        "events": lambda: kube.core.list_namespaced_event(namespace),
        "workloads": lambda: kube.custom.list_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads"
        ),
    }
    for name, read in reads.items():
        try:
            body = sanitize(await read())
        except Exception as e:  # an apiserver down at the end must not hide the run's verdict
            missed.append(f"{name}: {type(e).__name__}: {e}")
            continue
        (dest / f"{name}.json").write_text(json.dumps(body, indent=1, default=str) + "\n", encoding="utf-8")
    return missed
