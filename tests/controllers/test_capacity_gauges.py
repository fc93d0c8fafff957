"""Free capacity per topology domain, as exported on /metrics."""

from __future__ import annotations

import asyncio

import builders as mk
from prometheus_client.parser import text_string_to_metric_families
from vocab import BLOCK, GPU, RACK

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry
from kueue_tas.controllers.gauges.reconciler import CapacityGauges, publish_domain_free
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free import domain_free

LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)


def live() -> LiveCapacity:
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", LEVELS, {"pool": "gpu"})})
    for rack in ("b1-r1", "b1-r2"):
        for h in (1, 2):
            labels = {BLOCK: "b1", RACK: rack, "pool": "gpu"}
            cap.upsert_node(mk.node_info(f"{rack}-h{h}", labels, cpu=16000, pods=110, gpus=8))
    return cap


def assignment(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((host,), n) for host, n in domains))


def test_domain_free_sums_leaves_per_level_minus_all_usage() -> None:
    cap = live()
    cap.upsert_pod("kube-system/ds-1", "b1-r1-h1", {"cpu": 500, GPU: 1, "pods": 1})
    cap.set_workload_usage(
        "ns/a", (UsageEntry("gpu", assignment(("b1-r1-h1", 3), ("b1-r1-h2", 8)), {GPU: 1, "cpu": 100}),)
    )
    cap.assume("ns/b", (UsageEntry("gpu", assignment(("b1-r2-h2", 2)), {GPU: 2}),))
    snap = cap.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    gpu = {(lvl, dom): v for (lvl, dom, res), v in free.items() if res == GPU}
    assert gpu == {
        (BLOCK, "b1"): 4 + 0 + 8 + 4,
        (RACK, "b1,b1-r1"): 4,
        (RACK, "b1,b1-r2"): 12,
        (HOSTNAME_LABEL, "b1-r1-h1"): 4,  # 8 - daemon pod 1 - 3 assigned
        (HOSTNAME_LABEL, "b1-r1-h2"): 0,
        (HOSTNAME_LABEL, "b1-r2-h1"): 8,
        (HOSTNAME_LABEL, "b1-r2-h2"): 4,  # 8 - assumed 2 x 2
    }
    assert free[(HOSTNAME_LABEL, "b1-r1-h1", "pods")] == 110 - 1 - 3
    assert free[(HOSTNAME_LABEL, "b1-r1-h1", "cpu")] == 16000 - 500 - 300
    assert free[(BLOCK, "b1", "cpu")] == 4 * 16000 - 500 - 1100


def test_domain_free_never_negative() -> None:
    cap = live()
    cap.upsert_pod("x/over", "b1-r2-h1", {GPU: 12, "pods": 1})
    snap = cap.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    assert free[(HOSTNAME_LABEL, "b1-r2-h1", GPU)] == 0
    assert free[(RACK, "b1,b1-r2", GPU)] == 8


def samples(m: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    body, _ = m.render()
    return {
        tuple(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
        if s.name == name
    }


def test_publish_follows_the_model_and_drops_flavors_no_longer_governed() -> None:
    cap, m = live(), Metrics()
    publish_domain_free(m, cap)
    got = samples(m, "kueue_tas_domain_free")
    key = (
        ("domain", "b1,b1-r1"),
        ("flavor", "gpu"),
        ("level", RACK),
        ("resource", GPU),
        ("topology", "topo"),
    )
    assert got[key] == 16
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", assignment(("b1-r1-h1", 5)), {GPU: 1}),))
    publish_domain_free(m, cap)
    assert samples(m, "kueue_tas_domain_free")[key] == 11
    cap.set_flavors({})
    publish_domain_free(m, cap)
    assert samples(m, "kueue_tas_domain_free") == {}


def test_gauges_publish_after_touch_and_periodically() -> None:
    async def go() -> None:
        cap, m = live(), Metrics()
        gauges = CapacityGauges(m, cap, period=30.0, min_interval=0.01, hostname_level=True)
        task = asyncio.create_task(gauges.run())
        await asyncio.sleep(0.05)
        key = (
            ("domain", "b1-r2-h1"),
            ("flavor", "gpu"),
            ("level", HOSTNAME_LABEL),
            ("resource", GPU),
            ("topology", "topo"),
        )
        assert samples(m, "kueue_tas_domain_free")[key] == 8
        cap.set_workload_usage("ns/a", (UsageEntry("gpu", assignment(("b1-r2-h1", 6)), {GPU: 1}),))
        gauges.touch()
        await asyncio.sleep(0.05)
        assert samples(m, "kueue_tas_domain_free")[key] == 2
        task.cancel()

    asyncio.run(go())


def test_metric_numbers_are_the_capacity_commands_numbers() -> None:
    from kueue_tas.cli.capacity import flavor_capacity

    cap = live()
    cap.upsert_pod("kube-system/ds-1", "b1-r1-h1", {"cpu": 500, GPU: 1, "pods": 1})
    cap.upsert_pod("x/over", "b1-r2-h1", {GPU: 12, "pods": 1})
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", assignment(("b1-r1-h2", 5)), {GPU: 1}),))
    snap = cap.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    command = flavor_capacity("gpu", {"pool": "gpu"}, snap)
    expected = {}
    for lvl in command.levels:
        for d in lvl.domains:
            name = d.values[-1] if lvl.key == HOSTNAME_LABEL else ",".join(d.values)
            expected.update({(lvl.key, name, res): v for res, v in d.free.items()})
    assert free == expected


def test_domain_free_can_leave_out_the_lower_levels() -> None:
    m = Metrics()
    publish_domain_free(m, live(), max_levels=2)
    levels = {dict(k)["level"] for k in samples(m, "kueue_tas_domain_free")}
    assert levels == {BLOCK, RACK}
    publish_domain_free(m, live(), hostname_level=True)
    levels = {dict(k)["level"] for k in samples(m, "kueue_tas_domain_free")}
    assert levels == {BLOCK, RACK, HOSTNAME_LABEL}


def test_hostname_level_series_are_opt_in() -> None:
    """Issue 30: per-host series are most of a large cluster's /metrics (40,000 of them at
    10,000 nodes) and what made its render slow; they are published only when asked for."""
    m = Metrics()
    publish_domain_free(m, live())
    levels = {dict(k)["level"] for k in samples(m, "kueue_tas_domain_free")}
    assert levels == {BLOCK, RACK}
    publish_domain_free(m, live(), hostname_level=True)
    levels = {dict(k)["level"] for k in samples(m, "kueue_tas_domain_free")}
    assert levels == {BLOCK, RACK, HOSTNAME_LABEL}
    publish_domain_free(m, live(), max_levels=1, hostname_level=True)
    assert {dict(k)["level"] for k in samples(m, "kueue_tas_domain_free")} == {BLOCK}


def test_the_settings_turn_hostname_level_series_on() -> None:
    from kueue_tas.runtime.config import Settings

    assert Settings.load().metrics_hostname_level is False
    off = CapacityGauges.from_settings(Metrics(), live(), Settings.load())
    on = CapacityGauges.from_settings(Metrics(), live(), Settings.load(metrics_hostname_level=True))
    assert (off.hostname_level, on.hostname_level) == (False, True)
    on.publish()
    off.publish()
    assert HOSTNAME_LABEL in {dict(k)["level"] for k in samples(on.metrics, "kueue_tas_domain_free")}
    assert HOSTNAME_LABEL not in {dict(k)["level"] for k in samples(off.metrics, "kueue_tas_domain_free")}
