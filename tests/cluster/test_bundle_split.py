"""Bundle split and the load manager's choice by load: pure logic, no broker."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from quasar.broker.lookup_data import LookupData
from quasar.cluster.bundle_split import (
    BundleLoad,
    SplitThresholds,
    bundle_to_split,
    exceeded,
    write_split,
)
from quasar.cluster.load_manager import (
    LOAD_PER_BUNDLE_MSG_RATE,
    LoadManager,
    broker_load,
    choose_broker,
)
from quasar.cluster.load_shedding import SheddingSettings, bundle_to_shed
from quasar.cluster.member import ClusterMember
from quasar.cluster.ownership import BundleOwnership, NamespaceEphemeralData
from quasar.cluster.registry import BrokerRegistration, LoadReport
from quasar.config import ServiceConfiguration
from quasar.errors import ConflictError, PreconditionFailedError, ResourceNotFoundError
from quasar.protocol.namespace_name import parse_topic
from quasar.resources.bundles import (
    RANGE_EQUALLY_DIVIDE,
    TOPIC_COUNT_EQUALLY_DIVIDE,
    BundleRange,
    BundlesData,
    split_boundary,
)
from quasar.resources.models import Policies, TenantInfo
from quasar.resources.store import PulsarResources
from quasar.storage.metadata.memory import MemoryMetadataStore
from quasar.storage.metadata.zk_watch import SessionState

FULL = BundleRange(0, 0xFFFFFFFF)


# -- split boundaries ------------------------------------------------------------------
def test_range_equally_divide_halves_the_range() -> None:
    assert split_boundary(FULL, RANGE_EQUALLY_DIVIDE, []) == 0x7FFFFFFF
    quarter = BundleRange(0x40000000, 0x80000000)
    assert split_boundary(quarter, RANGE_EQUALLY_DIVIDE, []) == 0x60000000


def test_a_range_of_one_hash_cannot_be_split() -> None:
    with pytest.raises(PreconditionFailedError, match="too small"):
        split_boundary(BundleRange(5, 6), RANGE_EQUALLY_DIVIDE, [])


@pytest.mark.parametrize(
    "hashes",
    [
        [10, 20],
        [10, 11],
        [1, 2, 3, 4, 5, 6, 7],
        [0, 0xFFFFFFF0],
        [100, 100, 200, 300],  # two topics with one hash stay on one side
    ],
)
def test_topic_count_equally_divide_puts_half_the_topics_on_each_side(
    hashes: list[int],
) -> None:
    boundary = split_boundary(FULL, TOPIC_COUNT_EQUALLY_DIVIDE, hashes)
    assert FULL.low < boundary < FULL.high
    distinct = sorted(set(hashes))
    below = [h for h in distinct if h < boundary]
    assert len(below) == len(distinct) // 2


def test_topic_count_ignores_hashes_outside_the_bundle_and_needs_two() -> None:
    half = BundleRange(0, 0x80000000)
    with pytest.raises(PreconditionFailedError, match="fewer than two"):
        split_boundary(half, TOPIC_COUNT_EQUALLY_DIVIDE, [5, 0x90000000, 0xA0000000])
    with pytest.raises(PreconditionFailedError, match="fewer than two"):
        split_boundary(half, TOPIC_COUNT_EQUALLY_DIVIDE, [7, 7])


def test_topic_count_at_the_top_of_the_last_bundle() -> None:
    last = BundleRange(0xFFFFFFFE, 0xFFFFFFFF)
    # The last bundle holds 0xffffffff; no boundary strictly inside separates it.
    with pytest.raises(PreconditionFailedError, match="too small"):
        split_boundary(last, TOPIC_COUNT_EQUALLY_DIVIDE, [0xFFFFFFFE, 0xFFFFFFFF])


def test_unknown_algorithms_are_refused_as_pulsar_does() -> None:
    with pytest.raises(PreconditionFailedError, match="Unsupported namespace bundle split"):
        split_boundary(FULL, "specified_positions_divide", [])
    assert PreconditionFailedError("x").http_status == 412


def test_split_replaces_the_parent_by_its_halves() -> None:
    bundles = BundlesData.even(4)
    parent = BundleRange(0x40000000, 0x80000000)
    after = bundles.split(parent, 0x60000000)
    assert after.num_bundles == 5
    assert [r.name for r in after.ranges()][1:3] == [
        "0x40000000_0x60000000", "0x60000000_0x80000000",
    ]
    assert not after.contains(parent)
    assert after.find(0x5FFFFFFF) == BundleRange(0x40000000, 0x60000000)
    assert after.find(0x60000000) == BundleRange(0x60000000, 0x80000000)
    assert BundlesData.from_json(after.to_json()) == after


def test_split_refuses_a_bundle_split_meanwhile_and_a_boundary_outside() -> None:
    bundles = BundlesData.even(4)
    with pytest.raises(PreconditionFailedError, match="not a bundle"):
        bundles.split(BundleRange(0x40000000, 0x60000000), 0x50000000)
    with pytest.raises(PreconditionFailedError, match="not inside"):
        bundles.split(BundleRange(0x40000000, 0x80000000), 0x80000000)


# -- which bundle splits on its own ----------------------------------------------------
LIMITS = SplitThresholds(max_topics=3, max_sessions=10, max_msg_rate=100, max_bandwidth_mbytes=1)


def _load(topics: int, sessions: int = 0, msg_rate: float = 0, byte_rate: float = 0) -> BundleLoad:
    return BundleLoad(topics, sessions, msg_rate, byte_rate)


@pytest.mark.parametrize(
    ("load", "reason"),
    [
        (_load(3, 10, 100, 1024 * 1024), None),
        (_load(4), "4 topics > 3"),
        (_load(2, sessions=11), "11 sessions > 10"),
        (_load(2, msg_rate=101), "101 msg/s > 100"),
        (_load(2, byte_rate=2 * 1024 * 1024), "2.0 MB/s > 1"),
    ],
)
def test_each_threshold_is_checked(load: BundleLoad, reason: str | None) -> None:
    assert exceeded(load, LIMITS) == reason


def test_the_bundle_with_most_topics_splits_first_within_the_namespace_limit() -> None:
    a = ("t/a", BundleRange(0, 0x80000000))
    b = ("t/a", BundleRange(0x80000000, 0xFFFFFFFF))
    c = ("t/c", BundleRange(0, 0xFFFFFFFF))
    loads = {a: _load(5), b: _load(9), c: _load(20)}
    # t/c has reached loadBalancerNamespaceMaximumBundles: never split further.
    chosen = bundle_to_split(loads, {"t/a": 2, "t/c": 4}, LIMITS, max_bundles=4)
    assert chosen == (b, "9 topics > 3")
    assert bundle_to_split({c: _load(20)}, {"t/c": 4}, LIMITS, max_bundles=4) is None


def test_a_bundle_of_one_topic_is_never_split() -> None:
    one = ("t/a", FULL)
    assert bundle_to_split({one: _load(1, msg_rate=1e6)}, {"t/a": 1}, LIMITS, 128) is None


def test_split_settings_have_pulsars_names_and_defaults() -> None:
    lb = ServiceConfiguration.load(env={}).load_balancer
    assert lb.load_balancer_auto_bundle_split_enabled is True
    assert lb.load_balancer_auto_unload_split_bundles_enabled is True
    assert SplitThresholds.of(lb) == SplitThresholds(1000, 1000, 30000, 100)
    assert lb.default_namespace_bundle_split_algorithm == RANGE_EQUALLY_DIVIDE


def test_unknown_split_algorithms_are_refused_in_the_configuration() -> None:
    with pytest.raises(ValueError, match="defaultNamespaceBundleSplitAlgorithm"):
        ServiceConfiguration.load(
            env={}, overrides={"defaultNamespaceBundleSplitAlgorithm": "flow_or_qps"}
        )


# -- the load manager's choice by load -------------------------------------------------
def _broker(
    broker_id: str, bundles: int = 0, topics: int = 0, rate_in: float = 0, rate_out: float = 0
) -> BrokerRegistration:
    urls = LookupData(f"pulsar://{broker_id}", None, f"http://{broker_id}", None)
    load = LoadReport(tuple(f"ns/b{i}" for i in range(bundles)), topics, rate_in, rate_out)
    return BrokerRegistration(broker_id, urls, {}, load)


def test_a_busy_broker_loses_to_an_idle_one_with_more_bundles() -> None:
    busy = _broker("a:1", bundles=1, topics=1, rate_in=5000, rate_out=5000)
    idle = _broker("b:1", bundles=3, topics=3)
    assert broker_load(busy, 0) > broker_load(idle, 0)
    assert choose_broker("ns/x", [busy, idle], {}).broker_id == "b:1"  # type: ignore[union-attr]


def test_without_traffic_bundles_and_topics_decide() -> None:
    few = _broker("a:1", bundles=2, topics=2)
    many = _broker("b:1", bundles=2, topics=20)
    assert choose_broker("ns/x", [few, many], {}).broker_id == "a:1"  # type: ignore[union-attr]
    assert broker_load(few, 3) - broker_load(few, 0) == 3 * LOAD_PER_BUNDLE_MSG_RATE


def test_pending_choices_move_on_to_the_next_broker_by_load() -> None:
    manager = LoadManager(pending_ttl_s=60, pending_max_per_broker=128, clock=lambda: 0.0)
    a = _broker("a:1", rate_in=250)
    b = _broker("b:1")
    picks = [manager.choose(f"ns/{i}", [a, b]) for i in range(6)]
    chosen = [p.broker_id for p in picks if p is not None]
    # b starts 250 msg/s lighter: it takes the first three (300 > 250), then they alternate.
    assert chosen[:3] == ["b:1", "b:1", "b:1"]
    assert sorted(chosen) == ["a:1", "a:1", "b:1", "b:1", "b:1", "b:1"]


@pytest.mark.parametrize("bad", ["NaN", "-Infinity", "Infinity", -5])
def test_a_malformed_rate_in_a_peers_report_counts_as_zero(bad: object) -> None:
    obj = _broker("a:1").to_json()
    obj["msgRateIn"] = float(bad) if isinstance(bad, str) else bad
    obj["numTopics"] = -3
    parsed = BrokerRegistration.from_json("a:1", json.loads(json.dumps(obj)))
    assert parsed.load.msg_rate_in == 0.0 and parsed.load.num_topics == 0
    assert math.isfinite(broker_load(parsed, 0))


# -- a lookup with boundaries read before a split ------------------------------------
class _SessionStore(MemoryMetadataStore):
    """The memory store with the calls a cluster member makes of ZooKeeper's."""

    session_state = SessionState.CONNECTED
    session_id = 1

    def create_ephemeral(self, path: str, value: bytes) -> int:
        return self.put(path, value, -1)


def _member_with_stale_first_read() -> tuple[ClusterMember, _SessionStore, BundlesData]:
    """A member whose first read of ``t/ns``'s policies returns them as they were
    before another member ("a") split its only bundle, deleting the parent's node."""
    store = _SessionStore()
    resources = PulsarResources(store)
    resources.tenants.create("t", TenantInfo())
    before = BundlesData.even(1)
    after = before.split(before.ranges()[0], 0x80000000)
    resources.namespaces.create("t/ns", Policies(bundles=after))
    a_urls = LookupData("pulsar://a:6650", None, "http://a:8080", None)
    a = BundleOwnership(store, NamespaceEphemeralData(a_urls))
    for child in after.ranges():
        assert a.try_acquire("t/ns", child)[0]
    config = ServiceConfiguration.load(env={}, overrides={"advertisedAddress": "b"})
    service = SimpleNamespace(
        config=config, resources=resources, topics={},
        non_persistent=SimpleNamespace(topics={}),
    )
    member = ClusterMember(
        service, store, "b:8080", config.load_balancer,  # type: ignore[arg-type]
        session_timeout_ms=30_000,
    )
    member.serving = True
    reads = [Policies(bundles=before)]
    fresh = resources.namespaces.get
    resources.namespaces.get = (  # type: ignore[method-assign]
        lambda ns: reads.pop() if reads else fresh(ns)
    )
    return member, store, after


def test_a_lookup_with_boundaries_from_before_a_split_never_takes_the_parent() -> None:
    member, store, after = _member_with_stale_first_read()
    name = parse_topic("persistent://t/ns/x")
    answer = member.lookup(name, True, "")  # authoritative: it would acquire the parent
    assert answer.redirect and answer.data.broker_url == "pulsar://a:6650"
    assert member.owned == set()
    assert store.get(f"/namespace/t/ns/{FULL.name}") is None


def test_an_admin_acquire_with_stale_boundaries_is_refused() -> None:
    member, store, _ = _member_with_stale_first_read()
    stale = member.bundles("t/ns")  # the stale read: the parent still listed
    assert stale.contains(FULL)
    with pytest.raises(ResourceNotFoundError):
        member.acquire(("t/ns", FULL))
    assert store.get(f"/namespace/t/ns/{FULL.name}") is None


# -- the owner's metadata writes -------------------------------------------------------
def _owner(store: _SessionStore, url: str) -> BundleOwnership:
    return BundleOwnership(store, NamespaceEphemeralData(LookupData(url, None, None, None)))


def _namespace_owned_by_b(
    bundles: BundlesData,
) -> tuple[_SessionStore, PulsarResources, BundleOwnership]:
    store = _SessionStore()
    resources = PulsarResources(store)
    resources.tenants.create("t", TenantInfo())
    resources.namespaces.create("t/ns", Policies(bundles=bundles))
    return store, resources, _owner(store, "pulsar://b:1")


def test_write_split_owns_both_halves_then_stores_the_boundaries() -> None:
    store, resources, b = _namespace_owned_by_b(BundlesData.even(2))
    parent = BundleRange(0, 0x80000000)
    halves = write_split(
        b, resources.namespaces, ("t/ns", parent), 0x40000000, max_bundles=3, default_bundles=4
    )
    assert [h.name for h in halves] == ["0x00000000_0x40000000", "0x40000000_0x80000000"]
    assert all(b.is_mine("t/ns", h) for h in halves)
    assert resources.namespaces.get("t/ns").bundles.num_bundles == 3  # type: ignore[union-attr]


@pytest.mark.parametrize("refusal", ["maximum", "taken"])
def test_a_refused_split_leaves_no_node_and_the_parent_as_it_was(refusal: str) -> None:
    store, resources, b = _namespace_owned_by_b(BundlesData.even(2))
    parent = BundleRange(0, 0x80000000)
    upper = BundleRange(0x40000000, 0x80000000)
    if refusal == "taken":
        assert _owner(store, "pulsar://x:1").try_acquire("t/ns", upper)[0]
    error = PreconditionFailedError if refusal == "maximum" else ConflictError
    with pytest.raises(error):
        write_split(
            b, resources.namespaces, ("t/ns", parent), 0x40000000,
            max_bundles=2 if refusal == "maximum" else 128, default_bundles=4,
        )
    assert store.get(f"/namespace/t/ns/{BundleRange(0, 0x40000000).name}") is None
    assert not b.is_mine("t/ns", upper)
    assert resources.namespaces.get("t/ns").bundles == BundlesData.even(2)


# -- load shedding ---------------------------------------------------------------------
SHED = SheddingSettings(threshold_percent=10, min_throughput_bytes=1000, grace_period_s=60)


def _shed(
    brokers: list[BrokerRegistration],
    mine: dict[str, BundleLoad],
    moved: dict[str, float] | None = None,
    settings: SheddingSettings = SHED,
) -> tuple[str, str] | None:
    return bundle_to_shed("a:1", brokers, mine, moved or {}, 1000.0, settings)


def test_the_most_loaded_member_sheds_its_busiest_bundle() -> None:
    brokers = [_broker("a:1", bundles=2, rate_in=900), _broker("b:1", bundles=2)]
    mine = {"ns/x": _load(1, byte_rate=50_000), "ns/y": _load(1, byte_rate=80_000)}
    chosen = _shed(brokers, mine)
    assert chosen is not None and chosen[0] == "ns/y"
    assert "above the average" in chosen[1]
    # A bundle moved within the grace period stays; the next busiest goes.
    again = _shed(brokers, mine, {"ns/y": 990.0})
    assert again is not None and again[0] == "ns/x"
    assert _shed(brokers, mine, {"ns/y": 990.0, "ns/x": 941.0}) is None
    assert _shed(brokers, mine, {"ns/y": 900.0}) is not None  # grace period over


@pytest.mark.parametrize(
    "case",
    ["not the most loaded", "within the threshold", "little traffic", "one bundle", "alone"],
)
def test_no_shedding(case: str) -> None:
    mine = {"ns/x": _load(1, byte_rate=50_000), "ns/y": _load(1, byte_rate=80_000)}
    a = _broker("a:1", bundles=2, rate_in=900)
    others = [_broker("b:1", bundles=2)]
    settings = SHED
    if case == "not the most loaded":
        others.append(_broker("c:1", bundles=2, rate_in=2000))
    elif case == "within the threshold":
        others = [_broker("b:1", bundles=2, rate_in=800)]
    elif case == "little traffic":
        settings = SheddingSettings(10, min_throughput_bytes=10 * 1024 * 1024, grace_period_s=60)
    elif case == "one bundle":
        mine = {"ns/y": mine["ns/y"]}
    elif case == "alone":
        others = []
    assert _shed([a, *others], mine, settings=settings) is None


def test_shedding_settings_have_pulsars_names_and_defaults() -> None:
    lb = ServiceConfiguration.load(env={}).load_balancer
    assert lb.load_balancer_shedding_enabled is True
    assert lb.load_balancer_shedding_interval_minutes == 1
    assert SheddingSettings.of(lb) == SheddingSettings(10, 10 * 1024 * 1024, 30 * 60)
