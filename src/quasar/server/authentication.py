"""Authentication of one binary-protocol connection: CONNECT and credential refresh.

``ConnectionAuthentication`` holds what the connection's credentials established (its
``AuthenticationState``) and follows Pulsar's rules:

* CONNECT: the method is ``auth_method_name``, else the legacy ``auth_method`` enum's
  name (``AuthMethodNone`` is ``none``). ``AuthenticationService`` answers the role or
  refuses; a refusal is answered with ERROR(request_id=-1, AuthenticationError) and
  the connection is closed.
* Refresh: every ``authenticationRefreshCheckSeconds`` the state is checked. When the
  credentials expired (a token's ``exp``), a client that declared
  ``supports_auth_refresh`` is sent AUTH_CHALLENGE with ``PulsarAuthRefresh``; one that
  did not, or that left the previous challenge unanswered, is disconnected.
* AUTH_RESPONSE: must answer a pending challenge (anything else is a protocol error
  that closes the connection, so a client cannot queue checks) and carry a method and
  data; the credentials are authenticated again. The same role replaces the state (no new CONNECTED); another role or a
  failure closes the connection.

Providers run on the default thread pool, not on the event loop: a bcrypt check
costs tens of milliseconds, and a burst of reconnecting clients must not stall every
other connection of the broker. A client waits for CONNECTED before it sends anything
else, so CONNECT is answered when its check completes.

Every refusal is logged with the remote address; the service counts it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from quasar.auth import AuthenticationService, AuthenticationState, Peer
from quasar.errors import AuthenticationError, BrokerError, ProtocolError
from quasar.protocol import PROTOCOL_VERSION_MAX, pb

from .replies import BROKER_REQUEST_ID, error

__all__ = ["AUTH_REFRESH_CHALLENGE", "AuthenticatedConnection", "ConnectionAuthentication"]

log = logging.getLogger(__name__)

T = pb.BaseCommand

# The challenge data a refresh sends (Pulsar's AuthData.REFRESH_AUTH_DATA).
AUTH_REFRESH_CHALLENGE = b"PulsarAuthRefresh"
# What clients are told: the reason stays in the broker's log, as in Pulsar.
_REFUSED = "Unable to authenticate"


class AuthenticatedConnection(Protocol):
    """What authentication needs of the connection."""

    principal: str | None

    @property
    def remote_address(self) -> str: ...

    @property
    def peer_certificate(self) -> Mapping[str, Any] | None:
        """The verified TLS client certificate (``getpeercert()``), or None."""
        ...

    @property
    def closed(self) -> bool: ...

    def send_command(self, cmd: pb.BaseCommand) -> None: ...

    def abort(self) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro``; it is cancelled when the connection closes."""
        ...


def connect_auth_method(c: pb.CommandConnect) -> str:
    """The auth method a CONNECT names (see the module doc)."""
    if c.HasField("auth_method_name"):
        return c.auth_method_name
    if c.HasField("auth_method"):
        name = pb.AuthMethod.Name(c.auth_method)
        return name[len("AuthMethod"):].lower()
    return "none"


class ConnectionAuthentication:
    """The authentication of one connection (see the module doc)."""

    def __init__(
        self,
        connection: AuthenticatedConnection,
        service: AuthenticationService,
        server_version: str,
        refresh_check_s: float,
        now_s: Callable[[], float] = time.time,
    ) -> None:
        self._conn = connection
        self._service = service
        self._server_version = server_version
        self._refresh_check_s = refresh_check_s
        self._now_s = now_s
        self.state: AuthenticationState | None = None
        self.supports_refresh = False
        self.challenge_pending = False
        self._answer_in_check = False  # an AUTH_RESPONSE is being authenticated
        self._timer: asyncio.TimerHandle | None = None

    def _peer(self) -> Peer:
        return Peer(self._conn.remote_address, self._conn.peer_certificate)

    async def _authenticate(self, method: str, auth_data: bytes) -> AuthenticationState:
        """The service's check, on the default thread pool (see the module doc).

        Raises:
            AuthenticationError: refused.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, self._service.authenticate, method, auth_data, self._peer()
        )

    async def on_connect(self, c: pb.CommandConnect) -> bool:
        """Authenticate a CONNECT; True when CONNECTED may be sent. On refusal the
        client has been answered and the connection is closing."""
        method = connect_auth_method(c)
        try:
            state = await self._authenticate(method, c.auth_data)
        except AuthenticationError as exc:
            self._refuse(method, exc)
            return False
        if self._conn.closed:
            return False
        self.state = state
        self.supports_refresh = c.feature_flags.supports_auth_refresh
        self._conn.principal = state.role
        if state.expires_at_s is not None:
            self._schedule_check()
        return True

    def on_auth_response(self, cmd: pb.BaseCommand, frame: Any) -> None:
        """AUTH_RESPONSE: re-authenticate (see the module doc).

        Raises:
            ProtocolError: no challenge awaits an answer (the connection closes).
        """
        if not self.challenge_pending or self._answer_in_check:
            raise ProtocolError("AUTH_RESPONSE without a pending AUTH_CHALLENGE")
        r = cmd.authResponse
        if not (r.HasField("response") and r.response.HasField("auth_method_name")
                and r.response.HasField("auth_data")):
            self._refuse("none", AuthenticationError("AUTH_RESPONSE without credentials"))
            return
        self._answer_in_check = True
        self._conn.spawn(self._reauthenticate(r.response.auth_method_name,
                                              r.response.auth_data))

    async def _reauthenticate(self, method: str, auth_data: bytes) -> None:
        try:
            state = await self._authenticate(method, auth_data)
        except AuthenticationError as exc:
            self._refuse(method, exc)
            return
        finally:
            self._answer_in_check = False
        if self._conn.closed:
            return
        previous = self.state
        if previous is not None and state.role != previous.role:
            log.warning("closing connection from %s: refreshed credentials are for "
                        "role %r, not %r", self._conn.remote_address, state.role,
                        previous.role)
            self._refuse(method, AuthenticationError("role changed on refresh"))
            return
        self.state = state
        self.challenge_pending = False
        if state.expires_at_s is not None:
            self._schedule_check()

    def check_expiry(self) -> None:
        """The periodic check: challenge or disconnect a connection whose
        credentials expired."""
        self._timer = None
        state = self.state
        if state is None or not state.is_expired(self._now_s()):
            if state is not None and state.expires_at_s is not None:
                self._schedule_check()
            return
        if not self.supports_refresh or self.challenge_pending:
            log.info("closing connection from %s: credentials of role %r expired%s",
                     self._conn.remote_address, state.role,
                     " and the refresh challenge was not answered"
                     if self.challenge_pending else "")
            self._conn.abort()
            return
        challenge = T(type=T.AUTH_CHALLENGE)
        challenge.authChallenge.server_version = self._server_version
        challenge.authChallenge.protocol_version = PROTOCOL_VERSION_MAX
        challenge.authChallenge.challenge.auth_method_name = state.auth_method
        challenge.authChallenge.challenge.auth_data = AUTH_REFRESH_CHALLENGE
        self.challenge_pending = True
        self._conn.send_command(challenge)
        self._schedule_check()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule_check(self) -> None:
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._refresh_check_s, self.check_expiry)

    def _refuse(self, method: str, exc: BrokerError) -> None:
        log.warning("authentication failed for %s (method %r): %s",
                    self._conn.remote_address, method[:64], exc)
        self._conn.send_command(error(BROKER_REQUEST_ID, AuthenticationError(_REFUSED)))
        self._conn.abort()
