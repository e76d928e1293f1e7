"""The event bus: NATS JetStream streams, publishing with ``Nats-Msg-Id``, durable pull consumers
with retry and dead-lettering, latest-value reads; and ``InMemoryBus`` with the same API for tests.

Owns the wire: stream declaration (from the caller's list; the catalogue is ``events.subjects``),
message headers (``Nats-Msg-Id``, ``traceparent``, the ``Hyperjob-*`` dead-letter headers) and
the ack/nak/term protocol. Invariants:

- a handler's message is acked only after the handler returns; delivery is at-least-once, so
  handlers are idempotent (``store.commit`` writes their dedup markers with their state);
- a publish carries a deterministic ``msg_id``, so a republish inside the stream's duplicate
  window is dropped by the server;
- every message ends acked or on ``dlq.<durable>`` — never silently dropped after ``max_deliver``;
  one too large to copy there is dead-lettered by reference (its stream and sequence);
- a dependency outage (Redis, NATS) holds a message without using up its deliveries;
- the connection comes back after any loss, a server's protocol error included;
- trace context rides in headers and each consumed message runs in one span (see ``dispatch``).

Durability: streams default to file storage; the server flushes to disk periodically, not per
message, so a killed nats-server loses nothing (the OS has the data) but a machine crash can lose
the last moments of acknowledged messages. That is the chosen trade-off for every stream here:
the producers' deterministic ids make a replay safe. Per-message fsync is a server setting
(``testkit.servers.NatsServer(sync_always=True)``, i.e. ``jetstream { sync_interval: always }``)
and costs 1-3k msg/s. Latest-value streams (``max_msgs_per_subject=1``) keep one message per
subject. ``DLQ`` keeps 30 days.

Handler recipe (``servicekit.Runtime`` implements it)::

    async def on_delivery(d: Delivery) -> None:          # bus.consume(durable, subjects, on_delivery)
        msg = decoder.decode(d.data)                       # undecodable -> raise TerminalError
        state = await store.get_many(kind, names)          # one round trip
        writes, outputs = decide(state, msg)               # pure
        result = await store.commit(Commit(consumer=durable, event_ids=[msg.event_id], writes=writes, outputs=outputs))
        if result.refusal == "conflict": raise RetryableError("stale")  # reload and decide again
        await bus.publish_many(result.outputs if result.refusal == "duplicate" else outputs)  # the first run's
        # return -> ack

``NatsBus`` lives in ``bus.natsbus`` (it imports nats-py); this package's top level imports no
I/O library, so in-process users (the simulator) do not pull nats in.

For throughput, ``consume_batch`` + one ``store.commit`` (every message's marker in
``Commit.event_ids``) + one ``publish_many`` per batch does the same for a whole batch in three
round trips.
"""

from .dispatch import (
    H_BY_REFERENCE,
    H_DLQ_REASON,
    H_ERROR,
    H_ERROR_TYPE,
    H_NUM_DELIVERED,
    H_ORIGINAL_MSG_ID,
    H_ORIGINAL_SEQ,
    H_ORIGINAL_STREAM,
    H_ORIGINAL_SUBJECT,
    H_WATCH,
    MAX_PAYLOAD,
    Verdict,
)
from .errors import (
    BusClosedError,
    BusError,
    ConsumerError,
    CredentialsRefusedError,
    DependencyDown,
    HandlerError,
    InstanceCrash,
    MessageTooLargeError,
    NoStreamError,
    PermissionDeniedError,
    PublishError,
    RetryableError,
    StreamConfigError,
    TerminalError,
    is_dependency_down,
)
from .memory import InMemoryBus, Member
from .model import (
    DLQ_STREAM,
    MSG_ID,
    BatchHandler,
    ConsumerLag,
    ConsumerPolicy,
    Delivery,
    Handler,
    Message,
    Outgoing,
    OutputLike,
    Payload,
    PublishAck,
    StreamSpec,
    Subscription,
    as_stream_spec,
    subject_covers,
)
from .protocol import Bus

__all__ = [
    "BatchHandler",
    "Bus",
    "BusClosedError",
    "BusError",
    "ConsumerError",
    "ConsumerLag",
    "ConsumerPolicy",
    "CredentialsRefusedError",
    "DLQ_STREAM",
    "Delivery",
    "DependencyDown",
    "H_BY_REFERENCE",
    "H_DLQ_REASON",
    "H_ERROR",
    "H_ERROR_TYPE",
    "H_NUM_DELIVERED",
    "H_ORIGINAL_MSG_ID",
    "H_ORIGINAL_SEQ",
    "H_ORIGINAL_STREAM",
    "H_ORIGINAL_SUBJECT",
    "H_WATCH",
    "Handler",
    "HandlerError",
    "InMemoryBus",
    "InstanceCrash",
    "Member",
    "MAX_PAYLOAD",
    "MSG_ID",
    "Message",
    "MessageTooLargeError",
    "NoStreamError",
    "Outgoing",
    "OutputLike",
    "Payload",
    "PermissionDeniedError",
    "PublishAck",
    "PublishError",
    "RetryableError",
    "StreamConfigError",
    "StreamSpec",
    "Subscription",
    "TerminalError",
    "Verdict",
    "as_stream_spec",
    "is_dependency_down",
    "subject_covers",
]
