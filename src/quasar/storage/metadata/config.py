"""Where the broker's metadata lives: the ``metadataStoreUrl`` section of broker.conf.

Unset (the default), metadata is kept in the embedded SQLite store in the data
directory, as ``quasar standalone`` always has. ``metadataStoreUrl=zk:…`` puts it in
ZooKeeper; ``configurationMetadataStoreUrl`` puts the configuration metadata
(clusters, tenants, namespaces with their policies and permissions, partitioned
topics) in a second ZooKeeper (or another chroot), as Pulsar's configuration store.

Pulsar's deprecated keys are read the way Pulsar reads them: ``zookeeperServers`` is
``metadataStoreUrl`` with the ``zk:`` scheme when the latter is unset,
``configurationStoreServers`` likewise for ``configurationMetadataStoreUrl``, and
``zooKeeperSessionTimeoutMillis`` / ``zooKeeperOperationTimeoutSeconds`` win over
the ``metadataStore…`` timeouts when set to a positive value.
"""

from __future__ import annotations

from dataclasses import dataclass

from quasar.config_schema import Section, at_least, setting
from quasar.storage.metadata.url import ZooKeeperUrl, parse_metadata_store_url

__all__ = ["MetadataStoreConfig"]


@dataclass(frozen=True)
class MetadataStoreConfig(Section):
    """The metadata store's location and its ZooKeeper session settings."""

    # Pulsar's key; empty = the embedded SQLite store in the data directory.
    metadata_store_url: str = setting("", "metadataStoreUrl")
    # Pulsar's key; empty = the configuration metadata shares metadataStoreUrl.
    configuration_metadata_store_url: str = setting("", "configurationMetadataStoreUrl")
    # Pulsar's deprecated spelling of metadataStoreUrl (a ZooKeeper connect string).
    zookeeper_servers: str = setting("", "zookeeperServers")
    # Pulsar's deprecated spelling of configurationMetadataStoreUrl.
    configuration_store_servers: str = setting("", "configurationStoreServers")
    # Pulsar default (broker.conf metadataStoreSessionTimeoutMillis): how long
    # ZooKeeper keeps the session (and its ephemeral nodes) of an unreachable broker.
    metadata_store_session_timeout_millis: int = setting(
        30_000, "metadataStoreSessionTimeoutMillis", at_least(1)
    )
    # Pulsar default (broker.conf metadataStoreOperationTimeoutSeconds): the longest
    # one metadata operation waits before failing with MetadataError.
    metadata_store_operation_timeout_seconds: int = setting(
        30, "metadataStoreOperationTimeoutSeconds", at_least(1)
    )
    # Pulsar's deprecated keys; -1 (their default) defers to the metadataStore… keys.
    zoo_keeper_session_timeout_millis: int = setting(
        -1, "zooKeeperSessionTimeoutMillis", at_least(-1)
    )
    zoo_keeper_operation_timeout_seconds: int = setting(
        -1, "zooKeeperOperationTimeoutSeconds", at_least(-1)
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        # Parse now: an unsupported scheme or a malformed URL is a start-up error.
        self.metadata_url()
        self.configuration_url()

    def metadata_url(self) -> ZooKeeperUrl | None:
        """The metadata store's ZooKeeper, or ``None`` for the embedded SQLite store.

        Raises:
            ValueError: an unsupported scheme or a malformed URL.
        """
        if self.metadata_store_url:
            return _parse("metadataStoreUrl", self.metadata_store_url)
        if self.zookeeper_servers:
            return _parse("zookeeperServers", "zk:" + self.zookeeper_servers)
        return None

    def configuration_url(self) -> ZooKeeperUrl | None:
        """The configuration store's ZooKeeper when it is configured on its own, else
        ``None`` (the configuration metadata then shares the metadata store).

        Raises:
            ValueError: an unsupported scheme, a malformed URL, or a configuration
                store without a metadata store (the broker's local metadata would
                have nowhere to go but the data directory, which a cluster cannot
                share).
        """
        url: ZooKeeperUrl | None = None
        if self.configuration_metadata_store_url:
            url = _parse(
                "configurationMetadataStoreUrl", self.configuration_metadata_store_url
            )
        elif self.configuration_store_servers:
            url = _parse("configurationStoreServers", "zk:" + self.configuration_store_servers)
        if url is not None and self.metadata_url() is None:
            raise ValueError(
                "configurationMetadataStoreUrl is set but metadataStoreUrl is not: "
                "set metadataStoreUrl to the ZooKeeper that holds this broker's "
                "metadata"
            )
        return url

    @property
    def session_timeout_ms(self) -> int:
        """The ZooKeeper session timeout in effect."""
        if self.zoo_keeper_session_timeout_millis > 0:
            return self.zoo_keeper_session_timeout_millis
        return self.metadata_store_session_timeout_millis

    @property
    def operation_timeout_s(self) -> int:
        """The per-operation timeout in effect, in seconds."""
        if self.zoo_keeper_operation_timeout_seconds > 0:
            return self.zoo_keeper_operation_timeout_seconds
        return self.metadata_store_operation_timeout_seconds


def _parse(key: str, url: str) -> ZooKeeperUrl:
    try:
        return parse_metadata_store_url(url)
    except ValueError as exc:
        raise ValueError(f"invalid value for {key}: {exc}") from None
