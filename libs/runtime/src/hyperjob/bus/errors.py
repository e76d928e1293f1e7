"""The bus's exceptions: what a handler raises to steer redelivery, and what the bus raises itself.

A handler returns normally to ack, raises ``RetryableError`` to be redelivered after a backoff and
``TerminalError`` to be dead-lettered at once; any other exception counts as retryable. Exceptions
whose class sets ``transient = True`` (``PublishError``, ``store.StoreUnavailableError``, ...) are
logged as expected retries; others with a traceback, since they are probably bugs.

``DependencyDown`` (or any exception whose class sets ``dependency_down = True``: Redis or NATS
unreachable) is neither the message's fault nor a bug: the bus holds the message and tries it
again in place, with back-off, for as long as the dependency stays down, so an outage never uses
up a message's deliveries (see ``dispatch``).
``BusError`` and its subclasses are what callers of the bus catch; nats-py's exceptions never
leave this package.
"""

from __future__ import annotations


class HandlerError(Exception):
    """Base of the two exceptions a handler raises on purpose."""


class RetryableError(HandlerError):
    """A transient failure (Redis down, version conflict, dependency not ready): nak and redeliver
    after the consumer's backoff for this delivery number, or after ``delay`` seconds if given.
    After ``max_deliver`` deliveries the message goes to the dead-letter subject."""

    def __init__(self, message: str = "", *, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class DependencyDown(RetryableError):
    """Something the handler needs (Redis, NATS) is unreachable: try the message again once it is
    back, without counting toward ``max_deliver`` (an outage is not the message's fault)."""


def is_dependency_down(exc: BaseException) -> bool:
    """Whether ``exc`` says a dependency is unreachable (``DependencyDown``, or a class that sets
    ``dependency_down = True`` such as ``store.StoreUnavailableError`` and ``BusClosedError``)."""
    return isinstance(exc, DependencyDown) or getattr(exc, "dependency_down", False) is True


class TerminalError(HandlerError):
    """The message can never be processed (undecodable, invalid): ``term()`` it and publish the
    original to ``dlq.<durable>`` with the error in headers."""


class BusError(Exception):
    """Base of every error the bus raises to its callers."""


class StreamConfigError(BusError):
    """A stream could not be declared or updated; ``stream`` names it."""

    def __init__(self, stream: str, message: str) -> None:
        super().__init__(f"stream {stream}: {message}")
        self.stream = stream


class NoStreamError(BusError):
    """No declared stream captures ``subject`` (publish or consume on an undeclared subject)."""

    def __init__(self, subject: str) -> None:
        super().__init__(f"no stream captures subject {subject!r}")
        self.subject = subject


class PublishError(BusError):
    """A publish was not acknowledged by the stream; safe to retry with the same ``msg_id``."""

    transient = True
    dependency_down = True

    def __init__(self, subject: str, msg_id: str, message: str) -> None:
        super().__init__(f"publish {subject} ({msg_id}): {message}")
        self.subject = subject
        self.msg_id = msg_id


class MessageTooLargeError(PublishError):
    """The message with its headers exceeds the server's ``max_payload``: refused before sending
    (the server would close the connection). Retrying cannot help."""

    transient = False
    dependency_down = False


class PermissionDeniedError(PublishError):
    """NATS refused the publish: this connection's user may not publish on ``subject`` (said at
    once, not after the ack's timeout). Retrying cannot help."""

    transient = False
    dependency_down = False

    def __init__(self, subject: str, msg_id: str) -> None:
        super().__init__(subject, msg_id, f"permission denied: this NATS user may not publish on {subject}")


class ConsumerError(BusError):
    """A durable consumer could not be created or bound; ``durable`` names it."""

    def __init__(self, durable: str, message: str) -> None:
        super().__init__(f"consumer {durable}: {message}")
        self.durable = durable


class BusClosedError(BusError):
    """The bus was closed or its connection is gone."""

    transient = True
    dependency_down = True


class CredentialsRefusedError(BusClosedError):
    """The server refused the user or password the connection offered (an authorization
    violation): the server is up; retrying with the same credentials cannot help."""

    transient = False
    dependency_down = False


class InstanceCrash(BaseException):
    """A service instance dies here (the deterministic simulator's injected crash). Not an
    ``Exception``, so no handler or dispatch code catches it: the batch in hand is left
    unsettled, as when a process is killed, and the driver restarts the instance."""
