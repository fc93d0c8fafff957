"""The local cluster: ``python -m e2e.cluster up|down|status|env``.

``up`` builds the Go components once (see ``e2e.build``), makes certificates, starts etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok, JobSet and Kueue as processes on
127.0.0.1 (free ports chosen at start), installs CRDs and webhook configurations from the
modules' own manifests and waits until each piece answers. State lives in the run directory
(``$KUEUE_TAS_RUN_DIR`` or ``~/.cache/kueue-tas/run``); ``down`` stops every process it started.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import shutil
import ssl
import sys
import time
from pathlib import Path
from typing import Any

from e2e import build, components, manifests, pki, procs, versions
from e2e.cluster_bootstrap import (
    create_nodes,
    ensure_namespace,
    install_crds,
    install_webhooks,
    jobset_webhook_works,
    kueue_webhook_works,
)
from e2e.cluster_health import component_health, health_urls, http_ok, is_healthy
from e2e.cluster_state import State, child_env, load_state, pinned_versions, rest_client, run_dir_lock
from e2e.components import Layout
from e2e.nodes import NodePool
from e2e.paths import run_dir
from e2e.rest import ApiError, ProbeFatal, wait_for

# Bounded waits (seconds). First start on 2 cores is the slow case.
T_ETCD = 60
T_APISERVER = 180
T_COMPONENT = 120
T_WEBHOOK_PROBE = 120


def log(msg: str) -> None:
    print(f"[e2e.cluster] {msg}", file=sys.stderr, flush=True)


# When the current ``up`` started (monotonic), for "since start" in progress lines.
_T0 = [time.monotonic()]


def _wait_component(state: State, name: str, check: Any, timeout: float, what: str = "ready") -> None:
    info = state.proc(name)
    assert info is not None

    def probe() -> bool:
        if not procs.is_alive(info):
            raise ProbeFatal(f"{name} exited; last log lines:\n{procs.tail(info.log)}")
        return bool(check())

    t0 = time.monotonic()
    wait_for(name, probe, timeout, on_timeout=lambda: f"{name} log tail:\n{procs.tail(info.log)}")
    log(f"{name} {what} ({time.monotonic() - t0:.1f}s, since start {time.monotonic() - _T0[0]:.1f}s)")


# ------------------------------------------------------------------ up / down


def _valid_pair(crt: Path, key: Path) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(crt), str(key))
    except (OSError, ssl.SSLError):
        return False
    return True


def _write_kueue_metrics_certs(p: pki.Pki) -> None:
    """Kueue (certs managed outside) insists on /etc/kueue/metrics/certs/tls.{crt,key}.

    The path is shared by every local cluster (the chaos campaign runs its own beside the e2e
    one), and each Kueue watches it. Its metrics server is off, so any matching pair will do:
    a valid pair already there is kept, so a second cluster's start never swaps files under a
    running Kueue; a missing or broken pair is replaced under a lock, by renames.
    """
    d = components.KUEUE_METRICS_CERT_DIR
    try:
        d.mkdir(parents=True, exist_ok=True)
        with (d.parent / ".certs.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if _valid_pair(d / "tls.crt", d / "tls.key"):
                return
            for f in ("tls.key", "tls.crt"):
                tmp = d / f".{f}.tmp"
                shutil.copyfile(p.serving_dir("kueue") / f, tmp)
                tmp.replace(d / f)
    except PermissionError as e:
        raise RuntimeError(
            f"Kueue needs a cert pair in {d} (hard-coded upstream); run as root or make {d} writable"
        ) from e


def _start(state: State, layout: Layout, name: str, argv: list[str]) -> None:
    info = procs.start(name, argv, layout.logs, env=child_env(state, layout), cwd=layout.run)
    state.procs.append(info)
    state.save()


def up(pool: NodePool | None = None, *, rebuild_check: bool = True) -> State:
    """Start the cluster (or reuse a healthy running one) and return its state."""
    rdir = run_dir()
    with run_dir_lock(rdir):
        existing = load_state(rdir)
        if existing is not None:
            same_pins = existing.versions == pinned_versions()
            if same_pins and is_healthy(existing):
                log(f"cluster already up and healthy (run dir {rdir})")
                if pool is not None:
                    t = time.monotonic()
                    names = create_nodes(rest_client(existing), pool)
                    log(f"{len(names)} kwok nodes Ready ({time.monotonic() - t:.1f}s)")
                return existing
            why = "not healthy" if same_pins else f"built from other pins ({existing.versions})"
            log(f"previous cluster is {why}: stopping it first")
            _down_locked(existing)
        return _fresh_up(rdir, pool, rebuild_check)


def _fresh_up(rdir: Path, pool: NodePool | None, rebuild_check: bool) -> State:
    _T0[0] = time.monotonic()
    if rebuild_check:
        build.ensure_built()
    if rdir.exists():
        shutil.rmtree(rdir)
    layout = Layout(rdir)
    for d in (layout.run, layout.logs, layout.config, layout.home, layout.etcd_data):
        d.mkdir(parents=True, exist_ok=True)
    layout.etcd_data.chmod(0o700)

    t0 = time.monotonic()
    p = pki.generate(layout.pki_dir, webhook_servers=("kueue", "jobset", "kueue-tas"))
    _write_kueue_metrics_certs(p)
    ports = procs.free_ports(components.PORT_NAMES)
    kubeconfig = components.write_kubeconfig(layout, p, ports["apiserver"])
    state = State(
        run_dir=str(rdir),
        kubeconfig=str(kubeconfig),
        log_dir=str(layout.logs),
        ports=ports,
        started_at=time.time(),
        versions=pinned_versions(),
    )
    state.save()
    log(f"run dir {rdir}; certificates and configs ready ({time.monotonic() - t0:.1f}s)")
    try:
        _start_all(state, layout, p)
        if pool is not None:
            t = time.monotonic()
            names = create_nodes(rest_client(state), pool)
            log(f"{len(names)} kwok nodes Ready ({time.monotonic() - t:.1f}s)")
    except BaseException:
        log(f"start failed; logs in {layout.logs}; stopping what was started")
        _down_locked(state, remove_state=False)
        raise
    state.ready_after_s = round(time.monotonic() - _T0[0], 1)
    state.save()
    log(f"cluster up in {state.ready_after_s}s (including build check). export KUBECONFIG={kubeconfig}")
    return state


def _start_all(state: State, layout: Layout, p: pki.Pki) -> None:
    ports = state.ports
    kubeconfig = Path(state.kubeconfig)
    ca_pem = p.ca_crt.read_bytes()

    _start(state, layout, "etcd", components.etcd_argv(layout, ports))
    _wait_component(state, "etcd", lambda: http_ok(health_urls(ports)["etcd"]), T_ETCD)

    _start(state, layout, "kube-apiserver", components.apiserver_argv(p, ports))
    rest = rest_client(state)
    _wait_component(state, "kube-apiserver", lambda: rest.raw_status("/readyz")[0] == 200, T_APISERVER)
    version = rest.get("/version")["gitVersion"]
    if version != versions.KUBERNETES:
        raise RuntimeError(f"kube-apiserver reports {version!r}, expected {versions.KUBERNETES} (ldflags?)")

    # Controllers that need nothing but the API start now, while CRDs get installed.
    _start(state, layout, "kube-controller-manager", components.kcm_argv(p, kubeconfig, ports))
    _start(state, layout, "kube-scheduler", components.scheduler_argv(layout, kubeconfig, ports))
    _start(state, layout, "kwok", components.kwok_argv(layout, kubeconfig, ports, complete_delay_ms=1000))

    t = time.monotonic()
    for ns in ("kueue-system", "jobset-system"):
        ensure_namespace(rest, ns)
    crds = manifests.jobset_crds() + manifests.kueue_crds(ports["kueue_webhook"], ca_pem)
    install_crds(rest, crds)
    install_webhooks(rest, manifests.jobset_webhooks(ports["jobset_webhook"], ca_pem))
    install_webhooks(rest, manifests.kueue_webhooks(ports["kueue_webhook"], ca_pem))
    log(f"{len(crds)} CRDs Established, webhook configurations installed ({time.monotonic() - t:.1f}s)")

    _start(state, layout, "jobset", components.jobset_argv(layout, p, ports))
    _start(state, layout, "kueue", components.kueue_argv(layout, p, ports))

    urls = health_urls(ports)
    for name in ("kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue"):
        _wait_component(state, name, lambda u=urls[name]: http_ok(u), T_COMPONENT)
    _wait_component(
        state,
        "jobset",
        lambda: jobset_webhook_works(rest),
        T_WEBHOOK_PROBE,
        "webhooks answer (dry-run JobSet defaulted)",
    )
    _wait_component(
        state, "kueue", lambda: kueue_webhook_works(rest), T_WEBHOOK_PROBE, "webhooks answer (dry-run Job suspended)"
    )


_STOP_PHASES = (
    lambda name: name not in ("kube-apiserver", "etcd"),
    lambda name: name == "kube-apiserver",
    lambda name: name == "etcd",
)


def _down_locked(state: State, remove_state: bool = True) -> list[tuple[str, str]]:
    # Clients first, together (bounded by the slowest), then the apiserver, then etcd: a client
    # stopping while the apiserver is already gone hangs on its in-flight requests.
    results: list[tuple[str, str]] = []
    for phase in _STOP_PHASES:
        group = [p for p in reversed(state.procs) if phase(p.name)]
        results += procs.stop_all(group)
    if remove_state:
        with contextlib.suppress(OSError):
            state.layout.state.unlink()
    return results


def down() -> list[tuple[str, str]]:
    rdir = run_dir()
    with run_dir_lock(rdir):
        state = load_state(rdir)
        if state is None:
            log(f"no cluster state in {rdir}: nothing to stop")
            return []
        results = _down_locked(state)
    for name, what in results:
        log(f"{name}: {what}")
    return results


def status() -> dict[str, Any]:
    state = load_state()
    if state is None:
        return {"up": False, "run_dir": str(run_dir())}
    health = component_health(state)
    return {
        "up": all(v == "ok" for v in health.values()),
        "run_dir": state.run_dir,
        "kubeconfig": state.kubeconfig,
        "logs": state.log_dir,
        "ports": state.ports,
        "components": {p.name: {"pid": p.pid, "health": health.get(p.name, "?")} for p in state.procs},
        "versions": state.versions,
        "ready_after_s": state.ready_after_s,
    }


def env_lines(state: State) -> list[str]:
    return [f"export KUBECONFIG={state.kubeconfig}", "export NO_PROXY=127.0.0.1,localhost"]


def _parse_nodes(spec: str) -> NodePool:
    b, r, h = (int(x) for x in spec.lower().split("x"))
    return NodePool(blocks=b, racks_per_block=r, hosts_per_rack=h)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m e2e.cluster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="build (once) and start the cluster, or reuse a healthy one")
    p_up.add_argument("--nodes", metavar="BxRxH", help="also create kwok nodes, e.g. 2x4x8")
    sub.add_parser("down", help="stop every process of the cluster")
    sub.add_parser("status", help="print the cluster state as JSON")
    sub.add_parser("env", help="print shell exports for the running cluster")
    sub.add_parser("build", help="only build the Go components")
    args = ap.parse_args(argv)

    if args.cmd == "up":
        try:
            state = up(_parse_nodes(args.nodes) if args.nodes else None)
        except (RuntimeError, TimeoutError, ApiError) as e:
            log(f"up failed: {e}")
            return 1
        print("\n".join(env_lines(state)))
        return 0
    if args.cmd == "down":
        down()
        return 0
    if args.cmd == "status":
        st = status()
        print(json.dumps(st, indent=2))
        return 0 if st["up"] else 1
    if args.cmd == "env":
        current = load_state()
        if current is None:
            log("no cluster running; start one with: python -m e2e.cluster up")
            return 1
        print("\n".join(env_lines(current)))
        return 0
    if args.cmd == "build":
        return build.main([])
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
