"""Deterministic simulation testing of ``kueue-tas run`` (issue 27): the smoke that runs in
``make test``, the replay guarantee, and the regression seeds of the defects it found.

``make dst RUNS=N SEED=S [PROFILE=P]`` runs a campaign; ``dst_sim`` says how a run works."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import dst_sim
import pytest
from dst_world import CHECK, RACK, WORKLOADS

HERE = Path(__file__).resolve().parent
SEEDS = tomllib.loads((HERE / "seeds.toml").read_text())

# The defects of seeds.toml whose fix is merged: their seeds must now run clean. The lead adds a
# defect here ("defect-2", ...) when its fix lands; on the unfixed code each of them fails.
# DST_FIXED=defect-1,defect-5 (or "all") adds to it for one run.
FIXED: list[str] = [f"defect-{n}" for n in range(1, 10)] + [
    "defect-stale-copies",
    "defect-handover-fence",
    "defect-relevelled-open-slots",
    "defect-held-reminder",
    "defect-unknown-repair-write",
    "defect-recreated-under-name",
    "defect-serial-repair-writes",
    "defect-stray-waits-for-repair",
]  # all fixes merged
_ASKED = os.environ.get("DST_FIXED", "")
ENABLED = set(SEEDS) if _ASKED == "all" else set(FIXED) | {d for d in _ASKED.split(",") if d}

SMOKE_SCHEDULES = 300


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """No log lines from the controller while it runs thousands of steps; the stdlib's global
    switch is turned back on for the tests after (conftest resets structlog)."""
    dst_sim.quiet_logs()
    yield
    logging.disable(logging.NOTSET)


def test_smoke_schedules_keep_every_invariant() -> None:
    """Three hundred short schedules with write, watch and node faults: no invariant broken."""
    admitting = 0
    for seed in range(1, SMOKE_SCHEDULES + 1):
        result = dst_sim.simulate(seed, dst_sim.SMOKE)
        assert result.violation is None, (seed, result.violation, result.history[-15:])
        admitting += any("admitted" in line for line in result.history)
    # The schedules exercise the controller: most of them see Kueue admit on our Ready entry.
    assert admitting >= 0.8 * SMOKE_SCHEDULES, f"only {admitting} of {SMOKE_SCHEDULES} schedules admitted anything"


def test_a_seed_replays_exactly() -> None:
    first = dst_sim.simulate(7, "base")
    second = dst_sim.simulate(7, "base")
    assert len(first.history) > 50
    assert first.history == second.history
    assert first.digest == second.digest
    assert dst_sim.simulate(8, "base").digest != first.digest


def test_the_monitor_sees_a_ready_entry_on_an_evicted_workload() -> None:
    """The monitor itself: a Ready entry put on a quota-less Workload is a violation."""
    sim = dst_sim.Simulation(1, dst_sim.PROFILES["quiet"])
    sim.setup()
    sim.kueue.submit("w0", 2, RACK, "required")
    wl = sim.server.items(WORKLOADS)[0]
    wl = {**wl, "status": {"admissionChecks": [{"name": CHECK, "state": "Ready", "message": ""}]}}
    sim.server.replace(WORKLOADS, wl)
    found = sim.monitor.check(0.0, None)
    assert found is not None and found.invariant == "ready-not-decided"


@pytest.mark.parametrize("defect", sorted(SEEDS))
def test_regression_seed(defect: str) -> None:
    """Each defect's finding seed, replayed in a fresh process with a fixed hash seed (as
    ``make dst`` runs it): clean once the defect is fixed."""
    if defect not in ENABLED:
        pytest.skip(f"{defect} not fixed on this branch yet (tests/dst/test_dst.py FIXED, or DST_FIXED=...)")
    row = SEEDS[defect]
    run = subprocess.run(
        [
            sys.executable,
            str(HERE / "dst_sim.py"),
            "--runs",
            "1",
            "--seed",
            str(row["seed"]),
            "--profile",
            row["profile"],
        ],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"{defect} ({row['what']}) found again:\n{run.stdout[-3000:]}"


_DIGEST_AFTER = """
import sys
sys.path[:0] = [{here!r}, {tests!r}]
import dst_sim
dst_sim.quiet_logs()
for seed in range(70000, {last}):
    dst_sim.simulate(seed, dst_sim.CAMPAIGN[(seed - 70000) % len(dst_sim.CAMPAIGN)])
print(dst_sim.simulate({last}, "elastic").digest)
"""


def _digest_after(last: int) -> str:
    code = _DIGEST_AFTER.format(here=str(HERE), tests=str(HERE.parent), last=last)
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return run.stdout.split()[-1]


def test_a_seed_replays_exactly_after_other_schedules_in_the_same_process() -> None:
    """A campaign runs thousands of schedules in one process: what earlier ones leave behind
    must not change a later one (a violation found in a campaign must replay on its own).
    Before each schedule started from a collected heap, elastic seed 70013 after the 13 seeds
    before it gave a new digest in each fresh process."""
    alone = dst_sim.simulate(70013, "elastic").digest
    assert _digest_after(70013) == alone
    assert _digest_after(70013) == alone


def test_the_preemption_profile_preempts() -> None:
    """Profile "preemption-reservations" exercises what it is for: over a few schedules the
    controller evicted victims (TopologyPreempted on them, TopologyPreemption on the preemptor)
    while Kueue evicted, writes failed and watches lagged, and no invariant broke. (Its world is
    too small for a wait blocked by fragmentation: reservations are on but rarely made; their
    rules are tested in tests/capacity/test_reservation.py and tests/controllers/test_reservations.py.)"""
    reasons: dict[str, int] = {}
    for seed in range(1, 7):
        result = dst_sim.simulate(seed, "preemption-reservations")
        assert result.violation is None, result.violation
        for reason, n in result.event_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + n
    assert reasons.get("TopologyPreempted", 0) > 0 and reasons.get("TopologyPreemption", 0) > 0, reasons
