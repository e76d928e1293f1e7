"""The workflow-controller's handlers: answer applies and deletes of its kinds, sync each CronJob
and JobFlow on its news, and carry out what the pure cores decide."""

from __future__ import annotations

from typing import Any, TypeVar, overload

import msgspec
from msgspec.structs import replace

from hyperjob import api, events, records
from hyperjob.events import subjects
from hyperjob.jobcore import cronjob, jobflow
from hyperjob.servicekit import Reaction, Runtime, Table, answers, present

from . import domain

T = TypeVar("T")
U = TypeVar("U")

Answer = events.RequestAccepted | events.RequestRejected


class WorkflowController:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.cronjobs = runtime.table(records.CRONJOB, records.CronJobDoc)
        self.flows = runtime.table(records.JOBFLOW, records.JobFlowDoc)
        self.templates = runtime.table(records.JOBTEMPLATE, records.JobTemplateDoc)
        # Every object is kept under its ``api.object_key``: team-a/nightly and team-b/nightly are two.
        self.owners: dict[str, tuple[str, str]] = {}  # job key (``domain.job_key``) → (owner kind, owner key)
        # job key → the job's name in its owner (a plain Job's key is its fleet name: ``team-a-x``)
        self.made_names: dict[str, str] = {}
        self.asked: dict[str, tuple[str, str, str]] = {}  # a job's apply id → (owner kind, owner key, job)
        runtime.on_load(self._loaded)

    def _loaded(self) -> None:
        for table in (self.cronjobs, self.flows, self.templates):
            _rekey(table)
        self.owners, self.asked, self.made_names = {}, {}, {}
        for key, cron in self.cronjobs.items():
            self._claim("CronJob", key, cron)
            self._arm(key, cron)
        for key, flow in self.flows.items():
            self._claim("JobFlow", key, flow)

    # -- requests ------------------------------------------------------------------------------------

    def concerns(self, msg: events.Message) -> bool:
        """Whether ``msg`` is about a workflow object or a job made here. Most of what this
        controller consumes is every HyperJob's news: this cheap look spares it the handling."""
        if isinstance(msg, events.ApplyManifest):
            return _kind_and_name(msg.manifest)[0] in api.WORKFLOW_KINDS
        if isinstance(msg, events.DeleteObject):
            return msg.kind in api.WORKFLOW_KINDS
        if isinstance(msg, events.RequestAccepted):
            return False  # only a refusal changes what a job's owner does
        if isinstance(msg, events.JobPhaseChanged):
            return not msg.hyperjob and msg.job in self.owners
        if isinstance(msg, events.RequestRejected):
            return msg.causation_id in self.asked
        if isinstance(msg, events.HyperJobStatusChanged | events.HyperJobDeleted):
            return msg.name in self.owners
        return True

    def on_apply(self, msg: events.ApplyManifest) -> Reaction | None:
        kind, name = _kind_and_name(msg.manifest)
        if kind not in api.WORKFLOW_KINDS:
            return None  # the splitter's
        try:  # in the namespace of the request's subject, as the splitter judges its kinds
            obj = api.decode(events.scoped_manifest(msg))
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind=kind, name=name, reason=str(exc))
        if isinstance(obj, api.CronJob):
            return self._apply_cronjob(msg, obj)
        if isinstance(obj, api.JobFlow):
            return self._apply_jobflow(msg, obj)
        if isinstance(obj, api.JobTemplate | api.HyperJobTemplate):
            return self._apply_template(msg, obj)
        raise api.UnexpectedKindError(f"{type(obj).__name__}: not a kind the workflow-controller is asked to apply")

    def _apply_cronjob(self, msg: events.ApplyManifest, cron: api.CronJob) -> Reaction:
        name, key, manifest = cron.metadata.name, domain.key_of(cron), api.encode(cron)
        existing = self.cronjobs.get(key)
        if existing is not None and existing.manifest == manifest:
            return answers.accepted(self.rt, msg, kind="CronJob", name=name, outcome="unchanged")
        doc = (
            replace(existing, manifest=manifest)
            if existing is not None
            else records.CronJobDoc(manifest=manifest, created=self.rt.now())
        )
        self._put_cronjob(key, doc)
        outcome: events.Outcome = "created" if existing is None else "configured"
        reaction = answers.accepted(self.rt, msg, kind="CronJob", name=name, outcome=outcome)
        return reaction.extend(self._sync_cronjob(msg, key))

    def _apply_jobflow(self, msg: events.ApplyManifest, flow: api.JobFlow) -> Reaction:
        name, key, manifest = flow.metadata.name, domain.key_of(flow), api.encode(flow)
        existing = self.flows.get(key)
        if existing is not None and existing.manifest == manifest:
            return answers.accepted(self.rt, msg, kind="JobFlow", name=name, outcome="unchanged")
        doc = (
            replace(existing, manifest=manifest, refused={}, message="")
            if existing is not None
            else records.JobFlowDoc(manifest=manifest, created=self.rt.now())
        )
        self._put_jobflow(key, doc)
        outcome: events.Outcome = "created" if existing is None else "configured"
        reaction = answers.accepted(self.rt, msg, kind="JobFlow", name=name, outcome=outcome)
        return reaction.extend(self._sync_jobflow(msg, key))

    def _apply_template(self, msg: events.ApplyManifest, template: api.JobTemplate | api.HyperJobTemplate) -> Reaction:
        name, key, manifest, kind = template.metadata.name, domain.key_of(template), api.encode(template), template.kind
        existing = self.templates.get(key)
        if existing is not None and existing.manifest == manifest:
            return answers.accepted(self.rt, msg, kind=kind, name=name, outcome="unchanged")
        if existing is not None and existing.manifest.get("kind") != kind:  # a flow names its template alone
            reason = f"$.metadata.name: a {existing.manifest.get('kind')} named {name!r} already exists"
            return answers.rejected(self.rt, msg, kind=kind, name=name, reason=reason)
        created = existing.created if existing is not None else self.rt.now()
        self.templates.put(key, records.JobTemplateDoc(manifest=manifest, created=created))
        outcome: events.Outcome = "created" if existing is None else "configured"
        reaction = answers.accepted(self.rt, msg, kind=kind, name=name, outcome=outcome)
        # Flows of its namespace waiting for it (it was missing, or its job was refused) may go on now.
        for flow_key, doc in self.flows.items():
            flow = _decode(doc.manifest, api.JobFlow)
            if flow.metadata.namespace == template.metadata.namespace and name in domain.templates_of(flow):
                job = jobflow.job_name(flow, name)
                self._put_jobflow(flow_key, replace(doc, refused={j: r for j, r in doc.refused.items() if j != job}))
                reaction.extend(self._sync_jobflow(msg, flow_key))
        return reaction

    def on_delete(self, msg: events.DeleteObject) -> Reaction | None:
        if msg.kind not in api.WORKFLOW_KINDS:
            return None  # the splitter's
        try:
            namespace = events.request_namespace(subjects.DELETE, msg, msg.kind, msg.namespace, "$.namespace")
        except api.ManifestError as exc:
            return answers.rejected(self.rt, msg, kind=msg.kind, name=msg.name, reason=str(exc))
        table: Table[records.CronJobDoc] | Table[records.JobFlowDoc] | Table[records.JobTemplateDoc] = (
            self.cronjobs if msg.kind == "CronJob" else self.flows if msg.kind == "JobFlow" else self.templates
        )  # JobTemplate and HyperJobTemplate share names
        key = api.object_key(namespace, msg.name)
        doc = table.get(key)
        if doc is None or (table is self.templates and doc.manifest.get("kind") != msg.kind):
            reason = domain.not_found(msg.kind, namespace, msg.name)
            return answers.rejected(self.rt, msg, kind=msg.kind, name=msg.name, reason=reason)
        reaction = answers.accepted(self.rt, msg, kind=msg.kind, name=msg.name, outcome="deleted")
        if msg.kind == "CronJob":
            self.rt.cancel(_timer(key))
        for job, made in getattr(doc, "jobs", {}).items():  # the jobs it made go with it (background cascade)
            reaction.extend(self._delete_job(msg, (msg.kind, key), job, made, namespace))
        table.delete(key)
        return reaction

    # -- news of the jobs made -----------------------------------------------------------------------

    def on_job_phase(self, msg: events.JobPhaseChanged) -> Reaction | None:
        owner = self.owners.get(msg.job) if not msg.hyperjob else None
        if owner is None:
            return None
        kind, name = owner
        job = self.made_names.get(msg.job, msg.job)
        if kind == "CronJob":
            cron = self._cronjob(name)
            made = cron.jobs[job]
            if made.phase == msg.new:
                return None
            done = msg.new == "Completed"
            cron = replace(
                cron,
                jobs={**cron.jobs, job: replace(made, phase=msg.new)},
                last_successful_time=self.rt.now() if done else cron.last_successful_time,
            )
            self._put_cronjob(name, cron)
            return self._sync_cronjob(msg, name)
        return self._flow_step_phase(msg, name, job, msg.new)

    def on_hyperjob_status(self, msg: events.HyperJobStatusChanged) -> Reaction | None:
        """A flow's step made from a HyperJobTemplate changed phase: the flow judges it as a Job's."""
        job = domain.job_of_key(msg.name)
        owner = self.owners.get(msg.name)
        if owner is None or owner[0] != "JobFlow":
            return None
        made = self._jobflow(owner[1]).jobs.get(job)
        if made is None or made.kind != "HyperJob":
            return None
        return self._flow_step_phase(msg, owner[1], job, domain.step_phase(msg.phase))

    def _flow_step_phase(self, cause: events.Message, name: str, job: str, phase: str) -> Reaction | None:
        flow = self._jobflow(name)
        made = flow.jobs[job]
        if made.phase == phase:
            return None
        self._put_jobflow(name, replace(flow, jobs={**flow.jobs, job: replace(made, phase=phase)}))
        return self._sync_jobflow(cause, name)

    def on_job_deleted(self, msg: events.HyperJobDeleted) -> Reaction | None:
        """A job made here is gone (deleted by someone else): its owner syncs without it."""
        owner = self.owners.get(msg.name)
        if owner is None:
            return None
        kind, name = owner
        self._forget(kind, name, self.made_names.get(msg.name) or domain.job_of_key(msg.name))
        return self._sync_cronjob(msg, name) if kind == "CronJob" else self._sync_jobflow(msg, name)

    def on_answer(self, msg: Answer) -> None:
        """The splitter refused a job made here: its owner records why, and does not ask again."""
        if not isinstance(msg, events.RequestRejected) or msg.kind not in ("Job", "HyperJob"):
            return
        asked = self.asked.get(msg.causation_id)
        if asked is None:
            return
        kind, name, job = asked
        made = self._made(kind, name, job)
        if made is None or made.request != msg.causation_id:
            return  # the answer to another request for the same name
        self._forget(kind, name, job)
        message = f"{made.kind.lower()} {job!r} refused: {msg.reason}"
        if kind == "CronJob":
            self._put_cronjob(name, replace(self._cronjob(name), message=message))
        else:
            flow = self._jobflow(name)
            self._put_jobflow(name, replace(flow, refused={**flow.refused, job: msg.reason}, message=message))

    # -- CronJob ---------------------------------------------------------------------------------------

    def _sync_cronjob(self, cause: events.Message | str, name: str) -> Reaction:
        doc = self._cronjob(name)
        cron = _decode(doc.manifest, api.CronJob)
        runs = {
            job: cronjob.JobRun(phase=made.phase or "Pending", created_at=made.created)
            for job, made in doc.jobs.items()
        }
        state = cronjob.CronState(last_schedule_time=doc.last_schedule_time, active=doc.active)
        now = self.rt.now()
        decided = cronjob.step(cron, doc.created, state, runs, now)
        reaction = Reaction()
        jobs = dict(doc.jobs)
        for job in decided.delete:
            if job in jobs:
                reaction.extend(self._delete_job(cause, ("CronJob", name), job, jobs.pop(job), cron.metadata.namespace))
        if decided.create is not None:
            scheduled_at = present(decided.scheduled_at, f"the scheduled time of {decided.create}")
            manifest = domain.cron_job(cron, decided.create, scheduled_at)
            request = self._create_job(reaction, cause, manifest)
            jobs[decided.create] = records.MadeJob(request=request, created=now, scheduled_at=scheduled_at)
        doc = replace(
            doc,
            jobs=jobs,
            active=decided.state.active,
            last_schedule_time=decided.state.last_schedule_time,
            next_sync=decided.requeue_at,
        )
        self._put_cronjob(name, doc)
        self._arm(name, doc)
        return reaction

    def _arm(self, name: str, doc: records.CronJobDoc) -> None:
        at = doc.next_sync
        if at is None:
            self.rt.cancel(_timer(name))
            return
        self.rt.at(at, _timer(name), lambda: self._tick(name, at))

    async def _tick(self, name: str, at: float) -> None:
        doc = self.cronjobs.get(name)
        if doc is None or doc.next_sync != at:
            return  # deleted or re-armed since
        cause = events.derive_id(f"cronjob/{name}/{doc.created!r}", f"tick/{at!r}")
        await self.rt.commit(cause, self._sync_cronjob(cause, name))

    # -- JobFlow ---------------------------------------------------------------------------------------

    def _sync_jobflow(self, cause: events.Message | str, name: str) -> Reaction:
        doc = self._jobflow(name)
        flow = _decode(doc.manifest, api.JobFlow)
        phases = {job: made.phase or "Pending" for job, made in doc.jobs.items()}
        decided = jobflow.step(flow, phases, doc.phase)
        reaction = Reaction()
        # A refusal stays said until the flow or the template is applied again; a wait only while it lasts.
        jobs, message = dict(doc.jobs), doc.message if doc.refused else ""
        for job in decided.delete:
            reaction.extend(self._delete_job(cause, ("JobFlow", name), job, jobs.pop(job), flow.metadata.namespace))
        for job, template_name in decided.create:
            template = self.templates.get(api.object_key(flow.metadata.namespace, template_name))
            if job in doc.refused:
                continue
            if template is None:
                message = f"job {job!r} waits for JobTemplate {template_name!r}, which does not exist"
                continue
            manifest = domain.flow_step(flow, _decode(template.manifest, (api.JobTemplate, api.HyperJobTemplate)), job)
            request = self._create_job(reaction, cause, manifest)
            jobs[job] = records.MadeJob(request=request, created=self.rt.now(), kind=manifest["kind"])
        status = decided.status
        if status is not None and decided.create:  # the jobs just made are listed Pending
            status = jobflow.step(flow, {job: made.phase or "Pending" for job, made in jobs.items()}, doc.phase).status
        if status is not None:
            doc = replace(doc, phase=status.phase, status=_builtins(status))
        self._put_jobflow(name, replace(doc, jobs=jobs, message=message))
        return reaction

    # -- jobs --------------------------------------------------------------------------------------------

    def _create_job(self, reaction: Reaction, cause: events.Message | str, manifest: api.RawDocument) -> str:
        """Ask the splitter for the job, as a user would; returns the request's id (its answer names it)."""
        name = manifest["metadata"]["name"]
        request = events.ApplyManifest(**self.rt.envelope(cause, f"create/{name}"), manifest=manifest)
        reaction.publish(subjects.APPLY, request)
        return request.event_id

    def _delete_job(
        self, cause: events.Message | str, owner: tuple[str, str], job: str, made: records.MadeJob, namespace: str
    ) -> Reaction:
        self._disown(owner, domain.job_key(made.kind, namespace, job), made)
        request = events.DeleteObject(
            **self.rt.envelope(cause, f"delete/{job}"), kind=made.kind, name=job, namespace=_namespace_field(namespace)
        )
        return Reaction().publish(subjects.DELETE, request)

    def _disown(self, owner: tuple[str, str], job_key: str, made: records.MadeJob) -> None:
        """``owner`` no longer has the job. Two owners may ask for one fleet name (``team-b-x`` in
        default and ``x`` in team-b): the first keeps it (``_claim``), the other's is refused, and
        forgetting the refused one leaves the first its job."""
        if self.owners.get(job_key) == owner:
            del self.owners[job_key]
            self.made_names.pop(job_key, None)
        self.asked.pop(made.request, None)

    def _claim(self, kind: str, key: str, doc: records.CronJobDoc | records.JobFlowDoc) -> None:
        for job_key, job, owner in domain.made_keys(kind, key, doc):
            self.owners.setdefault(job_key, owner)
            self.made_names.setdefault(job_key, job)
        self._remember_requests(kind, key, doc)

    def _remember_requests(self, kind: str, key: str, doc: records.CronJobDoc | records.JobFlowDoc) -> None:
        """The splitter's answer names the apply it answers: what each of the owner's applies was for."""
        self.asked.update((made.request, (kind, key, job)) for job, made in doc.jobs.items())

    def _forget(self, kind: str, name: str, job: str) -> None:
        made = self._made(kind, name, job)
        if made is not None:
            doc = self._cronjob(name) if kind == "CronJob" else self._jobflow(name)
            self._disown((kind, name), domain.job_key(made.kind, domain.namespace_of(doc.manifest), job), made)
        if kind == "CronJob":
            cron = self._cronjob(name)
            jobs = {j: made for j, made in cron.jobs.items() if j != job}
            self._put_cronjob(name, replace(cron, jobs=jobs, active=[j for j in cron.active if j != job]))
        else:
            flow = self._jobflow(name)
            self._put_jobflow(name, replace(flow, jobs={j: made for j, made in flow.jobs.items() if j != job}))

    def _made(self, kind: str, name: str, job: str) -> records.MadeJob | None:
        doc = self.cronjobs.get(name) if kind == "CronJob" else self.flows.get(name)
        return doc.jobs.get(job) if doc is not None else None

    # -- tables ------------------------------------------------------------------------------------------

    def _cronjob(self, name: str) -> records.CronJobDoc:
        return self.cronjobs.require(name)

    def _jobflow(self, name: str) -> records.JobFlowDoc:
        return self.flows.require(name)

    def _put_cronjob(self, key: str, doc: records.CronJobDoc) -> None:
        self.cronjobs.put(key, doc)
        self._claim("CronJob", key, doc)

    def _put_jobflow(self, key: str, doc: records.JobFlowDoc) -> None:
        self.flows.put(key, doc)
        self._claim("JobFlow", key, doc)


def _timer(key: str) -> str:
    return f"cronjob/{key}"


def _rekey(table: Table[Any]) -> None:
    """Move a document stored under its name alone (before namespaces kept objects apart) to its
    ``api.object_key``; the move is committed with the next unit of work (until then it is made
    again at each load). One in ``default`` keeps its key: the two are the same there."""
    for key, doc in table.items():
        metadata = doc.manifest.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        wanted = api.object_key(domain.namespace_of(doc.manifest), str(name or key))
        if wanted != key and wanted not in table:
            table.delete(key)
            table.put(wanted, doc)


def _kind_and_name(manifest: api.RawDocument) -> tuple[str, str]:
    metadata = manifest.get("metadata")
    name = str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
    return str(manifest.get("kind", "")), name


def _namespace_field(namespace: str) -> str:
    """A delete's ``namespace``: "" for ``default`` (the bare subject's own), as the CLI sends it."""
    return "" if namespace == api.DEFAULT_NAMESPACE else namespace


@overload
def _decode(manifest: api.RawDocument, kind: type[T]) -> T: ...
@overload
def _decode(manifest: api.RawDocument, kind: tuple[type[T], type[U]]) -> T | U: ...
def _decode(manifest: api.RawDocument, kind: type[object] | tuple[type[object], ...]) -> object:
    """A stored manifest as the kind (or one of the kinds) it was accepted as."""
    obj = api.decode(manifest)
    if not isinstance(obj, kind):
        raise api.UnexpectedKindError(f"a stored {type(obj).__name__} where {kind} is kept")
    return obj


def _builtins(status: jobflow.FlowStatus) -> records.JSONObject:
    builtins: records.JSONObject = msgspec.to_builtins(status)  # a struct encodes as a JSON object
    return builtins
