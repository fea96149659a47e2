"""Transactions on a cluster member (``quasar broker``).

What differs from one broker (``docs/cluster.md``, "Transactions in a cluster"):

* **Coordinators follow their bundle.** Coordinator ``n`` is partition ``n`` of
  ``pulsar/system/transaction_coordinator_assign``; a member hosts it only while it owns
  that partition's bundle (``owns_coordinator``, asked by the registry before it opens
  the coordinator's log), and loads it as soon as it acquires the bundle, as Pulsar's
  brokers do (a client's TC_CLIENT_CONNECT also loads it). When the member stops
  serving the bundle (an unload, SIGTERM, a lost ZooKeeper session) the coordinator is
  unloaded before the bundle's topics are closed. The next owner loads it from its log, as on a restart, and drives every
  COMMITTING/ABORTING transaction to its one outcome. Every append to a coordinator's
  log first asks the member whether it still serves (``ServingLedgers``): a member
  whose loop was paused past its session notices there, before anything is written,
  and the coordinator fences itself instead of writing beside the next owner.
* **Ends travel to the participants' owners.** ``ClusterTransactionBufferClient`` ends
  a transaction on a partition or subscription this member serves directly, and on any
  other over the binary protocol: it asks its own cluster view where the topic lives,
  then sends LOOKUP to that broker, following Redirects (at most
  ``MAX_LOOKUP_REDIRECTS``, the Pulsar client's default) until one answers Connect, and
  sends END_TXN_ON_PARTITION / END_TXN_ON_SUBSCRIPTION there. A Redirect is followed
  only to a live member's registered URL (anything else is counted as hostile input,
  ``broker_redirect``), so the connection pool holds at most one connection per
  member. Every failure keeps its code, so the coordinator's retry rules
  (``buffer_client.classify_end_failure``) apply as in one process: an owner that moved or died meanwhile answers ServiceNotReady or
  cannot be reached, and the end is sent again after ``transactionEndRetryIntervalMs``.
* **Buffer snapshots** go to the metadata store (``broker/txn_snapshot_metadata.py``).
* **Credentials.** With authentication on, a member connects to the others as its own
  role (``brokerClientAuthenticationPlugin`` / ``brokerClientAuthenticationParameters``,
  Pulsar's keys; the token plugin, or the TLS plugin whose certificate is presented in
  the TLS handshake), which must be a super-user there.
* **TLS.** With ``brokerClientTlsEnabled`` (``peer_tls.py``) every URL taken from a
  lookup, a Redirect or the live members is the ``pulsar+ssl://`` one
  (``brokerServiceUrlTls``), else the ``pulsar://`` one; an owner without a URL of
  that kind cannot be reached (retryably), never over the other kind.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any, cast

from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.lookup_data import LookupData
from quasar.broker.transactions import LocalTransactionBufferClient
from quasar.broker.txn_snapshot_metadata import MetadataSnapshotStore
from quasar.cluster.coordinator_topics import assign_partition
from quasar.cluster.member import ClusterMember, OwnedBundle
from quasar.config import AuthenticationConfig
from quasar.errors import (
    REFUSED_BROKER_REDIRECT,
    QuasarError,
    ServiceNotReady,
    error_for_code,
)
from quasar.protocol import pb
from quasar.protocol.topic_name import SYSTEM_NAMESPACE, TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import (
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFactory,
    MetadataStore,
    Position,
)
from quasar.transaction.buffer.snapshot_store import SnapshotStore
from quasar.transaction.buffer_client import TransactionBufferClient
from quasar.transaction.coordinator_registry import TransactionCoordinatorRegistry
from quasar.transaction.txn_status import TxnAction

from .peer_tls import TLS_PLUGINS, tls_plugin_files
from .remote_buffer_client import RemoteTransactionBufferClient

__all__ = [
    "MAX_LOOKUP_REDIRECTS",
    "ClusterTransactionBufferClient",
    "ClusterTransactions",
    "broker_client_auth",
]

log = logging.getLogger(__name__)

# Redirects a participant lookup follows before it fails (retryably): Pulsar's
# client default (maxLookupRedirects).
MAX_LOOKUP_REDIRECTS = 20
_LookupType = pb.CommandLookupTopicResponse
# Pulsar's token plugin (its class name, and the short name its clients also accept).
TOKEN_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "token")


def broker_client_auth(config: AuthenticationConfig) -> tuple[str, bytes] | None:
    """The method name and data this member's CONNECT to another member carries.

    ``None`` when no plugin is set (which authentication on refuses). The token is
    read once, at start-up.

    Raises:
        ValueError: authentication is on and the broker's client has no credentials,
            or a plugin other than the token and TLS plugins, or parameters it cannot
            read.
    """
    plugin = config.broker_client_authentication_plugin.strip()
    params = config.broker_client_authentication_parameters.strip()
    if not plugin:
        if config.authentication_enabled:
            raise ValueError(
                "authenticationEnabled=true on a cluster member with transactions needs "
                "brokerClientAuthenticationPlugin and brokerClientAuthenticationParameters "
                "(the broker's own super-user token)"
            )
        return None
    if plugin in TLS_PLUGINS:
        # The certificate is presented in the handshake (``peer_tls``); CONNECT
        # names the method only, as Pulsar's TLS plugin does.
        tls_plugin_files(params)
        return "tls", b""
    if plugin not in TOKEN_PLUGINS:
        raise ValueError(
            f"brokerClientAuthenticationPlugin={plugin} is not supported by quasar: "
            f"use {TOKEN_PLUGINS[0]} or {TLS_PLUGINS[0]}"
        )
    if params.startswith("token:"):
        token = params.removeprefix("token:")
    elif params.startswith("file:"):
        path = params.removeprefix("file:")
        path = path.removeprefix("//") if path.startswith("///") else path
        try:
            with open(path, encoding="utf-8") as f:
                token = f.read()
        except OSError as exc:
            raise ValueError(f"brokerClientAuthenticationParameters: {exc}") from None
    else:
        raise ValueError(
            "brokerClientAuthenticationParameters must be token:<jwt> or file:<path>"
        )
    token = token.strip()
    if not token:
        raise ValueError("brokerClientAuthenticationParameters names an empty token")
    return "token", token.encode()


class ClusterTransactions:
    """``ClusterTransactionParts`` of a cluster member. The member is attached once it
    exists (it is built after the transaction service); until then this broker owns no
    coordinator."""

    def __init__(
        self,
        store: MetadataStore,
        auth: tuple[str, bytes] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``auth``: the broker's own credentials for its connections to other
        members (CONNECT's ``auth_method_name`` and ``auth_data``); ``tls``: the
        context of those connections (``None``: plaintext)."""
        self.secure = tls is not None
        self._member: ClusterMember | None = None
        self._registry: TransactionCoordinatorRegistry | None = None
        self._refusals = HostileInputRefusals()
        # Coordinator loads started by an acquired bundle (held so they are not
        # collected; at most one per coordinator at a time, as the registry shares them).
        self._loads: set[asyncio.Task[None]] = set()
        self._snapshots = MetadataSnapshotStore(store)
        self.remote = RemoteTransactionBufferClient(_no_default_route, auth, tls)

    @property
    def snapshot_store(self) -> SnapshotStore:
        return self._snapshots

    def coordinator_ledgers(self, ledgers: ManagedLedgerFactory) -> ManagedLedgerFactory:
        return cast(ManagedLedgerFactory, ServingLedgers(ledgers, self))

    def coordinator_client(self, local: TransactionBufferClient) -> TransactionBufferClient:
        assert isinstance(local, LocalTransactionBufferClient)
        return ClusterTransactionBufferClient(self, local, self.remote)

    def attach(
        self,
        member: ClusterMember,
        registry: TransactionCoordinatorRegistry,
        refusals: HostileInputRefusals,
    ) -> None:
        """Start following ``member``'s bundles for ``registry``'s coordinators;
        ``refusals``: the broker's count of hostile input."""
        self._member = member
        self._registry = registry
        self._refusals = refusals
        member.on_bundles_closing.append(self._bundles_closing)
        member.on_bundle_acquired.append(self._bundle_acquired)

    @property
    def member(self) -> ClusterMember:
        """Raises: ServiceNotReady before the member is attached (start-up)."""
        if self._member is None:
            raise ServiceNotReady("the broker has not joined its cluster yet")
        return self._member

    def owns_coordinator(self, tc_id: int) -> bool:
        if self._member is None:
            return False
        try:
            self._member.check_serving(assign_partition(tc_id))
        except QuasarError:
            return False
        return True

    def binary_url(self, data: LookupData) -> str | None:
        """The binary URL of ``data`` members reach each other at: ``pulsar+ssl://``
        with TLS, else ``pulsar://``."""
        return data.broker_url_tls if self.secure else data.broker_url

    def redirect_url(self, found: pb.CommandLookupTopicResponse) -> str | None:
        """The URL a Redirect answer names, of the kind ``binary_url`` picks."""
        field = "brokerServiceUrlTls" if self.secure else "brokerServiceUrl"
        return getattr(found, field) if found.HasField(field) else None

    def require_member_url(self, topic: str, url: str | None) -> str:
        """``url`` if it is a live member's binary URL (of the kind ``binary_url``
        picks).

        Raises:
            ServiceNotReady: it is not (a peer's redirect to anywhere else is refused
                and counted; the end is tried again, from a fresh lookup).
        """
        live = {self.binary_url(b.urls) for b in self.member.registry.live_brokers()}
        if url is None or url not in live:
            self._refusals.count(REFUSED_BROKER_REDIRECT)
            log.warning("lookup of %s redirected to %s, which is no live member", topic, url)
            raise ServiceNotReady(f"{topic}: redirect to {url}, which is no live member")
        return url

    def _bundle_acquired(self, bundle: OwnedBundle) -> None:
        registry, member = self._registry, self._member
        if registry is None or member is None or bundle[0] != SYSTEM_NAMESPACE:
            return
        for tc_id in range(registry.coordinator_count):
            if member.bundle_of(assign_partition(tc_id)) == bundle:
                task = asyncio.get_running_loop().create_task(self._load(registry, tc_id))
                self._loads.add(task)
                task.add_done_callback(self._loads.discard)

    @staticmethod
    async def _load(registry: TransactionCoordinatorRegistry, tc_id: int) -> None:
        try:
            await registry.connect(tc_id)
        except QuasarError as exc:  # a client's TC_CLIENT_CONNECT tries again
            log.warning("transaction coordinator %d did not load: %s", tc_id, exc)

    async def _bundles_closing(self, bundles: set[OwnedBundle]) -> None:
        registry, member = self._registry, self._member
        if registry is None or member is None:
            return
        for tc_id in registry.loaded():
            try:
                closing = member.bundle_of(assign_partition(tc_id)) in bundles
            except QuasarError:  # the metadata store is out of reach: stop it too
                closing = True
            if closing:
                log.info("unloading transaction coordinator %d: its bundle moves", tc_id)
                await registry.unload(tc_id)

    async def close(self) -> None:
        for task in list(self._loads):
            task.cancel()
        await self.remote.close()


class ServingLedgers:
    """The broker's ledger factory, whose ledgers refuse appends (``ServiceNotReady``)
    while the member does not serve; everything else is the factory's."""

    def __init__(self, ledgers: ManagedLedgerFactory, cluster: ClusterTransactions) -> None:
        self._ledgers = ledgers
        self._cluster = cluster

    async def open(
        self, name: str, config: ManagedLedgerConfig | None = None
    ) -> ManagedLedger:
        ledger = await self._ledgers.open(name, config)
        return cast(ManagedLedger, _ServingLedger(ledger, self._cluster))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledgers, name)


class _ServingLedger:
    def __init__(self, ledger: ManagedLedger, cluster: ClusterTransactions) -> None:
        self._ledger = ledger
        self._cluster = cluster

    def add_entry(self, data: bytes) -> asyncio.Future[Position]:
        self._cluster.member.require_serving()
        return self._ledger.add_entry(data)

    def append_entry(
        self, data: bytes, callback: Callable[[Position | None, BaseException | None], None]
    ) -> None:
        self._cluster.member.require_serving()
        self._ledger.append_entry(data, callback)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)


def _no_default_route(topic: str) -> str:
    # Every end names its broker (``*_at``); this is never asked.
    raise ServiceNotReady(f"no route to the owner of {topic}")


class ClusterTransactionBufferClient:
    """A coordinator's ``TransactionBufferClient`` on a cluster member."""

    def __init__(
        self,
        cluster: ClusterTransactions,
        local: LocalTransactionBufferClient,
        remote: RemoteTransactionBufferClient,
    ) -> None:
        self._cluster = cluster
        self._local = local
        self._remote = remote

    async def end_txn_on_partition(
        self, topic: str, txn_id: TxnID, action: TxnAction, low_watermark: int
    ) -> None:
        url = await self._owner_url(topic)
        if url is None:
            await self._local.end_txn_on_partition(topic, txn_id, action, low_watermark)
        else:
            await self._remote.end_txn_on_partition_at(
                url, topic, txn_id, action, low_watermark
            )

    async def end_txn_on_subscription(
        self,
        topic: str,
        subscription: str,
        txn_id: TxnID,
        action: TxnAction,
        low_watermark: int,
    ) -> None:
        url = await self._owner_url(topic)
        if url is None:
            await self._local.end_txn_on_subscription(
                topic, subscription, txn_id, action, low_watermark
            )
        else:
            await self._remote.end_txn_on_subscription_at(
                url, topic, subscription, txn_id, action, low_watermark
            )

    async def _owner_url(self, topic: str) -> str | None:
        """The binary URL of ``topic``'s owner; ``None`` when it is this member.

        Raises:
            InvalidTopicName, TopicNotFound: the topic can never be reached (the
                coordinator counts it as ended).
            ServiceNotReady: the owner is not known yet, or too many redirects.
        """
        name = TopicName.parse(topic)
        answer = self._cluster.member.lookup(name, False, "")
        if not answer.redirect:
            return None
        cluster = self._cluster
        url, authoritative = cluster.binary_url(answer.data), answer.authoritative
        for _ in range(MAX_LOOKUP_REDIRECTS):
            if url is None:
                kind = "pulsar+ssl://" if cluster.secure else "pulsar://"
                raise ServiceNotReady(f"the owner of {topic} has no {kind} URL")
            found = await self._remote.lookup(url, topic, authoritative)
            if found.response == _LookupType.Connect:
                return url
            if found.response != _LookupType.Redirect:
                raise error_for_code(found.error, found.message)
            url = cluster.require_member_url(topic, cluster.redirect_url(found))
            authoritative = found.authoritative
        raise ServiceNotReady(
            f"{topic}: more than {MAX_LOOKUP_REDIRECTS} lookup redirects"
        )
