"""Build the controller image from the Dockerfile, on this machine, into an OCI archive.

``make image`` runs ``python -m e2e.image``. No container registry is reachable here, so the
base (``debian:bookworm-slim``'s equivalent) is made from Debian's packages with mmdebstrap
(minbase, slim's dpkg excludes), committed into buildah's store once and cached as a tarball
under ``<cache>/image``; the Dockerfile gets it through ``BASE_IMAGE``. buildah builds with
``--isolation chroot`` (no runtime, no daemon) and writes ``build/kueue-tas-<version>.oci.tar``.
The version is setuptools-scm's (the git tag), passed in as ``VERSION``: the build context
has no ``.git``. pip in the build gets the machine's CA bundle as a secret, never as a layer.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.paths import cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
SUITE = "bookworm"  # Debian's python3 there is 3.11, the version the locks are made for
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
# What debian:*-slim leaves out (debuerreotype's slimify), kept in the base's dpkg configuration
# so that the packages the Dockerfile installs leave them out too.
SLIM_DPKG_OPTIONS = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-include=/usr/share/locale/locale.alias",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/lintian/*",
)
MERGED_USR_HOOK = Path("/usr/share/mmdebstrap/hooks/maybe-merged-usr")
BASE_IMAGE = f"localhost/kueue-tas-base:{SUITE}"
IMAGE_REPOSITORY = "localhost/kueue-tas"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}  # command -> Debian package
# An OCI tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
_NOT_IN_TAG = re.compile(r"[^A-Za-z0-9_.-]")


def image_cache_dir() -> Path:
    return cache_dir() / "image"


def base_tarball() -> Path:
    return image_cache_dir() / f"debian-{SUITE}-minbase.tar"


def image_tag(version: str) -> str:
    """The OCI tag of a PEP 440 version: a local part's ``+`` (not allowed in tags) becomes ``-``,
    as Helm and most registries spell such builds (0.2.1.dev3+g1a2b3c4 -> 0.2.1.dev3-g1a2b3c4)."""
    tag = _NOT_IN_TAG.sub("-", version).lstrip(".-")
    if not tag:
        raise ValueError(f"version {version!r} gives no image tag")
    return tag[:128]


def archive_path(version: str, build_dir: Path = BUILD_DIR) -> Path:
    return build_dir / f"kueue-tas-{image_tag(version)}.oci.tar"


def project_version(root: Path = REPO_ROOT) -> str:
    """setuptools-scm's version of the checkout (the git tag, or its fallback without git)."""
    out = subprocess.run(
        [sys.executable, "-m", "setuptools_scm", "--root", str(root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    return out.stdout.strip().splitlines()[-1]


def git_revision(root: Path = REPO_ROOT) -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=root, check=False)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def mmdebstrap_command(out: Path, hook_dir: Path = MERGED_USR_HOOK) -> list[str]:
    """The base: Debian's minbase (essential packages and apt), as debian:bookworm-slim is."""
    return [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=tar",
        f"--hook-dir={hook_dir}",
        *(f"--dpkgopt={opt}" for opt in SLIM_DPKG_OPTIONS),
        SUITE,
        str(out),
        *MIRRORS,
    ]


@dataclass(frozen=True)
class BuildRequest:
    version: str
    revision: str
    base_image: str = BASE_IMAGE
    ca_bundle: Path | None = CA_BUNDLE
    context: Path = REPO_ROOT

    @property
    def image(self) -> str:
        return f"{IMAGE_REPOSITORY}:{image_tag(self.version)}"

    def bud_command(self) -> list[str]:
        cmd = [
            "buildah",
            "bud",
            "--isolation",
            "chroot",
            "--layers",  # a warm build reuses the dependency layers while the locks are unchanged
            "--pull=never",
            "--format",
            "oci",
            "--build-arg",
            f"BASE_IMAGE={self.base_image}",
            "--build-arg",
            f"VERSION={self.version}",
            "--build-arg",
            f"REVISION={self.revision}",
            "--tag",
            self.image,
            "--file",
            str(self.context / "Dockerfile"),
        ]
        if self.ca_bundle is not None:
            cmd += ["--secret", f"id=pip-ca,src={self.ca_bundle}"]
        return [*cmd, str(self.context)]

    def push_command(self, archive: Path) -> list[str]:
        """Write the image as an OCI archive whose index names it ``kueue-tas:<tag>``."""
        return ["buildah", "push", self.image, f"oci-archive:{archive}:kueue-tas:{image_tag(self.version)}"]


def _say(message: str) -> None:
    print(f"[e2e.image] {message}", flush=True)


def _run(cmd: Sequence[str], **kwargs: object) -> None:
    subprocess.run(list(cmd), check=True, **kwargs)  # type: ignore[call-overload]


def cannot_build_here() -> str | None:
    """Why ``build`` cannot run on this machine (its tools missing and not installable), or None."""
    missing = sorted({pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None})
    if missing and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        return f"{', '.join(missing)} missing, and installing them needs root and apt-get"
    return None


def ensure_tools() -> None:
    """Install buildah and mmdebstrap with apt-get when missing (a fresh machine)."""
    missing = sorted({pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None})
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"e2e.image: {', '.join(missing)} missing; install them (apt-get install {' '.join(missing)})")
    _say(f"installing {', '.join(missing)} with apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    _run(["apt-get", "update", "-q"], env=env)
    _run(["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=600", *missing], env=env)


def _image_exists(name: str) -> bool:
    return (
        subprocess.run(["buildah", "inspect", "--type", "image", name], capture_output=True, check=False).returncode
        == 0
    )


def ensure_base(rebuild: bool = False) -> str:
    """The base image in buildah's store: from the cached tarball, made first if missing."""
    tarball = base_tarball()
    if rebuild or not tarball.exists():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        started = time.monotonic()
        _say(f"making the base from Debian {SUITE} packages (mmdebstrap, ~2 min) -> {tarball}")
        _run(mmdebstrap_command(partial))
        partial.replace(tarball)
        _say(f"base made in {time.monotonic() - started:.0f}s")
    if rebuild or not _image_exists(BASE_IMAGE):
        container = subprocess.run(
            ["buildah", "from", "scratch"], capture_output=True, text=True, check=True
        ).stdout.strip()
        try:
            _run(["buildah", "add", container, str(tarball), "/"], stdout=subprocess.DEVNULL)
            _run(
                [
                    "buildah",
                    "config",
                    "--env",
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "--cmd",
                    "bash",
                    container,
                ]
            )
            _run(["buildah", "commit", "--quiet", container, BASE_IMAGE], stdout=subprocess.DEVNULL)
        finally:
            subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
        _say(f"base committed as {BASE_IMAGE}")
    return BASE_IMAGE


def build(version: str | None = None, rebuild_base: bool = False, build_dir: Path = BUILD_DIR) -> Path:
    """Build the image and write its OCI archive; returns the archive's path."""
    started = time.monotonic()
    ensure_tools()
    base = ensure_base(rebuild_base)
    request = BuildRequest(
        version=version or project_version(),
        revision=git_revision(),
        base_image=base,
        ca_bundle=CA_BUNDLE if CA_BUNDLE.exists() else None,
    )
    _say(f"building {request.image} (buildah, --isolation chroot)")
    _run(request.bud_command())
    archive = archive_path(request.version, build_dir)
    archive.parent.mkdir(parents=True, exist_ok=True)
    archive.unlink(missing_ok=True)  # buildah push adds to an existing archive instead
    _run(request.push_command(archive))
    size = archive.stat().st_size / 2**20
    _say(f"wrote {archive} ({size:.1f} MiB) in {time.monotonic() - started:.0f}s")
    _prune(request.image, archive)
    return archive


def _prune(current_image: str, current_archive: Path) -> None:
    """Drop the images and archives of earlier versions (~90 MiB each; the layer cache stays)."""
    for old in current_archive.parent.glob("kueue-tas-*.oci.tar"):
        if old != current_archive:
            old.unlink()
    listed = subprocess.run(
        ["buildah", "images", "--format", "{{.Name}}:{{.Tag}}"], capture_output=True, text=True, check=False
    )
    stale = [n for n in listed.stdout.split() if n.startswith(f"{IMAGE_REPOSITORY}:") and n != current_image]
    if stale:
        subprocess.run(["buildah", "rmi", *stale], capture_output=True, check=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.image", description=__doc__.split("\n")[0])
    parser.add_argument("--version", help="the image's version (default: setuptools-scm's, from the git tag)")
    parser.add_argument("--rebuild-base", action="store_true", help="make the Debian base again")
    parser.add_argument("--print-archive", action="store_true", help="print where the archive goes and exit")
    args = parser.parse_args(argv)
    if args.print_archive:
        print(archive_path(args.version or project_version()))
        return 0
    print(build(args.version, args.rebuild_base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
