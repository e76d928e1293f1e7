"""Children's news that comes before its HyperJob's spec is kept, then folded in once the spec
comes (issue 33, item 3: a restart of the status-aggregator holds the spec back for its consumer's
ack wait while the children's news flows on; dropping that news froze the HyperJob's status)."""

from __future__ import annotations

from hyperjob import events
from hyperjob.services.status_aggregator import domain


def _news(job: str, new: str, at: float, cluster: str = "c1") -> events.JobPhaseChanged:
    return events.JobPhaseChanged(
        event_id=f"{job}-{new}-{at}", occurred_at=at, cluster=cluster, job=job, hyperjob="hj", old="", new=new
    )


def test_the_latest_news_of_each_child_is_kept_whatever_order_it_comes_in() -> None:
    doc = None
    for msg in (_news("hj-0", "Running", 10), _news("hj-0", "Completed", 30), _news("hj-0", "Running", 10)):
        doc = domain.keep_early(doc, msg, now=100)
    doc = domain.keep_early(doc, _news("hj-0", "Running", 12, cluster="c2"), now=101)
    assert {key: msg.new for key, msg in doc.news.items()} == {"hj-0@c1": "Completed", "hj-0@c2": "Running"}
    assert doc.kept_at == 101


def test_news_from_before_the_hyperjob_was_accepted_is_of_an_earlier_one_of_that_name() -> None:
    doc = None
    for msg in (_news("hj-0", "Completed", 5), _news("hj-1", "Running", 25), _news("hj-2", "Running", 21)):
        doc = domain.keep_early(doc, msg, now=30)
    assert doc is not None
    assert [msg.job for msg in domain.early_news_of(doc, created=20)] == ["hj-2", "hj-1"]  # oldest first


def test_news_kept_an_hour_with_no_spec_is_dropped() -> None:
    doc = domain.keep_early(None, _news("hj-0", "Running", 10), now=10)
    assert not domain.expired(doc, now=10 + domain.EARLY_NEWS_TTL)
    assert domain.expired(doc, now=11 + domain.EARLY_NEWS_TTL)
