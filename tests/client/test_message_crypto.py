"""Pulsar's payload encryption, without a broker: round trips, tampering, keys."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from quasar.client import CryptoError, EncryptionKeyInfo
from quasar.client import message_crypto as mc
from quasar.protocol import pb


def _pem_pair(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> tuple[bytes, bytes]:
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return public, private


class MemoryKeys:
    """Key pairs by name, with metadata, counting private-key reads."""

    def __init__(self, pairs: dict[str, tuple[bytes, bytes]]) -> None:
        self.pairs = pairs
        self.private_reads = 0

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(self.pairs[key_name][0], {"version": key_name})

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        self.private_reads += 1
        if key_name not in self.pairs:
            raise OSError(f"no key {key_name}")
        assert metadata == {"version": key_name}
        return EncryptionKeyInfo(self.pairs[key_name][1])


@pytest.fixture(scope="module")
def pair() -> tuple[bytes, bytes]:
    return _pem_pair(rsa.generate_private_key(public_exponent=65537, key_size=2048))


def test_round_trip_sets_pulsars_metadata(pair: tuple[bytes, bytes]) -> None:
    keys = MemoryKeys({"a": pair, "b": pair})
    encryptor = mc.MessageEncryptor(["a", "b"], keys)
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    cipher = encryptor.encrypt(md, b"hello")
    assert cipher != b"hello" and len(cipher) == len(b"hello") + 16
    assert [k.key for k in md.encryption_keys] == ["a", "b"]
    assert {kv.key: kv.value for kv in md.encryption_keys[0].metadata} == {"version": "a"}
    assert len(md.encryption_param) == mc.IV_BYTES
    decryptor = mc.MessageDecryptor(MemoryKeys({"b": pair}))
    assert decryptor.decrypt(md, cipher) == b"hello"


def test_the_data_key_is_decrypted_once(pair: tuple[bytes, bytes]) -> None:
    encryptor = mc.MessageEncryptor(["a"], MemoryKeys({"a": pair}))
    readers = MemoryKeys({"a": pair})
    decryptor = mc.MessageDecryptor(readers)
    for i in range(5):
        md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1)
        assert decryptor.decrypt(md, encryptor.encrypt(md, b"m%d" % i)) == b"m%d" % i
    assert readers.private_reads == 1
    # Every message has its own IV.
    ivs = set()
    for i in range(3):
        md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1)
        encryptor.encrypt(md, b"x")
        ivs.add(md.encryption_param)
    assert len(ivs) == 3


def test_tampering_and_wrong_keys_fail(pair: tuple[bytes, bytes]) -> None:
    encryptor = mc.MessageEncryptor(["a"], MemoryKeys({"a": pair}))
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    cipher = bytearray(encryptor.encrypt(md, b"hello"))
    cipher[0] ^= 1
    with pytest.raises(CryptoError, match="does not decrypt"):
        mc.MessageDecryptor(MemoryKeys({"a": pair})).decrypt(md, bytes(cipher))
    other = _pem_pair(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    with pytest.raises(CryptoError, match="data key does not decrypt"):
        mc.MessageDecryptor(MemoryKeys({"a": other})).decrypt(md, bytes(cipher))
    with pytest.raises(CryptoError, match="cannot read the private key"):
        mc.MessageDecryptor(MemoryKeys({})).decrypt(md, bytes(cipher))


def test_only_rsa_keys(pair: tuple[bytes, bytes]) -> None:
    ec_pair = _pem_pair(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(CryptoError, match="only RSA"):
        mc.MessageEncryptor(["a"], MemoryKeys({"a": ec_pair})).renew_data_key()
    with pytest.raises(CryptoError, match="not a PEM public key"):
        mc.MessageEncryptor(["a"], MemoryKeys({"a": (b"junk", b"junk")})).renew_data_key()


def test_decrypted_keys_are_bounded(pair: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mc, "DECRYPTED_KEYS_MAX", 3)
    decryptor = mc.MessageDecryptor(MemoryKeys({"a": pair}))
    for i in range(5):
        encryptor = mc.MessageEncryptor(["a"], MemoryKeys({"a": pair}))
        md = pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1)
        decryptor.decrypt(md, encryptor.encrypt(md, b"x"))
    assert len(decryptor._keys) == 3
