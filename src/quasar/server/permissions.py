"""Authorization of binary-protocol commands: the one place a refusal is made.

Pulsar checks a command's right when it names a topic (LOOKUP, PARTITIONED_METADATA,
PRODUCER, SUBSCRIBE, schema and namespace queries); a refusal is answered with
``AuthorizationError`` in that command's response and the connection stays open.
SEND and ACK are not checked again: the producer or consumer they go through was.
"""

from __future__ import annotations

import logging

from quasar.errors import AuthorizationError

from .context import ConnectionContext

__all__ = ["require"]

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
