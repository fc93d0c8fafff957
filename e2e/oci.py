"""Read an OCI image archive (``oci-archive``, as ``make image`` writes it) and unpack its
root filesystem, the way a container runtime lays its layers out.

Layers apply in order: an entry ``.wh.<name>`` deletes ``<name>`` of the lower layers, a
``.wh..wh..opq`` entry empties its directory of what the lower layers put there (the OCI image
layout's whiteouts). Device nodes are left out: the runner gives the root its own ``/dev``.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


class OciError(ValueError):
    """The archive is not an image this module can read."""


@dataclass(frozen=True)
class ImageConfig:
    """What the image tells a runtime to run, and its labels."""

    entrypoint: list[str]
    cmd: list[str]
    env: dict[str, str]
    user: str
    working_dir: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return [*self.entrypoint, *self.cmd]

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ImageConfig:
        c = doc.get("config") or {}
        env = dict(item.split("=", 1) for item in c.get("Env") or [])
        return cls(
            entrypoint=list(c.get("Entrypoint") or []),
            cmd=list(c.get("Cmd") or []),
            env=env,
            user=str(c.get("User") or ""),
            working_dir=str(c.get("WorkingDir") or ""),
            labels=dict(c.get("Labels") or {}),
        )


class OciArchive:
    """An ``oci-archive``: a tar of an OCI image layout holding one image."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tar = tarfile.open(path)  # noqa: SIM115  (closed by __exit__)

    def __enter__(self) -> OciArchive:
        return self

    def __exit__(self, *_: object) -> None:
        self._tar.close()

    def _json(self, name: str) -> dict[str, Any]:
        doc = json.load(self._open(name))
        if not isinstance(doc, dict):
            raise OciError(f"{self.path}: {name} is no JSON object")
        return doc

    def _open(self, name: str) -> IO[bytes]:
        try:
            f = self._tar.extractfile(name)
        except KeyError:
            f = None
        if f is None:
            raise OciError(f"{self.path}: no {name} in the archive (not an OCI image layout?)")
        return f

    def _blob(self, digest: str) -> str:
        algorithm, _, hexdigest = digest.partition(":")
        return f"blobs/{algorithm}/{hexdigest}"

    def manifest(self) -> dict[str, Any]:
        manifests = self._json("index.json").get("manifests") or []
        if len(manifests) != 1:
            raise OciError(f"{self.path}: index.json lists {len(manifests)} manifests, expected 1")
        return self._json(self._blob(manifests[0]["digest"]))

    def ref_name(self) -> str:
        """The name the archive's index gives the image (``kueue-tas:<tag>``)."""
        (entry,) = self._json("index.json")["manifests"]
        return str((entry.get("annotations") or {}).get("org.opencontainers.image.ref.name", ""))

    def config(self) -> ImageConfig:
        return ImageConfig.from_json(self._json(self._blob(self.manifest()["config"]["digest"])))

    def layers(self) -> Iterator[tarfile.TarFile]:
        for layer in self.manifest()["layers"]:
            raw = self._open(self._blob(layer["digest"]))
            compressed = layer["mediaType"].endswith("+gzip")
            with tarfile.open(fileobj=raw, mode="r|gz" if compressed else "r|") as tar:
                yield tar

    def unpacked_size(self) -> int:
        """Bytes of the image's files, summed over its layers (what ``unpack`` writes, about)."""
        return sum(m.size for tar in self.layers() for m in tar if m.isfile())


def _inside(root: Path, name: str) -> Path:
    """``name`` (a layer entry) under ``root``, refusing one that would land outside it."""
    rel = posixpath.normpath(name.lstrip("/"))
    target = root / rel
    parent = os.path.realpath(target.parent)
    escapes = rel in ("", ".", "..") or rel.startswith("../")
    if escapes or not (parent == str(root) or parent.startswith(str(root) + os.sep)):
        raise OciError(f"layer entry {name!r} lands outside the root filesystem")
    return target


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def apply_layer(members: Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]], root: Path) -> None:
    """Apply one layer's entries (in archive order, each with its content) onto ``root``."""
    root = Path(os.path.realpath(root))
    written: set[Path] = set()  # this layer's own entries, which its opaque markers keep
    for info, content in members:
        base = posixpath.basename(posixpath.normpath(info.name))
        if base == OPAQUE:
            directory = _inside(root, posixpath.dirname(posixpath.normpath(info.name)) + "/x").parent
            if directory.is_dir() and not directory.is_symlink():
                _clear_lower(directory, written)
            continue
        target = _inside(root, info.name)
        written.add(target)
        if base.startswith(WHITEOUT):
            _remove(target.with_name(base[len(WHITEOUT) :]))
            continue
        if info.ischr() or info.isblk() or info.isfifo():
            continue
        if not info.isdir() and (target.exists() or target.is_symlink()):
            _remove(target)
        _extract(info, content, root, target)


def _clear_lower(directory: Path, written: set[Path]) -> None:
    """Remove what the lower layers put under ``directory``, keeping this layer's entries."""
    for child in directory.iterdir():
        keeps_some = any(w == child or child in w.parents for w in written)
        if not keeps_some:
            _remove(child)
        elif child.is_dir() and not child.is_symlink():
            _clear_lower(child, written)


def _extract(info: tarfile.TarInfo, content: IO[bytes] | None, root: Path, target: Path) -> None:
    if info.isdir():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            _remove(target)
        target.mkdir(parents=True, exist_ok=True)
    elif info.issym():
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(info.linkname, target)
    elif info.islnk():
        os.link(_inside(root, info.linkname), target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            if content is not None:
                shutil.copyfileobj(content, out)
    if os.geteuid() == 0:
        os.lchown(target, info.uid, info.gid)
    if not info.issym():
        os.chmod(target, info.mode)
        os.utime(target, (info.mtime, info.mtime))


def _entries(tar: tarfile.TarFile) -> Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]:
    for info in tar:
        yield info, tar.extractfile(info) if info.isfile() else None


def unpack(archive: Path, root: Path) -> ImageConfig:
    """Unpack the image of ``archive`` into ``root`` (created, must be empty); its config."""
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise OciError(f"{root} is not empty")
    with OciArchive(archive) as oci:
        for tar in oci.layers():
            apply_layer(_entries(tar), root)
        return oci.config()
