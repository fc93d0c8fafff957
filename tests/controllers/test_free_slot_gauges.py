"""Free-slot metrics (kueue_tas_domain_free_slots, kueue_tas_free_domains), read back from the real
prometheus_client exposition text, and their settings (free_slot_shapes, free_slot_levels)."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path

import builders as mk
import pytest
from prometheus_client.parser import text_string_to_metric_families
from vocab import BLOCK, GPU, RACK

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry
from kueue_tas.cli.run import run as run_command
from kueue_tas.controllers.gauges.reconciler import CapacityGauges, publish_free_slots
from kueue_tas.controllers.setup import setup_controllers
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free_slots import free_slots, parse_pod_shape
from kueue_tas.topology.level_names import level_names

LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
SHAPES = (parse_pod_shape("nvidia.com/gpu=8"), parse_pod_shape("nvidia.com/gpu=1"))
SLOTS, FREE = "kueue_tas_domain_free_slots", "kueue_tas_free_domains"


pytestmark = pytest.mark.usefixtures("no_settings_env")


def live(racks: int = 2, hosts: int = 2) -> LiveCapacity:
    """Flavor gpu of Topology topo: block b1 with racks b1-r1.., each of 8-GPU hosts."""
    cap = LiveCapacity()
    names = level_names(f"rack={RACK}", LEVELS)  # and "host", named by default
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", LEVELS, {"pool": "gpu"}, level_names=names)})
    for r in range(1, racks + 1):
        for h in range(1, hosts + 1):
            labels = {BLOCK: "b1", RACK: f"b1-r{r}", "pool": "gpu"}
            cap.upsert_node(mk.node_info(f"b1-r{r}-h{h}", labels, cpu=16000, pods=110, gpus=8))
    return cap


def on(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((host,), n) for host, n in domains))


def samples(m: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    body, _ = m.render()
    return {
        tuple(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
        if s.name == name
    }


def slots_of(m: Metrics) -> dict[tuple[str, str, str], float]:
    """(level, domain, shape) -> value, for topology topo and flavor gpu."""
    out = {}
    for labels, value in samples(m, SLOTS).items():
        d = dict(labels)
        assert (d["topology"], d["flavor"]) == ("topo", "gpu")
        out[(d["level"], d["domain"], d["shape"])] = value
    return out


def free_of(m: Metrics) -> dict[tuple[str, str], float]:
    return {(dict(k)["level"], dict(k)["shape"]): v for k, v in samples(m, FREE).items()}


def busy() -> LiveCapacity:
    cap = live()
    cap.upsert_pod("kube-system/agent", "b1-r1-h1", {"cpu": 200, "pods": 1})
    cap.upsert_pod("ns/other", "b1-r1-h2", {GPU: 3, "pods": 1})
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", on(("b1-r2-h1", 8)), {GPU: 1}),))
    cap.assume("ns/b", (UsageEntry("gpu", on(("b1-r2-h2", 1)), {GPU: 2}),))
    return cap


def test_values_are_free_slots_numbers() -> None:
    cap, m = busy(), Metrics()
    publish_free_slots(m, cap, SHAPES, levels=None)
    snap = cap.snapshot("gpu")
    assert snap is not None
    expected_slots, expected_free = {}, {}
    for shape in SHAPES:
        for level in free_slots(snap, shape):
            expected_free[(level.level, shape.text)] = level.free_domains
            if level.level != HOSTNAME_LABEL:  # the default leaves hosts out
                for d in level.domains:
                    expected_slots[(level.level, ",".join(d.values), shape.text)] = d.fit
    assert slots_of(m) == expected_slots
    assert free_of(m) == expected_free
    # and by hand: r1 keeps h1 whole (8) and 5 GPUs of h2; r2 has 6 left on h2, none on h1
    assert slots_of(m)[(RACK, "b1,b1-r1", "nvidia.com/gpu=1")] == 13
    assert slots_of(m)[(RACK, "b1,b1-r1", "nvidia.com/gpu=8")] == 1
    assert slots_of(m)[(RACK, "b1,b1-r2", "nvidia.com/gpu=1")] == 6
    assert slots_of(m)[(BLOCK, "b1", "nvidia.com/gpu=8")] == 1
    assert free_of(m) == {
        (BLOCK, "nvidia.com/gpu=8"): 0,
        (RACK, "nvidia.com/gpu=8"): 0,
        (HOSTNAME_LABEL, "nvidia.com/gpu=8"): 1,  # h1: its agent takes no GPU
        (BLOCK, "nvidia.com/gpu=1"): 0,
        (RACK, "nvidia.com/gpu=1"): 0,
        (HOSTNAME_LABEL, "nvidia.com/gpu=1"): 1,
    }


def test_values_follow_the_model() -> None:
    cap, m = live(), Metrics()
    publish_free_slots(m, cap, SHAPES)
    key = (RACK, "b1,b1-r2", "nvidia.com/gpu=8")
    assert slots_of(m)[key] == 2 and free_of(m)[(RACK, "nvidia.com/gpu=8")] == 2
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", on(("b1-r2-h1", 1)), {GPU: 1}),))
    publish_free_slots(m, cap, SHAPES)
    assert slots_of(m)[key] == 1 and free_of(m)[(RACK, "nvidia.com/gpu=8")] == 1
    cap.remove_workload_usage("ns/a")
    cap.delete_node("b1-r2-h2")
    cap.delete_node("b1-r2-h1")
    publish_free_slots(m, cap, SHAPES)
    assert key not in slots_of(m)  # a rack that is gone has no series left
    assert slots_of(m)[(BLOCK, "b1", "nvidia.com/gpu=8")] == 2


def test_series_vanish_when_a_flavor_is_no_longer_governed() -> None:
    cap, m = live(), Metrics()
    cap.set_flavors({**cap.flavors(), "other": FlavorSpec("other", "topo2", (RACK, HOSTNAME_LABEL), {"pool": "gpu"})})
    publish_free_slots(m, cap, SHAPES)
    assert {(dict(k)["topology"], dict(k)["flavor"]) for k in samples(m, FREE)} == {("topo", "gpu"), ("topo2", "other")}
    cap.set_flavors({"gpu": cap.flavors()["gpu"]})
    publish_free_slots(m, cap, SHAPES)
    assert {(dict(k)["topology"], dict(k)["flavor"]) for k in samples(m, SLOTS)} == {("topo", "gpu")}
    assert {(dict(k)["topology"], dict(k)["flavor"]) for k in samples(m, FREE)} == {("topo", "gpu")}
    cap.set_flavors({})
    publish_free_slots(m, cap, SHAPES)
    assert samples(m, SLOTS) == {} and samples(m, FREE) == {}


def test_no_shapes_no_series() -> None:
    cap, m = live(), Metrics()
    publish_free_slots(m, cap, SHAPES)
    assert samples(m, SLOTS)
    publish_free_slots(m, cap, ())
    assert samples(m, SLOTS) == {} and samples(m, FREE) == {}


@pytest.mark.parametrize(
    ("levels", "kept"),
    [
        (None, {BLOCK, RACK}),  # default: every level but the hostname
        ((RACK,), {RACK}),
        (("rack",), {RACK}),  # the Topology's name for the level
        (("host", BLOCK), {HOSTNAME_LABEL, BLOCK}),  # "host" names the hostname level by default
        (("example.com/zone",), set()),  # a level this topology lacks
        ((), set()),
    ],
)
def test_the_levels_knob_bounds_the_series(levels: tuple[str, ...] | None, kept: set[str]) -> None:
    racks, hosts = 3, 4
    m = Metrics()
    publish_free_slots(m, live(racks, hosts), SHAPES, levels)
    series = samples(m, SLOTS)
    assert {dict(k)["level"] for k in series} == kept
    domains = {BLOCK: 1, RACK: racks, HOSTNAME_LABEL: racks * hosts}
    # The documented count: the sum over the chosen levels of domains x shapes ...
    assert len(series) == sum(domains[level] for level in kept) * len(SHAPES)
    # ... while the free-domain counts cover every level whatever the knob says.
    assert len(samples(m, FREE)) == len(LEVELS) * len(SHAPES)


def test_the_gauge_loop_publishes_both_families() -> None:
    cap, m = live(), Metrics()
    gauges = CapacityGauges(m, cap, shapes=SHAPES, slot_levels=[RACK])
    gauges.publish()
    assert {dict(k)["level"] for k in samples(m, SLOTS)} == {RACK}
    assert samples(m, "kueue_tas_domain_free")  # the free capacity is still published beside them
    assert free_of(m)[(HOSTNAME_LABEL, "nvidia.com/gpu=1")] == 4


# ---- settings -------------------------------------------------------------------------------------


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings.load()
    assert s.free_slot_shapes == ("nvidia.com/gpu=8", "nvidia.com/gpu=1")
    assert s.free_slot_levels is None
    assert s.pod_shapes() == SHAPES
    monkeypatch.setenv("KUEUE_TAS_FREE_SLOT_SHAPES", "nvidia.com/gpu=4,cpu=32; cpu=1")
    monkeypatch.setenv("KUEUE_TAS_FREE_SLOT_LEVELS", f"rack,{BLOCK}")
    s = Settings.load()
    assert [shape.requests for shape in s.pod_shapes()] == [{GPU: 4, "cpu": 32000}, {"cpu": 1000}]
    assert s.free_slot_levels == ("rack", BLOCK)


def test_file_values(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("free_slot_shapes: ['nvidia.com/gpu=2', 'cpu=500m,memory=1Gi']\nfree_slot_levels: [rack]\n")
    s = Settings.load(f)
    assert s.free_slot_shapes == ("nvidia.com/gpu=2", "cpu=500m,memory=1Gi")
    assert s.free_slot_levels == ("rack",)
    f.write_text("free_slot_shapes: []\nfree_slot_levels: null\n")
    assert Settings.load(f).pod_shapes() == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "free_slot_shapes: ['nvidia.com/gpu=x']\n",
            "free_slot_shapes: pod shape 'nvidia.com/gpu=x': 'x' is not a quantity",
        ),
        ("free_slot_shapes: ['gpu=0']\n", "free_slot_shapes: pod shape 'gpu=0': gpu must be more than 0, got 0"),
        ("free_slot_shapes: ['']\n", "free_slot_shapes: pod shape '': empty"),
        ("free_slot_shapes: ['a=1,a=2']\n", "free_slot_shapes: pod shape 'a=1,a=2': resource 'a' appears twice"),
        ("free_slot_shapes: [cpu=1, ' cpu=1']\n", "free_slot_shapes: pod shape 'cpu=1' is listed twice"),
        ("free_slot_levels: ['not a level']\n", "free_slot_levels: 'not a level' is not a level"),
    ],
)
def test_bad_values_are_config_errors_naming_setting_and_shape(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        Settings.load(f)
    assert expected in str(err.value)


def test_run_stops_at_start_on_a_bad_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("free_slot_shapes: ['nvidia.com/gpu=eight']\n")
    assert run_command(argparse.Namespace(config=str(f), kubeconfig=None)) == 1
    out = capsys.readouterr()
    assert "free_slot_shapes: pod shape 'nvidia.com/gpu=eight': 'eight' is not a quantity" in out.out
    assert "Traceback" not in out.out + out.err


def test_the_settings_configure_the_gauges() -> None:
    settings = Settings.load(free_slot_shapes=["cpu=2"], free_slot_levels=["rack"], metrics_domain_levels=1)
    gauges = CapacityGauges.from_settings(Metrics(), live(), settings)
    assert gauges.shapes == (parse_pod_shape("cpu=2"),)
    assert gauges.slot_levels == ("rack",)
    assert gauges.max_levels == 1
    assert "CapacityGauges.from_settings(manager.metrics, capacity, settings)" in inspect.getsource(setup_controllers)
