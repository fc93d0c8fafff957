"""Run the controller from the image's root filesystem, as a kubelet would run its container.

The archive ``make image`` writes is unpacked once (``e2e/oci.py``); each replica then runs the
image's own entrypoint and command, as its user (65532), in a mount namespace of its own
(``unshare``) where the root is the unpacked image mounted read-only, ``/tmp`` an emptyDir-like
tmpfs, ``/dev`` the few devices a runtime gives, and ``/var/run/secrets/kubernetes.io/
serviceaccount`` the ServiceAccount's token, CA and namespace, read-only: the controller finds
the API server in-cluster (``KUBERNETES_SERVICE_HOST``/``PORT``), as in a pod. It runs with no
capabilities (``chroot --userspec`` drops them with root) and no_new_privs (``setpriv``). The
network is the host's (the local cluster's API server and webhooks listen on 127.0.0.1), like
``hostNetwork``; there is no PID namespace.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from e2e.oci import ImageConfig, OciArchive, unpack

SERVICE_ACCOUNT_MOUNT = "run/secrets/kubernetes.io/serviceaccount"  # /var/run is /run in Debian
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
# Settings the replica gets from the harness; the rest of the host's environment stays outside.
_PASSED = ("POD_NAME", "PYTHONUNBUFFERED")

# Runs as root in the new mount namespace, then becomes the image's process (exec, same pid).
_LAUNCH = r"""
set -eu
root=$1 sa=$2 user=$3 sa_mount=$4 devices=$5
shift 5
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$root/tmp"
mount -t tmpfs -o mode=0755,size=1m,nosuid,nodev tmpfs "$root/run"
mkdir -p "$root/$sa_mount"
mount --bind "$sa" "$root/$sa_mount"
mount -o remount,bind,ro "$root/$sa_mount"
mount -t tmpfs -o mode=0755,size=1m,nosuid tmpfs "$root/dev"
for d in $devices; do
  touch "$root/dev/$d"
  mount --bind "/dev/$d" "$root/dev/$d"
done
ln -s /proc/self/fd "$root/dev/fd"
mount -o remount,bind,ro "$root"
exec setpriv --no-new-privs -- chroot --userspec="$user" --groups= "$root" "$@"
"""


def archive_digest(archive: Path) -> str:
    """A short name for the archive's image (its manifest), so a rebuilt image is unpacked anew."""
    with OciArchive(archive) as oci:
        blob = repr(oci.manifest()).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def unpacked_root(archive: Path, cache: Path) -> tuple[Path, ImageConfig]:
    """The archive's root filesystem under ``cache`` (unpacked on first use) and its config."""
    root = cache / archive_digest(archive)
    done = root.with_name(root.name + ".done")
    if not done.exists():
        for old in cache.glob("*") if cache.exists() else ():  # an image's root is ~400 MB: keep one
            if old.is_dir():
                shutil.rmtree(old)
            else:
                old.unlink()
        unpack(archive, root)
        done.touch()
    with OciArchive(archive) as oci:
        return root, oci.config()


def write_service_account(directory: Path, token: str, ca_cert: bytes, namespace: str) -> Path:
    """The files a pod's ServiceAccount volume holds (readable by the image's user, as the
    kubelet's projected volume's default mode 0644 makes them)."""
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o755)
    for name, data in (("token", token.encode()), ("ca.crt", ca_cert), ("namespace", namespace.encode())):
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o644)
    return directory


@dataclass(frozen=True)
class ImageRuntime:
    """How a replica runs from the image: its root, config, ServiceAccount and API server."""

    root: Path
    config: ImageConfig
    service_account: Path
    api_server: str  # https://host:port of the API server, as KUBERNETES_SERVICE_* name it

    def __post_init__(self) -> None:
        if self.config.working_dir not in ("", "/"):
            raise ValueError(f"image working directory {self.config.working_dir!r}: the runner starts in /")
        if not self.config.user:
            raise ValueError("the image names no user: it would run as root")

    def launch(self, settings: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) of one replica; ``settings`` is the harness's environment for a
        local process, of which the controller's settings and identity are kept (its kubeconfig
        is not: the replica uses the ServiceAccount, in-cluster)."""
        url = urlsplit(self.api_server)
        env = dict(self.config.env)
        env.update({k: v for k, v in settings.items() if (k.startswith("KUEUE_TAS_") and k != "KUEUE_TAS_KUBECONFIG")})
        env.update({k: settings[k] for k in _PASSED if k in settings})
        env.update(
            {
                "KUBERNETES_SERVICE_HOST": url.hostname or "",
                "KUBERNETES_SERVICE_PORT": str(url.port or 443),
            }
        )
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            _LAUNCH,
            "launch",
            str(self.root),
            str(self.service_account),
            self.config.user,
            SERVICE_ACCOUNT_MOUNT,
            " ".join(DEVICES),
            *self.config.argv,
        ]
        return argv, env


def process_status(pid: int) -> dict[str, str]:
    """The fields of ``/proc/<pid>/status`` (Uid, CapEff, NoNewPrivs, ...)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def root_mount_options(pid: int) -> set[str]:
    """The mount options of the process's root filesystem, as it sees it."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise LookupError(f"process {pid} has no root mount in its mountinfo")


def can_run_here() -> str | None:
    """Why replicas cannot run from the image on this machine, or None."""
    if os.geteuid() != 0:
        return "running the image's root filesystem needs root (mount namespace, chroot)"
    missing = [c for c in ("unshare", "setpriv", "chroot", "mount") if shutil.which(c) is None]
    return f"missing {', '.join(missing)}" if missing else None
