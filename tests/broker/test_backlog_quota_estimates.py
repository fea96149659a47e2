"""The backlog-quota arithmetic and the strict policy models, without a broker."""

from __future__ import annotations

import argparse

import pytest

from quasar.broker.backlog_quota import _position_keeping, estimated_backlog_bytes
from quasar.cli.admin_namespace_policies import duration_seconds, size_bytes
from quasar.errors import InvalidResourceError, InvalidValueError
from quasar.resources.models import BacklogQuota, Policies, RetentionPolicies
from quasar.storage.api import LedgerInfo, Position


class Ledgers:
    """Just the ledger list of a managed ledger: ids 1, 2, 3 of 10 entries, 100 B each."""

    def __init__(self) -> None:
        self.infos = [LedgerInfo(i, 10, 1000, 0) for i in (1, 2, 3)]

    def ledgers(self) -> list[LedgerInfo]:
        return self.infos

    def previous_position(self, position: Position) -> Position:
        if position.entry_id > 0:
            return Position(position.ledger_id, position.entry_id - 1)
        previous = [i for i in self.infos if i.ledger_id < position.ledger_id]
        if not previous:
            return Position(position.ledger_id, -1)
        return Position(previous[-1].ledger_id, previous[-1].entries - 1)


def test_estimated_backlog_bytes() -> None:
    ledgers = Ledgers()
    assert estimated_backlog_bytes(ledgers, Position(1, -1)) == 3000  # type: ignore[arg-type]
    assert estimated_backlog_bytes(ledgers, Position(1, 4)) == 2500  # type: ignore[arg-type]
    assert estimated_backlog_bytes(ledgers, Position(2, 9)) == 1000  # type: ignore[arg-type]
    assert estimated_backlog_bytes(ledgers, Position(3, 9)) == 0  # type: ignore[arg-type]


def test_the_eviction_position_keeps_the_target() -> None:
    ledgers = Ledgers()
    assert _position_keeping(ledgers, 5000) is None  # type: ignore[arg-type]
    assert _position_keeping(ledgers, 1000) == Position(2, 9)  # type: ignore[arg-type]
    assert _position_keeping(ledgers, 1550) == Position(2, 4)  # type: ignore[arg-type]
    assert _position_keeping(ledgers, 0) == Position(3, 9)  # type: ignore[arg-type]
    target = _position_keeping(ledgers, 1550)
    assert target is not None
    assert estimated_backlog_bytes(ledgers, target) <= 1550  # type: ignore[arg-type]


def test_cli_sizes_and_durations() -> None:
    assert size_bytes("10") == 10
    assert size_bytes("2k") == 2048
    assert size_bytes("10M") == 10 * 1024**2
    assert size_bytes("1g") == 1024**3
    assert size_bytes("-1") == -1
    assert duration_seconds("90") == 90
    assert duration_seconds("5m") == 300
    assert duration_seconds("2h") == 7200
    assert duration_seconds("1d") == 86_400
    assert duration_seconds("3", plain_unit_s=60) == 180
    for bad in ("", "1.5G", "ten", "-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            size_bytes(bad)
    for bad in ("", "5x", "1.5h", "-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            duration_seconds(bad)


def test_policy_models_are_strict_for_requests_only() -> None:
    stored = {"message_ttl_in_seconds": 5, "max_producers_per_topic": 3}
    assert Policies.from_json(stored).message_ttl_in_seconds == 5  # a stored value loads
    with pytest.raises(InvalidValueError, match="max_producers_per_topic"):
        Policies.from_json(stored, strict=True)
    with pytest.raises(InvalidResourceError, match="message TTL"):
        Policies.from_json({"message_ttl_in_seconds": -5})
    with pytest.raises(InvalidResourceError, match="backlog quota type"):
        Policies.from_json({"backlog_quota_map": {"size": {"policy": "producer_exception"}}})
    with pytest.raises(InvalidValueError, match="policy is required"):
        BacklogQuota.from_json({"limitSize": 5}, strict=True)
    assert BacklogQuota.from_json({"limit": 7, "policy": "producer_exception"}).limit_size == 7
    with pytest.raises(InvalidResourceError):
        BacklogQuota.from_json({"limitSize": 5, "policy": "drop"})
    with pytest.raises(InvalidValueError, match="extra"):
        RetentionPolicies.from_json(
            {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1, "extra": 1}, strict=True
        )
    policies = Policies(
        message_ttl_in_seconds=60,
        backlog_quota_map={"message_age": BacklogQuota(limit_time=30)},
    )
    assert Policies.from_json(policies.to_json()) == policies


def test_policy_numbers_stay_within_pulsars_types() -> None:
    with pytest.raises(InvalidResourceError):
        BacklogQuota(limit_size=1 << 63, policy="producer_exception")
    with pytest.raises(InvalidResourceError):
        BacklogQuota(limit_time=1 << 31, policy="producer_exception")
    with pytest.raises(InvalidResourceError):
        Policies(message_ttl_in_seconds=1 << 31)
