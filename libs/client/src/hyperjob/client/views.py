"""The read model of a running system: what ``hyperjob get``, ``describe``, the dashboard and the
apiserver show.

Each kind has a loader (``hyperjobs``, ``jobs``, ...) returning one flat dict per object (what the
table shows, and ``-o json|yaml`` for kinds that are not API objects) and a ``rows`` function
(``wide`` adds columns). API objects also have a ``manifest`` function: the object as kubectl
prints it (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``), which ``apply`` takes back
(server-set metadata and ``status`` are ignored there). Everything here reads the store and the
bus through ``Client``; nothing reads local files.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

import msgspec

from hyperjob import api, fleetcore, jobcore, records
from hyperjob.api.quantity import format_quantity
from hyperjob.jobcore import model as jm

from . import Client, eventlog

TERMINAL_HYPERJOB_PHASES = ("Completed", "Failed", "Aborted")
HYPERJOB_LABEL = "volcano.sh/hyperjob-name"
# One object as `get` shows it: a JSON view built from stored documents (and a manifest as YAML
# wrote it) for tables, -o json/yaml and jsonpath, so its values are whatever JSON holds.
View = dict[str, Any]


async def hyperjobs(client: Client, name: str | None) -> list[View]:
    docs = await client.docs(records.HYPERJOB, records.HyperJobDoc)
    statuses = await client.docs(records.HYPERJOB_STATUS, records.HyperJobStatusDoc)
    prices = {n: r.prices for n, r in (await client.capacities()).items()}
    items = []
    for doc in docs.values():
        metadata = doc.manifest.get("metadata", {})
        if doc.plain or (name and metadata.get("name", doc.name) != name):
            continue
        status = statuses.get(doc.name)  # kept under the HyperJob's key (team-a/x; x in default)
        phase = "Terminating" if doc.deleting else status.phase if status else "Pending"
        items.append(
            {
                "name": metadata.get("name", doc.name),
                "namespace": metadata.get("namespace", "default"),
                "labels": metadata.get("labels", {}),
                "phase": phase,
                "generation": doc.generation,
                "splitCount": len(doc.children),
                "children": [msgspec.to_builtins(c) for c in doc.children],
                "waitingReason": _waiting_reason(phase, doc, status),
                "status": status.status if status else {},
                "lifecycle": doc.lifecycle,
                "restarts": doc.restarts,
                "created": doc.created,
                "manifest": doc.manifest,
                **_cost_field(estimated_cost(doc, prices)),
            }
        )
    return items


def _cost_field(cost: float | None) -> View:
    """``describe`` shows the estimate only where there is one (every cluster used has prices)."""
    return {} if cost is None else {"estimatedCostPerHour": cost}


def estimated_cost(doc: records.HyperJobDoc, prices: dict[str, dict[str, float]]) -> float | None:
    """The plan's price per hour by its clusters' declared prices (None: not planned, or a cluster
    without prices), rounded to cents."""
    if not doc.children:
        return None
    try:
        hyperjob = api.decode(doc.manifest)
    except api.ManifestError:
        return None  # a manifest the API no longer takes: shown without an estimate
    if not isinstance(hyperjob, api.HyperJob):
        return None
    children = [(c.replicated_job, c.cluster, c.tasks) for c in doc.children]
    cost = fleetcore.plan_cost(hyperjob, children, prices)
    return None if cost is None else round(cost, 2)


def _waiting_reason(phase: str, doc: records.HyperJobDoc, status: records.HyperJobStatusDoc | None) -> str:
    """Why it waits, only while it waits: a HyperJob that runs or ended shows no stale reason."""
    if phase not in ("Pending", "Admitted"):
        return ""
    return doc.waiting_reason or (str(status.status.get("waitingReason", "")) if status else "")


def hyperjob_manifest(item: View) -> View:
    status = {
        **item["status"],
        "phase": item["phase"],
        "waitingReason": item["waitingReason"],
        "splitCount": item["splitCount"],
        "children": item["children"],
        "restarts": item["restarts"],
        **_cost_field(item.get("estimatedCostPerHour")),
    }
    return _manifest(item["manifest"], item["created"], status)


def hyperjob_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for item in items:
        placement = item["status"].get("placement") or _planned(item["children"])
        row = [
            item["name"],
            item["phase"],
            str(item["splitCount"]),
            ",".join(f"{c}:{n}" for c, n in sorted(placement.items())) or "-",
            _age(item["created"]),
            item["waitingReason"],
        ]
        if wide:
            counts = _pod_counts(item["status"])
            row[5:5] = [
                ",".join(hyperjob_queues(item["manifest"])),
                "/".join(str(counts[k]) for k in ("pending", "running", "succeeded", "failed")),
                str(item["restarts"]),
                ",".join(c["name"] for c in item["children"]) or "-",
            ]
        rows.append(row)
    header = ["NAME", "PHASE", "CHILDREN", "PLACEMENT", "AGE", "WAITING"]
    if wide:
        header[5:5] = ["QUEUE", "PENDING/RUNNING/SUCCEEDED/FAILED", "RESTARTS", "CHILD JOBS"]
    return header, rows


def _pod_counts(status: View) -> dict[str, int]:
    return {
        k: sum(rj.get(k, 0) for rj in status.get("replicatedJobsStatus", []))
        for k in ("pending", "running", "succeeded", "failed")
    }


def hyperjob_queues(manifest: View) -> list[str]:
    """The queues a HyperJob's manifest submits to, sorted: its replicated jobs' (the short form)
    or its own (the conceptual form)."""
    spec = manifest.get("spec", {})
    found = {rj.get("templateSpec", {}).get("queue", api.DEFAULT_QUEUE) for rj in spec.get("replicatedJobs", [])}
    return sorted(found) or [spec.get("queue", api.DEFAULT_QUEUE)]


def _planned(children: list[View]) -> dict[str, int]:
    placement: dict[str, int] = {}
    for child in children:
        if child.get("cluster"):
            placement[child["cluster"]] = placement.get(child["cluster"], 0) + child["replicas"]
    return placement


async def jobs(client: Client, name: str | None) -> list[View]:
    """Every Volcano Job in every cluster, and plain Jobs accepted but not on a cluster yet."""
    items = []
    owners = await child_owners(client)
    plain = {doc.name: doc for doc in await _plain_jobs(client, None)}  # every one: they rename records
    placed: set[str] = set()
    for cluster in await client.cluster_names():
        podgroups = await client.docs(records.pgphase_kind(cluster), records.PodGroupPhaseDoc)
        for record in (await client.docs(records.job_kind(cluster), jm.JobRecord)).values():
            # A plain Job runs under its fleet name (team-b-x) and is shown as applied (x, -n team-b).
            shown = _applied_name(plain[record.name]) if record.name in plain else record.name
            if name and shown != name:
                continue
            placed.add(record.name)
            counts = jobcore.counts(record)
            items.append(
                {
                    "name": shown,
                    "namespace": record.namespace,
                    "labels": record.job.metadata.labels,
                    "cluster": cluster,
                    "hyperJob": record.job.metadata.labels.get(HYPERJOB_LABEL) or owners.get(record.name),
                    "phase": record.phase,
                    "retryCount": record.retry_count,
                    "queue": record.spec.queue,
                    "minAvailable": record.spec.min_available,
                    "pending": counts.pending,
                    "running": counts.running,
                    "succeeded": counts.succeeded,
                    "failed": counts.failed,
                    "terminating": counts.terminating,
                    # A plain Job was created when applied (its uid derives from it): not when its
                    # cluster made the record, which goes before the document when it is deleted.
                    "created": plain[record.name].created if record.name in plain else record.created_at,
                    "waitingReason": _unschedulable(record, podgroups.get(record.name)),
                    # A plain Job as applied (round-trips through apply); a child as its cluster runs it.
                    "manifest": plain[record.name].manifest if record.name in plain else api.encode(record.job),
                    "applied": plain[record.name].applied if record.name in plain else {},
                    "pods": [
                        {
                            "name": p.name,
                            "phase": p.phase,
                            "node": p.node,
                            "restarts": p.restarts,
                            "created": p.status.created_at,
                            "started": p.status.started_at,
                            "finished": p.status.finished_at,
                        }
                        for p in sorted(record.pods.values(), key=lambda p: (p.task, p.index))
                    ],
                }
            )
    waiting = [doc for doc in plain.values() if doc.name not in placed and (not name or _applied_name(doc) == name)]
    items += [_waiting_job(doc) for doc in waiting]
    return sorted(items, key=lambda i: (i["name"], i["cluster"]))


def _unschedulable(record: jm.JobRecord, podgroup: records.PodGroupPhaseDoc | None) -> str:
    """A waiting job's podgroup Unschedulable message (of this incarnation of the job)."""
    if podgroup is None or record.phase != "Pending" or not _current(record, podgroup):
        return ""
    return podgroup.reason


def _current(record: jm.JobRecord, podgroup: records.PodGroupPhaseDoc) -> bool:
    """Whether the scheduler's word on a podgroup is about this incarnation of the job."""
    return podgroup.incarnation == f"{record.uid}/{record.version}"


async def _plain_jobs(client: Client, name: str | None) -> list[records.HyperJobDoc]:
    docs = (await client.docs(records.HYPERJOB, records.HyperJobDoc)).values()
    return [d for d in docs if d.plain and d.manifest.get("kind") == "Job" and (not name or _applied_name(d) == name)]


def _applied_name(doc: records.HyperJobDoc) -> str:
    """A plain Job's name as applied; ``doc.name`` is its fleet name (ADR 0010)."""
    metadata = doc.manifest.get("metadata")
    return str(metadata.get("name") or doc.name) if isinstance(metadata, dict) else doc.name


async def child_owners(client: Client) -> dict[str, str]:
    """Child job name → its HyperJob."""
    docs = (await client.docs(records.HYPERJOB, records.HyperJobDoc)).values()
    return {ref.name: d.name for d in docs if not d.plain for ref in d.children}


def _waiting_job(doc: records.HyperJobDoc) -> View:
    """A plain Job the system accepted that no cluster runs yet (waiting for admission or placement)."""
    metadata, spec = doc.manifest.get("metadata", {}), doc.manifest.get("spec", {})
    replicas = sum(task.get("replicas", 1) for task in spec.get("tasks", []))
    return {
        "name": _applied_name(doc),
        "namespace": metadata.get("namespace", "default"),
        "labels": metadata.get("labels", {}),
        "cluster": (doc.children[0].cluster if doc.children else "") or "-",
        "hyperJob": None,
        "phase": "Terminating" if doc.deleting else "Pending",
        "retryCount": 0,
        "queue": spec.get("queue", api.DEFAULT_QUEUE),
        "minAvailable": spec.get("minAvailable", 0),
        "pending": replicas,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "terminating": 0,
        "created": doc.created,
        "waitingReason": doc.waiting_reason,
        "manifest": doc.manifest,
        "applied": doc.applied,
        "pods": [],
    }


def job_manifest(item: View) -> View:
    status = {
        "state": {"phase": item["phase"]},
        "cluster": item["cluster"],
        "waitingReason": item["waitingReason"],
        "hyperJob": item["hyperJob"],
        **{k: item[k] for k in ("pending", "running", "succeeded", "failed", "terminating", "retryCount")},
        "pods": item["pods"],
    }
    return _manifest(item["manifest"], item["created"], status)


def job_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        row = [
            i["name"],
            i["cluster"],
            i["hyperJob"] or "-",
            i["phase"],
            str(i["retryCount"]),
            f"{i['pending']}/{i['running']}/{i['succeeded']}/{i['failed']}",
        ]
        if wide:
            row += [i["queue"], str(i["minAvailable"]), _age(i["created"])]
        rows.append([*row, i["waitingReason"]])
    header = ["NAME", "CLUSTER", "HYPERJOB", "PHASE", "RETRIES", "PENDING/RUNNING/SUCCEEDED/FAILED"]
    return header + (["QUEUE", "MINAVAILABLE", "AGE"] if wide else []) + ["WAITING"], rows


async def pods(client: Client, name: str | None) -> list[View]:
    items = []
    for cluster in await client.cluster_names():
        for record in (await client.docs(records.job_kind(cluster), jm.JobRecord)).values():
            containers = _main_containers(record.job)
            for pod in sorted(record.pods.values(), key=lambda p: (p.task, p.index)):
                if name and pod.name != name:
                    continue
                items.append(
                    {
                        "name": pod.name,
                        "namespace": pod.namespace,
                        "labels": pod.labels,
                        "cluster": cluster,
                        "job": record.name,
                        "task": pod.task,
                        "phase": pod.phase,
                        "node": pod.node or "",
                        "restarts": pod.restarts,
                        "container": containers.get(pod.task, pod.task),
                        # How its container last ended, as the node said (kubectl's terminated state).
                        "reason": pod.status.reason,
                        "exitCode": pod.status.exit_code,
                    }
                )
    return sorted(items, key=lambda i: (i["cluster"], i["name"]))


def _main_containers(job: api.Job) -> dict[str, str]:
    """Each task's main container's name (the one a pod runs), by task."""
    return {t.name: t.template.spec.containers[0].name for t in job.spec.tasks if t.template.spec.containers}


def pod_manifest(item: View) -> View:
    status: View = {"phase": item["phase"], "cluster": item["cluster"], "restarts": item["restarts"]}
    container: View = {"name": item["container"], "restartCount": item["restarts"]}
    if item["exitCode"] is not None:
        # As Kubernetes says it, in the container's status: an ended pod's container is
        # terminated; a restarted one was (its last state).
        state = "state" if item["phase"] in ("Succeeded", "Failed") else "lastState"
        terminated = {"exitCode": item["exitCode"], **({"reason": item["reason"]} if item["reason"] else {})}
        container[state] = {"terminated": terminated}
    status["containerStatuses"] = [container]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": item["name"], "namespace": item["namespace"], "labels": item["labels"]},
        # Its container by name: kubectl logs takes a pod's first container when none is named.
        "spec": {"nodeName": item["node"], "containers": [{"name": item["container"]}]},
        "status": status,
    }


def pod_status(item: View) -> str:
    """kubectl's STATUS of a pod: a Failed pod's container's reason (``OOMKilled``, ``Error``)
    where the node gave one, else its phase."""
    if item["phase"] == "Failed" and item["reason"]:
        return str(item["reason"])
    return str(item["phase"])


def pod_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        row = [i["name"], i["cluster"], pod_status(i), str(i["restarts"]), i["node"] or "<none>"]
        if wide:
            row += [i["job"], i["task"]]
        rows.append(row)
    return ["NAME", "CLUSTER", "STATUS", "RESTARTS", "NODE"] + (["JOB", "TASK"] if wide else []), rows


async def podgroups(client: Client, name: str | None) -> list[View]:
    """A podgroup per Volcano Job (named after it, as Volcano does), with its scheduler phase."""
    items = []
    for cluster in await client.cluster_names():
        phases = await client.docs(records.pgphase_kind(cluster), records.PodGroupPhaseDoc)
        for record in (await client.docs(records.job_kind(cluster), jm.JobRecord)).values():
            if name and record.name != name:
                continue
            doc = phases.get(record.name)
            phase = jobcore.shown_phase(record, doc.phase if doc else None, doc.incarnation if doc else None)
            items.append(
                {
                    "name": record.name,
                    "namespace": record.namespace,
                    "labels": record.job.metadata.labels,
                    "cluster": cluster,
                    "phase": phase,
                    "reason": doc.reason if doc and phase == doc.phase and _current(record, doc) else "",
                    "minMember": record.spec.min_available,
                    "queue": record.spec.queue,
                    "priorityClassName": record.spec.priority_class_name,
                }
            )
    return sorted(items, key=lambda i: (i["name"], i["cluster"]))


def podgroup_manifest(item: View) -> View:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": item["name"], "namespace": item["namespace"], "labels": item["labels"]},
        "spec": {
            "minMember": item["minMember"],
            "queue": item["queue"],
            **({"priorityClassName": item["priorityClassName"]} if item["priorityClassName"] else {}),
        },
        "status": {"phase": item["phase"], "cluster": item["cluster"]},
    }


def podgroup_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        row = [i["name"], i["cluster"], i["phase"], str(i["minMember"]), i["queue"]]
        if wide:
            row += [i["priorityClassName"] or "-", i["reason"] or "-"]
        rows.append(row)
    return ["NAME", "CLUSTER", "STATUS", "MINMEMBER", "QUEUE"] + (["PRIORITYCLASS", "REASON"] if wide else []), rows


async def priorityclasses(client: Client, name: str | None) -> list[View]:
    docs = await client.docs(records.PRIORITY_CLASS, records.PriorityClassDoc)
    return [
        {"name": n, "value": d.value, "globalDefault": d.global_default, "manifest": d.manifest, "created": 0.0}
        for n, d in docs.items()
        if not name or n == name
    ]


def priorityclass_manifest(item: View) -> View:
    return {k: v for k, v in item["manifest"].items() if k != "status"}


def priorityclass_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = [[i["name"], str(i["value"]), str(i["globalDefault"]).lower()] for i in items]
    if wide:
        for row, i in zip(rows, items, strict=True):
            row.append(i["manifest"].get("preemptionPolicy", "PreemptLowerPriority"))
    return ["NAME", "VALUE", "GLOBAL-DEFAULT"] + (["PREEMPTIONPOLICY"] if wide else []), rows


async def queues(client: Client, name: str | None) -> list[View]:
    """Each queue with vcctl's columns: its podgroups by phase and its resources, per cluster and
    fleet-wide (allocated and deserved as each cluster's last scheduling session saw them)."""
    docs = await client.docs(records.QUEUE, records.QueueDoc)
    items = [
        {"name": n, "state": d.state, "spec": d.manifest.get("spec", {}), "created": d.created, "manifest": d.manifest}
        for n, d in docs.items()
        if not name or n == name
    ]
    if api.DEFAULT_QUEUE not in docs and (not name or name == api.DEFAULT_QUEUE):
        default = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}
        spec = {"weight": 1, "reclaimable": True}
        items.append({"name": api.DEFAULT_QUEUE, "state": "Open", "spec": spec, "created": 0.0, "manifest": default})
    groups = await podgroups(client, None)
    usage = {
        c: await client.docs(records.queue_usage_kind(c), records.QueueUsageDoc) for c in await client.cluster_names()
    }
    for item in items:
        mine = [g for g in groups if g["queue"] == item["name"]]
        item["podgroups"] = {
            phase.lower(): sum(1 for g in mine if g["phase"] == phase) for phase in ("Inqueue", "Pending", "Running")
        }
        item["usage"] = {
            cluster: msgspec.to_builtins(per_queue[item["name"]])
            for cluster, per_queue in usage.items()
            if item["name"] in per_queue
        }
        item["allocated"] = _sum([u.get("allocated", {}) for u in item["usage"].values()])
        item["deserved"] = _sum([u.get("deserved", {}) for u in item["usage"].values()])
    return sorted(items, key=lambda i: i["name"])


def _sum(maps: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for values in maps:
        for key, value in values.items():
            total[key] = total.get(key, 0.0) + value
    return total


def queue_manifest(item: View) -> View:
    status = {
        "state": item["state"],
        **item["podgroups"],
        "allocated": item["allocated"],
        "deserved": item["deserved"],
        "clusters": item["usage"],
    }
    return _manifest(item["manifest"], item["created"], status)


def queue_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        groups = i["podgroups"]
        row = [
            i["name"],
            str(i["spec"].get("weight", 1)),
            i["state"],
            str(groups["inqueue"]),
            str(groups["pending"]),
            str(groups["running"]),
            _resources(i["allocated"]),
        ]
        if wide:
            row += [
                _resources(i["deserved"]),
                _spec_resources(i["spec"].get("capability")),
                i["spec"].get("parent", "-"),
            ]
        rows.append(row)
    header = ["NAME", "WEIGHT", "STATE", "INQUEUE", "PENDING", "RUNNING", "ALLOCATED"]
    return header + (["DESERVED", "CAPABILITY", "PARENT"] if wide else []), rows


# -- the workflow-controller's kinds: CronJob, JobFlow, JobTemplate ------------------------------------


async def cronjobs(client: Client, name: str | None) -> list[View]:
    docs = await client.docs(records.CRONJOB, records.CronJobDoc)
    items = []
    for key, doc in docs.items():
        n = api.split_key(key)[1]  # kept by namespace and name (api.object_key)
        if name and n != name:
            continue
        metadata, spec = doc.manifest.get("metadata", {}), doc.manifest.get("spec", {})
        items.append(
            {
                "name": n,
                "namespace": metadata.get("namespace", "default"),
                "labels": metadata.get("labels", {}),
                "schedule": spec.get("schedule", ""),
                "timeZone": spec.get("timeZone"),
                "suspend": spec.get("suspend", False),
                "concurrencyPolicy": spec.get("concurrencyPolicy", "Allow"),
                "active": doc.active,
                "lastScheduleTime": doc.last_schedule_time,
                "lastSuccessfulTime": doc.last_successful_time,
                "nextScheduleTime": doc.next_sync,
                "jobs": _made_jobs(doc.jobs),
                "message": doc.message,
                "created": doc.created,
                "manifest": doc.manifest,
            }
        )
    return items


def cronjob_manifest(item: View) -> View:
    """Kubernetes' CronJob status: the active jobs, the last schedule and the last success."""
    status: View = {"active": [{"kind": "Job", "name": job} for job in item["active"]]}
    for key in ("lastScheduleTime", "lastSuccessfulTime"):
        if item[key] is not None:
            status[key] = _timestamp(item[key])
    return _manifest(item["manifest"], item["created"], status)


def cronjob_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        last = i["lastScheduleTime"]
        row = [
            i["name"],
            i["schedule"],
            i["timeZone"] or "<none>",
            str(i["suspend"]),
            str(len(i["active"])),
            _age(last) if last is not None else "<none>",
            _age(i["created"]),
        ]
        if wide:
            row += [i["concurrencyPolicy"], ",".join(i["jobs"]) or "-", i["message"] or "-"]
        rows.append(row)
    header = ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    return header + (["POLICY", "JOBS", "MESSAGE"] if wide else []), rows


async def jobflows(client: Client, name: str | None) -> list[View]:
    docs = await client.docs(records.JOBFLOW, records.JobFlowDoc)
    items = []
    for key, doc in docs.items():
        n = api.split_key(key)[1]  # kept by namespace and name (api.object_key)
        if name and n != name:
            continue
        metadata = doc.manifest.get("metadata", {})
        items.append(
            {
                "name": n,
                "namespace": metadata.get("namespace", "default"),
                "labels": metadata.get("labels", {}),
                "phase": doc.phase,
                "status": {_camel(k): v for k, v in doc.status.items() if k != "phase"},
                "jobs": _made_jobs(doc.jobs),
                "refused": doc.refused,
                "message": doc.message,
                "created": doc.created,
                "manifest": doc.manifest,
            }
        )
    return items


def jobflow_manifest(item: View) -> View:
    """Volcano's JobFlow status: the state, the jobs by phase (``unKnowJobs`` as Volcano spells it)
    and one entry per job."""
    lists = {("unKnowJobs" if k == "unknownJobs" else k): v for k, v in item["status"].items()}
    job_list = [
        {"name": job, "state": made["phase"], "startTimestamp": _timestamp(made["created"])}
        for job, made in item["jobs"].items()
    ]
    status = {"state": {"phase": item["phase"]}, **lists, "jobStatusList": job_list}
    return _manifest(item["manifest"], item["created"], status)


def jobflow_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        row = [i["name"], i["phase"], _age(i["created"])]
        if wide:
            by_phase = [len(i["status"].get(f"{p}Jobs", [])) for p in ("pending", "running", "completed", "failed")]
            row += ["/".join(map(str, by_phase)), i["message"] or "-"]
        rows.append(row)
    return ["NAME", "STATUS", "AGE"] + (["PENDING/RUNNING/COMPLETED/FAILED", "MESSAGE"] if wide else []), rows


async def jobtemplates(client: Client, name: str | None) -> list[View]:
    return await _templates(client, name, "JobTemplate")


async def hyperjobtemplates(client: Client, name: str | None) -> list[View]:
    return await _templates(client, name, "HyperJobTemplate")


async def _templates(client: Client, name: str | None, kind: str) -> list[View]:
    """The templates of ``kind``: they share one table, as a flow names either by name alone."""
    docs = await client.docs(records.JOBTEMPLATE, records.JobTemplateDoc)
    flows = (await client.docs(records.JOBFLOW, records.JobFlowDoc)).values()
    items = []
    for key, doc in docs.items():
        n = api.split_key(key)[1]  # kept by namespace and name (api.object_key)
        if (name and n != name) or doc.manifest.get("kind") != kind:
            continue
        metadata = doc.manifest.get("metadata", {})
        # The jobs made from it (Volcano's status.jobDependsOnList): a flow's step of this name.
        made = sorted(
            job
            for flow in flows
            for job in flow.jobs
            if job == f"{flow.manifest.get('metadata', {}).get('name', '')}-{n}"
        )
        items.append(
            {
                "name": n,
                "namespace": metadata.get("namespace", "default"),
                "labels": metadata.get("labels", {}),
                "jobDependsOnList": made,
                "created": doc.created,
                "manifest": doc.manifest,
            }
        )
    return items


def jobtemplate_manifest(item: View) -> View:
    return _manifest(item["manifest"], item["created"], {"jobDependsOnList": item["jobDependsOnList"]})


def jobtemplate_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = [[i["name"], _age(i["created"])] + ([",".join(i["jobDependsOnList"]) or "-"] if wide else []) for i in items]
    return ["NAME", "AGE"] + (["JOBS"] if wide else []), rows


def _made_jobs(jobs: dict[str, records.MadeJob]) -> dict[str, View]:
    return {
        job: {"phase": made.phase or "Pending", "created": made.created, "scheduledAt": made.scheduled_at}
        for job, made in sorted(jobs.items())
    }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def event_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        # As kubectl: the count in -o wide (and describe), so that -w reprints a row when it recurs.
        row = [_age(i["lastTimestamp"]), i["type"], i["reason"], i["object"], i["message"]]
        if wide:
            row += [i["cluster"] or "-", _age(i["firstTimestamp"]), str(i["count"])]
        rows.append(row)
    header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    return header + (["CLUSTER", "FIRST SEEN", "COUNT"] if wide else []), rows


def _spec_resources(values: View | None) -> str:
    return ",".join(f"{k.split('/')[-1]}={v}" for k, v in (values or {}).items()) or "-"


def _manifest(applied: View, created: float, status: View) -> View:
    """The object as applied, with the server-set metadata and the status kubectl shows."""
    metadata = {**applied.get("metadata", {})}
    metadata.setdefault("namespace", "default")
    if created:
        metadata["creationTimestamp"] = _timestamp(created)
    body = {k: v for k, v in applied.items() if k not in ("metadata", "status")}
    return {
        "apiVersion": body.pop("apiVersion", ""),
        "kind": body.pop("kind", ""),
        "metadata": metadata,
        **body,
        "status": status,
    }


def _timestamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def clusters(client: Client, name: str | None) -> list[View]:
    now = time.time()
    return [
        {
            "name": n,
            **{
                k: v
                for k, v in msgspec.to_builtins(r).items()
                if k not in ("node_classes", "cluster") and k not in _ENVELOPE
            },
            "lastReportAge": round(now - r.occurred_at, 1),
        }
        for n, r in (await client.capacities()).items()
        if not name or n == name
    ]


_ENVELOPE = (
    "type",
    "event_id",
    "occurred_at",
    "producer",
    "correlation_id",
    "causation_id",
    "aggregate_id",
    "aggregate_version",
)


def cluster_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            i["name"],
            f"{i['ready_nodes']}/{i['nodes']}",
            _resources(i["free"]),
            ",".join(f"{m}={n:g}" for m, n in sorted(i["free_accelerators"].items())) or "-",
            ",".join(f"{s}={n}" for s, n in i["gangs"].items()) or "-",
            f"{i['gpu_healthy_nodes']}/{i['fabric_healthy_nodes']}",
            f"{i['lastReportAge']:g}s",
        ]
        + (
            [_resources(i["allocatable"]), ",".join(f"{c}={g:g}" for c, g in sorted(i["links"].items())) or "-"]
            if wide
            else []
        )
        for i in items
    ]
    header = ["NAME", "READY", "FREE", "FREE GPUS", "PODS THAT FIT", "HEALTHY GPU/FABRIC", "REPORTED"]
    return header + (["ALLOCATABLE", "LINKS GB/S"] if wide else []), rows


async def nodes(client: Client, name: str | None) -> list[View]:
    items = []
    for cluster in await client.cluster_names():
        usage = await client.store.nodes(cluster)
        for node in (await client.node_statuses(cluster)).values():
            if name and node.node != name:
                continue
            used = usage[node.node].used if node.node in usage else {}
            items.append(
                {
                    "name": node.node,
                    "cluster": cluster,
                    "ready": node.ready,
                    "labels": node.labels,
                    "allocatable": node.allocatable,
                    "used": used,
                    "gpuHealthy": node.gpu_ok,
                    "fabricHealthy": node.fabric_ok,
                    "health": node.health_reasons,
                }
            )
    return sorted(items, key=lambda i: (i["cluster"], i["name"]))


def node_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        row = [
            i["cluster"],
            i["name"],
            "Ready" if i["ready"] else "NotReady",
            _resources(i["used"]),
            _resources(i["allocatable"]),
        ]
        if wide:
            row += [
                "ok" if i["gpuHealthy"] else "sick",
                "ok" if i["fabricHealthy"] else "sick",
                ",".join(i["health"]) or "-",
                i["labels"].get("nvidia.com/gpu.product", "-"),
            ]
        rows.append(row)
    header = ["CLUSTER", "NAME", "STATUS", "USED", "ALLOCATABLE"]
    return header + (["GPU", "FABRIC", "HEALTH", "GPU MODEL"] if wide else []), rows


def _resources(values: dict[str, float]) -> str:
    shown = ("cpu", "memory", "nvidia.com/gpu", "pods")
    return ",".join(f"{k.split('/')[-1]}={format_quantity(k, v)}" for k, v in values.items() if k in shown) or "-"


def age(seconds: float) -> str:
    """kubectl's short ages: 45s, 12m, 5h, 3d."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 2 * 3600:
        return f"{s // 60}m"
    if s < 2 * 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _age(created: float) -> str:
    return age(time.time() - created)


async def load_events(client: Client) -> list[eventlog.Event]:
    """Every Event of the log, each in its object's namespace under its own name (a plain Job runs
    under its fleet name, ADR 0010; one never dispatched has its namespace from the store only)."""
    plain = await _plain_jobs(client, None)
    known = {doc.name: str(doc.manifest.get("metadata", {}).get("namespace") or api.DEFAULT_NAMESPACE) for doc in plain}
    names = {doc.name: _applied_name(doc) for doc in plain}
    return await eventlog.load(client.bus, known, names)


def selector(text: str) -> Callable[[dict[str, str]], bool]:
    """kubectl's equality-based label selector: ``k=v``, ``k==v``, ``k!=v``, ``k`` and ``!k``, all required."""
    tests: list[Callable[[dict[str, str]], bool]] = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        if "!=" in term:
            key, value = (p.strip() for p in term.split("!=", 1))
            tests.append(_label_test(key, value, want=False))
        elif "=" in term:
            key, value = (p.strip() for p in term.replace("==", "=").split("=", 1))
            tests.append(_label_test(key, value, want=True))
        elif term.startswith("!"):
            tests.append(_label_test(term[1:].strip(), None, want=False))
        else:
            tests.append(_label_test(term, None, want=True))
        if not key_ok(term):
            raise ValueError(f"invalid label selector {text!r}")
    return lambda labels: all(test(labels) for test in tests)


def _label_test(key: str, value: str | None, *, want: bool) -> Callable[[dict[str, str]], bool]:
    """Whether the labels have ``key`` (``value`` None) or ``key=value``, is ``want``."""
    if value is None:
        return lambda labels: (key in labels) == want
    return lambda labels: (labels.get(key) == value) == want


def key_ok(term: str) -> bool:
    key = term.lstrip("!").replace("==", "=").replace("!=", "=").split("=", 1)[0].strip()
    return bool(key) and " " not in key


def table(header: list[str], rows: list[list[str]], no_headers: bool = False) -> str:
    """Columns padded to their widest cell, three spaces apart, as kubectl prints them."""
    shown = rows if no_headers else [header, *rows]
    widths = [max(len(str(c)) for c in column) for column in zip(*shown, strict=True)] if shown else []
    return "\n".join("   ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in shown)
