"""Pulsar's JWT tokens: making them and validating them as the broker's token provider.

A token is a compact JWS (RFC 7515) as Pulsar's ``AuthTokenUtils`` writes it with
jjwt::

    base64url({"alg":"HS256"}) . base64url({"sub":"role","exp":1700000000}) . signature

The header carries only ``alg`` (and any headers asked for); the payload carries
``sub`` and, when the token expires, ``exp`` in seconds since the epoch.

Validation follows Pulsar's ``AuthenticationProviderToken``: a signed token only
(``alg: none`` is refused), signed with an algorithm of the configured key's family
(a secret key accepts HS256/384/512; an RSA public key RS* and PS*; an EC public key
the ES* of its curve), ``exp`` and ``nbf`` enforced with no clock skew, the role
read from ``tokenAuthClaim`` and, when ``tokenAudienceClaim`` is set, the audience
checked. Every refusal is an ``AuthenticationError`` whose message says why and never
repeats the token.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import HMACAlgorithm

from quasar.auth.token_keys import (
    EC_CURVES,
    HMAC_ALGORITHMS,
    HMAC_KEY_BYTES_MIN,
    RSA_ALGORITHMS,
    RSA_KEY_BITS,
    PrivateKey,
    PublicKey,
    decode_public_key,
    decode_secret_key,
    key_family,
    read_key_value,
)
from quasar.clock import Clock, SystemClock
from quasar.config import TokenAuthenticationConfig
from quasar.errors import AuthenticationError

__all__ = [
    "AuthenticatedToken",
    "TokenValidator",
    "accepted_algorithms",
    "create_token",
    "hmac_algorithms_for",
    "signing_algorithm_for",
]

SigningKey = bytes | PrivateKey
VerifyingKey = bytes | PublicKey


def signing_algorithm_for(key: SigningKey) -> str:
    """The algorithm jjwt signs with when given only a key: the strongest it fits.

    A secret of 64 bytes or more signs HS512, 48 HS384, 32 HS256; an RSA key of
    4096 bits or more RS512, 3072 RS384, 2048 RS256; an EC key the ES* of its curve.

    Raises:
        ValueError: a key too weak for any algorithm, or an unsupported curve.
    """
    if isinstance(key, bytes):
        for algorithm in reversed(HMAC_ALGORITHMS):
            if len(key) >= HMAC_KEY_BYTES_MIN[algorithm]:
                return algorithm
        decode_secret_key(key)  # raises with the reason
    elif isinstance(key, rsa.RSAPrivateKey):
        for suffix, bits in sorted(RSA_KEY_BITS.items(), reverse=True):
            if key.key_size >= bits:
                return "RS" + suffix
        raise ValueError(f"the RSA key has {key.key_size} bits; tokens need 2048")
    else:
        for algorithm, curve in EC_CURVES.items():
            if isinstance(key.curve, curve):
                return algorithm
        raise ValueError(f"EC curve {key.curve.name} is not used by JWT algorithms")
    raise AssertionError("unreachable")


def _check_key_fits(key: SigningKey | VerifyingKey, algorithm: str) -> None:
    family = key_family(algorithm)
    if family == "HMAC":
        if not isinstance(key, bytes):
            raise ValueError(f"{algorithm} signs with a secret key, not a key pair")
        if len(key) < HMAC_KEY_BYTES_MIN[algorithm]:
            raise ValueError(
                f"{algorithm} needs a secret key of at least "
                f"{HMAC_KEY_BYTES_MIN[algorithm] * 8} bits, not {len(key) * 8}"
            )
        try:
            # PyJWT refuses an HMAC secret that is a PEM or DER public key, the
            # material of algorithm-confusion attacks; say so at configuration.
            HMACAlgorithm(HMACAlgorithm.SHA256).prepare_key(key)
        except jwt.InvalidKeyError:
            raise ValueError(
                "the secret key is an encoded asymmetric key, not an HMAC secret"
            ) from None
    elif family == "RSA":
        if not isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
            raise ValueError(f"{algorithm} needs an RSA key")
        if key.key_size < RSA_KEY_BITS["256"]:
            raise ValueError(f"the RSA key has {key.key_size} bits; tokens need 2048")
    else:
        if not isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
            raise ValueError(f"{algorithm} needs an EC key")
        if not isinstance(key.curve, EC_CURVES[algorithm]):
            raise ValueError(f"{algorithm} needs an EC key on {EC_CURVES[algorithm].name}")


def create_token(
    subject: str,
    key: SigningKey,
    algorithm: str | None = None,
    expiry_time_s: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    """A signed token for ``subject``, laid out as Pulsar's ``pulsar tokens create``.

    Args:
        subject: the role (``sub`` claim).
        key: a secret key (bytes) or an RSA/EC private key.
        algorithm: the signature algorithm; ``None`` picks it from the key as jjwt
            does (``signing_algorithm_for``).
        expiry_time_s: the ``exp`` claim, seconds since the epoch; ``None`` for a
            token that never expires.
        headers: extra JWS headers (``kid``, ...); ``alg`` cannot be overridden.

    Raises:
        ValueError: an unknown algorithm, or a key that does not fit it.
    """
    if algorithm is None:
        algorithm = signing_algorithm_for(key)
    _check_key_fits(key, algorithm)
    extra = dict(headers or {})
    if "alg" in extra:
        raise ValueError("the alg header is set from the signature algorithm")
    payload: dict[str, Any] = {"sub": subject}
    if expiry_time_s is not None:
        payload["exp"] = int(expiry_time_s)
    # PyJWT adds "typ": "JWT" unless told not to; jjwt writes only "alg" (and the
    # headers asked for, typ included).
    return jwt.encode(
        payload, key, algorithm=algorithm, headers={"typ": None, **extra},
        sort_headers=False,
    )


@dataclass(frozen=True)
class AuthenticatedToken:
    """What a valid token says: the role, and when the token stops being valid."""

    role: str
    # The exp claim in milliseconds since the epoch (None: never expires); the
    # connection sends AUTH_CHALLENGE for fresh credentials once it has passed.
    expiry_time_ms: int | None
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)


class TokenValidator:
    """Validates tokens against one key, as Pulsar's token provider does.

    Build it from the broker's settings with ``from_config``, or directly with a
    decoded key and the algorithms it accepts.
    """

    def __init__(
        self,
        key: VerifyingKey,
        algorithms: tuple[str, ...],
        auth_claim: str = "sub",
        audience_claim: str = "",
        audience: str = "",
        clock: Clock | None = None,
    ) -> None:
        """Raises: ValueError: the key does not fit the algorithms, or an audience
        claim without an audience (Pulsar refuses that configuration too)."""
        if not algorithms:
            raise ValueError("no accepted signature algorithm")
        for algorithm in algorithms:
            _check_key_fits(key, algorithm)
        if audience_claim and not audience:
            raise ValueError(
                "tokenAudienceClaim is set but tokenAudience is not: the broker "
                "cannot tell which audience it stands for"
            )
        if not auth_claim:
            raise ValueError("tokenAuthClaim must name a claim")
        self._key = key
        self.algorithms = algorithms
        self.auth_claim = auth_claim
        self.audience_claim = audience_claim
        self.audience = audience
        self._clock = clock or SystemClock()
        self._jws = jwt.PyJWS()

    @classmethod
    def from_config(
        cls, config: TokenAuthenticationConfig, clock: Clock | None = None
    ) -> TokenValidator:
        """The validator the broker's token settings describe.

        ``tokenSecretKey`` wins over ``tokenPublicKey``, as in Pulsar.

        Raises:
            ValueError: neither key set, an unreadable or invalid key, or a
                ``tokenPublicAlg`` that does not fit the public key.
            OSError: a key file cannot be read.
        """
        key: VerifyingKey
        if config.token_secret_key:
            key = decode_secret_key(read_key_value(config.token_secret_key))
            algorithms = hmac_algorithms_for(key)
        elif config.token_public_key:
            key = decode_public_key(read_key_value(config.token_public_key))
            algorithms = accepted_algorithms(key, config.token_public_alg)
        else:
            raise ValueError(
                "token authentication needs tokenSecretKey or tokenPublicKey"
            )
        return cls(
            key,
            algorithms,
            auth_claim=config.token_auth_claim,
            audience_claim=config.token_audience_claim,
            audience=config.token_audience,
            clock=clock,
        )

    def validate(self, token: str) -> AuthenticatedToken:
        """The role and expiry of a valid token.

        Raises:
            AuthenticationError: blank, malformed, unsigned, signed with another
                algorithm or key, expired, not yet valid, without the role claim,
                or for another audience.
        """
        if not token or not token.strip():
            raise AuthenticationError("blank token")
        try:
            decoded = self._jws.decode_complete(
                token.strip(), self._key, algorithms=list(self.algorithms)
            )
        except jwt.InvalidAlgorithmError:
            raise AuthenticationError(
                "token signature algorithm not accepted; this broker accepts "
                + ", ".join(self.algorithms)
            ) from None
        except jwt.InvalidSignatureError:
            raise AuthenticationError("token signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise AuthenticationError(f"malformed token: {exc}") from None
        claims = _claims(decoded["payload"])
        now_ms = self._clock.wall_ms()
        expiry_ms = _time_claim_ms(claims, "exp")
        if expiry_ms is not None and now_ms > expiry_ms:
            raise AuthenticationError("token expired")
        not_before_ms = _time_claim_ms(claims, "nbf")
        if not_before_ms is not None and now_ms < not_before_ms:
            raise AuthenticationError("token not valid yet (nbf)")
        if self.audience_claim:
            self._check_audience(claims)
        return AuthenticatedToken(self._role(claims), expiry_ms, claims)

    def _role(self, claims: Mapping[str, Any]) -> str:
        value = claims.get(self.auth_claim)
        # An array claim gives its first element, as in Pulsar.
        if isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, str) or not value:
            raise AuthenticationError(f"token has no role in claim {self.auth_claim!r}")
        return value

    def _check_audience(self, claims: Mapping[str, Any]) -> None:
        value = claims.get(self.audience_claim)
        if isinstance(value, list):
            matches = self.audience in value
        else:
            matches = value == self.audience
        if not matches:
            raise AuthenticationError(
                f"token audience ({self.audience_claim!r} claim) is not this broker's"
            )


def hmac_algorithms_for(secret: bytes) -> tuple[str, ...]:
    """The HMAC algorithms a secret key is long enough for (HS256 at 256 bits)."""
    return tuple(a for a in HMAC_ALGORITHMS if len(secret) >= HMAC_KEY_BYTES_MIN[a])


def accepted_algorithms(key: PublicKey, public_alg: str) -> tuple[str, ...]:
    """The token algorithms a public key accepts under ``tokenPublicAlg``.

    Raises:
        ValueError: ``public_alg`` is an HMAC algorithm or not of the key's type.
    """
    family = key_family(public_alg)
    if family == "HMAC":
        raise ValueError(f"{public_alg} signs with a secret key, not a public key")
    if family == "RSA":
        if not isinstance(key, rsa.RSAPublicKey):
            raise ValueError(f"signature algorithm {public_alg} needs an RSA public key")
        return RSA_ALGORITHMS
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError(f"signature algorithm {public_alg} needs an EC public key")
    for algorithm, curve in EC_CURVES.items():
        if isinstance(key.curve, curve):
            return (algorithm,)
    raise ValueError(f"EC curve {key.curve.name} is not used by JWT algorithms")


def _claims(payload: bytes) -> dict[str, Any]:
    try:
        claims = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise AuthenticationError("malformed token: the payload is not JSON") from None
    if not isinstance(claims, dict):
        raise AuthenticationError("malformed token: the payload is not a JSON object")
    return claims


def _time_claim_ms(claims: Mapping[str, Any], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
    ):
        raise AuthenticationError(f"malformed token: {name} is not a number")
    return int(value * 1000)
