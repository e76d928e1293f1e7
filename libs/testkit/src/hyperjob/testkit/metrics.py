"""Reading a Prometheus exposition in tests: one number out of a service's ``/metrics`` text."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["sample"]


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when there is none)."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and labels.items() <= s.labels.items()
    )
