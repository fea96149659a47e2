"""``quasar broker``: a broker that is one member of a cluster on ZooKeeper.

It starts like ``quasar standalone`` (same ports, storage and admin API) with these
differences, each checked before any port listens:

* ``metadataStoreUrl`` must name ZooKeeper, and the cluster named by ``clusterName``
  must have been initialized (``quasar initialize-cluster-metadata``): a member
  creates no tenants or namespaces itself;
* it locks ``LOCK-<broker id>`` in the data directory instead of ``LOCK``, so the
  brokers of one host may share a data directory (bundle ownership keeps two of them
  from opening the same topic);
* it registers under ``/loadbalance/brokers`` and serves only the topics of the
  bundles it owns (``quasar.cluster.member``); lookups redirect, admin topic requests
  answer 307 to the owner;
* transaction coordinators are owned with their bundles and ends travel to the
  participants' owners (``cluster_transactions.py``), over TLS with
  ``brokerClientTlsEnabled`` (``peer_tls.py``).

On SIGTERM it releases its bundles (another broker may take them at once) and
deregisters before shutting down like a standalone broker.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from typing import Any

from quasar.auth import AuthenticationConfigError
from quasar.cluster.member import ClusterMember
from quasar.config import ServiceConfiguration
from quasar.errors import MetadataError
from quasar.storage.metadata.routed import ConfigurationRoutedStore
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

from .cluster_transactions import ClusterTransactions, broker_client_auth
from .peer_tls import broker_client_tls_context
from .standalone import GIL_SWITCH_INTERVAL_S, Standalone
from .tls import TlsConfigurationError

__all__ = ["ClusterBroker", "ClusterConfigurationError", "run"]

log = logging.getLogger("quasar.broker")


class ClusterConfigurationError(ValueError):
    """The configuration cannot start a cluster member (a start-up error)."""


def check_cluster_config(config: ServiceConfiguration) -> None:
    """Raises: ClusterConfigurationError naming what is missing or unsupported."""
    if config.metadata_store.metadata_url() is None:
        raise ClusterConfigurationError(
            "quasar broker needs metadataStoreUrl=zk:host:port[/chroot] (the "
            "cluster's ZooKeeper); use quasar standalone for a single broker"
        )
    broker = config.broker
    transactions = config.transaction.transaction_coordinator_enabled
    if transactions:
        _check_peer_ports(config)
    try:
        if transactions:
            broker_client_auth(config.authentication)
        _peer_tls(config)
    except ValueError as exc:
        raise ClusterConfigurationError(str(exc)) from None
    if broker.web_service_port is None and broker.web_service_port_tls is None:
        raise ClusterConfigurationError(
            "quasar broker needs webServicePort or webServicePortTls: the broker id "
            "is advertisedAddress:webServicePort"
        )


def _peer_tls(config: ServiceConfiguration) -> ssl.SSLContext | None:
    """The context of this member's TLS connections to the others (``None``:
    plaintext); the credentials of its TLS plugin count only with transactions,
    the one use of that plugin here.

    Raises:
        TlsConfigurationError: a ``brokerClient*`` TLS value cannot be used.
    """
    transactions = config.transaction.transaction_coordinator_enabled
    return broker_client_tls_context(
        config.tls, config.authentication if transactions else None
    )


def _check_peer_ports(config: ServiceConfiguration) -> None:
    """Members reach each other on the ports their own configuration says they all
    listen on: the TLS ones with brokerClientTlsEnabled, else the plaintext ones
    (a member never falls back from one to the other).

    Raises:
        ClusterConfigurationError: naming the port that is missing.
    """
    broker = config.broker
    if config.tls.broker_client_tls_enabled:
        missing = [
            key
            for key, port in (
                ("brokerServicePortTls", broker.broker_service_port_tls),
                ("webServicePortTls", broker.web_service_port_tls),
            )
            if port is None
        ]
        if missing:
            raise ClusterConfigurationError(
                "transactionCoordinatorEnabled=true with brokerClientTlsEnabled=true "
                f"needs {' and '.join(missing)}: members send each other the ends of "
                "transactions over pulsar+ssl:// and gather the transaction admin "
                "routes over https://"
            )
    elif broker.broker_service_port is None:
        raise ClusterConfigurationError(
            "transactionCoordinatorEnabled=true on quasar broker needs "
            "brokerServicePort: members send each other the ends of transactions over "
            "the plaintext port unless brokerClientTlsEnabled=true (then over "
            "brokerServicePortTls)"
        )


def _zookeeper_of(store: Any) -> ZooKeeperMetadataStore:
    if isinstance(store, ConfigurationRoutedStore):
        store = store.local
    if not isinstance(store, ZooKeeperMetadataStore):
        raise ClusterConfigurationError("quasar broker needs a ZooKeeper metadata store")
    return store


def _configuration_zookeeper_of(store: Any) -> ZooKeeperMetadataStore | None:
    """The configuration store's own ZooKeeper session, when there is one."""
    if isinstance(store, ConfigurationRoutedStore) and isinstance(
        store.configuration, ZooKeeperMetadataStore
    ):
        return store.configuration
    return None


class ClusterBroker(Standalone):
    """A standalone broker that joins a cluster before it listens."""

    command = "broker"

    def __init__(self, config: ServiceConfiguration) -> None:
        check_cluster_config(config)
        super().__init__(config)
        broker = config.broker
        web_port = broker.web_service_port
        if web_port is None:
            web_port = broker.web_service_port_tls
        # Pulsar's broker id: the advertised address and the web service port.
        self.broker_id = f"{broker.advertised_address}:{web_port}"
        self.member: ClusterMember | None = None
        self.cluster_transactions: ClusterTransactions | None = None
        self._broker_client_auth: tuple[str, bytes] | None = None
        if config.transaction.transaction_coordinator_enabled:
            self._broker_client_auth = broker_client_auth(config.authentication)
        # Built whether or not transactions are on: the admin routes gathered from
        # the other members must not go out in plaintext with brokerClientTlsEnabled.
        self._broker_client_tls = _peer_tls(config)
        if self._broker_client_tls is not None and config.tls.tls_allow_insecure_connection:
            log.warning(
                "tlsAllowInsecureConnection=true: this member accepts any "
                "certificate from the other members of its cluster"
            )

    def _data_dir_lock(self) -> str:
        return f"LOCK-{self.broker_id}"

    def _data_dir_shared(self) -> bool:
        # Members share the data directory: a topic's new owner fences the ledger
        # its previous owner was writing (docs/cluster.md, "Fencing a previous owner").
        return True

    def _create_system_namespaces(self) -> None:
        # initialize-cluster-metadata's job; a member only checks it was done.
        assert self.service is not None
        name = self.config.broker.cluster_name
        if self.service.resources.clusters.get(name) is None:
            raise MetadataError(
                f"cluster {name} is not initialized in the metadata store: run "
                "quasar initialize-cluster-metadata first"
            )

    def _before_listening(self) -> None:
        assert self.service is not None
        member = ClusterMember(
            self.service, _zookeeper_of(self._store), self.broker_id,
            self.config.load_balancer, self.config.metadata_store.session_timeout_ms,
            _configuration_zookeeper_of(self._store),
        )
        member.start()
        self.member = member
        self.service.ownership = member
        transactions = self.service.transactions
        if self.cluster_transactions is not None and transactions is not None:
            self.cluster_transactions.attach(
                member, transactions.registry, self.service.refusals
            )

    def _transaction_cluster_parts(self) -> ClusterTransactions:
        self.cluster_transactions = ClusterTransactions(
            self._store, self._broker_client_auth, self._broker_client_tls
        )
        return self.cluster_transactions

    def _admin_options(self) -> dict[str, Any]:
        # The transaction routes over every coordinator ask the other members as
        # this broker's own role, the one its binary connections to them carry.
        headers = {}
        if self._broker_client_auth is not None:
            method, token = self._broker_client_auth
            # The TLS plugin's identity is the certificate of the HTTPS handshake.
            if method == "token":
                headers["Authorization"] = f"Bearer {token.decode()}"
        return {
            "cluster": self.member,
            "cluster_peer_headers": headers,
            "cluster_peer_tls": self._broker_client_tls,
        }

    async def start(self) -> None:
        await super().start()
        log.info("quasar broker %s is a member of cluster %s",
                 self.broker_id, self.config.broker.cluster_name)

    async def stop(self) -> None:
        if self.member is not None:
            try:
                await self.member.stop()
            except Exception:
                log.exception("error releasing bundles")
        await super().stop()
        if self.cluster_transactions is not None:
            await self.cluster_transactions.close()


def run(config: ServiceConfiguration) -> None:
    """Run a cluster member in the foreground until SIGTERM/SIGINT."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    try:
        broker = ClusterBroker(config)
    except (AuthenticationConfigError, TlsConfigurationError, ClusterConfigurationError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        import uvloop
    except ImportError:  # uvloop is optional: plain asyncio works, only slower
        asyncio.run(broker.run_until_signal())
        return
    uvloop.run(broker.run_until_signal())
