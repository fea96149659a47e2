"""The pure parts of transactions on a cluster member: where a coordinator's own
topics are placed, buffer snapshots in the metadata store, the broker client's
credentials, and how an end finds a participant's owner (with fakes for the member
and the other brokers)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from quasar.broker.hostile_input import HostileInputRefusals
from quasar.broker.lookup_data import LookupData
from quasar.broker.topic_ownership import LookupAnswer
from quasar.broker.txn_snapshot_metadata import MetadataSnapshotStore
from quasar.cluster.coordinator_topics import assign_partition, placement_of
from quasar.config import AuthenticationConfig
from quasar.errors import REFUSED_BROKER_REDIRECT, ServiceNotReady, TopicNotFound
from quasar.protocol import pb
from quasar.protocol.topic_name import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.server.cluster_transactions import (
    MAX_LOOKUP_REDIRECTS,
    ClusterTransactionBufferClient,
    ClusterTransactions,
    broker_client_auth,
)
from quasar.storage.memory import MemoryManagedLedgerFactory
from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.transaction.txn_status import TxnAction

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


# -- the coordinator's way to participants on other members ------------------------

LookupType = pb.CommandLookupTopicResponse
ME = "pulsar://10.0.0.1:6650"
OTHER = "pulsar://10.0.0.2:6650"
THIRD = "pulsar://10.0.0.3:6650"


class _Member:
    """The member's lookup answers, and the live members' registrations."""

    def __init__(self, answer: LookupAnswer, live: list[str]) -> None:
        self.answer = answer
        self.on_bundles_closing: list[object] = []
        self.on_bundle_acquired: list[object] = []
        self.registry = SimpleNamespace(
            live_brokers=lambda: [
                SimpleNamespace(urls=LookupData(u, None, None, None)) for u in live
            ]
        )

    def lookup(self, name: TopicName, authoritative: bool, listener: str) -> LookupAnswer:
        return self.answer


class _Remote:
    """LOOKUP answers by URL, and the ends sent (URL, topic)."""

    def __init__(self, answers: dict[str, tuple[int, str | None]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, bool]] = []
        self.ended: list[tuple[str, str]] = []

    async def lookup(self, url: str, topic: str, authoritative: bool) -> object:
        self.asked.append((url, authoritative))
        response, target = self.answers[url]
        found = pb.CommandLookupTopicResponse(request_id=1, response=response,
                                               authoritative=True)
        if target is not None:
            found.brokerServiceUrl = target
        if response == LookupType.Failed:
            found.error, found.message = pb.TopicNotFound, "Namespace gone"
        return found

    async def end_txn_on_partition_at(self, url: str, topic: str, *args: object) -> None:
        self.ended.append((url, topic))


class _Local:
    def __init__(self) -> None:
        self.ended: list[str] = []

    async def end_txn_on_partition(self, topic: str, *args: object) -> None:
        self.ended.append(topic)


def _router(
    answer: LookupAnswer, live: list[str], answers: dict[str, tuple[int, str | None]]
) -> tuple[ClusterTransactionBufferClient, _Local, _Remote, HostileInputRefusals]:
    cluster = ClusterTransactions(MemoryMetadataStore())
    refusals = HostileInputRefusals()
    cluster.attach(_Member(answer, live), SimpleNamespace(), refusals)  # type: ignore[arg-type]
    local, remote = _Local(), _Remote(answers)
    router = ClusterTransactionBufferClient(cluster, local, remote)  # type: ignore[arg-type]
    return router, local, remote, refusals


TOPIC = "persistent://public/default/t"


def _end(router: ClusterTransactionBufferClient) -> None:
    asyncio.run(router.end_txn_on_partition(TOPIC, TxnID(0, 1), TxnAction.COMMIT, -1))


def test_an_end_on_a_topic_this_member_serves_stays_local() -> None:
    router, local, remote, _ = _router(
        LookupAnswer(LookupData(ME, None, None, None), False), [ME], {}
    )
    _end(router)
    assert local.ended == [TOPIC] and remote.asked == [] and remote.ended == []


def test_an_end_follows_redirects_to_the_owner() -> None:
    router, local, remote, refusals = _router(
        LookupAnswer(LookupData(OTHER, None, None, None), True),
        [ME, OTHER, THIRD],
        {OTHER: (LookupType.Redirect, THIRD), THIRD: (LookupType.Connect, None)},
    )
    _end(router)
    assert remote.asked == [(OTHER, True), (THIRD, True)]
    assert remote.ended == [(THIRD, TOPIC)] and local.ended == []


def test_a_redirect_to_no_live_member_is_refused_and_counted() -> None:
    router, _, remote, refusals = _router(
        LookupAnswer(LookupData(OTHER, None, None, None), True),
        [ME, OTHER],
        {OTHER: (LookupType.Redirect, "pulsar://evil.example:6650")},
    )
    with pytest.raises(ServiceNotReady, match="no live member"):
        _end(router)
    assert remote.ended == []
    assert refusals._refused.labels(REFUSED_BROKER_REDIRECT)._value.get() == 1


def test_a_redirect_loop_ends_after_the_bound() -> None:
    router, _, remote, _ = _router(
        LookupAnswer(LookupData(OTHER, None, None, None), True),
        [ME, OTHER, THIRD],
        {OTHER: (LookupType.Redirect, THIRD), THIRD: (LookupType.Redirect, OTHER)},
    )
    with pytest.raises(ServiceNotReady, match="redirects"):
        _end(router)
    assert len(remote.asked) == MAX_LOOKUP_REDIRECTS and remote.ended == []


def test_a_failed_lookup_keeps_its_code() -> None:
    router, _, remote, _ = _router(
        LookupAnswer(LookupData(OTHER, None, None, None), True), [ME, OTHER],
        {OTHER: (LookupType.Failed, None)},
    )
    # TopicNotFound: the coordinator counts the participant as ended.
    with pytest.raises(TopicNotFound, match="Namespace gone"):
        _end(router)


def test_a_coordinators_log_refuses_appends_while_the_member_does_not_serve() -> None:
    serving = [True]

    def require_serving() -> None:
        if not serving[0]:
            raise ServiceNotReady("not serving")

    member = _Member(LookupAnswer(LookupData(ME, None, None, None), False), [ME])
    member.require_serving = require_serving  # type: ignore[attr-defined]
    cluster = ClusterTransactions(MemoryMetadataStore())
    cluster.attach(member, SimpleNamespace(), HostileInputRefusals())  # type: ignore[arg-type]

    async def run() -> None:
        ledgers = MemoryManagedLedgerFactory()
        log = await cluster.coordinator_ledgers(ledgers).open("pulsar/system/persistent/log")
        first = await log.add_entry(b"one")
        serving[0] = False
        with pytest.raises(ServiceNotReady):
            log.add_entry(b"two")
        with pytest.raises(ServiceNotReady):
            log.append_entry(b"two", lambda position, error: None)
        assert log.number_of_entries == 1  # reads and the rest are the ledger's own
        assert (await log.read_entries(first, 10))[0].data == b"one"
        await log.close()
        await ledgers.close()

    asyncio.run(run())
