"""Errors as Kubernetes ``Status`` objects (meta/v1), the reasons and codes clients act on:
kubectl prints ``Error from server (NotFound): hyperjobs.training.volcano.sh "x" not found`` from
them, and client libraries raise on their ``code``."""

from __future__ import annotations

from typing import Any

# A Status or any other JSON body: whatever shape the API gives it.
Body = dict[str, Any]


class ApiError(Exception):
    """A request the apiserver answers with a failure ``Status``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: Body | None = None,
        metadata: Body | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.metadata = metadata or {}

    def status(self) -> Body:
        body: Body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def success(kind: str, name: str, group: str) -> Body:
    """What a delete answers once the request was accepted."""
    details = {"name": name, "group": group, "kind": kind}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def not_found(qualified: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified} "{name}" not found', details=_about(qualified, name))


def already_exists(qualified: str, name: str, why: str = "") -> ApiError:
    message = f'{qualified} "{name}" already exists' + (f": {why}" if why else "")
    return ApiError(409, "AlreadyExists", message, details=_about(qualified, name))


def conflict(qualified: str, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {qualified} "{name}": {why}'
    return ApiError(409, "Conflict", message, details=_about(qualified, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def expired_continue(token: str) -> ApiError:
    """A ``continue`` whose list is no longer kept: 410 with a token going on from the same
    object in the list as it is now, as Kubernetes answers once etcd compacted."""
    message = (
        "The provided continue parameter is too old to display a consistent list result. You can start a new list "
        "without the continue parameter, or use the continue token in this response to retrieve the remainder of "
        "the results. Continuing with the provided token results in an inconsistent list - objects that were "
        "created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )
    return ApiError(410, "Expired", message, metadata={"continue": token})


def too_large(message: str) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, resource: str, group: str, namespace: str | None, name: str = "") -> ApiError:
    """kubectl's wording: who cannot do what to which resource where."""
    what = f'{resource}.{group} "{name}"' if name and group else f'{resource} "{name}"' if name else resource
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = f'{what} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}"{where}'
    return ApiError(403, "Forbidden", message, details={"name": name, "group": group, "kind": resource})


def invalid(kind: str, group: str, name: str, reason: str) -> ApiError:
    """The splitter's refusal (``$.spec.x: why``) as 422 Invalid, its cause naming the field as
    Kubernetes does (``spec.x``)."""
    path, sep, why = reason.partition(": ")
    field = path.removeprefix("$").removeprefix(".") if sep and path.startswith("$") else ""
    cause = {"reason": "FieldValueInvalid", "message": why if field else reason, "field": field}
    message = f'{kind}.{group} "{name}" is invalid: {field + ": " if field else ""}{cause["message"]}'
    details = {**_about(f"{kind.lower()}s", name), "group": group, "kind": kind, "causes": [cause]}
    return ApiError(422, "Invalid", message, details=details)


def refused(kind: str, group: str, qualified: str, name: str, reason: str, *, creating: bool = False) -> ApiError:
    """A request the splitter refused, with the code its reason means: not found (404), already
    exists (409, to a create), a field's value (``$.spec.x: ...``: 422 Invalid naming it, as an
    immutable field is), or else the state of the system (a queue still in use: 409 Conflict)."""
    if reason.endswith("not found"):
        return not_found(qualified, name)
    if creating and "already exists" in reason:
        return already_exists(qualified, name, reason.partition(": ")[2] or reason)
    if reason.startswith("$"):
        return invalid(kind, group, name, reason)
    return conflict(qualified, name, reason)


def _about(qualified: str, name: str) -> Body:
    resource, _, group = qualified.partition(".")
    return {"name": name, "group": group, "kind": resource}


def method_not_allowed() -> ApiError:
    """Kubernetes' answer to a verb a (sub)resource does not serve, such as an update of a read-only
    ``status`` (``NewMethodNotSupported``)."""
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_option(field: str, value: object, supported: tuple[str, ...], why: str) -> ApiError:
    """A ``DeleteOptions`` value the apiserver cannot honour, as Kubernetes refuses an invalid one:
    422 Invalid, its cause naming the field (``FieldValueNotSupported``); ``why`` says what the
    system does instead."""
    allowed = ", ".join(f'"{s}"' for s in supported)
    shown = f'"{value}"' if isinstance(value, str) else str(value).lower()
    cause = {
        "reason": "FieldValueNotSupported",
        "message": f"Unsupported value: {shown}: supported values: {allowed} ({why})",
        "field": field,
    }
    message = f'DeleteOptions.meta.k8s.io "" is invalid: {field}: {cause["message"]}'
    details = {"name": "", "group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [cause]}
    return ApiError(422, "Invalid", message, details=details)


def apply_conflict(message: str, causes: list[Body]) -> ApiError:
    """A server-side apply that would change fields other managers own, as Kubernetes answers it
    (``NewApplyConflict``): 409 Conflict, a ``FieldManagerConflict`` cause per field."""
    return ApiError(409, "Conflict", message, details={"causes": causes})


def invalid_option(options: str, field: str, reason: str, message: str) -> ApiError:
    """A request option Kubernetes refuses (``PatchOptions.meta.k8s.io "" is invalid: fieldManager:
    Required value: ...``): 422 Invalid naming it."""
    cause = {"reason": reason, "message": message, "field": field}
    details = {"name": "", "group": "meta.k8s.io", "kind": options, "causes": [cause]}
    return ApiError(422, "Invalid", f'{options}.meta.k8s.io "" is invalid: {field}: {message}', details=details)


def unsupported_patch(accepted: tuple[str, ...]) -> ApiError:
    """A patch type the resource does not take: 415, as Kubernetes answers a strategic merge patch
    of a custom resource (kubectl then names the types to use)."""
    listed = ", ".join(accepted)
    message = f"the body of the request was in an unknown format - accepted media types include: {listed}"
    return ApiError(415, "UnsupportedMediaType", message)
