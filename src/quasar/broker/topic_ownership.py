"""What the broker asks of a cluster about its topics (``quasar broker``).

A standalone broker owns every topic and has no ``TopicOwnership``. A cluster member
(``quasar.cluster.member``) owns the namespace bundles it acquired; the broker service
asks it before it loads or serves a topic, and LOOKUP (binary and HTTP) asks it
where a topic lives. The broker only knows this interface: the cluster package sits
above it and implements it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from quasar.protocol.topic_name import TopicName

from .lookup_data import LookupData

__all__ = ["LookupAnswer", "TopicOwnership"]


@dataclass(frozen=True)
class LookupAnswer:
    """A LOOKUP's answer: ``redirect`` false is Pulsar's Connect (this broker serves
    the topic), true is Redirect to ``data`` with ``authoritative`` set as Pulsar
    sets it."""

    data: LookupData
    redirect: bool
    authoritative: bool = True


class TopicOwnership(Protocol):
    def check_serving(self, name: TopicName) -> None:
        """Return if this broker serves ``name`` now; raise otherwise.

        Raises:
            ServiceNotReady: another broker owns the topic's bundle, nobody does
                (a client must look it up first), or this broker lost its
                metadata-store session.
        """

    def lookup(self, name: TopicName, authoritative: bool, listener: str) -> LookupAnswer:
        """Where a client reaches ``name`` through ``listener`` ("" for none),
        acquiring its bundle when this broker is the one to own it.

        Raises:
            ServiceNotReady: no live broker can own it, or this broker lost its
                session; the listener does not exist.
            MetadataError: the metadata store failed.
        """
