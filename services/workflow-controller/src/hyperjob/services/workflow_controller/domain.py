"""The Jobs a CronJob or a JobFlow makes, as manifests the splitter takes (pure)."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import msgspec

from hyperjob import api, records
from hyperjob.api.job import JOB_API_VERSION

# What Volcano's controllers write on the jobs they make (labels.go, jobflow/constant.go at ed72c7c81).
SCHEDULED_TIMESTAMP = "volcano.sh/cronjob-scheduled-timestamp"
CREATED_BY_JOB_TEMPLATE = "volcano.sh/createdByJobTemplate"
CREATED_BY_JOB_FLOW = "volcano.sh/createdByJobFlow"
# A JobTemplate's own metadata is not copied onto its jobs (Volcano copies the spec only), except the
# simulator's annotations: they say how long the job's pods run, which is part of what a template means.
SIM_ANNOTATIONS = (api.SIM_DURATION, api.SIM_EXIT_CODE)


def cron_job(cron: api.CronJob, name: str, scheduled_at: float) -> api.RawDocument:
    """The Job a CronJob makes for one schedule time (``getJobFromTemplate``): the template's labels,
    annotations and spec, and the schedule time it is for."""
    template = cron.spec.job_template
    labels = _strings(template.metadata.get("labels"))
    annotations = {
        **_strings(template.metadata.get("annotations")),
        SCHEDULED_TIMESTAMP: rfc3339(scheduled_at, cron.spec.time_zone),
    }
    return _job(name, cron.metadata.namespace, labels, annotations, template.spec)


def flow_job(flow: api.JobFlow, template: api.JobTemplate, name: str) -> api.RawDocument:
    """The Job of one flow (``loadJobTemplateAndSetJob``): the template's spec, marked with where it came from."""
    namespace = flow.metadata.namespace
    marks = {
        CREATED_BY_JOB_TEMPLATE: f"{namespace}.{template.metadata.name}",
        CREATED_BY_JOB_FLOW: f"{namespace}.{flow.metadata.name}",
    }
    sim = {k: v for k, v in template.metadata.annotations.items() if k in SIM_ANNOTATIONS}
    return _job(name, namespace, dict(marks), {**sim, **marks}, template.spec)


def flow_hyperjob(flow: api.JobFlow, template: api.HyperJobTemplate, name: str) -> api.RawDocument:
    """The HyperJob of one flow whose template is a HyperJobTemplate: its spec, marked as a Job's would be."""
    namespace = flow.metadata.namespace
    marks = {
        CREATED_BY_JOB_TEMPLATE: f"{namespace}.{template.metadata.name}",
        CREATED_BY_JOB_FLOW: f"{namespace}.{flow.metadata.name}",
    }
    hyperjob = template.as_hyperjob(name)
    metadata = msgspec.structs.replace(hyperjob.metadata, labels=dict(marks), annotations=dict(marks))
    return api.encode(msgspec.structs.replace(hyperjob, metadata=metadata))


def flow_step(flow: api.JobFlow, template: api.JobTemplate | api.HyperJobTemplate, name: str) -> api.RawDocument:
    """What one flow makes from its template: a Volcano Job, or a HyperJob split across clusters."""
    if isinstance(template, api.HyperJobTemplate):
        return flow_hyperjob(flow, template, name)
    return flow_job(flow, template, name)


def step_phase(hyperjob_phase: str) -> str:
    """A HyperJob's phase as the Volcano Job phase a flow judges by (``jobcore.jobflow``): admitted
    or suspended is still Pending, a restart runs; Completed, Failed and Terminating are the same."""
    return {"Admitted": "Pending", "Suspended": "Pending", "Restarting": "Running"}.get(hyperjob_phase, hyperjob_phase)


def job_of_key(key: str) -> str:
    """The name in a HyperJob's key (``team-a/x`` → ``x``; ``x`` in ``default``)."""
    return key.rpartition("/")[2]


def job_key(kind: str, namespace: str, job: str) -> str:
    """How the splitter keys a job made here, and names it in its news (``HyperJobStatusChanged``,
    ``HyperJobDeleted``): a HyperJob by namespace and name (``api.object_key``), a plain Job by its
    fleet name (``api.fleet_key``: ``team-a-x`` for team-a/x, the name its clusters know it by;
    ADR 0010)."""
    return api.object_key(namespace, job) if kind == "HyperJob" else api.fleet_key(namespace, job)


def key_of(obj: api.CronJob | api.JobFlow | api.JobTemplate | api.HyperJobTemplate) -> str:
    """Where a workflow object is kept: by namespace and name (``api.object_key``), as the splitter
    keeps a HyperJob, so team-a/nightly and team-b/nightly are two."""
    return api.object_key(obj.metadata.namespace, obj.metadata.name)


def not_found(kind: str, namespace: str, name: str) -> str:
    """kubectl's NotFound, naming the namespace outside ``default`` (the reason ends "not found")."""
    where = f" in namespace {namespace!r}" if namespace != api.DEFAULT_NAMESPACE else ""
    return f"{kind} {name!r}{where} not found"


def namespace_of(manifest: api.RawDocument) -> str:
    """The namespace of a stored manifest (written in at apply: ``events.scoped_manifest``)."""
    metadata = manifest.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return str(namespace or api.DEFAULT_NAMESPACE)


def _job(
    name: str, namespace: str, labels: dict[str, str], annotations: dict[str, str], spec: api.JobSpec
) -> api.RawDocument:
    metadata: api.RawDocument = {"name": name}
    if namespace != "default":
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": metadata, "spec": msgspec.to_builtins(spec)}


def _strings(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def rfc3339(epoch: float, zone: str | None) -> str:
    """Go's ``time.RFC3339`` of ``epoch`` in ``zone`` (``Z`` for UTC)."""
    when = dt.datetime.fromtimestamp(epoch, zoneinfo.ZoneInfo(zone) if zone else dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S%z")
    if text.endswith("+0000") and not zone:
        return text[:-5] + "Z"
    return text[:-2] + ":" + text[-2:]


def templates_of(flow: api.JobFlow) -> set[str]:
    return {f.name for f in flow.spec.flows}


def made_keys(
    kind: str, key: str, doc: records.CronJobDoc | records.JobFlowDoc
) -> list[tuple[str, str, tuple[str, str]]]:
    """``(job key, job name, (owner kind, owner key))`` of each job the owner ``kind``/``key`` made."""
    namespace = namespace_of(doc.manifest)
    return [(job_key(made.kind, namespace, job), job, (kind, key)) for job, made in doc.jobs.items()]
