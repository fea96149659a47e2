"""kill -9 after an exclusive producer was fenced: the topic epoch survives, so the
fenced producer stays fenced when it comes back before the one that fenced it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.protocol import pb
from quasar.testing.process import BrokerProcess
from quasar.testing.raw import Raw

pytestmark = [pytest.mark.crash, pytest.mark.usefixtures("close_raw")]

TOPIC = "persistent://public/default/epoch-after-crash"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    yield proc
    proc.stop()


def _producer(raw: Raw, pid: int, mode: int, epoch: int | None = None) -> pb.BaseCommand:
    cmd = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
    p = cmd.producer
    p.topic, p.producer_id, p.request_id, p.producer_access_mode = TOPIC, pid, pid, mode
    if epoch is not None:
        p.topic_epoch = epoch
    raw.send(cmd)
    while True:  # the answer: PRODUCER_SUCCESS or ERROR
        answer = raw.recv()
        if answer.type in (pb.BaseCommand.PRODUCER_SUCCESS, pb.BaseCommand.ERROR):
            return answer


def _connected(broker: BrokerProcess) -> Raw:
    raw = Raw(broker.port)
    raw.connect()
    return raw


def test_a_fenced_producer_stays_fenced_after_a_crash(broker: BrokerProcess) -> None:
    first = _producer(_connected(broker), 1, pb.Exclusive)
    fencer = _producer(_connected(broker), 2, pb.ExclusiveWithFencing)
    assert (first.producer_success.topic_epoch, fencer.producer_success.topic_epoch) == (0, 1)
    broker.restart(hard=True)
    # The fenced producer reconnects first, with the epoch it was granted.
    stale = _producer(_connected(broker), 1, pb.Exclusive, epoch=0)
    assert stale.error.error == pb.ProducerFenced, stale
    assert "Current epoch: 1, Producer epoch: 0" in stale.error.message
    back = _producer(_connected(broker), 2, pb.Exclusive, epoch=1)
    assert back.producer_success.topic_epoch == 1
