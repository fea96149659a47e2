"""End-to-end encryption between the official client and quasar's, both ways.

Keys are RSA pairs in PEM files (the official ``CryptoKeyReader`` reads files); the
broker only ever stores ciphertext, which one test checks by reading the topic
without a key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulsar
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

import quasar.client as qc
from quasar.testing.process import BrokerProcess
from tests.interop.conftest import make_client

pytestmark = pytest.mark.timeout(120)

IMPLS = {"pulsar": pulsar, "quasar": qc}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """Two key pairs: "right" (the producers use it) and "wrong"."""
    out = {}
    base = tmp_path_factory.mktemp("keys")
    for name in ("right", "wrong"):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = base / f"{name}.pub.pem"
        private = base / f"{name}.key.pem"
        public.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM,
                serialization.PublicFormat.SubjectPublicKeyInfo,
            )
        )
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        out[name] = (str(public), str(private))
    return out


def _reader(mod: Any, pair: tuple[str, str]) -> Any:
    return mod.CryptoKeyReader(pair[0], pair[1])


def _topic() -> str:
    import uuid

    return f"persistent://public/default/e2e-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize(
    ("producer_impl", "consumer_impl"),
    [("quasar", "pulsar"), ("pulsar", "quasar"), ("quasar", "quasar")],
)
@pytest.mark.parametrize("batched", [False, True], ids=["single", "batched"])
def test_encrypted_messages_decrypt_across_clients(
    broker: BrokerProcess,
    keys: dict[str, tuple[str, str]],
    producer_impl: str,
    consumer_impl: str,
    batched: bool,
) -> None:
    pmod, cmod = IMPLS[producer_impl], IMPLS[consumer_impl]
    pclient, cclient = make_client(pmod, broker.url), make_client(cmod, broker.url)
    topic = _topic()
    try:
        consumer = cclient.subscribe(
            topic, "sub", crypto_key_reader=_reader(cmod, keys["right"])
        )
        producer = pclient.create_producer(
            topic,
            encryption_key="app-key",
            crypto_key_reader=_reader(pmod, keys["right"]),
            compression_type=pmod.CompressionType.LZ4,
            batching_enabled=batched,
            batching_max_publish_delay_ms=5,
        )
        payloads = [b"secret-%d-" % i + b"x" * 200 for i in range(10)]
        for i, p in enumerate(payloads):
            producer.send_async(p, None, properties={"i": str(i)}, partition_key=f"k{i}")
        producer.flush()
        got = [consumer.receive(10_000) for _ in payloads]
        assert [m.data() for m in got] == payloads
        assert [m.properties()["i"] for m in got] == [str(i) for i in range(10)]
        assert [m.partition_key() for m in got] == [f"k{i}" for i in range(10)]
        for m in got:
            consumer.acknowledge(m)
    finally:
        pclient.close()
        cclient.close()


@pytest.mark.parametrize("consumer_impl", ["pulsar", "quasar"])
def test_what_cannot_be_decrypted_follows_the_failure_action(
    broker: BrokerProcess, keys: dict[str, tuple[str, str]], consumer_impl: str
) -> None:
    cmod = IMPLS[consumer_impl]
    pclient, cclient = make_client(qc, broker.url), make_client(cmod, broker.url)
    topic = _topic()
    try:
        consume = cclient.subscribe(
            topic, "consume", crypto_key_reader=_reader(cmod, keys["wrong"]),
            crypto_failure_action=cmod.ConsumerCryptoFailureAction.CONSUME,
        )
        discard = cclient.subscribe(
            topic, "discard", crypto_key_reader=_reader(cmod, keys["wrong"]),
            crypto_failure_action=cmod.ConsumerCryptoFailureAction.DISCARD,
        )
        fail = cclient.subscribe(topic, "fail")  # no key reader, FAIL by default
        producer = pclient.create_producer(
            topic, encryption_key="app-key", crypto_key_reader=_reader(qc, keys["right"])
        )
        producer.send(b"top secret")
        # CONSUME: the ciphertext (GCM adds a 16-byte tag), never the plain text.
        raw = consume.receive(10_000)
        assert raw.data() != b"top secret"
        assert len(raw.data()) == len(b"top secret") + 16
        consume.acknowledge(raw)
        # DISCARD and FAIL: nothing reaches the application.
        with pytest.raises(cmod.Timeout):
            discard.receive(1000)
        with pytest.raises(cmod.Timeout):
            fail.receive(500)
        # FAIL left it unacknowledged: a consumer with the right key gets it.
        fail.close()
        fixed = cclient.subscribe(
            topic, "fail", crypto_key_reader=_reader(cmod, keys["right"])
        )
        assert fixed.receive(10_000).data() == b"top secret"
    finally:
        pclient.close()
        cclient.close()


def test_quasar_refuses_half_an_encryption_setup(
    broker: BrokerProcess, keys: dict[str, tuple[str, str]]
) -> None:
    client = make_client(qc, broker.url)
    try:
        with pytest.raises(qc.InvalidConfiguration):
            client.create_producer(_topic(), encryption_key="app-key")
        with pytest.raises(qc.InvalidConfiguration, match="quasar.client.CryptoKeyReader"):
            client.subscribe(
                _topic(), "s", crypto_key_reader=pulsar.CryptoKeyReader(*keys["right"])
            )
        missing = qc.CryptoKeyReader(str(Path(keys["right"][0]).with_name("nope")), "")
        with pytest.raises(qc.CryptoError):
            client.create_producer(
                _topic(), encryption_key="app-key", crypto_key_reader=missing
            )
    finally:
        client.close()
