"""``advertisedListeners`` parsing and validation, and the lookup answer it gives."""

from __future__ import annotations

import pytest

from quasar.broker.lookup_data import lookup_data
from quasar.config import ServiceConfiguration
from quasar.errors import ServiceNotReady
from quasar.protocol.advertised_listeners import (
    AdvertisedListener,
    parse_advertised_listeners,
)


def test_a_listener_may_have_one_url_per_scheme() -> None:
    parsed = parse_advertised_listeners(
        " internal:pulsar://10.0.0.5:6650, external:pulsar://b.example:16650,"
        "external:pulsar+ssl://b.example:16651,external:https://b.example:18443"
    )
    assert list(parsed) == ["internal", "external"]
    assert parsed["external"] == AdvertisedListener(
        "external", "pulsar://b.example:16650", "pulsar+ssl://b.example:16651",
        None, "https://b.example:18443",
    )
    assert parse_advertised_listeners("") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pulsar://h:1", "scheme must be one of"),  # no listener name
        (":pulsar://h:1", "do not contain listener name"),
        ("a:pulsar://h:1,a:pulsar://h:2", "redundant configure for listener `a`"),
        ("a:pulsar://h:1,b:pulsar+ssl://h:1", "must not specify `h:1` to different listener"),
        ("a:kafka://h:1", "scheme must be one of"),
        ("a:pulsar://h", "expected pulsar://host:port"),
        ("a:pulsar://:1", "expected pulsar://host:port"),
        ("a:pulsar://h:99999", "is invalid"),
    ],
)
def test_invalid_lists_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_advertised_listeners(text)


def _broker(**overrides: str) -> ServiceConfiguration:
    return ServiceConfiguration.load(env={}, overrides=overrides)


def test_the_configuration_refuses_a_bad_list_or_internal_name() -> None:
    with pytest.raises(ValueError, match="advertisedListeners"):
        _broker(advertisedListeners="a:pulsar://h")
    with pytest.raises(ValueError, match="do not contain `internalListenerName`"):
        _broker(advertisedListeners="a:pulsar://h:1", internalListenerName="b")
    with pytest.raises(ValueError, match="do not contain `internalListenerName`"):
        _broker(internalListenerName="b")  # names nothing without listeners


def test_lookup_answers_by_listener() -> None:
    config = _broker(
        advertisedListeners="in:pulsar://10.0.0.5:6650,out:pulsar+ssl://b.example:16651",
        internalListenerName="in",
    ).broker
    # No listener named: the internal one, with the URLs it lacks from advertisedAddress.
    assert lookup_data(config).to_json() == {
        "brokerUrl": "pulsar://10.0.0.5:6650",
        "brokerUrlTls": None,
        "httpUrl": "http://127.0.0.1:8080",
        "httpUrlTls": None,
        "nativeUrl": "pulsar://10.0.0.5:6650",
    }
    out = lookup_data(config, "out")
    assert (out.broker_url, out.broker_url_tls) == (None, "pulsar+ssl://b.example:16651")
    with pytest.raises(ServiceNotReady, match="^the broker do not have test listener$"):
        lookup_data(config, "test")


def test_without_listeners_lookups_use_the_advertised_address() -> None:
    config = _broker(advertisedAddress="broker.local").broker
    assert lookup_data(config).broker_url == "pulsar://broker.local:6650"
    with pytest.raises(ServiceNotReady):
        lookup_data(config, "internal")
