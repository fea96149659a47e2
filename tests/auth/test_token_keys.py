"""Pulsar's key value formats and key encodings (quasar.auth.token_keys)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from quasar.auth.token_keys import (
    KEY_PAIR_ALGORITHMS,
    create_key_pair,
    create_secret_key,
    decode_private_key,
    decode_public_key,
    decode_secret_key,
    key_family,
    read_key_value,
)

KEY = bytes(range(32))


def test_a_data_url_gives_its_base64_content() -> None:
    value = "data:;base64," + base64.b64encode(KEY).decode()
    assert read_key_value(value) == KEY
    typed = "data:application/octet-stream;base64," + base64.b64encode(KEY).decode()
    assert read_key_value(typed) == KEY


def test_a_plain_data_url_gives_its_percent_decoded_content() -> None:
    assert read_key_value("data:,a%20b") == b"a b"


def test_a_file_url_gives_the_files_raw_bytes(tmp_path: Path) -> None:
    path = tmp_path / "secret key.bin"
    path.write_bytes(KEY)
    assert read_key_value(path.as_uri()) == KEY
    assert read_key_value(f"file://{path}") == KEY


def test_an_existing_path_gives_the_files_raw_bytes(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_bytes(KEY)
    assert read_key_value(str(path)) == KEY


def test_anything_else_is_base64() -> None:
    assert read_key_value(base64.b64encode(KEY).decode()) == KEY


@pytest.mark.parametrize(
    "value", ["", "   ", "not base64!", "data:;base64", "data:;base64,@@@"]
)
def test_bad_values_are_refused_without_repeating_them(value: str) -> None:
    with pytest.raises(ValueError) as info:
        read_key_value(value)
    if value.strip():
        assert value not in str(info.value)


def test_a_missing_file_url_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        read_key_value((tmp_path / "missing").as_uri())


def test_secret_keys_need_256_bits() -> None:
    assert decode_secret_key(KEY) == KEY
    with pytest.raises(ValueError, match="at least 256"):
        decode_secret_key(KEY[:31])


@pytest.mark.parametrize(("algorithm", "size"), [("HS256", 32), ("HS384", 48), ("HS512", 64)])
def test_new_secret_keys_are_as_long_as_the_hash(algorithm: str, size: int) -> None:
    assert len(create_secret_key(algorithm)) == size
    assert create_secret_key(algorithm) != create_secret_key(algorithm)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "ES384", "ES512", "PS256"])
def test_key_pairs_are_der_pkcs8_and_x509(algorithm: str) -> None:
    private_der, public_der = create_key_pair(algorithm)
    private = serialization.load_der_private_key(private_der, password=None)
    public = serialization.load_der_public_key(public_der)
    assert private_der == private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    assert decode_private_key(private_der).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == public_der
    assert isinstance(decode_public_key(public_der), type(public))
    kind = rsa.RSAPublicKey if algorithm[0] in "RP" else ec.EllipticCurvePublicKey
    assert isinstance(public, kind)


def test_key_sizes_follow_the_algorithm() -> None:
    private = decode_private_key(create_key_pair("ES384")[0])
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.curve.name == "secp384r1"
    rsa_key = decode_private_key(create_key_pair("RS256")[0])
    assert isinstance(rsa_key, rsa.RSAPrivateKey) and rsa_key.key_size == 2048


def test_pem_keys_are_refused_with_advice() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match="PEM.*DER"):
        decode_private_key(pem)
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with pytest.raises(ValueError, match="PEM.*DER"):
        decode_public_key(public_pem)


def test_garbage_and_other_key_types_are_refused() -> None:
    with pytest.raises(ValueError, match="not a DER PKCS#8"):
        decode_private_key(b"\x30\x03garbage")
    with pytest.raises(ValueError, match="not a DER X.509"):
        decode_public_key(KEY)
    ed = ed25519.Ed25519PrivateKey.generate()
    with pytest.raises(ValueError, match="neither an RSA nor an EC"):
        decode_public_key(
            ed.public_key().public_bytes(
                serialization.Encoding.DER,
                serialization.PublicFormat.SubjectPublicKeyInfo,
            )
        )


def test_algorithms_and_their_families() -> None:
    assert key_family("HS512") == "HMAC"
    assert key_family("PS384") == "RSA"
    assert key_family("ES512") == "EC"
    assert set(KEY_PAIR_ALGORITHMS) >= {"RS256", "ES256"}
    with pytest.raises(ValueError, match="unknown signature algorithm"):
        key_family("none")
    with pytest.raises(ValueError, match="secret key"):
        create_key_pair("HS256")
    with pytest.raises(ValueError, match="key pair"):
        create_secret_key("RS256")
