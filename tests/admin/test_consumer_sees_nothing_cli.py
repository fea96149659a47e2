"""The command-line path of ``docs/operations.md``, "My consumer sees nothing", run
as written against a real broker process.

The commands come from the fenced blocks of the walkthrough's subsections (so the
doc and the test cannot drift). Five of the six causes run here (a hanging
transaction, a poisoned message, a subscription started at the latest message,
consumers blocked on unacknowledged messages, messages expired by TTL); every
command of the sixth is checked by the parser. Each scenario sets up its cause with
quasar's client,
checks that the consumer indeed receives nothing, runs the subsection's commands in
order through ``quasar.cli.main.main`` (filling the ``<placeholders>`` from the output
of the command before, as a reader would), and checks that the consumer then receives.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import quasar.client as pulsar
from quasar.cli.main import build_parser, main
from quasar.testing.process import BrokerProcess

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
FENCE = re.compile(r"^```\w*\n(.*?)^```", re.S | re.M)
TOPIC = "persistent://public/default/orders"
SUBSCRIPTION = "billing"
HANGING_TIMEOUT_MS = 3_600_000
WAIT_S = 30.0


def walkthrough_sessions() -> dict[str, list[str]]:
    """``{subsection title: [command line, ...]}`` of "From the command line"."""
    text = OPERATIONS.read_text()
    section = text.split("\n## My consumer sees nothing\n", 1)[1].split("\n## ", 1)[0]
    cli_part = section.split("\n### From the command line\n", 1)[1].split("\n### ", 1)[0]
    sessions = {}
    for chunk in cli_part.split("\n#### ")[1:]:
        title, body = chunk.split("\n", 1)
        sessions[title.strip()] = [
            line.strip()
            for block in FENCE.findall(body)
            for line in block.splitlines()
            if line.startswith("quasar ")
        ]
    return sessions


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data").start()
    yield proc
    assert proc.stop() == 0, proc.read_log()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[pulsar.Client]:
    c = pulsar.Client(broker.url, operation_timeout_seconds=10, enable_transaction=True)
    yield c
    c.close()


class Session:
    """Runs a walkthrough's command lines against ``broker`` as a reader would."""

    def __init__(self, broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> None:
        self.broker = broker
        self.capsys = capsys
        self.values: dict[str, str] = {}

    def run(self, line: str) -> str:
        argv = [self.values.get(word, word) for word in shlex.split(line)]
        assert argv[:2] == ["quasar", "admin"], line
        unfilled = [word for word in argv if word.startswith("<")]
        assert not unfilled, f"{line}: nothing before it said {unfilled}"
        code = main(
            ["--log-level", "WARNING", "admin", "--admin-url", self.broker.admin_url,
             *argv[2:]]
        )
        out = self.capsys.readouterr()
        assert code == 0, (line, out.err)
        return out.out

    def run_until(self, line: str, done: Callable[[str], bool], what: str) -> str:
        """Run ``line`` until its output shows ``what`` (an event the broker has no
        push channel for, such as a transaction growing older than a threshold)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            out = self.run(line)
            if done(out):
                return out
            if time.monotonic() > deadline:
                raise AssertionError(f"{line}: never showed {what}; last output:\n{out}")
            time.sleep(0.2)


def stat(out: str, key: str) -> str:
    """One value of ``quasar admin topics stats``' table."""
    m = re.search(rf"^{re.escape(key)}\s+(\S+)$", out, re.M)
    assert m, f"{key} not in\n{out}"
    return m.group(1)


def receive_texts(consumer: Any, n: int) -> list[str]:
    out = []
    for _ in range(n):
        message = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(message)
        out.append(bytes(message.data()).decode())
    return out


def assert_receives_nothing(consumer: Any) -> None:
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)


def test_the_walkthrough_names_the_sessions_the_tests_run() -> None:
    sessions = walkthrough_sessions()
    assert {
        "Is it the right topic and subscription?",
        "The subscription started at the latest message",
        "Every consumer is blocked on unacknowledged messages",
        "A hanging transaction holds back the readers",
        "A poisoned message comes back again and again",
        "Message TTL expired the messages",
    } <= set(sessions)
    assert all(sessions.values()), sessions


def test_every_walkthrough_command_is_accepted() -> None:
    parser = build_parser()
    for commands in walkthrough_sessions().values():
        for line in commands:
            argv = [re.sub(r"^<\w+>$", "1", word) for word in shlex.split(line)]
            try:
                parser.parse_args(argv[1:])
            except SystemExit as exc:  # argparse's answer to a wrong command or flag
                raise AssertionError(f"not accepted: {line}") from exc


def test_a_hanging_transaction_is_found_and_aborted(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    consumer = client.subscribe(
        TOPIC, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest
    )
    producer = client.create_producer(TOPIC, batching_enabled=False)
    hanging = client.new_transaction(timeout_ms=HANGING_TIMEOUT_MS)
    producer.send(b"in-hanging-transaction", txn=hanging)
    for i in range(3):
        producer.send(f"after-{i}".encode())
    assert_receives_nothing(consumer)

    most, least = hanging.id()
    session = Session(broker, capsys)
    commands = walkthrough_sessions()["A hanging transaction holds back the readers"]
    assert [c.split()[2:4] for c in commands] == [
        ["topics", "stats"],
        ["transactions", "slow-transactions"],
        ["transactions", "transaction-buffer-stats"],
        ["transactions", "abort-transaction"],
    ]
    for line in commands:
        if "topics stats" in line:
            out = session.run(line)
            assert stat(out, f"subscriptions.{SUBSCRIPTION}.msgBacklog") == "4"
            assert stat(out, f"subscriptions.{SUBSCRIPTION}.msgOutCounter") == "0"
        elif "slow-transactions" in line:
            out = session.run_until(
                line, lambda out: f"({most},{least})" in out, "the hanging transaction"
            )
            row = next(r for r in out.splitlines() if r.startswith(f"({most},{least})"))
            assert TOPIC in row and "OPEN" in row
            shown = re.match(r"\((\d+),(\d+)\)", row)
            assert shown is not None
            session.values["<mostSigBits>"], session.values["<leastSigBits>"] = shown.groups()
        elif "transaction-buffer-stats" in line:
            out = session.run(line)
            assert stat(out, "ongoingTxnSize") == "1"
        else:
            session.run(line)

    assert receive_texts(consumer, 3) == ["after-0", "after-1", "after-2"]
    assert_receives_nothing(consumer)


def test_a_poisoned_message_is_found_kept_and_skipped(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    def application() -> list[str]:
        """Processes in order and crashes (closes without acknowledging) on a
        message it cannot parse, as a consumer with a bug does."""
        consumer = client.subscribe(
            TOPIC, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest
        )
        processed = []
        try:
            while True:
                try:
                    message = consumer.receive(timeout_millis=1_000)
                except pulsar.Timeout:
                    return processed
                if message.data() == b"poison":
                    return processed
                consumer.acknowledge(message)
                processed.append(bytes(message.data()).decode())
        finally:
            consumer.close()

    client.subscribe(
        TOPIC, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest
    ).close()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    producer.send(b"poison")
    for i in range(3):
        producer.send(f"good-{i}".encode())
    assert application() == []
    assert application() == []  # and again, after a restart

    session = Session(broker, capsys)
    commands = walkthrough_sessions()["A poisoned message comes back again and again"]
    assert [c.split()[2:] for c in commands][-1][:2] == ["topics", "skip"]
    for line in commands:
        out = session.run(line)
        if "topics stats" in line:
            assert stat(out, f"subscriptions.{SUBSCRIPTION}.msgBacklog") == "4"
        elif "peek-messages" in line:
            assert "poison" in out
            shown = re.search(r"^Message ID: (\d+):(\d+)$", out, re.M)
            assert shown is not None, out
            session.values["<ledgerId>"], session.values["<entryId>"] = shown.groups()
        elif "get-message-by-id" in line:
            assert '"payload": "poison"' in out

    assert application() == ["good-0", "good-1", "good-2"]


def test_a_subscription_started_at_the_latest_message_is_moved_back(
    broker: BrokerProcess, client: pulsar.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(3):
        producer.send(f"early-{i}".encode())
    consumer = client.subscribe(TOPIC, SUBSCRIPTION)  # the clients' default: Latest
    assert_receives_nothing(consumer)

    session = Session(broker, capsys)
    commands = walkthrough_sessions()["The subscription started at the latest message"]
    assert [c.split()[2:4] for c in commands] == [["topics", "reset-cursor"]]
    for line in commands:
        session.run(line)

    assert receive_texts(consumer, 3) == ["early-0", "early-1", "early-2"]


def test_consumers_blocked_on_unacknowledged_messages_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    limit = 5
    with BrokerProcess(
        tmp_path / "data", settings={"maxUnackedMessagesPerConsumer": str(limit)}
    ) as broker:
        client = pulsar.Client(broker.url, operation_timeout_seconds=10)
        try:
            consumer = client.subscribe(
                TOPIC, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            producer = client.create_producer(TOPIC, batching_enabled=False)
            for i in range(2 * limit):
                producer.send(f"m-{i}".encode())
            held = [consumer.receive(timeout_millis=10_000) for _ in range(limit)]
            assert_receives_nothing(consumer)

            session = Session(broker, capsys)
            commands = walkthrough_sessions()[
                "Every consumer is blocked on unacknowledged messages"
            ]
            for line in commands:
                out = session.run(line)
                prefix = f"subscriptions.{SUBSCRIPTION}."
                assert stat(out, prefix + "blockedSubscriptionOnUnackedMsgs") == "true"
                assert stat(out, prefix + "consumers.0.unackedMessages") == str(limit)
                assert stat(out, prefix + "consumers.0.blockedConsumerOnUnackedMsgs") == "true"

            # The fix is the application's: once it acknowledges, dispatch resumes.
            for message in held:
                consumer.acknowledge(message)
            assert len(receive_texts(consumer, limit)) == limit
        finally:
            client.close()


def test_messages_expired_by_ttl_are_found_and_brought_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = {"messageExpiryCheckIntervalInSeconds": "1"}
    with BrokerProcess(tmp_path / "data", settings=settings) as broker:
        session = Session(broker, capsys)
        # The cause: a TTL shorter than the time the messages wait, with retention.
        session.run("quasar admin namespaces set-retention public/default -s 100M -t 1h")
        session.run("quasar admin namespaces set-message-ttl public/default -ttl 1")
        client = pulsar.Client(broker.url, operation_timeout_seconds=10)
        try:
            client.subscribe(
                TOPIC, SUBSCRIPTION, initial_position=pulsar.InitialPosition.Earliest
            ).close()
            producer = client.create_producer(TOPIC, batching_enabled=False)
            for i in range(3):
                producer.send(f"m-{i}".encode())
            key = f"subscriptions.{SUBSCRIPTION}.totalMsgExpired"
            session.run_until(
                f"quasar admin topics stats {TOPIC}",
                lambda out: stat(out, key) == "3",
                "the messages expired",
            )

            commands = walkthrough_sessions()["Message TTL expired the messages"]
            for line in commands:
                out = session.run(line)
                if "topics stats" in line:
                    assert stat(out, key) == "3"
                    assert stat(out, f"subscriptions.{SUBSCRIPTION}.msgBacklog") == "0"
                elif "get-message-ttl" in line:
                    assert out.strip() == "1"
                elif "get-retention" in line:
                    assert stat(out, "retentionTimeInMinutes") == "60"

            consumer = client.subscribe(TOPIC, SUBSCRIPTION)
            assert receive_texts(consumer, 3) == ["m-0", "m-1", "m-2"]
        finally:
            client.close()
