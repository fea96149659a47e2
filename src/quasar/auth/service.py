"""``AuthenticationService``: the configured providers, by auth method.

Built once at broker start-up from the ``authentication`` configuration section.
``authenticationProviders`` lists Pulsar's provider class names; each maps to a
quasar provider factory (``PROVIDER_CLASSES``), and an unknown name stops start-up
with ``AuthenticationConfigError`` rather than leaving a method silently unserved.

Two entry points, one per protocol, with Pulsar's rules:

* ``authenticate(method, auth_data, peer)``: the binary protocol's CONNECT and
  AUTH_RESPONSE. A method without a provider (``none`` included) gets the anonymous
  role if one is configured, else fails; a provider's refusal is final.
* ``authenticate_http(headers, peer)``: the admin API. ``X-Pulsar-Auth-Method-Name``
  picks the provider (unknown or failing: refused); otherwise every provider is tried
  with the credentials the request carries, the first success wins, and when all fail
  the anonymous role is used if configured, else the request is refused.

Every outcome is counted (``AuthenticationMetrics``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence

from prometheus_client.registry import CollectorRegistry

from quasar.config import ServiceConfiguration
from quasar.errors import AuthenticationError, BrokerError

from .basic import BasicAuthConfigError, BasicAuthenticationProvider
from .metrics import AuthenticationMetrics
from .provider import (
    AuthenticationFailure,
    AuthenticationProvider,
    AuthenticationState,
    Peer,
    failure_reason,
)
from .tls import TlsAuthenticationProvider
from .token import (
    TokenAuthenticationProvider,
    ValidateToken,
    validate_with_configured_key,
)

__all__ = [
    "AUTH_DATA_BYTES_MAX",
    "PROVIDER_CLASSES",
    "AuthenticationConfigError",
    "AuthenticationService",
]

# Credentials are a password line, a JWT or nothing (TLS): a few KiB at most. Anything
# larger is refused before a provider parses it.
AUTH_DATA_BYTES_MAX = 64 * 1024
AUTH_METHOD_NONE = "none"
AUTH_METHOD_HEADER = "X-Pulsar-Auth-Method-Name"

_PULSAR_PACKAGE = "org.apache.pulsar.broker.authentication."
PROVIDER_BASIC = _PULSAR_PACKAGE + "AuthenticationProviderBasic"
PROVIDER_TLS = _PULSAR_PACKAGE + "AuthenticationProviderTls"
PROVIDER_TOKEN = _PULSAR_PACKAGE + "AuthenticationProviderToken"


class AuthenticationConfigError(ValueError):
    """The authentication configuration cannot be served (raised at start-up)."""


# Builds a token validator from the configuration; tests inject fakes.
TokenValidatorFactory = Callable[[ServiceConfiguration], ValidateToken]
ProviderFactory = Callable[[ServiceConfiguration, TokenValidatorFactory | None], AuthenticationProvider]


def _basic(config: ServiceConfiguration, _: TokenValidatorFactory | None) -> AuthenticationProvider:
    try:
        return BasicAuthenticationProvider.from_conf(config.authentication.basic_auth_conf)
    except BasicAuthConfigError as exc:
        raise AuthenticationConfigError(str(exc)) from exc


def _tls(config: ServiceConfiguration, _: TokenValidatorFactory | None) -> AuthenticationProvider:
    return TlsAuthenticationProvider()


def _token(
    config: ServiceConfiguration, validator: TokenValidatorFactory | None
) -> AuthenticationProvider:
    build = validate_with_configured_key if validator is None else validator
    try:
        return TokenAuthenticationProvider(build(config))
    except ValueError as exc:
        raise AuthenticationConfigError(f"{PROVIDER_TOKEN}: {exc}") from exc


# Pulsar's provider class names (authenticationProviders) and what serves each.
PROVIDER_CLASSES: Mapping[str, ProviderFactory] = {
    PROVIDER_BASIC: _basic,
    PROVIDER_TLS: _tls,
    PROVIDER_TOKEN: _token,
}


def _short_name(class_name: str) -> str:
    return class_name.rsplit(".", 1)[-1]


class AuthenticationService:
    """The providers by auth method, the anonymous role and the outcome counters."""

    def __init__(
        self,
        providers: Sequence[tuple[str, AuthenticationProvider]],
        anonymous_user_role: str = "",
        metrics: AuthenticationMetrics | None = None,
    ) -> None:
        """``providers``: ``(provider name for the metrics, provider)`` pairs, in the
        order HTTP tries them."""
        self._providers: dict[str, tuple[str, AuthenticationProvider]] = {}
        for name, provider in providers:
            method = provider.auth_method_name
            if method in self._providers:
                raise AuthenticationConfigError(
                    f"two authentication providers serve method {method!r}"
                )
            self._providers[method] = (name, provider)
        self.anonymous_user_role = anonymous_user_role
        self._metrics = metrics or AuthenticationMetrics()

    @classmethod
    def from_config(
        cls,
        config: ServiceConfiguration,
        registry: CollectorRegistry | None = None,
        token_validator: TokenValidatorFactory | None = None,
    ) -> AuthenticationService | None:
        """The service for ``config``; None when authentication is disabled.

        Raises:
            AuthenticationConfigError: an unknown provider class name, no provider
                at all, or a provider that cannot load its configuration.
        """
        auth = config.authentication
        if not auth.authentication_enabled:
            return None
        providers: list[tuple[str, AuthenticationProvider]] = []
        for class_name in auth.authentication_providers:
            factory = PROVIDER_CLASSES.get(class_name)
            if factory is None:
                known = ", ".join(sorted(PROVIDER_CLASSES))
                raise AuthenticationConfigError(
                    f"unknown authentication provider {class_name!r} in "
                    f"authenticationProviders (known: {known})"
                )
            providers.append((_short_name(class_name), factory(config, token_validator)))
        if not providers and not auth.anonymous_user_role:
            raise AuthenticationConfigError(
                "authenticationEnabled=true needs authenticationProviders or an "
                "anonymousUserRole"
            )
        return cls(providers, auth.anonymous_user_role, AuthenticationMetrics(registry))

    # -- binary protocol -----------------------------------------------------------
    def authenticate(
        self, auth_method: str, auth_data: bytes, peer: Peer
    ) -> AuthenticationState:
        """Authenticate CONNECT or AUTH_RESPONSE credentials.

        Raises:
            AuthenticationError: refused (the message is safe to send to the client).
        """
        method = auth_method or AUTH_METHOD_NONE
        entry = self._providers.get(method)
        if entry is None:
            return self._anonymous(method)
        name, provider = entry
        if len(auth_data) > AUTH_DATA_BYTES_MAX:
            self._metrics.failed(name, method, "AuthDataTooLarge")
            raise AuthenticationFailure("AuthDataTooLarge", "authentication data too large")
        return self._run(name, provider, auth_data, peer)

    def _anonymous(self, method: str) -> AuthenticationState:
        if self.anonymous_user_role:
            self._metrics.succeeded("anonymous", method)
            return AuthenticationState(self.anonymous_user_role, AUTH_METHOD_NONE)
        self._metrics.failed("none", method, "UnknownAuthMethod")
        raise AuthenticationFailure(
            "UnknownAuthMethod", f"authentication method {method[:64]!r} is not served"
        )

    def _run(
        self, name: str, provider: AuthenticationProvider, auth_data: bytes, peer: Peer
    ) -> AuthenticationState:
        try:
            state = provider.authenticate(auth_data, peer)
        except AuthenticationError as exc:
            self._metrics.failed(name, provider.auth_method_name, failure_reason(exc))
            raise
        self._metrics.succeeded(name, provider.auth_method_name)
        return state

    # -- HTTP ------------------------------------------------------------------------
    def authenticate_http(
        self, headers: Mapping[str, str], peer: Peer
    ) -> AuthenticationState:
        """Authenticate an admin request from its headers (and TLS client cert).

        Raises:
            AuthenticationError: refused (answered with 401).
        """
        chosen = headers.get(AUTH_METHOD_HEADER)
        if chosen is not None:
            entry = self._providers.get(chosen)
            if entry is None:
                self._metrics.failed("none", chosen[:64], "UnknownAuthMethod")
                raise AuthenticationFailure(
                    "UnknownAuthMethod",
                    f"authentication method {chosen[:64]!r} is not served",
                )
            name, provider = entry
            return self._run(name, provider, self._http_data(name, chosen, headers), peer)
        last: BrokerError | None = None
        for method, (name, provider) in self._providers.items():
            try:
                data = self._http_data(name, method, headers)
                if method != "tls" and not data:
                    continue  # this request carries nothing for this provider
                return self._run(name, provider, data, peer)
            except AuthenticationError as exc:
                last = exc
        if self.anonymous_user_role:
            self._metrics.succeeded("anonymous", AUTH_METHOD_NONE)
            return AuthenticationState(self.anonymous_user_role, AUTH_METHOD_NONE)
        if last is not None:
            raise last
        self._metrics.failed("none", AUTH_METHOD_NONE, "NoCredentials")
        raise AuthenticationFailure("NoCredentials", "Authentication required")


    def _http_data(self, name: str, method: str, headers: Mapping[str, str]) -> bytes:
        """``_http_auth_data``, counting malformed credentials as failures."""
        try:
            return _http_auth_data(method, headers)
        except AuthenticationError as exc:
            self._metrics.failed(name, method, failure_reason(exc))
            raise


def _http_auth_data(method: str, headers: Mapping[str, str]) -> bytes:
    """The credentials for ``method`` in an HTTP request, as CONNECT would carry them
    (empty: none). Token: ``Bearer `` (case-sensitive, as Pulsar); basic: ``Basic ``
    (any case) and base64."""
    value = headers.get("Authorization", "")
    if len(value) > AUTH_DATA_BYTES_MAX:
        raise AuthenticationFailure("AuthDataTooLarge", "authentication data too large")
    if method == "token" and value.startswith("Bearer "):
        return value[len("Bearer "):].strip().encode()
    if method == "basic" and value[:6].lower() == "basic ":
        try:
            return base64.b64decode(value[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            raise AuthenticationFailure(
                "MalformedCredentials", "malformed basic credentials"
            ) from None
    return b""
