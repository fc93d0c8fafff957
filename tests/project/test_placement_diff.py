"""The placement micro-benchmark's verdict: the same per-domain counts, or where they part."""

from __future__ import annotations

from vocab import HOST

from benchmarks.placement_diff import Locator, explain, verdict

SCENARIO = {
    "topology": {"levels": ["rack", HOST]},
    "nodes": [
        {"name": "h1", "labels": {"rack": "r1"}},
        {"name": "h2", "labels": {"rack": "r1"}},
        {"name": "h3", "labels": {"rack": "r2"}},
    ],
}


def result(*domains: tuple[str, int]) -> dict[str, object]:
    return {
        "assignment": {
            "levels": [HOST],
            "domains": [{"values": [h], "count": n} for h, n in domains],
        }
    }


def test_the_same_counts_in_another_order_are_the_same_placement() -> None:
    assert verdict(result(("h1", 2), ("h2", 1)), result(("h2", 1), ("h1", 2))) == "yes"
    assert verdict({"assignment": None}, {"assignment": None}) == "yes (no fit)"
    assert verdict({"assignment": None}, result(("h1", 1))) == "NO (fit)"


def test_a_difference_is_named_at_the_highest_level_where_it_starts() -> None:
    kueue, ours = result(("h1", 2)), result(("h3", 2))
    assert verdict(kueue, ours) == "NO"
    lines = explain(kueue, ours, Locator(SCENARIO))
    assert any(line.startswith("  rack: Kueue r1=2") for line in lines), lines
    assert "  only Kueue (1): h1=2" in lines and "  only ours (1): h3=2" in lines
