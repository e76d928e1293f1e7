"""Pure parts of the global-scheduler: who waits for admission, and what each admitted one holds."""

from __future__ import annotations

from collections.abc import Mapping

import api
import fleetcore
import records
from api.quantity import add


def fleet_queues(queues: Mapping[str, records.QueueDoc]) -> dict[str, fleetcore.FleetQueue]:
    """Every global queue (the ``default`` queue always exists)."""
    result = {name: fleetcore.fleet_queue(api.decode(doc.manifest), doc.created)  # type: ignore[arg-type]
              for name, doc in queues.items()}
    if api.DEFAULT_QUEUE not in result:
        result[api.DEFAULT_QUEUE] = fleetcore.FleetQueue(name=api.DEFAULT_QUEUE)
    return result


def candidate(owner: records.HyperJobDoc, priority_classes: Mapping[str, int]) -> fleetcore.Candidate:
    manifest = api.decode(owner.manifest)
    if isinstance(manifest, api.Job):
        return fleetcore.job_candidate(manifest, owner.created, priority_classes)
    assert isinstance(manifest, api.HyperJob)
    return fleetcore.hyperjob_candidate(manifest, owner.created, priority_classes)


def unadmitted_owners(placements: Mapping[str, records.PlacementDoc], admitted: Mapping[str, object]) -> set[str]:
    return {p.owner for p in placements.values() if p.state == "Waiting" and p.owner not in admitted}


def allocated(admissions: Mapping[str, records.AdmissionDoc]) -> dict[str, dict[str, float]]:
    """Per queue, the requests of what it admitted and has not finished."""
    usage: dict[str, dict[str, float]] = {}
    for admission in admissions.values():
        usage[admission.queue] = add(usage.get(admission.queue, {}), admission.request)
    return usage


def finished_owners(placements: Mapping[str, records.PlacementDoc], admissions: Mapping[str, object]) -> list[str]:
    """Admitted owners with no child left that still runs (all finished, or all gone)."""
    live = {p.owner for p in placements.values() if not p.finished}
    return sorted(owner for owner in admissions if owner not in live)


def gang_size(owner: records.HyperJobDoc) -> int:
    """How many children must hold their reservations before any starts: the HyperJob's
    ``minAvailable`` (default all), when its children span clusters; 0 when no gang is needed."""
    if owner.plain or len({ref.cluster for ref in owner.children}) < 2:
        return 0
    hyperjob = api.decode(owner.manifest)
    assert isinstance(hyperjob, api.HyperJob)
    required = hyperjob.spec.min_available if hyperjob.spec.min_available is not None else len(owner.children)
    return required if required > 1 else 0
