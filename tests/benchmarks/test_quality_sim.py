"""The placement-quality simulator keeps its books: GPUs in use never beyond capacity and equal to
what the product's capacity model holds, every run as long as the job's runtime, every start
accounted for, no negative wait, nothing left waiting once arrivals stop, the model empty again
at the end, the same figures for the same seed. Each check is also run against a simulator
broken on purpose (a subclass overriding one seam), which it must catch."""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Hashable

import pytest

from benchmarks.quality.__main__ import main
from benchmarks.quality.figures import run_figures
from benchmarks.quality.policies import BASELINE, KueueExact
from benchmarks.quality.registry import POLICIES
from benchmarks.quality.run import Settings, simulate
from benchmarks.quality.shapes import BLOCK, FLAVOR, GPU, HOST, RACK, Shape
from benchmarks.quality.sim import JobRecord, Sim
from benchmarks.quality.trace import LARGE, MEDIUM, SMALL, Job, arrivals
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import Domain, WorkloadPlacement, place_workload

HOURS = 24.0


def faults(sim: Sim) -> set[str]:
    """The bookkeeping checks a finished simulation (run until nothing was left) fails."""
    found: set[str] = set()
    assert sim.samples, "run with record=True"
    if any(s.used > sim.shape.gpus or s.used != s.model_used or s.used < 0 for s in sim.samples):
        found.add("capacity")
    for rec in sim.records:
        if rec.finished is not None and not math.isclose(
            rec.job.gpus * (rec.runs[-1][1] - rec.runs[-1][0]), rec.job.gpus * rec.job.runtime, abs_tol=1e-9
        ):
            found.add("gpu-time")
        if rec.waited < 0 or any(start < rec.job.arrival for start, _ in rec.runs):
            found.add("waits")
    finished = sum(rec.finished is not None for rec in sim.records)
    if sim.starts != finished + len(sim.running) + sum(rec.evictions for rec in sim.records):
        found.add("counts")
    if sim.queue or sim.running or finished != len(sim.records):
        found.add("drained")
    snap = sim.capacity.snapshot(FLAVOR)
    assert snap is not None
    column = snap.capacity.columns[GPU]
    if (snap.capacity.left()[:, column] != snap.capacity.alloc[:, column]).any() or snap.capacity.tas.any():
        found.add("model not empty")
    return found


def finished_run(
    shape: Shape, cls: type[Sim] = Sim, seed: int = 5, check_skips: bool = True, policy: str = BASELINE
) -> Sim:
    """``HOURS`` of the seeded trace (large jobs at a higher priority), then no more arrivals,
    run until nothing is left; ``check_skips``: every job the cuts skip is checked against the
    engine (or the policy's placement, for a remembered answer)."""
    jobs = itertools.takewhile(lambda j: j.arrival < HOURS, arrivals(shape, seed, load=1.2, priorities=True))
    sim = cls(
        shape,
        POLICIES[policy](),
        jobs,
        window=(0.0, HOURS),
        stop_when_measured=False,
        record=True,
        check_skips=check_skips,
    )
    sim.run()
    return sim


def test_a_trace_worked_out_by_hand(tiny: Shape) -> None:
    """J0 (t=0) takes 3 of the 4 hosts for 2 h; J1 (t=0.5, a whole rack) cannot fit and waits;
    J2 (t=1, 2 GPUs on one host) starts behind it on the free host until 1.5. At 2 J0 ends and
    J1 starts (waited 1.5 h), until 3. Free GPUs while J1 waits: 4 on [0.5, 1), 2 on [1, 1.5),
    4 on [1.5, 2): 5 GPU-hours of 16 x 4. Busy: 12 x 2 + 8 x 1 + 2 x 0.5 = 33."""
    jobs = [
        Job(0, 0.0, LARGE, 3, 4, BLOCK, 2.0, None),
        Job(1, 0.5, MEDIUM, 2, 4, RACK, 1.0, None),
        Job(2, 1.0, SMALL, 1, 2, HOST, 0.5, None),
    ]
    sim = Sim(tiny, KueueExact(), jobs, window=(0.0, 4.0), record=True, check_skips=True)
    sim.run()
    assert [(r.runs, r.waited) for r in sim.records] == [([(0.0, 2.0)], 0.0), ([(2.0, 3.0)], 1.5), ([(1.0, 1.5)], 0.0)]
    values = run_figures(sim, "kueue-exact", 0).values
    assert values["stranded_pct"] == pytest.approx(100 * 5 / 64)
    assert values["utilisation_pct"] == pytest.approx(100 * 33 / 64)
    assert values["lw_wait_all"] == pytest.approx(90 * 8 / 33)
    assert values["p50_wait_medium"] == pytest.approx(90)
    assert values["jobs"] == 3 and values["unstarted"] == 0
    assert faults(sim) == set()


def test_the_simulator_keeps_its_books(small: Shape) -> None:
    sim = finished_run(small)
    assert len(sim.records) > 40 and sim.starts == len(sim.records)
    assert max(s.waiting for s in sim.samples or ()) > 0  # the trace does make jobs wait
    assert faults(sim) == set()


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != BASELINE])
def test_every_policy_keeps_the_books(small: Shape, policy: str) -> None:
    """The same checks with reservations and evictions: an evicted job's runs add up to more
    than its runtime, but its last run is whole, and the model holds exactly what runs."""
    sim = finished_run(small, seed=11, policy=policy)
    assert faults(sim) == set()
    if policy != "reserve":
        assert sum(r.evictions for r in sim.records) > 0  # the check covered evictions


class ChargesNothing(Sim):
    def _charge(self, rec: JobRecord, entries: tuple[UsageEntry, ...]) -> None:
        return None


class ReleasesNothing(Sim):
    def _release(self, rec: JobRecord) -> None:
        return None


class EndsEarly(Sim):
    def _run_ends_at(self, rec: JobRecord) -> float:
        return self.now + rec.job.runtime / 2


class LosesFinishes(Sim):
    def _finish(self, rec: JobRecord) -> None:
        self._end_run(rec)
        rec.started = None


class ForgetsWhenQueued(Sim):
    def _enqueue(self, rec: JobRecord) -> None:
        super()._enqueue(rec)
        rec.queued_since = self.now + 1.0


class NeverRetries(Sim):
    def _freed(self) -> None:
        self._bound.stale()  # the bounds are read again, but "does not fit" is remembered forever


@pytest.mark.parametrize(
    ("broken", "fault"),
    [
        (ChargesNothing, "capacity"),
        (ReleasesNothing, "model not empty"),
        (EndsEarly, "gpu-time"),
        (LosesFinishes, "counts"),
        (ForgetsWhenQueued, "waits"),
        (NeverRetries, "drained"),
    ],
)
def test_each_check_catches_its_broken_bookkeeping(small: Shape, broken: type[Sim], fault: str) -> None:
    assert fault in faults(finished_run(small, broken, check_skips=False))


def test_a_skip_the_engine_would_have_placed_is_caught(small: Shape) -> None:
    """The cuts (free total, per-domain bounds, "did not fit since the last change") only skip
    what the engine refuses: checked on every skip above, and failing when the memory is stale."""
    with pytest.raises(AssertionError, match=r"was skipped at .* but the engine places it"):
        finished_run(small, NeverRetries)


class RandomlyClosed(KueueExact):
    """Closes a rack chosen by an unseeded generator: runs no longer repeat."""

    def place(self, job: JobRecord, sim: Sim) -> WorkloadPlacement:
        rack = random.randrange(sim.shape.racks_per_block)
        return place_workload(job.requests, sim.capacity, closed=[Domain(FLAVOR, RACK, ("b0", f"b0-r{rack}"))])

    def memo_key(self, job: JobRecord) -> Hashable:
        return None  # an answer holds for nothing else


def test_the_same_seed_gives_the_same_figures(small: Shape) -> None:
    settings = Settings(hours=4.0, warmup=1.0, load=1.2)
    first = simulate(small, "kueue-exact", 3, settings)[1]
    again = simulate(small, "kueue-exact", 3, settings)[1]
    other = simulate(small, "kueue-exact", 4, settings)[1]
    assert first.values == again.values and first.placements == again.placements
    assert first.values != other.values

    def timeline(policy: KueueExact) -> list[list[tuple[float, float]]]:
        jobs = itertools.takewhile(lambda j: j.arrival < HOURS, arrivals(small, 3, load=1.2))
        sim = Sim(small, policy, jobs, stop_when_measured=False)
        sim.run()
        return [r.runs for r in sim.records]

    assert timeline(KueueExact()) == timeline(KueueExact())
    assert any(timeline(RandomlyClosed()) != timeline(RandomlyClosed()) for _ in range(5))


def test_the_command_prints_the_table_and_writes_json(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    out = f"{tmp_path}/quality.json"
    assert (
        main(["--shape", "B", "--policy", "all", "--seeds", "1,2", "--hours", "2", "--warmup", "1", "--json", out]) == 0
    )
    printed = capsys.readouterr()
    assert "| stranded GPUs while jobs wait (%) |" in printed.out and "wall time:" in printed.out
    assert "[B kueue-exact seed 2]" in printed.err
    with open(out) as f:
        doc = json.load(f)
    assert [(r["policy"], r["seed"]) for r in doc["runs"]] == [(p, s) for p in POLICIES for s in (1, 2)]
    assert doc["summary"]["B"]["kueue-exact"]["utilisation_pct"]["ratio"]["median"] == 1.0
    assert all(r["placements"] > 0 and r["cpu_s"] > 0 and r["sim_hours"] >= 3 for r in doc["runs"])
    # Runs saved one seed per file print as one table again.
    other = f"{tmp_path}/seed3.json"
    assert (
        main(["--shape", "B", "--policy", "all", "--seeds", "3", "--hours", "2", "--warmup", "1", "--json", other]) == 0
    )
    capsys.readouterr()
    assert main(["--report", out, other]) == 0
    assert "seeds 1,2,3;" in capsys.readouterr().out
    assert "| reserve / kueue-exact |" in printed.out


def test_unknown_shapes_and_policies_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--shape", "D"], ["--policy", "reserve-everything"], ["--seeds", "one"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("python -m benchmarks.quality: error: "), err
