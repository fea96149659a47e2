"""Pulsar's TLS provider: the role is the client certificate's common name.

The certificate arrives as ``ssl`` decodes a verified peer certificate
(``SSLObject.getpeercert()``): ``{"subject": ((("commonName", "alice"),), ...)}``.
The first ``commonName`` of the subject is the role; no certificate, or one without a
common name, fails, as in Pulsar.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .provider import AuthenticationFailure, AuthenticationState, Peer

__all__ = ["TlsAuthenticationProvider", "common_name"]

AUTH_METHOD_TLS = "tls"


def common_name(certificate: Mapping[str, Any] | None) -> str | None:
    """The first ``commonName`` of the certificate's subject, or None."""
    if not certificate:
        return None
    subject = certificate.get("subject") or ()
    try:
        for rdn in subject:
            for attribute, value in rdn:
                if attribute == "commonName" and isinstance(value, str) and value:
                    return value
    except (TypeError, ValueError):
        return None  # not the shape ssl produces: treat as no name
    return None


class TlsAuthenticationProvider:
    """``AuthenticationProvider`` for method ``tls``; the CONNECT auth data is unused
    (the C++ client sends none, the Java client empty bytes)."""

    @property
    def auth_method_name(self) -> str:
        return AUTH_METHOD_TLS

    def authenticate(self, auth_data: bytes, peer: Peer) -> AuthenticationState:
        if peer.certificate is None:
            raise AuthenticationFailure("NoClientCertificate", "no client certificate")
        role = common_name(peer.certificate)
        if role is None:
            raise AuthenticationFailure("NoCommonName", "client certificate has no common name")
        return AuthenticationState(role=role, auth_method=AUTH_METHOD_TLS)
