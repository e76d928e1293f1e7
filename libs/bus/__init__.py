"""The event bus: NATS JetStream streams, publishing with ``Nats-Msg-Id``, durable pull consumers
with retry and dead-lettering, latest-value reads; and ``InMemoryBus`` with the same API for tests.

Owns the wire: stream declaration (from the caller's list; the catalogue is ``events.subjects``),
message headers (``Nats-Msg-Id``, ``traceparent``, the ``Hyperjob-*`` dead-letter headers) and
the ack/nak/term protocol. Invariants:

- a handler's message is acked only after the handler returns; delivery is at-least-once, so
  handlers are idempotent (``store.apply`` gives them the dedup marker);
- a publish carries a deterministic ``msg_id``, so a republish inside the stream's duplicate
  window is dropped by the server;
- every message ends acked or on ``dlq.<durable>`` — never silently dropped after ``max_deliver``;
- trace context rides in headers and each consumed message runs in one span (see ``dispatch``).
"""

from .dispatch import (H_DLQ_REASON, H_ERROR, H_ERROR_TYPE, H_NUM_DELIVERED, H_ORIGINAL_SEQ, H_ORIGINAL_STREAM,
                       H_ORIGINAL_SUBJECT)
from .errors import (BusClosedError, BusError, ConsumerError, HandlerError, NoStreamError, PublishError,
                     RetryableError, StreamConfigError, TerminalError)
from .memory import InMemoryBus
from .model import (DLQ_STREAM, MSG_ID, BatchHandler, ConsumerPolicy, Delivery, Handler, Outgoing, PublishAck,
                    StreamSpec, Subscription, as_stream_spec, subject_covers)
from .natsbus import NatsBus
from .protocol import Bus

__all__ = [
    "BatchHandler", "Bus", "BusClosedError", "BusError", "ConsumerError", "ConsumerPolicy", "DLQ_STREAM",
    "Delivery", "H_DLQ_REASON", "H_ERROR", "H_ERROR_TYPE", "H_NUM_DELIVERED", "H_ORIGINAL_SEQ", "H_ORIGINAL_STREAM",
    "H_ORIGINAL_SUBJECT", "Handler", "HandlerError", "InMemoryBus", "MSG_ID", "NatsBus", "NoStreamError",
    "Outgoing", "PublishAck", "PublishError", "RetryableError", "StreamConfigError", "StreamSpec", "Subscription",
    "TerminalError", "as_stream_spec", "subject_covers"
]
