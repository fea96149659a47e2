"""TLS on the broker's listeners, from Pulsar's ``tls*`` settings.

``ServerTls`` builds the one server ``SSLContext`` that the binary TLS port
(``brokerServicePortTls``) and the HTTPS admin port (``webServicePortTls``) share, and
reloads the certificate, key and trust files when they change on disk
(``tlsCertRefreshCheckDurationSec``). A reload is applied to the same context object,
so both listeners hand the new certificate to every connection accepted after it;
connections already open keep the session they negotiated. Files that fail to load
on a reload are logged and the previous ones stay in use: a half-copied certificate
must not take the broker's TLS down.

``TlsHandshake`` is the protocol of a connection on a TLS port (binary or HTTPS): the
TLS layer in front of the ``ServerConnection`` or the admin API's HTTP handler, which
sees only the decrypted stream once the handshake succeeded. ``create_server(ssl=...)``
would use the same layer but drop a failed handshake without a word (asyncio logs it
only in debug mode); here a plaintext client, an untrusted or missing client
certificate or a stalled handshake is logged once, with the peer's address, counted in
``quasar_tls_handshake_failures_total{listener,reason}``, and only that socket is
closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import Callable

from prometheus_client import Counter
from prometheus_client.registry import CollectorRegistry

from quasar.config import TLS_PROTOCOLS, TlsConfig
from quasar.transport.tls import (
    TLS_HANDSHAKE_TIMEOUT_S,
    TlsLayer,
    handshake_failure_reason,
)

__all__ = [
    "TLS_HANDSHAKE_TIMEOUT_S",
    "ServerTls",
    "TlsConfigurationError",
    "TlsHandshake",
    "load_key_pair",
    "load_trust_file",
    "restrict_protocols_and_ciphers",
]

log = logging.getLogger(__name__)

# The files are checked at least this often by the background check, even when
# tlsCertRefreshCheckDurationSec is 0 (which also checks at every new connection).
MIN_BACKGROUND_CHECK_S = 1.0

_VERSIONS = dict(
    zip(
        TLS_PROTOCOLS,
        (
            ssl.TLSVersion.TLSv1,
            ssl.TLSVersion.TLSv1_1,
            ssl.TLSVersion.TLSv1_2,
            ssl.TLSVersion.TLSv1_3,
        ),
        strict=True,
    )
)

# A file's identity and version: a replaced or rewritten file changes one of them.
_FileStamp = tuple[int, int, int] | None


class TlsConfigurationError(ValueError):
    """The TLS settings cannot be used: a file is missing, unreadable or not what
    its key says, or a protocol or cipher name is unknown."""


def build_server_context(tls: TlsConfig) -> ssl.SSLContext:
    """A server context from the ``tls*`` settings.

    Raises:
        TlsConfigurationError: naming the key whose value cannot be used.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # No session resumption: a resumed session skips the certificate exchange, and
    # clients that check the host name from the certificate (the official client
    # with tls_validate_hostname) then refuse the connection. A client certificate
    # must also be presented, and checked, on every connection.
    ctx.options |= ssl.OP_NO_TICKET
    ctx.num_tickets = 0
    _load_cert_chain(ctx, tls)
    if tls.tls_require_trusted_client_cert_on_connect:
        ctx.verify_mode = ssl.CERT_REQUIRED
        _load_trust(ctx, tls)
    elif tls.tls_allow_insecure_connection:
        ctx.verify_mode = ssl.CERT_NONE
    else:
        # A client certificate is optional, but one that is sent must be trusted:
        # an authentication provider may read it.
        ctx.verify_mode = ssl.CERT_OPTIONAL
        _load_trust(ctx, tls)
    restrict_protocols_and_ciphers(
        ctx, ("tlsProtocols", tls.tls_protocols), ("tlsCiphers", tls.tls_ciphers)
    )
    return ctx


def restrict_protocols_and_ciphers(
    ctx: ssl.SSLContext,
    protocols: tuple[str, tuple[str, ...]],
    ciphers: tuple[str, tuple[str, ...]],
) -> None:
    """Limit ``ctx`` to the TLS versions and cipher suites named; an empty list
    keeps the TLS library's defaults. ``protocols`` and ``ciphers`` are each (the
    setting's name, its value), so an error names the key to fix.

    Raises:
        TlsConfigurationError: the versions cannot be used together, or no cipher
            suite of the list is known.
    """
    protocols_key, protocol_names = protocols
    ciphers_key, cipher_names = ciphers
    if protocol_names:
        versions = [_VERSIONS[name] for name in protocol_names]
        try:
            ctx.minimum_version = min(versions)
            ctx.maximum_version = max(versions)
        except (ValueError, ssl.SSLError) as e:
            raise TlsConfigurationError(
                f"{protocols_key}={','.join(protocol_names)} cannot be used: {e}"
            ) from None
    if cipher_names:
        try:
            ctx.set_ciphers(":".join(cipher_names))
        except ssl.SSLError:
            raise TlsConfigurationError(
                f"{ciphers_key}={','.join(cipher_names)}: no cipher suite of this list "
                "is known (names are OpenSSL's, e.g. ECDHE-RSA-AES128-GCM-SHA256)"
            ) from None


def load_key_pair(
    ctx: ssl.SSLContext, cert: tuple[str, str], key: tuple[str, str]
) -> None:
    """Load a certificate chain and its private key into ``ctx``; ``cert`` and ``key``
    are each (setting name, path), the name for the error.

    Raises:
        TlsConfigurationError: a file cannot be read, or they are not a PEM
            certificate chain and its unencrypted private key.
    """
    for name, path in (cert, key):
        if not os.access(path, os.R_OK):
            raise TlsConfigurationError(f"{name}={path}: the file cannot be read")
    try:
        ctx.load_cert_chain(cert[1], key[1])
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigurationError(
            f"{cert[0]}={cert[1]} and {key[0]}={key[1]} are not a PEM "
            f"certificate chain and its unencrypted private key: {e}"
        ) from None


def load_trust_file(ctx: ssl.SSLContext, name: str, path: str) -> None:
    """Trust the CA certificates of file ``path`` (setting ``name``) in ``ctx``.

    Raises:
        TlsConfigurationError: the file is not readable PEM CA certificates.
    """
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigurationError(
            f"{name}={path}: not readable PEM CA certificates: {e}"
        ) from None


def _load_cert_chain(ctx: ssl.SSLContext, tls: TlsConfig) -> None:
    load_key_pair(
        ctx,
        ("tlsCertificateFilePath", tls.tls_certificate_file_path),
        ("tlsKeyFilePath", tls.tls_key_file_path),
    )


def _load_trust(ctx: ssl.SSLContext, tls: TlsConfig) -> None:
    path = tls.tls_trust_certs_file_path
    if not path:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    load_trust_file(ctx, "tlsTrustCertsFilePath", path)


def _stamp(path: str) -> _FileStamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class ServerTls:
    """The shared server context and its reloading.

    Raises (constructor):
        TlsConfigurationError: the settings cannot be used.
    """

    def __init__(
        self,
        tls: TlsConfig,
        clock: Callable[[], float] = time.monotonic,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``registry``: where the handshake-failure counter is exposed (the broker's
        /metrics); None keeps it unregistered."""
        self._tls = tls
        self._clock = clock
        self.handshake_failures = Counter(
            "quasar_tls_handshake_failures",
            "TLS handshakes refused or abandoned, by listener and OpenSSL reason",
            ["listener", "reason"],
            registry=registry,
        )
        if (
            tls.tls_allow_insecure_connection
            and tls.tls_require_trusted_client_cert_on_connect
        ):
            log.warning(
                "tlsAllowInsecureConnection=true has no effect: "
                "tlsRequireTrustedClientCertOnConnect=true requires a trusted "
                "client certificate"
            )
        self.context = build_server_context(tls)
        self._stamps = self._file_stamps()
        self._checked_at = clock()
        self.reloads = 0  # how many times new files were loaded

    @property
    def check_interval_s(self) -> float:
        """How often the background check looks at the files."""
        return max(float(self._tls.tls_cert_refresh_check_duration_sec), MIN_BACKGROUND_CHECK_S)

    def _file_stamps(self) -> tuple[_FileStamp, ...]:
        tls = self._tls
        return tuple(
            _stamp(p)
            for p in (
                tls.tls_certificate_file_path,
                tls.tls_key_file_path,
                tls.tls_trust_certs_file_path,
            )
            if p
        )

    def on_new_connection(self) -> None:
        """Check the files if the refresh interval has passed (0: every time)."""
        interval = self._tls.tls_cert_refresh_check_duration_sec
        if interval and self._clock() - self._checked_at < interval:
            return
        self.check_files()

    def check_files(self) -> bool:
        """Reload the files if any changed; True if new ones are now in use."""
        self._checked_at = self._clock()
        stamps = self._file_stamps()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        tls = self._tls
        try:
            # Load into a scratch context first: a bad pair applied in place would
            # leave the live context with a certificate and a key that do not match.
            build_server_context(tls)
        except TlsConfigurationError as e:
            log.error("TLS files changed but cannot be loaded, keeping the previous "
                      "ones: %s", e)
            return False
        self.context.load_cert_chain(tls.tls_certificate_file_path, tls.tls_key_file_path)
        if tls.tls_trust_certs_file_path and self.context.verify_mode != ssl.CERT_NONE:
            # OpenSSL adds to a trust store and cannot remove from it: CAs of the
            # new file are trusted from now on; a removed CA stays trusted until
            # the broker restarts.
            self.context.load_verify_locations(cafile=tls.tls_trust_certs_file_path)
        self.reloads += 1
        log.info("reloaded the TLS certificate %s", tls.tls_certificate_file_path)
        return True

    async def run_checks(self) -> None:
        """Check the files every ``check_interval_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.check_interval_s)
            self.check_files()


class TlsHandshake(TlsLayer):
    """The protocol of one connection on the binary TLS port: the TLS layer in
    front of ``connection``, which sees only the decrypted stream once the
    handshake succeeded; a failed handshake is logged with the peer's address.

    Being the socket's protocol from the first byte, it cannot miss a client's
    hello, whatever the event loop's order of connection and first read.
    """

    def __init__(
        self,
        tls: ServerTls,
        connection: asyncio.BaseProtocol,
        listener: str,
        handshake_timeout_s: float = TLS_HANDSHAKE_TIMEOUT_S,
    ) -> None:
        """``listener`` names the port in the log and the metric (``pulsar+ssl``,
        ``https``)."""
        tls.on_new_connection()
        self._tls = tls
        self._listener = listener
        super().__init__(
            connection,
            tls.context,
            server_side=True,
            handshake_timeout_s=handshake_timeout_s,
        )
        self.handshake.add_done_callback(self._log_failure)

    def _log_failure(self, handshake: asyncio.Future[None]) -> None:
        if handshake.cancelled():
            return
        exc = handshake.exception()
        if exc is not None:
            reason = handshake_failure_reason(exc)
            log.warning("TLS handshake with %s on the %s port failed, closing: %s",
                        self.remote_address, self._listener, reason)
            self._tls.handshake_failures.labels(self._listener, reason).inc()
