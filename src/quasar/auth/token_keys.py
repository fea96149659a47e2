"""Keys for Pulsar's JWT tokens: the value formats, decoding, and making new keys.

Pulsar names a key by one configuration value (``tokenSecretKey``,
``tokenPublicKey``, the ``--secret-key`` option of ``pulsar tokens``), read the same
way everywhere:

* ``data:;base64,<base64>`` (any ``data:`` URL): the URL's content;
* ``file:///path/to/key`` (any ``file:`` URL): the file's bytes;
* a path to an existing file: the file's bytes;
* anything else: base64 of the key.

The key bytes themselves are, as Pulsar writes them:

* a secret (HMAC) key: the raw bytes, at least 256 bits;
* a private key: DER PKCS#8 (``PrivateKeyInfo``), RSA or EC;
* a public key: DER X.509 ``SubjectPublicKeyInfo``, RSA or EC.

Pulsar does not read PEM, so neither does quasar: a PEM key is refused with a
message saying how to convert it, rather than being misread as something else.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlparse

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

__all__ = [
    "HMAC_ALGORITHMS",
    "KEY_PAIR_ALGORITHMS",
    "SIGNATURE_ALGORITHMS",
    "PrivateKey",
    "PublicKey",
    "create_key_pair",
    "create_secret_key",
    "decode_private_key",
    "decode_public_key",
    "decode_secret_key",
    "key_family",
    "read_key_value",
]

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

# jjwt's SignatureAlgorithm, which Pulsar's options take, without NONE.
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
KEY_PAIR_ALGORITHMS = RSA_ALGORITHMS + EC_ALGORITHMS
SIGNATURE_ALGORITHMS = HMAC_ALGORITHMS + KEY_PAIR_ALGORITHMS

# An HMAC key must be at least as long as the hash (RFC 7518 §3.2, enforced by jjwt).
HMAC_KEY_BYTES_MIN = {"HS256": 32, "HS384": 48, "HS512": 64}

# The key sizes jjwt generates for each algorithm, and the least it signs with.
RSA_KEY_BITS = {"256": 2048, "384": 3072, "512": 4096}
EC_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "ES256": ec.SECP256R1,
    "ES384": ec.SECP384R1,
    "ES512": ec.SECP521R1,
}

_PEM_MARKER = b"-----BEGIN"


def key_family(algorithm: str) -> str:
    """``"HMAC"``, ``"RSA"`` or ``"EC"``: the kind of key ``algorithm`` signs with.

    Raises:
        ValueError: not one of Pulsar's signature algorithms.
    """
    if algorithm in HMAC_ALGORITHMS:
        return "HMAC"
    if algorithm in RSA_ALGORITHMS:
        return "RSA"
    if algorithm in EC_ALGORITHMS:
        return "EC"
    raise ValueError(
        f"unknown signature algorithm {algorithm!r}; expected one of "
        + ", ".join(SIGNATURE_ALGORITHMS)
    )


def read_key_value(value: str) -> bytes:
    """The key bytes a Pulsar key value names (``data:``, ``file:``, path, base64).

    Raises:
        ValueError: an empty value, a malformed ``data:`` URL, or text that is none
            of the forms (the message never repeats the value: it may be a secret).
        OSError: a ``file:`` URL whose file cannot be read.
    """
    text = value.strip()
    if not text:
        raise ValueError("no key given")
    if text.startswith("data:"):
        return _read_data_url(text)
    if text.startswith("file:"):
        return Path(unquote_to_bytes(urlparse(text).path).decode()).read_bytes()
    path = Path(text)
    try:
        if path.is_file():
            return path.read_bytes()
    except OSError:
        pass  # e.g. a base64 text too long to be a file name
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "a key must be a data: URL, a file: URL, the path of an existing file "
            "or base64 text"
        ) from None


def _read_data_url(url: str) -> bytes:
    header, sep, data = url[len("data:") :].partition(",")
    if not sep:
        raise ValueError("a data: URL needs a ',' before its content")
    if header.endswith(";base64"):
        try:
            return base64.b64decode("".join(data.split()), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("the data: URL's content is not valid base64") from None
    return unquote_to_bytes(data)


def decode_secret_key(data: bytes) -> bytes:
    """Check an HMAC key's length (at least 256 bits, as jjwt requires).

    Raises:
        ValueError: the key is too short to sign HS256.
    """
    if len(data) < HMAC_KEY_BYTES_MIN["HS256"]:
        raise ValueError(
            f"the secret key has {len(data) * 8} bits; an HMAC key needs at least 256"
        )
    return data


def decode_private_key(data: bytes) -> PrivateKey:
    """A DER PKCS#8 private key (RSA or EC), as ``create-key-pair`` writes it.

    Raises:
        ValueError: PEM, not DER PKCS#8, or a key type tokens cannot sign with.
    """
    _refuse_pem(data, "private")
    try:
        key = serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ValueError("the private key is not a DER PKCS#8 RSA or EC key") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise ValueError("the private key is neither an RSA nor an EC key")
    return key


def decode_public_key(data: bytes) -> PublicKey:
    """A DER X.509 SubjectPublicKeyInfo public key (RSA or EC).

    Raises:
        ValueError: PEM, not DER SubjectPublicKeyInfo, or neither RSA nor EC.
    """
    _refuse_pem(data, "public")
    try:
        key = serialization.load_der_public_key(data)
    except (ValueError, TypeError):
        raise ValueError(
            "the public key is not a DER X.509 SubjectPublicKeyInfo RSA or EC key"
        ) from None
    if not isinstance(key, (rsa.RSAPublicKey, ec.EllipticCurvePublicKey)):
        raise ValueError("the public key is neither an RSA nor an EC key")
    return key


def _refuse_pem(data: bytes, kind: str) -> None:
    if data.lstrip().startswith(_PEM_MARKER):
        raise ValueError(
            f"the {kind} key is PEM; Pulsar's keys are DER (convert it with "
            f"`openssl pkey {'-pubin ' if kind == 'public' else ''}-outform DER`)"
        )


def create_secret_key(algorithm: str = "HS256") -> bytes:
    """A new random HMAC key as long as ``algorithm``'s hash (32 bytes for HS256).

    Raises:
        ValueError: ``algorithm`` is not an HMAC algorithm.
    """
    if key_family(algorithm) != "HMAC":
        raise ValueError(f"{algorithm} does not use a secret key; use a key pair")
    return secrets.token_bytes(HMAC_KEY_BYTES_MIN[algorithm])


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """A new key pair for ``algorithm``: ``(DER PKCS#8 private, DER X.509 public)``.

    RSA keys are 2048, 3072 or 4096 bits for the 256, 384 and 512 variants; EC keys
    are on P-256, P-384 or P-521, the sizes jjwt generates.

    Raises:
        ValueError: ``algorithm`` is an HMAC algorithm (it uses a secret key).
    """
    family = key_family(algorithm)
    key: PrivateKey
    if family == "RSA":
        key = rsa.generate_private_key(
            public_exponent=65537, key_size=RSA_KEY_BITS[algorithm[2:]]
        )
    elif family == "EC":
        key = ec.generate_private_key(EC_CURVES[algorithm]())
    else:
        raise ValueError(f"{algorithm} uses a secret key, not a key pair")
    private = key.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER,
        serialization.PublicFormat.SubjectPublicKeyInfo,
    )
    return private, public
