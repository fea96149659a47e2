"""End-to-end encryption of message payloads, in Pulsar's format.

The broker never sees a key: producers encrypt, consumers decrypt, and both agree
with Pulsar's clients (Java and C++) on this layout in ``MessageMetadata``::

    payload            = AES-256-GCM(data key, iv, compressed payload) || 16-byte tag
    encryption_param   = iv (12 random bytes, new for every message)
    encryption_keys[i] = { key:      the key name the producer was given,
                           value:    RSA-OAEP(SHA-1, MGF1-SHA-1)(public key, data key),
                           metadata: the key's metadata from the key reader }

The producer draws one 32-byte data key, encrypts it once per key name and renews it
every four hours (as Pulsar does); compression happens before encryption, and a batch
is encrypted as one payload. A consumer decrypts the data key of the first key name
its key reader has the private key of, and caches what it decrypted (bounded), so an
RSA operation happens once per data key, not once per message.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from quasar.client.exceptions import CryptoError, InvalidConfiguration

DATA_KEY_BYTES = 32
IV_BYTES = 12
# Pulsar's producers renew their data key every four hours.
DATA_KEY_LIFETIME_S = 4 * 3600
# Data keys a consumer keeps decrypted: one per producer (and renewal) it reads.
DECRYPTED_KEYS_MAX = 100

_OAEP = padding.OAEP(
    mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None
)


@dataclass
class EncryptionKeyInfo:
    """A key (PEM bytes) and the metadata stored beside the data key encrypted
    with it (Pulsar's ``EncryptionKeyInfo``)."""

    key: bytes
    metadata: dict[str, str] = field(default_factory=dict)


class KeyReader(Protocol):
    """What a producer or consumer asks for keys (Pulsar's ``CryptoKeyReader``)."""

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo: ...

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo: ...


class CryptoKeyReader:
    """Reads the public and the private key from PEM files, whatever the key name
    (``pulsar.CryptoKeyReader``: the official client's default reader). Either path
    may be empty for a side that only encrypts or only decrypts."""

    def __init__(self, public_key_path: str, private_key_path: str) -> None:
        if not isinstance(public_key_path, str) or not isinstance(private_key_path, str):
            raise InvalidConfiguration("key paths must be strings")
        self.public_key_path = public_key_path
        self.private_key_path = private_key_path

    def get_public_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(_read(self.public_key_path))

    def get_private_key(self, key_name: str, metadata: Mapping[str, str]) -> EncryptionKeyInfo:
        return EncryptionKeyInfo(_read(self.private_key_path))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def key_reader_of(value: Any) -> KeyReader | None:
    """The key reader a producer or consumer was given.

    Raises:
        InvalidConfiguration: the official client's ``pulsar.CryptoKeyReader`` (it
            keeps its files inside the C++ library, out of reach), or an object
            without ``get_public_key`` / ``get_private_key``.
    """
    if value is None:
        return None
    if hasattr(value, "get_public_key") and hasattr(value, "get_private_key"):
        return value  # type: ignore[no-any-return]
    raise InvalidConfiguration(
        "crypto_key_reader must be a quasar.client.CryptoKeyReader(public_key_path, "
        f"private_key_path) or implement get_public_key/get_private_key, not "
        f"{type(value).__name__}"
    )


def _public_key(info: EncryptionKeyInfo) -> rsa.RSAPublicKey:
    try:
        key = serialization.load_pem_public_key(info.key)
    except ValueError as exc:
        raise CryptoError(f"not a PEM public key: {exc}") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise CryptoError(f"only RSA keys are supported, not {type(key).__name__}")
    return key


def _private_key(info: EncryptionKeyInfo) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(info.key, password=None)
    except (ValueError, TypeError) as exc:
        raise CryptoError(f"not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise CryptoError(f"only RSA keys are supported, not {type(key).__name__}")
    return key


class MessageEncryptor:
    """A producer's side: encrypts payloads for its key names."""

    def __init__(self, key_names: list[str], reader: KeyReader) -> None:
        if not key_names:
            raise InvalidConfiguration("encryption needs at least one key name")
        self.key_names = key_names
        self.reader = reader
        self._aead: AESGCM | None = None
        self._encrypted_keys: list[tuple[str, bytes, dict[str, str]]] = []
        self._renew_at = 0.0

    def renew_data_key(self) -> None:
        """Draw a new data key and encrypt it for every key name.

        Raises:
            CryptoError: a public key cannot be read or is not an RSA key.
        """
        data_key = os.urandom(DATA_KEY_BYTES)
        encrypted = []
        for name in self.key_names:
            try:
                info = self.reader.get_public_key(name, {})
            except OSError as exc:
                raise CryptoError(f"cannot read the public key {name!r}: {exc}") from None
            value = _public_key(info).encrypt(data_key, _OAEP)
            encrypted.append((name, value, dict(info.metadata)))
        self._aead = AESGCM(data_key)
        self._encrypted_keys = encrypted
        self._renew_at = time.monotonic() + DATA_KEY_LIFETIME_S

    def encrypt(self, md: Any, payload: bytes) -> bytes:
        """Encrypt ``payload`` (already compressed) and describe it in ``md``.

        Raises:
            CryptoError: as :meth:`renew_data_key`.
        """
        if self._aead is None or time.monotonic() >= self._renew_at:
            self.renew_data_key()
        assert self._aead is not None
        iv = os.urandom(IV_BYTES)
        del md.encryption_keys[:]
        for name, value, metadata in self._encrypted_keys:
            entry = md.encryption_keys.add(key=name, value=value)
            for k, v in metadata.items():
                entry.metadata.add(key=k, value=v)
        md.encryption_param = iv
        return self._aead.encrypt(iv, payload, None)


class MessageDecryptor:
    """A consumer's side: decrypts payloads with its key reader's private keys."""

    def __init__(self, reader: KeyReader) -> None:
        self.reader = reader
        # (key name, encrypted data key) -> the data key's cipher; least recent first.
        self._keys: OrderedDict[tuple[str, bytes], AESGCM] = OrderedDict()

    def decrypt(self, md: Any, payload: bytes) -> bytes:
        """The plain (still compressed) payload of an encrypted entry.

        Raises:
            CryptoError: no data key could be decrypted with the reader's keys, or the
                payload does not authenticate (wrong key, or tampered with).
        """
        iv = md.encryption_param
        last_error = "the message names no encryption key"
        for entry in md.encryption_keys:
            try:
                aead = self._data_key(entry)
            except CryptoError as exc:
                last_error = str(exc)
                continue
            try:
                return aead.decrypt(iv, payload, None)
            except (InvalidTag, ValueError):
                last_error = f"the payload does not decrypt with key {entry.key!r}"
        raise CryptoError(last_error)

    def _data_key(self, entry: Any) -> AESGCM:
        cache_key = (entry.key, bytes(entry.value))
        aead = self._keys.get(cache_key)
        if aead is not None:
            self._keys.move_to_end(cache_key)
            return aead
        metadata = {kv.key: kv.value for kv in entry.metadata}
        try:
            info = self.reader.get_private_key(entry.key, metadata)
        except OSError as exc:
            raise CryptoError(f"cannot read the private key {entry.key!r}: {exc}") from None
        try:
            data_key = _private_key(info).decrypt(bytes(entry.value), _OAEP)
        except ValueError:
            raise CryptoError(f"the data key does not decrypt with key {entry.key!r}") from None
        aead = AESGCM(data_key)
        self._keys[cache_key] = aead
        if len(self._keys) > DECRYPTED_KEYS_MAX:
            self._keys.popitem(last=False)
        return aead
