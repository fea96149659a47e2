"""Namespace bundles and the load manager's choice: pure logic, no broker."""

from __future__ import annotations

import zlib

import pytest

from quasar.broker.lookup_data import LookupData
from quasar.cluster.load_manager import LoadManager, choose_broker
from quasar.cluster.ownership import NamespaceEphemeralData
from quasar.cluster.registry import BrokerRegistration, LoadReport
from quasar.errors import InvalidResourceError, PreconditionFailedError
from quasar.resources.bundles import BundleRange, BundlesData, bundle_of, topic_hash
from quasar.resources.models import Policies


def test_four_even_bundles_have_pulsars_names() -> None:
    names = [r.name for r in BundlesData.even(4).ranges()]
    assert names == [
        "0x00000000_0x40000000",
        "0x40000000_0x80000000",
        "0x80000000_0xc0000000",
        "0xc0000000_0xffffffff",
    ]


def test_topic_hash_is_crc32_of_the_full_name() -> None:
    name = "persistent://public/default/orders-partition-3"
    assert topic_hash(name) == zlib.crc32(name.encode())


@pytest.mark.parametrize("h", [0, 0x3FFFFFFF, 0x40000000, 0xBFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF])
def test_a_hash_falls_in_the_bundle_whose_range_holds_it(h: int) -> None:
    bundle = BundlesData.even(4).find(h)
    # [low, high), except that the last bundle also holds 0xffffffff.
    assert bundle.low <= h and (h < bundle.high or bundle.high == 0xFFFFFFFF)


def test_partitions_of_one_topic_hash_apart() -> None:
    bundles = BundlesData.even(4)
    found = {bundle_of(bundles, f"persistent://public/default/t-partition-{i}") for i in range(16)}
    assert len(found) > 1


def test_bundles_json_round_trip_and_count_only_form() -> None:
    data = BundlesData.even(8)
    assert BundlesData.from_json(data.to_json()) == data
    assert BundlesData.from_json({"numBundles": 8}) == data


@pytest.mark.parametrize(
    "obj",
    [
        {"boundaries": ["0x00000000", "0x80000000"]},  # does not reach 0xffffffff
        {"boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"]},
        {"boundaries": ["0x00000000", "zz", "0xffffffff"]},
        {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 2},
        {"numBundles": 0},
        {"numBundles": 129},
        "four",
    ],
)
def test_bad_bundles_are_refused(obj: object) -> None:
    with pytest.raises(InvalidResourceError):
        BundlesData.from_json(obj, max_bundles=128)


def test_bundle_names_are_checked() -> None:
    assert BundleRange.parse("0x40000000_0x80000000") == BundleRange(0x40000000, 0x80000000)
    for bad in ("0x4_", "40000000_80000000", "0x80000000_0x40000000", "0x0_0x1ffffffff"):
        with pytest.raises(PreconditionFailedError):
            BundleRange.parse(bad)


def test_policies_carry_bundles() -> None:
    policies = Policies.from_json({"bundles": {"numBundles": 2}})
    assert policies.bundles == BundlesData.even(2)
    assert Policies.from_json(policies.to_json()) == policies
    assert "bundles" not in Policies().to_json()


def _broker(broker_id: str, bundles: int) -> BrokerRegistration:
    urls = LookupData(f"pulsar://{broker_id}", None, f"http://{broker_id}", None)
    return BrokerRegistration(
        broker_id, urls, {}, LoadReport(tuple(f"ns/b{i}" for i in range(bundles)))
    )


def test_the_least_loaded_broker_is_chosen() -> None:
    brokers = [_broker("a:1", 3), _broker("b:1", 1), _broker("c:1", 2)]
    assert choose_broker("ns/x", brokers, {}).broker_id == "b:1"  # type: ignore[union-attr]
    assert choose_broker("ns/x", [], {}) is None


def test_ties_are_broken_stably() -> None:
    brokers = [_broker("a:1", 0), _broker("b:1", 0)]
    first = choose_broker("ns/x", brokers, {})
    assert first == choose_broker("ns/x", list(reversed(brokers)), {})


def test_choices_not_yet_reported_count_as_load() -> None:
    now = [0.0]
    manager = LoadManager(pending_ttl_s=10, pending_max_per_broker=128, clock=lambda: now[0])
    brokers = [_broker("a:1", 0), _broker("b:1", 0)]
    chosen = [manager.choose(f"ns/{i}", brokers).broker_id for i in range(4)]  # type: ignore[union-attr]
    assert sorted(chosen) == ["a:1", "a:1", "b:1", "b:1"]
    now[0] = 11.0  # the choices expire: both brokers look idle again
    assert manager.choose("ns/9", brokers) == choose_broker("ns/9", brokers, {})


def test_pending_choices_are_bounded() -> None:
    manager = LoadManager(pending_ttl_s=60, pending_max_per_broker=2)
    brokers = [_broker("a:1", 0)]
    for i in range(10):
        manager.choose(f"ns/{i}", brokers)
    assert len(manager._pending["a:1"]) == 2


def test_ownership_data_has_pulsars_fields() -> None:
    data = NamespaceEphemeralData(
        LookupData("pulsar://h:6650", "pulsar+ssl://h:6651", "http://h:8080", None),
        listeners={"ext": LookupData("pulsar://e:6650", None, None, None)},
    )
    obj = data.to_json()
    assert set(obj) == {
        "nativeUrl", "nativeUrlTls", "httpUrl", "httpUrlTls", "disabled",
        "advertisedListeners",
    }
    assert NamespaceEphemeralData.from_json(obj) == data


def test_refused_bundles_are_counted_as_hostile_input() -> None:
    from quasar.errors import REFUSED_BUNDLES, take_refusal

    with pytest.raises(InvalidResourceError) as bad_count:
        BundlesData.from_json({"numBundles": 10_000}, max_bundles=128)
    assert take_refusal(bad_count.value) == REFUSED_BUNDLES
    with pytest.raises(PreconditionFailedError) as bad_name:
        BundleRange.parse("0xzz_0x10")
    assert take_refusal(bad_name.value) == REFUSED_BUNDLES


def test_a_namespace_asking_for_too_many_bundles_is_refused() -> None:
    from quasar.errors import REFUSED_BUNDLES, take_refusal
    from quasar.resources.models import TenantInfo
    from quasar.resources.store import PulsarResources
    from quasar.storage.metadata.memory import MemoryMetadataStore

    resources = PulsarResources(MemoryMetadataStore(), default_bundles=2, max_bundles=4)
    resources.tenants.create("t", TenantInfo())
    resources.namespaces.create("t/default")
    assert resources.namespaces.get("t/default").bundles == BundlesData.even(2)
    with pytest.raises(InvalidResourceError) as refused:
        resources.namespaces.create("t/big", Policies(bundles=BundlesData.even(8)))
    assert take_refusal(refused.value) == REFUSED_BUNDLES
    assert not resources.namespaces.exists("t/big")


def test_a_registration_carries_tls_urls_and_listeners() -> None:
    from quasar.cluster.registry import registration_of
    from quasar.config import ServiceConfiguration

    config = ServiceConfiguration.load(env={}, overrides={
        "advertisedAddress": "b1",
        "brokerServicePortTls": "6651",
        "webServicePortTls": "8443",
        "tlsCertificateFilePath": "/c", "tlsKeyFilePath": "/k",
        "advertisedListeners": "internal:pulsar://b1:6650,external:pulsar://x.example:7000",
        "internalListenerName": "internal",
    })
    me = registration_of("b1:8080", config.broker)
    assert me.urls == LookupData(
        "pulsar://b1:6650", "pulsar+ssl://b1:6651", "http://b1:8080", "https://b1:8443"
    )
    external = me.lookup_data("external")
    assert external is not None and external.broker_url == "pulsar://x.example:7000"
    assert me.lookup_data("nope") is None
    again = BrokerRegistration.from_json(me.broker_id, me.to_json())
    assert again == me
