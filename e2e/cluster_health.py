"""Is the local cluster up: each component's health endpoint, probed over loopback."""

from __future__ import annotations

import ssl
import urllib.request

from e2e import procs
from e2e.cluster_state import State, rest_client

START_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue")

_INSECURE = ssl.create_default_context()
_INSECURE.check_hostname = False
_INSECURE.verify_mode = ssl.CERT_NONE


def http_ok(url: str) -> bool:
    """True if ``url`` answers 200 (self-signed TLS of kcm/scheduler accepted: loopback health only)."""
    try:
        ctx = _INSECURE if url.startswith("https") else None
        with urllib.request.urlopen(url, timeout=3, context=ctx) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def health_urls(ports: dict[str, int]) -> dict[str, str]:
    return {
        "etcd": f"http://127.0.0.1:{ports['etcd']}/health",
        "kube-controller-manager": f"https://127.0.0.1:{ports['kcm']}/healthz",
        "kube-scheduler": f"https://127.0.0.1:{ports['scheduler']}/healthz",
        "kwok": f"http://127.0.0.1:{ports['kwok']}/healthz",
        "jobset": f"http://127.0.0.1:{ports['jobset_health']}/readyz",
        "kueue": f"http://127.0.0.1:{ports['kueue_health']}/readyz",
    }


def component_health(state: State) -> dict[str, str]:
    """Per component: 'ok', 'unhealthy' or 'not running'."""
    out: dict[str, str] = {}
    urls = health_urls(state.ports)
    rest = rest_client(state)
    for name in START_ORDER:
        info = state.proc(name)
        if info is None or not procs.is_alive(info):
            out[name] = "not running"
            continue
        ok = rest.raw_status("/readyz")[0] == 200 if name == "kube-apiserver" else http_ok(urls[name])
        out[name] = "ok" if ok else "unhealthy"
    return out


def is_healthy(state: State | None) -> bool:
    return state is not None and all(v == "ok" for v in component_health(state).values())
