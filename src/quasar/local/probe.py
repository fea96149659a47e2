"""Is a server there? Probes of a port, each bounded by a timeout.

``pulsar_handshake_ok`` sends a Pulsar CONNECT and expects CONNECTED (or ERROR: a
broker with authentication refuses the probe's missing credentials, but it is
serving); ``tls_handshake_ok`` completes a TLS handshake without checking the
certificate; ``port_taken`` tells whether something else listens on a port already.
"""

from __future__ import annotations

import socket
import ssl
import struct

__all__ = ["port_taken", "pulsar_handshake_ok", "tls_handshake_ok"]

# BaseCommand{type=CONNECT(2), connect{client_version="probe", protocol_version=20}}
_CONNECT = b"\x0a\x05probe" + b"\x20\x14"
_BASE = b"\x08\x02" + b"\x12" + bytes([len(_CONNECT)]) + _CONNECT
_CONNECT_FRAME = struct.pack(">II", 4 + len(_BASE), len(_BASE)) + _BASE
# The answer's BaseCommand type field: tag 0x08, value CONNECTED (3) or ERROR (14).
_ANSWERS = (b"\x08\x03", b"\x08\x0e")


def pulsar_handshake_ok(port: int, timeout: float, host: str = "127.0.0.1") -> bool:
    """True if ``host:port`` answers CONNECT with CONNECTED or ERROR."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(_CONNECT_FRAME)
            head = s.recv(8)
            if len(head) < 8:
                return False
            return s.recv(2)[:2] in _ANSWERS
    except OSError:
        return False


def tls_handshake_ok(port: int, timeout: float, host: str = "127.0.0.1") -> bool:
    """True if ``host:port`` completes a TLS handshake (the certificate is not checked)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw) as s:
                s.do_handshake()
                return True
    except OSError:
        return False


def port_taken(port: int, host: str = "127.0.0.1") -> bool:
    """True if ``host:port`` cannot be bound (another process listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As a server binds it: a port left in TIME_WAIT by a stopped one is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False
