"""The scheduler's bookings keep what is used on each node, and count each node's changes, so the
capacity summary rebuilds only the nodes whose bookings changed."""

from __future__ import annotations

from hyperjob.services.cluster_scheduler import domain
from hyperjob.store import Binding


def test_each_node_counts_the_changes_to_what_is_booked_there() -> None:
    bookings = domain.Bookings({"p0": Binding("c1", "p0", "n0", {"cpu": 2.0})})
    assert bookings.node_revision == {"n0": 1}
    bookings["p1"] = Binding("c1", "p1", "n1", {"cpu": 1.0})
    bookings["p0"] = Binding("c1", "p0", "n1", {"cpu": 2.0})  # moved: both nodes changed
    assert bookings.node_revision == {"n0": 2, "n1": 2}
    bookings.pop("p1")
    assert bookings.node_revision == {"n0": 2, "n1": 3}
    assert bookings.used == {"n0": {"cpu": 0.0}, "n1": {"cpu": 2.0}}
