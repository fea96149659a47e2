"""The pure parts of transactions on a cluster member: where a coordinator's own
topics are placed, buffer snapshots in the metadata store, and the broker client's
credentials."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from quasar.broker.txn_snapshot_metadata import MetadataSnapshotStore
from quasar.cluster.coordinator_topics import assign_partition, placement_of
from quasar.config import AuthenticationConfig
from quasar.protocol.topic_name import TopicName
from quasar.server.cluster_transactions import broker_client_auth
from quasar.storage.metadata.memory import MemoryMetadataStore

ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


@pytest.mark.parametrize(
    ("topic", "placed"),
    [
        ("persistent://pulsar/system/__transaction_log_3", f"{ASSIGN}-partition-3"),
        ("persistent://pulsar/system/__terminated_txn_state_12", f"{ASSIGN}-partition-12"),
        (f"{ASSIGN}-partition-5", f"{ASSIGN}-partition-5"),
        # Everything else stays where its own name puts it.
        ("persistent://pulsar/system/__transaction_log_03", None),
        ("persistent://pulsar/system/__transaction_log_x", None),
        ("persistent://pulsar/system/other", None),
        ("persistent://public/default/__transaction_log_1", None),
        ("non-persistent://pulsar/system/__transaction_log_1", None),
        ("persistent://pulsar/system/__transaction_log_1-partition-0", None),
    ],
)
def test_a_coordinators_topics_are_placed_with_its_assign_partition(
    topic: str, placed: str | None
) -> None:
    name = TopicName.parse(topic)
    assert placement_of(name).full == (placed or topic)


def test_assign_partition_names_pulsars_partition() -> None:
    assert assign_partition(7).full == f"{ASSIGN}-partition-7"


def test_snapshots_in_the_metadata_store_round_trip() -> None:
    store = MetadataSnapshotStore(MemoryMetadataStore())
    key = "persistent://public/default/t-partition-1"

    async def run() -> None:
        assert await store.read(key) is None
        await store.write(key, b"index")
        await store.write(f"{key}-segment-1", b"seg")
        assert await store.read(key) == b"index"
        await store.write(key, b"index-2")
        assert await store.read(key) == b"index-2"
        await store.delete(key)
        await store.delete(key)  # deleting an absent key succeeds
        assert await store.read(key) is None
        assert await store.read(f"{key}-segment-1") == b"seg"

    asyncio.run(run())
    # One node per key below one parent: "/" in a topic name is encoded.
    assert store.path(key).count("/") == 2


def _auth(**values: object) -> AuthenticationConfig:
    return AuthenticationConfig(**values)  # type: ignore[arg-type]


def test_broker_client_credentials(tmp_path: Path) -> None:
    plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert broker_client_auth(_auth()) is None
    assert broker_client_auth(
        _auth(broker_client_authentication_plugin=plugin,
              broker_client_authentication_parameters="token:abc")
    ) == ("token", b"abc")
    token_file = tmp_path / "broker.token"
    token_file.write_text("from-file\n")
    for url in (f"file://{token_file}", f"file:{token_file}"):
        assert broker_client_auth(
            _auth(broker_client_authentication_plugin="token",
                  broker_client_authentication_parameters=url)
        ) == ("token", b"from-file")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"authentication_enabled": True}, "brokerClientAuthenticationPlugin"),
        ({"broker_client_authentication_plugin": "org.example.Kerberos"}, "not supported"),
        ({"broker_client_authentication_plugin": "token",
          "broker_client_authentication_parameters": "abc"}, "token:<jwt>"),
        ({"broker_client_authentication_plugin": "token",
          "broker_client_authentication_parameters": "token:"}, "empty token"),
        ({"broker_client_authentication_plugin": "token",
          "broker_client_authentication_parameters": "file:/nonexistent/t"}, "No such file"),
    ],
)
def test_broker_client_credentials_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        broker_client_auth(_auth(**values))


def test_the_broker_token_is_masked_in_the_configurations_repr() -> None:
    config = _auth(broker_client_authentication_parameters="token:secret-jwt")
    assert "secret-jwt" not in repr(config)
