"""The apiserver's Starlette application: the Kubernetes API over HyperJob's contract.

Reads (get, list, watch, tables) come from the read model (``hyperjob.client.views``) through
``Objects``; writes become the contract's requests on NATS (``ApplyManifest``, ``DeleteObject``
on the namespace's subject, through ``hyperjob.client.Client``) and are answered once the
splitter has accepted or refused them: a refusal is a ``Status`` with its code (404, 409, 422
naming the field). Nothing is written anywhere else but the apiserver's changelog (the objects'
versions and field managers, ``Objects``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import jsonpatch
import msgspec
import structlog
import yaml
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hyperjob import api, events
from hyperjob.bus import BusError
from hyperjob.client import MAX_MANIFEST_BYTES, Client, ClientError, podlogs, request_subject
from hyperjob.client import views as read_model
from hyperjob.events import subjects
from hyperjob.events.access import Identity
from hyperjob.store import StoreUnavailableError

from . import chunks, discovery, fields, openapi, ownership, tables
from .identity import Tokens, bearer, may_publish
from .objects import Change, Entry, Objects, TooOld
from .patch import merge_patch, strategic_merge_patch
from .resources import PODS, Resource, api_versions, find
from .status import (
    ApiError,
    bad_request,
    conflict,
    expired_continue,
    forbidden,
    method_not_allowed,
    not_found,
    refused,
    success,
    too_large,
    unauthorized,
    unsupported_option,
    unsupported_patch,
)

_log = structlog.get_logger("apiserver")
POLL_SECONDS = 1.0  # how often a watch reads its resource again
BOOKMARK_SECONDS = 30.0
OPEN = ("/healthz", "/readyz", "/livez", "/metrics")  # answered without a token, as Kubernetes does

REQUESTS = Counter(
    "apiserver_request_total", "Requests answered, by verb, resource and code", ["verb", "resource", "code"]
)
LATENCY = Histogram("apiserver_request_duration_seconds", "Time to answer a request (watches: to open)", ["verb"])

Body = dict[str, Any]
Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class State:
    """What every request shares: the client (NATS and Redis as the apiserver's identity), the
    objects seen, the tokens and the version HyperJob reports."""

    def __init__(self, client: Client, tokens: Tokens, version: str, pod_logs: Path | None = None) -> None:
        self.client = client
        self.objects = Objects(client)
        self.tokens = tokens
        self.version = version
        self.pod_logs = pod_logs  # where this machine's node-agents keep their pods' logs, if any


def create_app(
    connect: Callable[[], Coroutine[Any, Any, Client]], tokens: Tokens, version: str, pod_logs: Path | None = None
) -> Starlette:
    holder: dict[str, State] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = await connect()
        holder["state"] = State(client, tokens, version, pod_logs)
        _log.info("apiserver_started")
        try:
            yield
        finally:
            await client.close()

    def endpoint(handler: Callable[[Request, State, Identity], Coroutine[Any, Any, Response]]) -> Handler:
        async def run(request: Request) -> Response:
            state = holder["state"]
            started = time.monotonic()
            try:
                token = bearer(request.headers.get("authorization", ""))
                identity = state.tokens.identity(token) if token else None
                if identity is None:
                    raise unauthorized()
                response = await handler(request, state, identity)
            except ApiError as exc:
                response = JSONResponse(exc.status(), status_code=exc.code)
            except (ClientError, StoreUnavailableError, BusError) as exc:
                # NATS or Redis not answering, or no answer from the splitter: the client may retry
                response = JSONResponse(ApiError(503, "ServiceUnavailable", str(exc)).status(), status_code=503)
            plural = request.path_params.get("plural", "")
            REQUESTS.labels(request.method, plural, str(response.status_code)).inc()
            LATENCY.labels(request.method).observe(time.monotonic() - started)
            return response

        return run

    async def health(request: Request) -> Response:
        state = holder.get("state")
        if request.url.path == "/metrics":
            return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
        if request.url.path == "/readyz" and state is not None:
            try:
                await asyncio.wait_for(state.client.store.ping(), 1.0)
            except Exception as exc:  # any failure to answer means not ready
                return Response(f"redis: {exc}", status_code=503)
        return Response("ok" if state is not None else "starting", status_code=200 if state else 503)

    collection, item, status = endpoint(_collection), endpoint(_item), endpoint(_status)
    routes = [
        *(Route(path, health) for path in OPEN),
        Route("/version", endpoint(_version)),
        Route("/api", endpoint(_static(discovery.core_versions))),
        Route("/apis", endpoint(_static(discovery.groups))),
        Route("/openapi/v3", endpoint(_static(openapi.index))),
        Route("/openapi/v3/api/{version}", endpoint(_openapi)),
        Route("/openapi/v3/apis/{group}/{version}", endpoint(_openapi)),
        Route("/api/{version}", endpoint(_resource_list)),
        Route("/apis/{group}", endpoint(_group)),
        Route("/apis/{group}/{version}", endpoint(_resource_list)),
        Route("/api/v1/namespaces/{namespace}/pods/{name}/log", endpoint(_pod_log)),
        # Before the collections: ``/api/v1/namespaces/NAME/status`` is a Namespace's status.
        *(Route(f"{item_path}/status", status, methods=["GET", "PUT", "PATCH"]) for item_path in ITEM_PATHS),
        Route("/api/{version}/namespaces/{namespace}/{plural}", collection, methods=["GET", "POST"]),
        Route("/api/{version}/namespaces/{namespace}/{plural}/{name}", item, methods=["GET", "PUT", "PATCH", "DELETE"]),
        Route("/api/{version}/{plural}", collection, methods=["GET", "POST"]),
        Route("/api/{version}/{plural}/{name}", item, methods=["GET", "PUT", "PATCH", "DELETE"]),
        Route("/apis/{group}/{version}/namespaces/{namespace}/{plural}", collection, methods=["GET", "POST"]),
        Route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
            item,
            methods=["GET", "PUT", "PATCH", "DELETE"],
        ),
        Route("/apis/{group}/{version}/{plural}", collection, methods=["GET", "POST"]),
        Route("/apis/{group}/{version}/{plural}/{name}", item, methods=["GET", "PUT", "PATCH", "DELETE"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


ITEM_PATHS = (
    "/api/{version}/namespaces/{namespace}/{plural}/{name}",
    "/api/{version}/{plural}/{name}",
    "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
    "/apis/{group}/{version}/{plural}/{name}",
)


def _static(document: Callable[[], Body]) -> Callable[[Request, State, Identity], Coroutine[Any, Any, Response]]:
    """A handler answering with ``document()`` (discovery documents, the OpenAPI index)."""

    async def answer(request: Request, state: State, identity: Identity) -> Response:
        return _json(document())

    return answer


def _json(body: Body, status_code: int = 200) -> Response:
    return Response(msgspec.json.encode(body), status_code=status_code, media_type="application/json")


async def _version(request: Request, state: State, identity: Identity) -> Response:
    return _json(discovery.version(state.version))


async def _group(request: Request, state: State, identity: Identity) -> Response:
    found = discovery.group(request.path_params["group"])
    if found is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return _json(found)


async def _resource_list(request: Request, state: State, identity: Identity) -> Response:
    group, version = request.path_params.get("group", ""), request.path_params["version"]
    found = discovery.resource_list(f"{group}/{version}" if group else version)
    if found is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return _json(found)


async def _openapi(request: Request, state: State, identity: Identity) -> Response:
    group, version = request.path_params.get("group", ""), request.path_params["version"]
    return _json(openapi.document(f"{group}/{version}" if group else version))


# -- a pod's log ----------------------------------------------------------------------------------

POD_PHASES_ENDED = ("Succeeded", "Failed")
LOG_POLL_SECONDS = 0.5
# kubectl logs' options a log file without timestamps or runs cannot answer: refused, not ignored.
LOG_OPTIONS_NOT_SERVED = ("previous", "timestamps", "sinceSeconds", "sinceTime", "limitBytes")


async def _pod_log(request: Request, state: State, identity: Identity) -> Response:
    """``kubectl logs POD [-f] [--tail N]``: the output of a pod that really runs (an exec- or
    container-mode agent on this machine keeps it, ``hyperjob.client.podlogs``), every restart's in
    one log. A person limited to some namespaces reads the logs of their pods only: a log is the
    workload's own output (Kubernetes' RBAC grants ``pods/log`` apart from ``pods``)."""
    namespace, name = request.path_params["namespace"], request.path_params["name"]
    if identity.namespaces is not None and namespace not in identity.namespaces:
        raise forbidden(identity.name, "get", "pods/log", "", namespace, name)
    pod = await _get(state, PODS, namespace, name)
    query = request.query_params
    for option in LOG_OPTIONS_NOT_SERVED:
        if query.get(option) not in (None, "", "false", "0"):
            raise bad_request(f"{option}: not served; a pod's log is its whole output, every run of its container")
    container = query.get("container")
    if container and container != pod.view["container"]:
        raise bad_request(f"container {container} is not valid for pod {name}")
    tail_lines = _count(query.get("tailLines"), "tailLines")
    paths = podlogs.log_paths(state.pod_logs, name, pod.view["cluster"]) if state.pod_logs is not None else []
    if not paths:
        raise bad_request(
            f'pod "{name}" has no log here: logs are kept for pods of exec- or container-mode node-agents '
            "on the apiserver's machine (simulated pods have none)"
        )
    log = podlogs.LogReader(paths[0])
    first = log.tail(tail_lines) if tail_lines is not None else b""
    follow = query.get("follow") in ("true", "1")
    return StreamingResponse(_output(request, state, pod, log, first, follow), media_type="text/plain")


async def _output(
    request: Request, state: State, pod: Entry, log: podlogs.LogReader, first: bytes, follow: bool
) -> AsyncIterator[bytes]:
    """The log from ``first`` on, in chunks; followed, what is written next, until the pod has
    ended and all of it was sent (or the client went away), as ``kubectl logs -f`` ends once the
    container does."""
    try:
        if first:
            yield first
        while True:
            if chunk := log.read(final=not follow):
                yield chunk
            elif not follow or await request.is_disconnected():
                return
            elif await _pod_ended(state, pod):
                if chunk := log.read(final=True):
                    yield chunk
                return
            else:
                await asyncio.sleep(LOG_POLL_SECONDS)
    finally:
        log.close()


async def _pod_ended(state: State, pod: Entry) -> bool:
    """Whether ``pod`` has ended: Succeeded, Failed, deleted, or another pod of its name now."""
    for entry in await state.objects.read(PODS, max_age=POLL_SECONDS):
        if entry.key == pod.key:
            return entry.view["phase"] in POD_PHASES_ENDED or entry.obj["metadata"]["uid"] != pod.obj["metadata"]["uid"]
    return True  # gone


def _count(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if not value.isdigit():
        raise bad_request(f"{name}: must be a whole number of lines, not {value!r}")
    return int(value)


# -- resources ------------------------------------------------------------------------------------


def _resource(request: Request) -> tuple[Resource, str | None]:
    """The resource a path names, and its namespace (None: every namespace, or cluster-scoped)."""
    params = request.path_params
    resource = find(params.get("group", ""), params["version"], params["plural"])
    namespace = params.get("namespace")
    if resource is None or (namespace is not None and not resource.namespaced):
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return resource, namespace


async def _collection(request: Request, state: State, identity: Identity) -> Response:
    resource, namespace = _resource(request)
    if request.method == "POST":
        return await _create(request, state, identity, resource, namespace or api.DEFAULT_NAMESPACE)
    query = request.query_params
    matches = _filter(query.get("labelSelector", ""), query.get("fieldSelector", ""), namespace)
    if query.get("watch") in ("1", "true"):
        return await _watch(request, state, resource, matches)
    entries, version, more = await _chunk(request, state, resource, matches)
    if tables.wants_table(request.headers.get("accept", "")):
        table = tables.table(resource, [e.view for e in entries], [e.obj for e in entries], str(version))
        return _json({**table, "metadata": {**table["metadata"], **more}})
    return _json(
        {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.group_version,
            "metadata": {"resourceVersion": str(version), **more},
            "items": [e.obj for e in entries],
        }
    )


async def _chunk(
    request: Request, state: State, resource: Resource, matches: Callable[[Entry], bool]
) -> tuple[list[Entry], int, Body]:
    """The objects a list answers, its version and what more its metadata says: every object, or
    with ``limit`` a chunk of them and a ``continue`` token when more are left, the chunks after
    the first from the first's snapshot (410 with a fresh token once it is no longer kept)."""
    query = request.query_params
    try:
        limit = chunks.limit_of(query.get("limit"))
        going_on = chunks.decode(query["continue"]) if query.get("continue") else None
    except chunks.ChunkError as exc:
        raise bad_request(str(exc)) from None
    if going_on is not None and query.get("resourceVersion") not in (None, ""):
        raise bad_request("resourceVersion: specifying a resource version is not allowed when using continue")
    if going_on is None:
        everything, version = await state.objects.read(resource), state.objects.version
    else:
        kept = state.objects.snapshot(resource, going_on.version)
        if kept is None:
            everything, version = await state.objects.read(resource), state.objects.version
            state.objects.keep(resource, version, everything)
            raise expired_continue(chunks.encode(chunks.Continue(version, going_on.after)))
        everything, version = kept, going_on.version
    if not limit and going_on is None:
        return [e for e in everything if matches(e)], version, {}
    answered = chunks.chunk([e for e in everything if matches(e)], going_on.after if going_on else None, limit)
    if answered.after is None:
        return answered.items, version, {}
    state.objects.keep(resource, version, everything)
    token = chunks.encode(chunks.Continue(version, answered.after))
    return answered.items, version, {"continue": token, "remainingItemCount": answered.remaining}


async def _item(request: Request, state: State, identity: Identity) -> Response:
    resource, namespace = _resource(request)
    name = request.path_params["name"]
    namespace = namespace or (api.DEFAULT_NAMESPACE if resource.namespaced else None)
    if request.method == "DELETE":
        return await _delete(request, state, identity, resource, namespace, name)
    if request.method == "PUT":
        return await _replace(request, state, identity, resource, namespace, name)
    if request.method == "PATCH":
        return await _patch(request, state, identity, resource, namespace, name)
    entry = await _get(state, resource, namespace, name)
    if tables.wants_table(request.headers.get("accept", "")):
        return _json(tables.table(resource, [entry.view], [entry.obj], str(entry.version)))
    return _json(entry.obj)


async def _status(request: Request, state: State, identity: Identity) -> Response:
    """``.../NAME/status``: the object, as Kubernetes answers a GET of the subresource. The system
    writes every status, so an update or patch of it is refused 405, as Kubernetes refuses a verb
    a subresource does not serve (discovery lists it with ``get`` only)."""
    resource, namespace = _resource(request)
    if not resource.status:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    if request.method != "GET":
        raise method_not_allowed()
    namespace = namespace or (api.DEFAULT_NAMESPACE if resource.namespaced else None)
    return _json((await _get(state, resource, namespace, request.path_params["name"])).obj)


async def _get(state: State, resource: Resource, namespace: str | None, name: str) -> Entry:
    for entry in await state.objects.read(resource):
        if entry.key == (namespace or "", name):
            return entry
    raise not_found(resource.qualified, name)


# The field selectors served: kubectl's (``--field-selector metadata.name=x``, ``delete --wait``)
# and describe's search for an object's Events. ``involvedObject.uid`` is not compared: the event
# log knows objects by kind, namespace and name.
FIELDS = ("metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.name",
          "involvedObject.namespace", "involvedObject.uid")  # fmt: skip


def _filter(labels: str, fields: str, namespace: str | None) -> Callable[[Entry], bool]:
    """Label selectors as ``hyperjob get -l`` reads them; the field selectors of ``FIELDS`` (``=``,
    ``==`` or ``!=``)."""
    try:
        by_labels = read_model.selector(labels)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    wanted: list[tuple[tuple[str, str], str, bool]] = []
    for term in filter(None, fields.split(",")):
        key, op, value = term.partition("!=") if "!=" in term else term.replace("==", "=").partition("=")
        if key not in FIELDS or not op:
            raise bad_request(f'field label not supported: "{key}"')
        if key != "involvedObject.uid":
            top, _, field = key.partition(".")
            wanted.append(((top, field), value, op == "="))

    def test(entry: Entry) -> bool:
        metadata = entry.obj["metadata"]
        if namespace is not None and metadata.get("namespace") != namespace:
            return False
        if any((entry.obj.get(top, {}).get(field, "") == value) != equal for (top, field), value, equal in wanted):
            return False
        return by_labels(metadata.get("labels") or {})

    return test


# -- watch ----------------------------------------------------------------------------------------


async def _watch(request: Request, state: State, resource: Resource, matches: Callable[[Entry], bool]) -> Response:
    """A stream of watch events (one JSON object a line): from ``resourceVersion`` (the changes
    after it), or, without one, every object as ADDED first; then each change as it is seen.
    ``timeoutSeconds`` ends it; bookmarks when asked (``allowWatchBookmarks``)."""
    query = request.query_params
    table = tables.wants_table(request.headers.get("accept", ""))
    timeout = float(query.get("timeoutSeconds") or 1800)
    bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
    since = query.get("resourceVersion", "")
    # Informers open many watches at once (and again after a restart): they share one read, as
    # their polls do; what changed since that read is recorded by the next poll, after ``start``.
    current = await state.objects.read(resource, max_age=POLL_SECONDS / 2)
    start = state.objects.version
    first: list[Body] = []
    if since in ("", "0"):
        first = [_event(resource, "ADDED", e, table) for e in current if matches(e)]
    else:
        try:
            backlog = state.objects.changes_since(resource, int(since))
        except (TooOld, ValueError) as exc:
            gone = ApiError(410, "Expired", str(exc)).status()
            return _stream([{"type": "ERROR", "object": gone}], None)
        first = [_event(resource, c.type, c.entry, table) for c in backlog if matches(c.entry)]

    async def changes() -> AsyncIterator[list[Body]]:
        seen, deadline, bookmarked = start, time.monotonic() + timeout, time.monotonic()
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            await state.objects.read(resource, max_age=POLL_SECONDS / 2)
            fresh: list[Change] = state.objects.changes_since(resource, seen)
            seen = max([seen, *(c.version for c in fresh)])
            out = [_event(resource, c.type, c.entry, table) for c in fresh if matches(c.entry)]
            if bookmarks and time.monotonic() - bookmarked > BOOKMARK_SECONDS:
                bookmarked = time.monotonic()
                out.append(_bookmark(resource, state.objects.version))
            if out:
                yield out

    return _stream(first, changes())


def _event(resource: Resource, type_: str, entry: Entry, table: bool) -> Body:
    obj = tables.table(resource, [entry.view], [entry.obj], str(entry.version)) if table else entry.obj
    return {"type": type_, "object": obj}


def _bookmark(resource: Resource, version: int) -> Body:
    metadata = {"resourceVersion": str(version)}
    return {
        "type": "BOOKMARK",
        "object": {"kind": resource.kind, "apiVersion": resource.group_version, "metadata": metadata},
    }


def _stream(first: list[Body], later: AsyncIterator[list[Body]] | None) -> Response:
    async def lines() -> AsyncIterator[bytes]:
        for event in first:
            yield msgspec.json.encode(event) + b"\n"
        if later is not None:
            async for batch in later:
                for event in batch:
                    yield msgspec.json.encode(event) + b"\n"

    return StreamingResponse(lines(), media_type="application/json")


# -- writes ---------------------------------------------------------------------------------------


async def _body(request: Request) -> Body:
    """The request's object: JSON (or YAML), at most the contract's size (413 beyond)."""
    raw = await request.body()
    if len(raw) > MAX_MANIFEST_BYTES:
        raise too_large(f"the object is {len(raw)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    try:
        if "yaml" in request.headers.get("content-type", ""):
            body = yaml.safe_load(raw)
        else:
            body = msgspec.json.decode(raw)
    except (msgspec.DecodeError, yaml.YAMLError) as exc:
        raise bad_request(f"the body is not valid JSON: {str(exc).splitlines()[0]}") from None
    if not isinstance(body, dict):
        raise bad_request("the body is not an object")
    return body


def _own(resource: Resource, body: Body, namespace: str | None, name: str | None) -> Body:
    """The body as the object at this path: its kind and group/version the resource's, its
    namespace and name the path's (400 when they disagree, as Kubernetes answers)."""
    if body.get("kind") != resource.kind or body.get("apiVersion") not in api_versions(resource.kind):
        raise bad_request(
            f"the object is {body.get('apiVersion')}/{body.get('kind')}, "
            f"not {resource.group_version}/{resource.kind} as the path says"
        )
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        raise bad_request("metadata: required, an object")
    if namespace is not None and metadata.get("namespace", namespace) != namespace:
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    if name is not None and metadata.get("name", name) != name:
        raise bad_request("the name of the object does not match the name on the URL")
    if not metadata.get("name"):
        raise ApiError(422, "Invalid", f"{resource.kind}.{resource.group} is invalid: metadata.name: Required value")
    return {**body, "metadata": {**metadata, **({"namespace": namespace} if namespace else {})}}


def _authorize(identity: Identity, verb: str, resource: Resource, namespace: str | None, name: str) -> None:
    """403 unless NATS would let the identity publish this request (``identity.may_publish``)."""
    request = subjects.DELETE if verb == "delete" else subjects.APPLY
    subject = request_subject(request, resource.kind, namespace or api.DEFAULT_NAMESPACE)
    if not may_publish(identity, subject):
        raise forbidden(identity.name, verb, resource.plural, resource.group, namespace, name)
    if not resource.writable:
        raise ApiError(
            405, "MethodNotAllowed", f"{resource.qualified} are owned by the system: {verb} is not supported"
        )


async def _submit(
    request: Request,
    state: State,
    resource: Resource,
    manifest: Body,
    status_code: int,
    owners: fields.Owners,
    uid: str = "",
) -> Response:
    """Send the object as ``ApplyManifest`` and, once the splitter accepted it, keep its field
    managers (``owners``; ``uid``: the object's, "" for a create) and answer with it; ``dryRun``:
    only check it, as the splitter would decode it, and send nothing."""
    name = manifest["metadata"]["name"]
    entries = fields.to_entries(owners)
    shown = {**manifest, "metadata": {**manifest["metadata"], "managedFields": entries}}
    if request.query_params.get("dryRun"):
        try:
            api.decode(api.without_server_fields(manifest))
        except api.ManifestError as exc:
            raise refused(
                resource.kind, resource.group, resource.qualified, name, str(exc), creating=status_code == 201
            ) from None
        return _json(shown, status_code)
    answer = await state.client.apply(manifest)
    if isinstance(answer, events.RequestRejected):
        creating = status_code == 201
        raise refused(resource.kind, resource.group, resource.qualified, name, answer.reason, creating=creating)
    namespace = manifest["metadata"].get("namespace")
    key = (namespace or "", name) if resource.namespaced else ("", name)
    await state.objects.record_managers(resource, key, uid, entries)  # before the read: one version
    try:
        entry = await _get(state, resource, namespace, name)
    except ApiError:  # accepted, not in the read model yet: the object as sent
        return _json(shown, status_code)
    if not uid:  # created: its managers are of this object only, not of a later one of its name
        await state.objects.record_managers(resource, key, entry.obj["metadata"]["uid"], entries)
    return _json(entry.obj, status_code)


async def _create(request: Request, state: State, identity: Identity, resource: Resource, namespace: str) -> Response:
    scope = namespace if resource.namespaced else None
    manifest = _own(resource, await _body(request), scope, None)
    name = manifest["metadata"]["name"]
    _authorize(identity, "create", resource, scope, name)
    with contextlib.suppress(ApiError):
        await _get(state, resource, scope, name)
        raise ApiError(409, "AlreadyExists", f'{resource.qualified} "{name}" already exists')
    return await _submit(request, state, resource, manifest, 201, ownership.updated(request, resource, None, manifest))


async def _replace(
    request: Request, state: State, identity: Identity, resource: Resource, namespace: str | None, name: str
) -> Response:
    manifest = _own(resource, await _body(request), namespace, name)
    _authorize(identity, "update", resource, namespace, name)
    current = await _get(state, resource, namespace, name)
    stated = manifest["metadata"].get("resourceVersion")
    if stated and stated != str(current.version):
        raise conflict(
            resource.qualified,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    owners = ownership.updated(request, resource, current.obj, manifest)
    return await _submit(request, state, resource, manifest, 200, owners, current.obj["metadata"]["uid"])


async def _patch(
    request: Request, state: State, identity: Identity, resource: Resource, namespace: str | None, name: str
) -> Response:
    """A JSON merge patch (kubectl's for custom resources), a strategic merge patch (its own kinds'
    only: a custom resource's is refused 415, as Kubernetes does) or a JSON patch, applied to the
    object as it reads (its status left out), the patch's manager recorded; or a server-side
    apply (``apply-patch+yaml``)."""
    _authorize(identity, "patch", resource, namespace, name)
    raw = await request.body()
    if len(raw) > MAX_MANIFEST_BYTES:
        raise too_large(f"the patch is {len(raw)} bytes; the limit is {MAX_MANIFEST_BYTES}")
    kind = request.headers.get("content-type", "").split(";")[0].strip()
    if kind not in ownership.accepted_patches(resource):
        raise unsupported_patch(ownership.accepted_patches(resource))
    if kind == ownership.APPLY_PATCH:
        return await _server_side_apply(request, state, resource, namespace, name, raw)
    current = await _get(state, resource, namespace, name)
    applied = {k: v for k, v in current.obj.items() if k != "status"}  # server-set metadata: dropped on apply
    try:
        patch = msgspec.json.decode(raw)
        if kind == ownership.JSON_PATCH:
            patched = jsonpatch.apply_patch(applied, patch)
        elif kind == ownership.STRATEGIC_PATCH:
            patched = strategic_merge_patch(applied, patch)
        else:
            patched = merge_patch(applied, patch)
    except (msgspec.DecodeError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, ValueError) as exc:
        raise bad_request(f"the patch cannot be applied: {exc}") from None
    if not isinstance(patched, dict):
        raise bad_request("the patched object is not an object")
    manifest = _own(resource, patched, namespace, name)
    owners = ownership.updated(request, resource, current.obj, manifest)
    return await _submit(request, state, resource, manifest, 200, owners, current.obj["metadata"]["uid"])


async def _server_side_apply(
    request: Request, state: State, resource: Resource, namespace: str | None, name: str, raw: bytes
) -> Response:
    """``kubectl apply --server-side``: the configuration merged into the object there is (or
    created), as its field manager's; 409 naming the fields other managers own that it changes,
    unless forced (``ownership.applied``, ``fields.apply``)."""
    try:
        wanted = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise bad_request(f"the body is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(wanted, dict):
        raise bad_request("the body is not an object")
    try:
        current: Entry | None = await _get(state, resource, namespace, name)
    except ApiError:
        current = None
    merged, owners = ownership.applied(request, resource, current.obj if current else None, wanted)
    manifest = _own(resource, merged, namespace, name)
    if current is None:
        return await _submit(request, state, resource, manifest, 201, owners)
    return await _submit(request, state, resource, manifest, 200, owners, current.obj["metadata"]["uid"])


async def _delete(
    request: Request, state: State, identity: Identity, resource: Resource, namespace: str | None, name: str
) -> Response:
    """``DeleteObject``, answered once the splitter accepted it. A Kubeflow job is deleted as the
    Volcano Job that runs it, once found as that kind (a ``pytorchjob`` delete never takes a plain
    Volcano Job of the name). ``dryRun``: only found, nothing sent."""
    _authorize(identity, "delete", resource, namespace, name)
    dry_run = await _delete_options(request)
    if resource.runs_as or dry_run:
        await _get(state, resource, namespace, name)
    if not dry_run:
        answer = await state.client.delete(resource.request_kind, name, namespace or api.DEFAULT_NAMESPACE)
        if isinstance(answer, events.RequestRejected):
            raise refused(resource.kind, resource.group, resource.qualified, name, answer.reason)
    return _json(success(resource.plural, name, resource.group))


# The fleet always deletes an object's children with it (a HyperJob's jobs, a job's pods): ``Orphan``
# cannot be honoured.
PROPAGATION = ("Background", "Foreground")


async def _delete_options(request: Request) -> bool:
    """The ``DeleteOptions`` of a delete (its body, or the query as ``kubectl`` and clients may
    send them), checked before anything is sent; whether it is a dry run. ``Foreground`` and
    ``Background`` delete alike: the object stays, ``Terminating``, until its children are gone;
    ``Orphan`` (or ``orphanDependents``) is refused 422 naming the field."""
    options = await _body(request) if (await request.body()).strip() else {}
    query = request.query_params
    policy = query.get("propagationPolicy") or options.get("propagationPolicy")
    if policy is not None and policy not in PROPAGATION:
        raise unsupported_option("propagationPolicy", policy, PROPAGATION, "the system deletes the children with it")
    if query.get("orphanDependents") == "true" or options.get("orphanDependents") is True:
        raise unsupported_option("orphanDependents", True, ("false",), "the system deletes the children with it")
    return bool(query.get("dryRun") or options.get("dryRun"))
