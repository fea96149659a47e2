"""Authorization of binary-protocol commands: the one place a refusal is made.

System topics come first: no client may produce to or subscribe to them, whatever
its role (``refuse_system_topic``), because the broker parses what is stored there as
its own records.

Pulsar checks a command's right when it names a topic (LOOKUP, PARTITIONED_METADATA,
PRODUCER, SUBSCRIBE, schema and namespace queries); a refusal is answered with
``AuthorizationError`` in that command's response and the connection stays open.
SEND and ACK are not checked again: the producer or consumer they go through was.
"""

from __future__ import annotations

import logging

from quasar.errors import (
    REFUSED_SYSTEM_TOPIC,
    AuthorizationError,
    NotAllowedError,
    tag_refusal,
)
from quasar.protocol import TopicName
from quasar.protocol.topic_name import is_closed_to_clients

from .context import ConnectionContext

__all__ = ["refuse_system_topic", "require"]

log = logging.getLogger(__name__)


def require(ctx: ConnectionContext, allowed: bool, operation: str, resource: str) -> None:
    """Refuse the command unless ``allowed``; log who was refused what, and from where.

    Raises:
        AuthorizationError: not ``allowed``; the message names the operation, as
            Pulsar's does ("Client is not authorized to Produce").
    """
    if allowed:
        return
    log.warning(
        "%s: role %r is not authorized to %s on %s",
        ctx.remote_address,
        ctx.principal,
        operation,
        resource,
    )
    raise AuthorizationError(f"Client is not authorized to {operation}")


def refuse_system_topic(ctx: ConnectionContext, name: TopicName, operation: str) -> None:
    """Refuse producing to or subscribing to a topic the broker keeps for itself.

    Raises:
        NotAllowedError: ``name`` is a system topic (Pulsar's code for an operation
            the broker does not allow, whoever asks), tagged as a refusal of hostile
            input.
    """
    if not is_closed_to_clients(name):
        return
    log.warning("%s: role %r tried to %s on system topic %s",
                ctx.remote_address, ctx.principal, operation, name.full)
    raise tag_refusal(
        NotAllowedError(f"{name.full} is a system topic: clients may not {operation} it"),
        REFUSED_SYSTEM_TOPIC,
    )
