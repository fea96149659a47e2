"""quasar.client exposes the `pulsar` package's names and signatures.

Code written for `pulsar-client` should port by changing the import, so every public
method checked here takes the same parameters, in the same order, with the same
defaults as the official package (extra trailing parameters are allowed).
"""

from __future__ import annotations

import enum
import inspect

import pulsar
import pytest

import quasar.client as qc

METHODS = {
    "Client": [
        "__init__",
        "create_producer",
        "subscribe",
        "create_reader",
        "get_topic_partitions",
        "close",
        "shutdown",
    ],
    "Producer": [
        "send",
        "send_async",
        "flush",
        "close",
        "topic",
        "producer_name",
        "last_sequence_id",
        "is_connected",
    ],
    "Consumer": [
        "receive",
        "acknowledge",
        "acknowledge_cumulative",
        "negative_acknowledge",
        "redeliver_unacknowledged_messages",
        "seek",
        "unsubscribe",
        "close",
        "get_last_message_id",
        "topic",
        "subscription_name",
        "consumer_name",
        "is_connected",
    ],
    "Reader": [
        "read_next",
        "has_message_available",
        "seek",
        "close",
        "topic",
        "is_connected",
    ],
    "Message": [
        "data",
        "value",
        "properties",
        "partition_key",
        "ordering_key",
        "publish_timestamp",
        "event_timestamp",
        "message_id",
        "topic_name",
        "redelivery_count",
    ],
    "MessageId": [
        "__init__",
        "ledger_id",
        "entry_id",
        "batch_index",
        "partition",
        "serialize",
    ],
}


def _same_default(ours: object, theirs: object) -> bool:
    if theirs is inspect.Parameter.empty or ours is inspect.Parameter.empty:
        return ours is theirs
    if (
        isinstance(theirs, enum.Enum)
        or hasattr(theirs, "__int__")
        and not isinstance(theirs, (int, float, bool))
    ):
        return int(ours) == int(theirs)  # type: ignore[call-overload]
    if type(theirs).__name__.endswith("Schema"):
        return type(ours).__name__ == type(theirs).__name__
    return ours == theirs


@pytest.mark.parametrize(
    ("cls", "method"), [(c, m) for c, methods in METHODS.items() for m in methods]
)
def test_signature_matches_pulsar(cls: str, method: str) -> None:
    theirs = inspect.signature(getattr(getattr(pulsar, cls), method))
    ours = inspect.signature(getattr(getattr(qc, cls), method))
    t_params = list(theirs.parameters.values())
    o_params = list(ours.parameters.values())
    assert [p.name for p in o_params[: len(t_params)]] == [p.name for p in t_params]
    for o, t in zip(o_params, t_params, strict=False):
        assert _same_default(o.default, t.default), f"{cls}.{method}({t.name}=...)"
    for extra in o_params[len(t_params) :]:
        assert extra.default is not inspect.Parameter.empty, (
            f"extra {extra.name} needs a default"
        )


@pytest.mark.parametrize(
    "name",
    [
        "ConsumerType",
        "InitialPosition",
        "CompressionType",
        "PartitionsRoutingMode",
        "BatchingType",
        "ProducerAccessMode",
        "KeySharedMode",
        "RegexSubscriptionMode",
        "Result",
    ],
)
def test_enums_match_pulsar(name: str) -> None:
    theirs = {k: int(v) for k, v in getattr(pulsar, name).__members__.items()}
    ours = {k: int(v) for k, v in getattr(qc, name).__members__.items()}
    assert ours == theirs


def test_exception_names_match_pulsar() -> None:
    theirs = {n for n in dir(pulsar.exceptions) if not n.startswith("_")}
    missing = sorted(n for n in theirs if not hasattr(qc, n))
    assert not missing
    for name in theirs:
        assert issubclass(getattr(qc, name), qc.PulsarException)


def test_aio_module_has_async_api() -> None:
    for cls, methods in {
        "Client": [
            "create_producer",
            "subscribe",
            "create_reader",
            "get_topic_partitions",
            "close",
        ],
        "Producer": ["send", "send_async", "flush", "close"],
        "Consumer": ["receive", "acknowledge", "seek", "close", "unsubscribe"],
        "Reader": ["read_next", "has_message_available", "seek", "close"],
    }.items():
        for m in methods:
            assert inspect.iscoroutinefunction(getattr(getattr(qc.aio, cls), m)), (
                f"{cls}.{m}"
            )
