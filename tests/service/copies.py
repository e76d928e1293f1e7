"""How many pods ran two copies at once, from what the streams recorded (pure; used by the chaos
suite's ``outage_kit`` and the container suite's ``observe``).

A copy is a pod on one cluster and node, one uid. It runs from the agent's Running report until a
report of another phase (Succeeded, Failed, Deleted), or until its agent froze it: a frozen copy
makes no progress, and the agent says when it froze (``PodsFrozen.frozen_at``, sent once it is back
on the bus). A frozen copy its job-controller confirmed (a resume-only ``StartPods`` naming its
uid and node) runs again from that confirmation. One never ended runs for ever. Two spans of one
pod that overlap are two copies running at once; a restart in place reports Running again and
opens no new span."""

from __future__ import annotations

from collections.abc import Iterable

from hyperjob import events

Key = tuple[str, str, str, str]  # pod, cluster, node, uid
RUN, STOP = 0, 1


class Copies:
    def __init__(
        self,
        reports: Iterable[tuple[str, events.PodReport]],
        frozen: Iterable[events.PodsFrozen] = (),
        confirmed: Iterable[events.StartPods] = (),
    ) -> None:
        changes: dict[Key, list[tuple[float, int]]] = {}
        for cluster, r in reports:
            changes.setdefault((r.pod, cluster, r.node, r.uid), []).append(
                (r.at, RUN if r.phase == "Running" else STOP)
            )
        for ask in frozen:
            for p in ask.pods:
                changes.setdefault((p.pod, ask.cluster, p.node, p.uid), []).append((ask.frozen_at, STOP))
        for start in confirmed:
            if start.resume_only:
                for s in start.pods:
                    key = (s.pod, start.cluster, s.node, s.uid)
                    if key in changes:  # resumes only what ran
                        changes[key].append((start.occurred_at, RUN))
        self.spans: dict[str, list[tuple[float, float]]] = {}
        for key, seen in changes.items():
            self.spans.setdefault(key[0], []).extend(_spans(sorted(seen, key=lambda c: c[0])))

    def concurrent(self) -> int:
        """How many pods had two copies running at overlapping times."""
        return sum(1 for spans in self.spans.values() if _overlap(sorted(spans)))


def _spans(changes: list[tuple[float, int]]) -> list[tuple[float, float]]:
    spans, since = [], None
    for at, change in changes:
        if change == RUN and since is None:
            since = at
        elif change == STOP and since is not None:
            spans.append((since, at))
            since = None
    if since is not None:
        spans.append((since, float("inf")))
    return spans


def _overlap(spans: list[tuple[float, float]]) -> bool:
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))
