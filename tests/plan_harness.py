"""``kueue-tas plan`` run in-process on objects dumped under ``tmp_path``: its exit code, output and
one-line errors (``Result``), and readers of a placed PodSet's hosts, racks and blocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import builders as mk
import pytest

from kueue_tas.cli.main import main


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code = code
        self.out = out
        self.err = err

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data

    @property
    def workloads(self) -> list[dict[str, Any]]:
        wls: list[dict[str, Any]] = self.json["workloads"]
        return wls

    def wl(self, name: str) -> dict[str, Any]:
        matches = [w for w in self.workloads if w["name"] == name]
        assert len(matches) == 1, f"{name}: {len(matches)} entries in {self.workloads}"
        return matches[0]

    def ps(self, name: str, podset: str = "main") -> dict[str, Any]:
        matches: list[dict[str, Any]] = [p for p in self.wl(name)["podSets"] if p["name"] == podset]
        assert len(matches) == 1, self.wl(name)
        return matches[0]

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()
    code = main(["plan", *argv])
    cap = capsys.readouterr()
    return Result(code, cap.out, cap.err)


def plan(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    objects: list[dict[str, Any]],
    *args: str,
    output: str = "json",
) -> Result:
    path = mk.write_yaml(tmp_path / f"input-{len(list(tmp_path.iterdir()))}.yaml", objects)
    return run(capsys, "-f", path, "-o", output, *args)


def hosts(ps: dict[str, Any]) -> dict[str, int]:
    """hostname -> pod count of a placed PodSet (the default assignment is at hostname level)."""
    assert ps["levels"] == [mk.HOST], ps
    return {d["values"][0]: d["count"] for d in ps["domains"]}


def racks(ps: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for host, n in hosts(ps).items():
        rack = host.rsplit("-", 1)[0]
        out[rack] = out.get(rack, 0) + n
    return out


def blocks(ps: dict[str, Any]) -> set[str]:
    return {host.split("-", 1)[0] for host in hosts(ps)}


def assert_invalid(res: Result, *fragments: str) -> None:
    assert res.code == 1, (res.out, res.err)
    assert res.out == ""
    assert len(res.err_lines) == 1, res.err
    line = res.err_lines[0]
    for fragment in fragments:
        assert fragment in line, f"{fragment!r} not in {line!r}"
