"""Open the metadata store a broker's configuration asks for.

Unset ``metadataStoreUrl``: the embedded SQLite store, ``metadata.db`` in the data
directory. ``zk:…``: ZooKeeper, and when ``configurationMetadataStoreUrl`` names
another ZooKeeper (or chroot), the configuration metadata goes there
(``ConfigurationRoutedStore``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from quasar.storage.api import MetadataStore
from quasar.storage.disk_space import DiskSpace
from quasar.storage.metadata.config import MetadataStoreConfig
from quasar.storage.metadata.routed import ConfigurationRoutedStore
from quasar.storage.metadata.sqlite import SqliteMetadataStore
from quasar.storage.metadata.url import ZooKeeperUrl
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

__all__ = ["SQLITE_FILE", "describe", "open_metadata_store"]

log = logging.getLogger(__name__)

SQLITE_FILE = "metadata.db"


def open_metadata_store(
    config: MetadataStoreConfig,
    data_dir: Path | None,
    *,
    disk_space: DiskSpace | None = None,
) -> MetadataStore:
    """The metadata store of ``config`` (``data_dir`` holds the SQLite file; a tool
    without a data directory passes ``None`` and must configure a URL).

    Raises:
        MetadataError: the store cannot be opened (SQLite file unusable, ZooKeeper
            not answering within the operation timeout).
        ValueError: an unsupported or malformed URL, or no URL and no data directory.
    """
    url = config.metadata_url()
    if url is None:
        if data_dir is None:
            raise ValueError("metadataStoreUrl is not set")
        return SqliteMetadataStore(str(data_dir / SQLITE_FILE), disk_space=disk_space)
    if data_dir is not None and (data_dir / SQLITE_FILE).exists():
        # Not silently ignored: an operator who moved a standalone to ZooKeeper
        # must know that what the file holds is not what the broker serves.
        log.warning(
            "%s in %s is not used: metadata is in %s (metadataStoreUrl)",
            SQLITE_FILE, data_dir, url,
        )
    local = _zookeeper(config, url)
    configuration_url = config.configuration_url()
    if configuration_url is None or configuration_url == url:
        return local
    try:
        configuration = _zookeeper(config, configuration_url)
    except BaseException:
        local.close()
        raise
    return ConfigurationRoutedStore(local, configuration)


def describe(config: MetadataStoreConfig, data_dir: Path) -> str:
    """Where the metadata lives, for the start-up log."""
    url = config.metadata_url()
    if url is None:
        return f"SQLite {data_dir / SQLITE_FILE}"
    configuration_url = config.configuration_url()
    if configuration_url is None or configuration_url == url:
        return f"ZooKeeper {url}"
    return f"ZooKeeper {url}, configuration in {configuration_url}"


def _zookeeper(config: MetadataStoreConfig, url: ZooKeeperUrl) -> ZooKeeperMetadataStore:
    return ZooKeeperMetadataStore(
        url,
        session_timeout_ms=config.session_timeout_ms,
        operation_timeout_s=config.operation_timeout_s,
    )
