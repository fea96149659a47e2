"""The client's TLS: ``pulsar+ssl://`` service URLs and ``pulsar.Client``'s TLS options.

The options mean what they mean in the official client:

* ``tls_trust_certs_file_path``: the CA certificates (PEM) the broker's certificate
  must chain to; without it, the system's CAs;
* ``tls_allow_insecure_connection``: accept any broker certificate (no verification
  at all: for tests only);
* ``tls_validate_hostname``: also check that the certificate names the host of the
  URL (off by default, as in Pulsar);
* ``tls_certificate_file_path`` and ``tls_private_key_file_path``: the client
  certificate for mutual TLS (both or neither).

The same context serves the binary connections and the admin client's ``https://``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from quasar.client.exceptions import InvalidConfiguration

__all__ = ["ClientTlsOptions"]


@dataclass(frozen=True)
class ClientTlsOptions:
    """The TLS options of a client; :meth:`context` builds the ``SSLContext``."""

    trust_certs_file_path: str | None = None
    allow_insecure_connection: bool = False
    validate_hostname: bool = False
    certificate_file_path: str | None = None
    private_key_file_path: str | None = None

    def __post_init__(self) -> None:
        if bool(self.certificate_file_path) != bool(self.private_key_file_path):
            raise InvalidConfiguration(
                "tls_certificate_file_path and tls_private_key_file_path go together: "
                "a client certificate needs its private key"
            )
        if self.allow_insecure_connection and self.validate_hostname:
            raise InvalidConfiguration(
                "tls_validate_hostname=True cannot be honoured with "
                "tls_allow_insecure_connection=True (no certificate is checked)"
            )

    def context(self) -> ssl.SSLContext:
        """A client context from these options.

        Raises:
            InvalidConfiguration: a file cannot be read or is not PEM of its kind.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.allow_insecure_connection:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = self.validate_hostname
            ctx.verify_mode = ssl.CERT_REQUIRED
            if self.trust_certs_file_path:
                try:
                    ctx.load_verify_locations(cafile=self.trust_certs_file_path)
                except (ssl.SSLError, OSError) as e:
                    raise InvalidConfiguration(
                        f"tls_trust_certs_file_path={self.trust_certs_file_path}: "
                        f"not readable PEM CA certificates: {e}"
                    ) from None
            else:
                ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.certificate_file_path and self.private_key_file_path:
            try:
                ctx.load_cert_chain(self.certificate_file_path, self.private_key_file_path)
            except (ssl.SSLError, OSError) as e:
                raise InvalidConfiguration(
                    f"tls_certificate_file_path={self.certificate_file_path} and "
                    f"tls_private_key_file_path={self.private_key_file_path} are not "
                    f"a PEM certificate and its unencrypted private key: {e}"
                ) from None
        return ctx
