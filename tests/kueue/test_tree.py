"""Quota arithmetic on a hierarchical cohort tree, checked against numbers worked by hand.

Tree used below (cpu only, in millicores):

    org (own nominal 4)
     └── a (no quota of its own)
          ├── x: nominal 6, lendingLimit 2  -> keeps 4 for itself, lends 2
          └── y: nominal 0, borrowingLimit 3 (in the second test)
"""

from __future__ import annotations

from sky_kueue.kueue import tree
from sky_kueue.kueue.scheduler import inactive_cluster_queues

from .builders import cohort, cq, flavor, state

CPU = ("f", "cpu")


def _tree(y_borrowing_limit: str | None = None) -> tree.TreeShape:
    y_quota: dict[str, str] = {"nominalQuota": "0"}
    if y_borrowing_limit is not None:
        y_quota["borrowingLimit"] = y_borrowing_limit
    s = state(
        flavor("f"),
        cohort("org", groups=[{"f": {"cpu": "4"}}]),
        cohort("a", parent="org"),
        cq("x", [{"f": {"cpu": {"nominalQuota": "6", "lendingLimit": "2"}}}], cohort="a"),
        cq("y", [{"f": {"cpu": y_quota}}], cohort="a"),
    )
    return tree.build_tree(s, inactive_cluster_queues(s))


def test_subtree_quota_counts_only_what_children_lend() -> None:
    t = _tree()
    assert t.cqs["x"].local_quota(CPU) == 4000
    assert t.cohorts["a"].subtree_quota[CPU] == 2000
    assert t.cohorts["org"].subtree_quota[CPU] == 6000


def test_available_and_potential_include_what_can_be_borrowed() -> None:
    t = _tree()
    x, y = t.cqs["x"], t.cqs["y"]
    assert tree.cq_available(x, CPU) == 10000
    assert tree.potential_available(x, CPU) == 10000
    assert tree.cq_available(y, CPU) == 6000
    assert tree.potential_available(y, CPU) == 6000


def test_usage_climbs_only_past_the_local_part() -> None:
    t = _tree()
    x, a, org = t.cqs["x"], t.cohorts["a"], t.cohorts["org"]
    tree.add_usage(x, CPU, 3000)  # within x's local 4
    assert (a.usage.get(CPU, 0), org.usage.get(CPU, 0)) == (0, 0)
    tree.add_usage(x, CPU, 2000)  # one more than local
    assert (a.usage[CPU], org.usage[CPU]) == (1000, 1000)
    tree.remove_usage(x, CPU, 2000)
    assert (x.usage[CPU], a.usage[CPU], org.usage[CPU]) == (3000, 0, 0)


def test_borrowing_of_a_sibling_reduces_what_is_left() -> None:
    t = _tree()
    x, y = t.cqs["x"], t.cqs["y"]
    tree.add_usage(y, CPU, 5000)
    assert tree.cq_available(x, CPU) == 5000  # its own 4 + 1 left in the tree
    assert tree.lowest_subtree_that_fits(x, CPU, 5000) == (0, True)  # within its nominal 6
    # 7 needs the tree above: a cannot hold it, nor can org -> root height, no reclaim advantage
    assert tree.lowest_subtree_that_fits(x, CPU, 7000) == (2, False)


def test_borrowing_limit_caps_what_a_queue_can_reach() -> None:
    t = _tree(y_borrowing_limit="3")
    y = t.cqs["y"]
    assert tree.cq_available(y, CPU) == 3000
    assert tree.potential_available(y, CPU) == 3000
    tree.add_usage(y, CPU, 2000)
    assert tree.cq_available(y, CPU) == 1000


def test_heights_grow_along_the_path() -> None:
    t = _tree()
    assert t.cohorts["a"].height() == 1
    assert t.cohorts["org"].height() == 2
