"""The image machinery without a cluster or buildah: tags, build commands, the Dockerfile's
promises, OCI archives unpacked with their whiteouts, and how a replica is launched."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from e2e import image
from e2e.image_controller import ImageRuntime
from e2e.oci import ImageConfig, OciArchive, OciError, apply_layer, unpack

DOCKERFILE = (image.REPO_ROOT / "Dockerfile").read_text()
OCI_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


@pytest.mark.parametrize(
    ("version", "tag"),
    [
        ("0.2.0", "0.2.0"),
        ("0.2.1.dev3+g1a2b3c4", "0.2.1.dev3-g1a2b3c4"),
        ("0.1.1.dev273+g22df5bf31.d20261127", "0.1.1.dev273-g22df5bf31.d20261127"),
    ],
)
def test_a_version_becomes_a_valid_oci_tag(version: str, tag: str) -> None:
    assert image.image_tag(version) == tag and OCI_TAG.fullmatch(tag)
    assert image.archive_path(version, Path("/b")) == Path(f"/b/kueue-tas-{tag}.oci.tar")


def test_no_version_no_tag() -> None:
    with pytest.raises(ValueError, match="gives no image tag"):
        image.image_tag("+")


def test_the_build_passes_base_version_and_the_ca_as_a_secret() -> None:
    req = image.BuildRequest(version="0.2.0", revision="abc", base_image="localhost/base:x", ca_bundle=Path("/ca.pem"))
    cmd = req.bud_command()
    assert cmd[:2] == ["buildah", "bud"] and cmd[-1] == str(image.REPO_ROOT)
    pairs = set(itertools.pairwise(cmd))
    assert {
        ("--isolation", "chroot"),
        ("--build-arg", "BASE_IMAGE=localhost/base:x"),
        ("--build-arg", "VERSION=0.2.0"),
        ("--build-arg", "REVISION=abc"),
        ("--secret", "id=pip-ca,src=/ca.pem"),
        ("--tag", "localhost/kueue-tas:0.2.0"),
    } <= pairs
    assert "--secret" not in image.BuildRequest(version="0.2.0", revision="abc", ca_bundle=None).bud_command()
    assert req.push_command(Path("/b/x.oci.tar"))[-1] == "oci-archive:/b/x.oci.tar:kueue-tas:0.2.0"


def test_the_base_is_debian_minbase_with_merged_usr_and_slim_excludes() -> None:
    cmd = image.mmdebstrap_command(Path("/out.tar"))
    assert "--variant=minbase" in cmd and f"--hook-dir={image.MERGED_USR_HOOK}" in cmd
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in cmd
    assert cmd[cmd.index("/out.tar") - 1] == "bookworm"
    assert cmd[-len(image.MIRRORS) :] == list(image.MIRRORS)


def test_the_dockerfile_keeps_its_promises() -> None:
    # `docker build .` works with no arguments: the base defaults to Debian's slim bookworm.
    assert re.search(r"^ARG BASE_IMAGE=debian:bookworm-slim$", DOCKERFILE, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS python$", DOCKERFILE, re.M)
    final = DOCKERFILE[DOCKERFILE.rindex("\nFROM ") :]
    assert final.startswith("\nFROM python\n")  # Debian's python3 only, no python3-venv or pip
    assert re.search(r"^USER 65532:65532$", final, re.M)
    assert "COPY --from=builder /opt/kueue-tas /opt/kueue-tas" in final
    assert "apt-get" not in final and "pip" not in final.replace("PIP_", "")
    # Locked installs only, and the CA only as a build secret: never an ARG, ENV or COPY.
    assert "--require-hashes" in DOCKERFILE and "--only-binary=:all:" in DOCKERFILE
    assert "--mount=type=secret,id=pip-ca" in DOCKERFILE
    for line in DOCKERFILE.splitlines():
        if re.match(r"(ARG|ENV|COPY|ADD)\b", line):
            assert "cert" not in line.lower() and "ca-certificates" not in line, line


# ---- OCI archives --------------------------------------------------------------------------------


def _tar(entries: list[tuple[str, str, bytes | str]]) -> bytes:
    """A layer: (name, kind, content or link target); kinds file, dir, sym, lnk, chr."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.mode = 0o755 if kind == "dir" else 0o644
            info.uid = info.gid = 65532
            if kind == "file":
                assert isinstance(data, bytes)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {
                "dir": tarfile.DIRTYPE,
                "sym": tarfile.SYMTYPE,
                "lnk": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
            }[kind]
            if kind in ("sym", "lnk"):
                assert isinstance(data, str)
                info.linkname = data
            tar.addfile(info)
    return buf.getvalue()


def _archive(path: Path, layers: list[bytes], config: dict[str, Any]) -> Path:
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> str:
        import hashlib

        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return digest

    config_digest = blob(json.dumps(config).encode())
    manifest = {
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob(x)} for x in layers],
    }
    index = {
        "schemaVersion": 2,
        "manifests": [{"digest": blob(json.dumps(manifest).encode()), "annotations": {}}],
    }
    with tarfile.open(path, "w") as tar:
        for name, data in [("index.json", json.dumps(index).encode())] + [
            (f"blobs/sha256/{d.split(':')[1]}", b) for d, b in blobs.items()
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


CONFIG: dict[str, Any] = {
    "config": {
        "User": "65532:65532",
        "Entrypoint": ["kueue-tas"],
        "Cmd": ["run"],
        "Env": ["PATH=/opt/kueue-tas/bin:/usr/bin", "A=b=c"],
        "Labels": {"org.opencontainers.image.version": "0.2.0"},
    }
}


def test_layers_apply_in_order_with_their_whiteouts(tmp_path: Path) -> None:
    lower = _tar(
        [
            ("a", "dir", b""),
            ("a/keep", "file", b"1"),
            ("a/gone", "file", b"2"),
            ("b", "dir", b""),
            ("b/old", "file", b"3"),
            ("b/sub", "dir", b""),
            ("b/sub/deep", "file", b"4"),
            ("dev", "dir", b""),
            ("dev/null", "chr", b""),
            ("link", "sym", "a/keep"),
        ]
    )
    upper = _tar(
        [
            ("a/.wh.gone", "file", b""),
            ("b/new", "file", b"5"),  # before the opaque marker in the layer: still kept
            ("b/.wh..wh..opq", "file", b""),
            ("c", "dir", b""),
            ("c/hard", "lnk", "a/keep"),
            ("link", "file", b"replaced"),
        ]
    )
    archive = _archive(tmp_path / "img.oci.tar", [lower, upper], CONFIG)
    root = tmp_path / "root"
    config = unpack(archive, root)

    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert files == ["a", "a/keep", "b", "b/new", "c", "c/hard", "dev", "link"]
    assert (root / "c/hard").read_bytes() == b"1" and (root / "c/hard").stat().st_ino == (root / "a/keep").stat().st_ino
    assert not (root / "link").is_symlink() and (root / "link").read_bytes() == b"replaced"
    if os.geteuid() == 0:
        assert (root / "a/keep").stat().st_uid == 65532
    assert config.argv == ["kueue-tas", "run"] and config.user == "65532:65532"
    assert config.env == {"PATH": "/opt/kueue-tas/bin:/usr/bin", "A": "b=c"}
    with OciArchive(archive) as oci:
        assert oci.config().labels == {"org.opencontainers.image.version": "0.2.0"}
        assert oci.unpacked_size() == len(b"1234") + len(b"5replaced")


@pytest.mark.parametrize(
    "entries",
    [
        [("../evil", "file", b"x")],
        [("out", "sym", "/"), ("out/etc-evil", "file", b"x")],  # through an absolute symlink
        [("up", "sym", "../.."), ("up/evil", "file", b"x")],
    ],
)
def test_an_entry_outside_the_root_is_refused(tmp_path: Path, entries: list[tuple[str, str, bytes | str]]) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with tarfile.open(fileobj=io.BytesIO(_tar(entries)), mode="r:gz") as tar:
        members = ((m, tar.extractfile(m) if m.isfile() else None) for m in tar.getmembers())
        with pytest.raises(OciError, match="outside the root filesystem"):
            apply_layer(members, root)
    assert not (tmp_path / "evil").exists() and not Path("/etc-evil").exists()


def test_an_archive_of_two_images_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w") as tar:
        data = json.dumps({"manifests": [{"digest": "sha256:a"}, {"digest": "sha256:b"}]}).encode()
        info = tarfile.TarInfo("index.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with OciArchive(path) as oci, pytest.raises(OciError, match="lists 2 manifests"):
        oci.manifest()


# ---- launching a replica -------------------------------------------------------------------------


def test_a_replica_runs_the_image_entrypoint_in_cluster_without_the_host_environment() -> None:
    config = ImageConfig.from_json(CONFIG)
    runtime = ImageRuntime(Path("/r"), config, Path("/sa"), "https://127.0.0.1:6443")
    argv, env = runtime.launch(
        {
            "KUEUE_TAS_KUBECONFIG": "/host/kubeconfig",
            "KUEUE_TAS_LEASE_NAME": "l",
            "POD_NAME": "p-0",
            "HOME": "/root",
            "PYTHONPATH": "/work",
        }
    )
    assert argv[0] == "unshare" and argv[-2:] == ["kueue-tas", "run"]
    assert argv[argv.index("launch") + 1 : argv.index("launch") + 4] == ["/r", "/sa", "65532:65532"]
    assert env == {
        "PATH": "/opt/kueue-tas/bin:/usr/bin",
        "A": "b=c",
        "KUEUE_TAS_LEASE_NAME": "l",
        "POD_NAME": "p-0",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "6443",
    }


def test_an_image_without_a_user_is_not_run() -> None:
    config = ImageConfig.from_json({"config": {"Entrypoint": ["x"]}})
    with pytest.raises(ValueError, match="would run as root"):
        ImageRuntime(Path("/r"), config, Path("/sa"), "https://127.0.0.1:6443")


# ---- a fresh machine -----------------------------------------------------------------------------


def test_missing_tools_are_installed_with_apt_get_as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(
        "e2e.image.shutil.which", lambda cmd: None if cmd in ("buildah", "mmdebstrap") else f"/bin/{cmd}"
    )
    monkeypatch.setattr("e2e.image.os.geteuid", lambda: 0)
    monkeypatch.setattr(image, "_run", lambda cmd, **_: ran.append(list(cmd)))
    assert image.cannot_build_here() is None
    image.ensure_tools()
    assert ran[0][:2] == ["apt-get", "update"]
    assert ran[1][:2] == ["apt-get", "install"] and ran[1][-2:] == ["buildah", "mmdebstrap"]


def test_without_root_the_build_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("e2e.image.shutil.which", lambda cmd: None if cmd == "buildah" else f"/bin/{cmd}")
    monkeypatch.setattr("e2e.image.os.geteuid", lambda: 1000)
    assert image.cannot_build_here() == "buildah missing, and installing them needs root and apt-get"
    with pytest.raises(SystemExit, match="apt-get install buildah"):
        image.ensure_tools()
