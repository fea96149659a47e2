"""The asyncio and blocking clients take the same options, spelled as the options types.

``create_producer``, ``subscribe`` and ``create_reader`` are written out in both
facades (so that editors and ``help()`` show pulsar's parameters); these tests keep the
two spellings and the options dataclasses from drifting apart: same names, order,
defaults and kinds.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from quasar.client import aio, sync
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.message_id import MessageId
from quasar.client.options import ConsumerOptions, ProducerOptions, ReaderOptions

FACADES = [
    ("create_producer", ProducerOptions),
    ("subscribe", ConsumerOptions),
    ("create_reader", ReaderOptions),
]


def _shape(func: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """(name, default, kind) of each parameter after ``self``."""
    params = list(inspect.signature(func).parameters.values())[1:]
    return [(p.name, p.default, p.kind) for p in params]


def _options_shape(options: type[Any]) -> list[tuple[str, Any, Any]]:
    """The options fields as facade parameters: everything after ``topic``."""
    shape = []
    for f in dataclasses.fields(options):
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        shape.append((f.name, default, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    return shape


def mismatches(
    ours: list[tuple[str, Any, Any]], theirs: list[tuple[str, Any, Any]]
) -> list[str]:
    """What differs between two parameter lists, one line per difference."""
    problems = []
    names_a = [n for n, _, _ in ours]
    names_b = [n for n, _, _ in theirs]
    if names_a != names_b:
        problems.append(f"names or order differ: {names_a} != {names_b}")
    for (name, default_a, kind_a), (_, default_b, kind_b) in zip(ours, theirs, strict=False):
        if default_a is not default_b and default_a != default_b:
            problems.append(f"{name}: default {default_a!r} != {default_b!r}")
        if kind_a != kind_b:
            problems.append(f"{name}: kind {kind_a} != {kind_b}")
    return problems


@pytest.mark.parametrize(("method", "options"), FACADES)
def test_async_and_blocking_facades_match(method: str, options: type[Any]) -> None:
    async_shape = _shape(getattr(aio.Client, method))
    sync_shape = _shape(getattr(sync.Client, method))
    assert mismatches(async_shape, sync_shape) == []


@pytest.mark.parametrize(("method", "options"), FACADES)
def test_facade_parameters_are_the_options_fields(method: str, options: type[Any]) -> None:
    for client in (aio.Client, sync.Client):
        shape = _shape(getattr(client, method))
        assert shape[0][0] == "topic"
        assert mismatches(shape[1:], _options_shape(options)) == [], client


def test_the_check_finds_a_drifted_facade() -> None:
    """A facade whose default, order or kind drifted is reported, so the tests above
    can fail."""

    def good(self: Any, topic: str, producer_name: Any = None, *, schema: Any = 1) -> None:
        del self, topic, producer_name, schema

    def other_default(
        self: Any, topic: str, producer_name: Any = "x", *, schema: Any = 1
    ) -> None:
        del self, topic, producer_name, schema

    def swapped(self: Any, topic: str, schema: Any = 1, producer_name: Any = None) -> None:
        del self, topic, producer_name, schema

    def positional(self: Any, topic: str, producer_name: Any = None, schema: Any = 1) -> None:
        del self, topic, producer_name, schema

    assert mismatches(_shape(good), _shape(good)) == []
    assert mismatches(_shape(good), _shape(other_default)) == [
        "producer_name: default None != 'x'"
    ]
    assert any("order" in p for p in mismatches(_shape(good), _shape(swapped)))
    assert mismatches(_shape(good), _shape(positional)) == [
        "schema: kind KEYWORD_ONLY != POSITIONAL_OR_KEYWORD"
    ]
    # The real facades against the wrong options type fail too.
    assert mismatches(
        _shape(aio.Client.create_producer)[1:], _options_shape(ReaderOptions)
    )


def test_options_check_once_with_clear_errors() -> None:
    with pytest.raises(InvalidConfiguration, match="chunking and batching"):
        ProducerOptions(chunking_enabled=True, batching_enabled=True)
    with pytest.raises(InvalidConfiguration, match="encryption"):
        ProducerOptions(encryption_key="k")
    with pytest.raises(InvalidConfiguration, match="subscription_name"):
        ConsumerOptions(subscription_name="")
    with pytest.raises(InvalidConfiguration, match="receiver_queue_size"):
        ConsumerOptions(subscription_name="s", receiver_queue_size=0)
    with pytest.raises(InvalidConfiguration, match="start_message_id"):
        ReaderOptions(start_message_id="earliest")  # type: ignore[arg-type]
    with pytest.raises(InvalidConfiguration, match="reader_listener"):
        ReaderOptions(MessageId.earliest, reader_listener=print)
    props = {"a": "1"}
    options = ProducerOptions(properties=props, schema=None)  # type: ignore[arg-type]
    props["b"] = "2"
    assert options.properties == {"a": "1"}
    assert options.schema is ProducerOptions().schema
    assert ReaderOptions(MessageId.earliest, receiver_queue_size=0).receiver_queue_size == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.producer_name = "p"  # type: ignore[misc]
