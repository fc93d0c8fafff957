"""Build the Go components of the e2e cluster from Go modules, once.

Each component gets a tiny wrapper module under ``$CACHE/src/<name>`` and its binaries go to
``$CACHE/bin``. A stamp file per component records what was built (versions, ldflags, Go version);
a component is rebuilt only when that changes. Wall time and peak memory of each build are
appended to ``$CACHE/build-stats.jsonl``.

A first build takes 10-25 minutes on a small machine; it reports as it goes which component
it is on (``[n/N]``), and every 30 s how long the current step has run and how many modules it
downloaded or packages it compiled (``e2e/build_progress.py``).

Usage: ``python -m e2e.build [component ...]`` (default: all).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from e2e import versions
from e2e.build_progress import BuildProgress, StepProgress, run_with_progress
from e2e.paths import bin_dir, cache_dir, src_dir

_K8S_VERSION_PKGS = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
_BUILD_TIMEOUT_S = 90 * 60
_GET_TIMEOUT_S = 30 * 60


@dataclass(frozen=True)
class Component:
    """One wrapper module and the binaries built from it."""

    name: str
    module: str  # module required by the wrapper
    version: str
    packages: tuple[str, ...]  # main packages; binary name = last path element unless renamed
    outputs: tuple[str, ...]  # binary names written to bin_dir(), same order as packages
    ldflags: str = "-s -w"
    replaces: dict[str, str] = field(default_factory=dict)
    godebug: str = ""

    def stamp_key(self, go_version: str) -> str:
        blob = json.dumps(
            [
                self.module,
                self.version,
                self.packages,
                self.outputs,
                self.ldflags,
                self.replaces,
                self.godebug,
                go_version,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def log(msg: str) -> None:
    print(f"[e2e.build] {msg}", file=sys.stderr, flush=True)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        CGO_ENABLED="0",
        GOWORK="off",
        GOTOOLCHAIN="local",
        GOFLAGS="-buildvcs=false -trimpath",
    )
    return env


def go_version() -> str:
    out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True, env=go_env())
    return out.stdout.strip()


def module_dir(module_at_version: str) -> Path:
    """Directory of a module in the module cache (downloads it if needed)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", module_at_version],
        capture_output=True,
        text=True,
        check=True,
        env=go_env(),
        cwd=cache_dir(),
        timeout=_GET_TIMEOUT_S,
    )
    return Path(json.loads(out.stdout)["Dir"])


def module_gomod(module_at_version: str) -> str:
    out = subprocess.run(
        ["go", "mod", "download", "-json", module_at_version],
        capture_output=True,
        text=True,
        check=True,
        env=go_env(),
        cwd=cache_dir(),
        timeout=_GET_TIMEOUT_S,
    )
    return Path(json.loads(out.stdout)["GoMod"]).read_text()


def kubernetes_component() -> Component:
    gomod = module_gomod(f"k8s.io/kubernetes@{versions.KUBERNETES}")
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod, re.M)))
    godebug = next((ln.strip() for ln in gomod.splitlines() if ln.startswith("godebug ")), "")
    major, minor = versions.KUBERNETES.removeprefix("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in _K8S_VERSION_PKGS:
        flags += [
            f"-X {pkg}.gitVersion={versions.KUBERNETES}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitCommit={'0' * 40}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={versions.BUILD_DATE}",
        ]
    # kubectl: the e2e tests apply manifests with it where what a user sees matters (webhook refusals).
    cmds = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    return Component(
        name="kubernetes",
        module="k8s.io/kubernetes",
        version=versions.KUBERNETES,
        packages=tuple(f"k8s.io/kubernetes/cmd/{c}" for c in cmds),
        outputs=cmds,
        ldflags=" ".join(flags),
        replaces={m: versions.KUBERNETES_STAGING for m in staging},
        godebug=godebug,
    )


def components() -> list[Component]:
    return [
        Component(
            name="etcd",
            module="go.etcd.io/etcd/server/v3",
            version=versions.ETCD,
            packages=("go.etcd.io/etcd/server/v3",),
            outputs=("etcd",),
            ldflags=f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA={versions.ETCD}",
        ),
        kubernetes_component(),
        Component(
            name="kwok",
            module="sigs.k8s.io/kwok",
            version=versions.KWOK,
            packages=("sigs.k8s.io/kwok/cmd/kwok",),
            outputs=("kwok",),
        ),
        Component(
            name="jobset",
            module="sigs.k8s.io/jobset",
            version=versions.JOBSET,
            packages=("sigs.k8s.io/jobset",),
            outputs=("jobset",),
            ldflags=f"-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion={versions.JOBSET}",
        ),
        Component(
            name="kueue",
            module="sigs.k8s.io/kueue",
            version=versions.KUEUE,
            packages=("sigs.k8s.io/kueue/cmd/kueue",),
            outputs=("kueue",),
            ldflags=f"-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={versions.KUEUE}",
        ),
        helm_component(),
        *kustomize_components(),
    ]


def helm_component() -> Component:
    """helm, with the version flags its own Makefile sets (``helm version``; the Kubernetes
    version ``helm template`` and ``helm lint`` assume without a cluster)."""
    flags = ["-s", "-w", f"-X helm.sh/helm/v3/internal/version.version={versions.HELM}"]
    for pkg in ("helm.sh/helm/v3/pkg/lint/rules", "helm.sh/helm/v3/pkg/chartutil"):
        flags += [f"-X {pkg}.k8sVersionMajor=1", f"-X {pkg}.k8sVersionMinor={versions.HELM_KUBERNETES_MINOR}"]
    return Component(
        name="helm",
        module="helm.sh/helm/v3",
        version=versions.HELM,
        packages=("helm.sh/helm/v3/cmd/helm",),
        outputs=("helm",),
        ldflags=" ".join(flags),
    )


def kustomize_components() -> list[Component]:
    """kustomize twice: the version kubectl 1.32 vendors (``kustomize-v5.5.0``: what ``kubectl
    apply -k`` of the oldest kubectl we support runs) and the newest (``kustomize``)."""
    out = []
    for name, version in (
        (f"kustomize-{versions.KUSTOMIZE_KUBECTL_1_32}", versions.KUSTOMIZE_KUBECTL_1_32),
        ("kustomize", versions.KUSTOMIZE),
    ):
        out.append(
            Component(
                name=name,
                module="sigs.k8s.io/kustomize/kustomize/v5",
                version=version,
                packages=("sigs.k8s.io/kustomize/kustomize/v5",),
                outputs=(name,),
                ldflags=f"-s -w -X sigs.k8s.io/kustomize/api/provenance.version={version}",
            )
        )
    return out


def _stamp_path(c: Component) -> Path:
    return bin_dir() / f".stamp-{c.name}"


def is_built(c: Component, gov: str) -> bool:
    stamp = _stamp_path(c)
    if not stamp.exists() or stamp.read_text().strip() != c.stamp_key(gov):
        return False
    return all((bin_dir() / o).is_file() for o in c.outputs)


def _write_wrapper(c: Component, wdir: Path) -> None:
    wdir.mkdir(parents=True, exist_ok=True)
    lines = [f"module e2e.local/{c.name}", "", "go 1.26.0"]
    if c.godebug:
        lines += ["", c.godebug]
    lines += ["", f"require {c.module} {c.version}"]
    if c.replaces:
        lines += ["", "replace ("]
        lines += [f"\t{m} => {m} {v}" for m, v in sorted(c.replaces.items())]
        lines += [")"]
    gomod = "\n".join(lines) + "\n"
    path = wdir / "go.mod"
    if not path.exists() or path.read_text() != gomod:
        path.write_text(gomod)
        # Seed go.sum with the hashes the component's own maintainers recorded. Needed: e.g. Kueue
        # v0.19.2 depends on sigs.k8s.io/scheduler-library v0.1.0-alpha1, which the public
        # checksum database does not know (lookup 404), while Kueue's go.sum pins its hash.
        upstream_sum = module_dir(f"{c.module}@{c.version}") / "go.sum"
        sum_path = wdir / "go.sum"
        if upstream_sum.exists():
            sum_path.write_text(upstream_sum.read_text())
        else:
            sum_path.unlink(missing_ok=True)


class _MemSampler:
    """Samples system-wide used memory (MemTotal - MemAvailable) while a build runs."""

    def __init__(self, period_s: float = 1.0) -> None:
        self.period_s = period_s
        self.peak_used_kib = 0
        self.base_used_kib = self._used()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _used() -> int:
        info: dict[str, int] = {}
        with open("/proc/meminfo") as f:
            for line in f:
                k, v = line.split(":", 1)
                info[k] = int(v.split()[0])
        return info["MemTotal"] - info["MemAvailable"]

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.peak_used_kib = max(self.peak_used_kib, self._used())

    def __enter__(self) -> _MemSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _run_timed(cmd: Sequence[str], cwd: Path, logf: Path, timeout: float, step: StepProgress) -> int:
    """Run cmd, appending output to logf and reporting progress; return peak RSS (KiB) of the
    largest child, or 0."""
    timev = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists() else None)
    rss_file = logf.with_suffix(".rss")
    full = [timev, "-f", "%M", "-o", str(rss_file), *cmd] if timev else list(cmd)
    run_with_progress(full, cwd=cwd, env=go_env(), log=logf, timeout=timeout, step=step, shown=cmd)
    if not timev:
        # Largest RSS among all children waited for so far (KiB on Linux): an upper bound.
        return int(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    try:
        return int(rss_file.read_text().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return 0


def build(c: Component, gov: str, progress: BuildProgress, label: str, jobs: int = 2) -> dict[str, object]:
    wdir = src_dir() / c.name
    logf = cache_dir() / "build-logs" / f"{c.name}.log"
    logf.parent.mkdir(parents=True, exist_ok=True)
    logf.write_text("")
    t0 = time.monotonic()
    log(f"{label}: building (full output: {logf})")
    _write_wrapper(c, wdir)
    with _MemSampler() as mem:
        get_cmd = ["go", "get", "-tool", *[f"{p}@{c.version}" for p in c.packages]]
        step = progress.step(label, "resolving and downloading modules")
        rss_get = _run_timed(get_cmd, wdir, logf, _GET_TIMEOUT_S, step)
        t_get = time.monotonic() - t0
        out_dir = wdir / "bin"
        out_dir.mkdir(exist_ok=True)
        target = str(out_dir) + "/" if len(c.packages) > 1 else str(out_dir / c.outputs[0])
        # -v: go names each package as it compiles it, which is what the progress lines count.
        build_cmd = ["go", "build", "-v", "-p", str(jobs), "-ldflags", c.ldflags, "-o", target, *c.packages]
        step = progress.step(label, f"compiling {', '.join(c.outputs)}", f"modules ready after {t_get:.0f}s")
        rss_build = _run_timed(build_cmd, wdir, logf, _BUILD_TIMEOUT_S, step)
    elapsed = time.monotonic() - t0
    bin_dir().mkdir(parents=True, exist_ok=True)
    for pkg, name in zip(c.packages, c.outputs, strict=True):
        produced = out_dir / (pkg.rsplit("/", 1)[-1] if len(c.packages) > 1 else name)
        produced.replace(bin_dir() / name)  # same filesystem: atomic, no second copy
    _stamp_path(c).write_text(c.stamp_key(gov) + "\n")
    stats: dict[str, object] = {
        "component": c.name,
        "version": c.version,
        "go": gov,
        "seconds_total": round(elapsed, 1),
        "seconds_modules": round(t_get, 1),
        "peak_rss_largest_process_mib": round(max(rss_get, rss_build) / 1024),
        "peak_system_used_mib": round(mem.peak_used_kib / 1024),
        "system_used_before_mib": round(mem.base_used_kib / 1024),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with (cache_dir() / "build-stats.jsonl").open("a") as f:
        f.write(json.dumps(stats) + "\n")
    progress.say(label, f"built in {elapsed:.0f}s (peak RSS {stats['peak_rss_largest_process_mib']} MiB)")
    return stats


def ensure_built(only: Sequence[str] = ()) -> None:
    """Build every component whose stamp is missing or stale. Raises on build failure."""
    if shutil.which("go") is None:
        raise RuntimeError("the Go toolchain (go >= 1.26) is required on PATH to build the e2e cluster")
    cache_dir().mkdir(parents=True, exist_ok=True)
    gov = go_version()
    t0 = time.monotonic()
    log("checking the pinned components (a first run downloads k8s.io/kubernetes's module first: a few minutes)")
    chosen = [c for c in components() if not only or c.name in only]
    progress = BuildProgress(len(chosen), log)
    for c in chosen:
        label = progress.next_component(c.name, c.version)
        if is_built(c, gov):
            log(f"{label}: up to date")
            continue
        try:
            build(c, gov, progress, label)
        except subprocess.CalledProcessError as e:
            logf = cache_dir() / "build-logs" / f"{c.name}.log"
            tail = "\n".join(logf.read_text().splitlines()[-30:]) if logf.exists() else ""
            raise RuntimeError(f"building {c.name} failed (exit {e.returncode}); last log lines:\n{tail}") from e
        log(f"total elapsed {time.monotonic() - t0:.0f}s")
    progress.finished()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        ensure_built(args)
    except RuntimeError as e:
        log(str(e))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
