"""Pulsar's metadata-store URLs (``metadataStoreUrl``), and the ones quasar supports.

Pulsar picks the metadata-store implementation by the URL's scheme:
``zk:host:port[,host:port]/chroot`` (or no scheme at all) is ZooKeeper, ``etcd:``,
``rocksdb:``, ``memory:``, ``oxia:`` and ``metadata-store:`` are others. quasar
implements ZooKeeper only (an unset URL keeps the embedded SQLite store in the data
directory), so every other scheme is refused here, at configuration time, naming
the scheme, instead of surfacing later as a connection failure.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_ZOOKEEPER_PORT", "ZooKeeperUrl", "parse_metadata_store_url"]

DEFAULT_ZOOKEEPER_PORT = 2181

_ZK_SCHEMES = ("zk://", "zk:")
# Schemes Pulsar understands and quasar does not implement.
_UNSUPPORTED_SCHEMES = ("etcd:", "rocksdb:", "memory:", "oxia:", "metadata-store:")


@dataclass(frozen=True)
class ZooKeeperUrl:
    """A parsed ``zk:`` URL: the ensemble's ``(host, port)`` pairs and the chroot
    (``""`` for none, else an absolute path without a trailing ``/``)."""

    hosts: tuple[tuple[str, int], ...]
    chroot: str = ""

    @property
    def connect_string(self) -> str:
        """The ensemble as ZooKeeper clients take it (``h1:2181,h2:2181``), no chroot."""
        return ",".join(f"{host}:{port}" for host, port in self.hosts)

    def __str__(self) -> str:
        return f"zk:{self.connect_string}{self.chroot}"


def parse_metadata_store_url(url: str) -> ZooKeeperUrl:
    """Parse ``url`` as Pulsar does; only ZooKeeper URLs are accepted.

    ``zk:h1:2181,h2:2181/chroot``, ``zk://h1:2181/chroot`` and the scheme-less
    ``h1:2181`` are ZooKeeper; a host without a port gets 2181.

    Raises:
        ValueError: an empty URL, a scheme quasar does not support (naming it), or a
            malformed host list or chroot.
    """
    text = url.strip()
    if not text:
        raise ValueError("the metadata store URL is empty")
    lowered = text.lower()
    for scheme in _UNSUPPORTED_SCHEMES:
        if lowered.startswith(scheme):
            raise ValueError(
                f"metadata store {text!r}: the {scheme[:-1]} metadata store is not "
                "supported by quasar; use a ZooKeeper URL (zk:host:port/chroot), or "
                "leave it unset for the embedded SQLite store in the data directory"
            )
    for scheme in _ZK_SCHEMES:
        if lowered.startswith(scheme):
            text = text[len(scheme) :]
            break
    else:
        if "://" in text:
            raise ValueError(
                f"metadata store {url!r}: unknown scheme; quasar supports ZooKeeper "
                "URLs (zk:host:port/chroot)"
            )
    ensemble, slash, chroot = text.partition("/")
    chroot = _chroot(url, "/" + chroot if slash else "")
    hosts = tuple(_host_port(url, part) for part in ensemble.split(","))
    return ZooKeeperUrl(hosts, chroot)


def _host_port(url: str, part: str) -> tuple[str, int]:
    part = part.strip()
    host, sep, port_text = part.rpartition(":")
    if not sep:
        host, port_text = part, str(DEFAULT_ZOOKEEPER_PORT)
    if not host or any(c.isspace() for c in host):
        raise ValueError(f"metadata store {url!r}: expected host:port, got {part!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(
            f"metadata store {url!r}: {part!r} has no valid port"
        ) from None
    if not 0 < port <= 65535:
        raise ValueError(f"metadata store {url!r}: port {port} out of range")
    return host, port


def _chroot(url: str, chroot: str) -> str:
    if chroot in ("", "/"):
        return ""
    if chroot.endswith("/") or "//" in chroot or "\x00" in chroot:
        raise ValueError(f"metadata store {url!r}: malformed chroot {chroot!r}")
    return chroot
