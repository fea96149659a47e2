"""Pulsar JWT tokens: the layout ``create_token`` writes and ``TokenValidator``'s
refusals, on a manual clock."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from quasar.auth.token_keys import (
    create_key_pair,
    decode_private_key,
    decode_public_key,
)
from quasar.auth.tokens import (
    AuthenticatedToken,
    TokenValidator,
    accepted_algorithms,
    create_token,
    signing_algorithm_for,
)
from quasar.clock import ManualClock
from quasar.config import TokenAuthenticationConfig
from quasar.errors import AuthenticationError, ServerError

SECRET = bytes(range(32))
NOW_S = 1_700_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(wall_ms=NOW_S * 1000)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def parts(token: str) -> tuple[dict[str, object], dict[str, object]]:
    header, payload, _ = token.split(".")
    return (
        json.loads(base64.urlsafe_b64decode(header + "==")),
        json.loads(base64.urlsafe_b64decode(payload + "==")),
    )


def hs256(header: dict[str, object], payload: dict[str, object], key: bytes) -> str:
    """A token signed by hand, for headers PyJWT would not write."""
    signing_input = (
        b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    )
    mac = hmac.HMAC(key, hashes.SHA256())
    mac.update(signing_input.encode())
    return signing_input + "." + b64url(mac.finalize())


def key_pair(algorithm: str) -> tuple[rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, bytes]:
    private, public = create_key_pair(algorithm)
    return decode_private_key(private), public


# --------------------------------------------------------------------------------------
# The layout.


def test_pulsars_documented_example_token_is_what_create_token_writes() -> None:
    """Pulsar's docs show eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKb2UifQ...: header
    {"alg":"HS256"} and payload {"sub":"Joe"}, nothing else."""
    token = create_token("Joe", SECRET)
    header, payload = token.split(".")[:2]
    assert header == "eyJhbGciOiJIUzI1NiJ9"
    assert payload == "eyJzdWIiOiJKb2UifQ"


def test_plain_pyjwt_reads_the_expected_header_and_claims() -> None:
    token = create_token("role-1", SECRET, "HS256", expiry_time_s=NOW_S + 60)
    assert jwt.get_unverified_header(token) == {"alg": "HS256"}
    assert jwt.decode(
        token, SECRET, algorithms=["HS256"], options={"verify_exp": False}
    ) == {"sub": "role-1", "exp": NOW_S + 60}


def test_extra_headers_are_added_but_alg_is_not_overridable() -> None:
    token = create_token("r", SECRET, headers={"kid": "k1"})
    assert parts(token)[0] == {"alg": "HS256", "kid": "k1"}
    assert parts(create_token("r", SECRET, headers={"typ": "JWT"}))[0] == {
        "alg": "HS256",
        "typ": "JWT",
    }
    with pytest.raises(ValueError, match="alg"):
        create_token("r", SECRET, headers={"alg": "none"})


def test_the_algorithm_follows_the_key_as_jjwt_picks_it() -> None:
    assert signing_algorithm_for(SECRET) == "HS256"
    assert signing_algorithm_for(bytes(48)) == "HS384"
    assert signing_algorithm_for(bytes(64)) == "HS512"
    assert signing_algorithm_for(key_pair("RS256")[0]) == "RS256"
    assert signing_algorithm_for(key_pair("ES384")[0]) == "ES384"
    with pytest.raises(ValueError, match="256"):
        signing_algorithm_for(bytes(16))


def test_a_key_that_does_not_fit_the_algorithm_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 512"):
        create_token("r", SECRET, "HS512")
    with pytest.raises(ValueError, match="RSA key"):
        create_token("r", key_pair("ES256")[0], "RS256")
    with pytest.raises(ValueError, match="P-384|secp384r1"):
        create_token("r", key_pair("ES256")[0], "ES384")
    with pytest.raises(ValueError, match="secret key"):
        create_token("r", key_pair("ES256")[0], "HS256")


# --------------------------------------------------------------------------------------
# Round trips.


def test_hs256_round_trip(clock: ManualClock) -> None:
    token = create_token("alice", SECRET, "HS256", expiry_time_s=NOW_S + 3600)
    result = TokenValidator(SECRET, ("HS256",), clock=clock).validate(token)
    assert result == AuthenticatedToken("alice", (NOW_S + 3600) * 1000, result.claims)
    assert result.claims == {"sub": "alice", "exp": NOW_S + 3600}


@pytest.mark.parametrize("algorithm", ["RS256", "PS256", "ES256", "ES512"])
def test_key_pair_round_trips(algorithm: str, clock: ManualClock) -> None:
    private, public_der = key_pair(algorithm)
    token = create_token("bob", private, algorithm)
    public = decode_public_key(public_der)
    validator = TokenValidator(public, accepted_algorithms(public, algorithm), clock=clock)
    result = validator.validate(token)
    assert (result.role, result.expiry_time_ms) == ("bob", None)


def test_from_config_prefers_the_secret_key(clock: ManualClock) -> None:
    _, public_der = key_pair("RS256")
    config = TokenAuthenticationConfig(
        token_secret_key="data:;base64," + base64.b64encode(SECRET).decode(),
        token_public_key=base64.b64encode(public_der).decode(),
    )
    validator = TokenValidator.from_config(config, clock)
    assert validator.algorithms == ("HS256",)
    assert validator.validate(create_token("c", SECRET)).role == "c"


def test_from_config_with_a_public_key_file(tmp_path: Path, clock: ManualClock) -> None:
    private, public_der = key_pair("ES256")
    (tmp_path / "public.key").write_bytes(public_der)
    config = TokenAuthenticationConfig(
        token_public_key=(tmp_path / "public.key").as_uri(), token_public_alg="ES256"
    )
    validator = TokenValidator.from_config(config, clock)
    assert validator.algorithms == ("ES256",)
    assert validator.validate(create_token("d", private)).role == "d"


def test_from_config_refuses_bad_settings() -> None:
    with pytest.raises(ValueError, match="tokenSecretKey or tokenPublicKey"):
        TokenValidator.from_config(TokenAuthenticationConfig())
    _, rsa_public = key_pair("RS256")
    with pytest.raises(ValueError, match="EC public key"):
        TokenValidator.from_config(
            TokenAuthenticationConfig(
                token_public_key=base64.b64encode(rsa_public).decode(),
                token_public_alg="ES256",
            )
        )
    with pytest.raises(ValueError, match="tokenAudience"):
        TokenValidator.from_config(
            TokenAuthenticationConfig(
                token_secret_key=base64.b64encode(SECRET).decode(),
                token_audience_claim="aud",
            )
        )
    with pytest.raises(ValueError, match="256"):
        TokenValidator.from_config(
            TokenAuthenticationConfig(token_secret_key=base64.b64encode(bytes(8)).decode())
        )


# --------------------------------------------------------------------------------------
# Refusals: each is an AuthenticationError (ServerError.AuthenticationError, 401).


def refused(validate: Callable[[], object], reason: str) -> None:
    with pytest.raises(AuthenticationError, match=reason) as info:
        validate()
    assert info.value.code == ServerError.AuthenticationError
    assert info.value.http_status == 401


def test_expiry_is_enforced_without_leeway(clock: ManualClock) -> None:
    token = create_token("e", SECRET, expiry_time_s=NOW_S + 10)
    validator = TokenValidator(SECRET, ("HS256",), clock=clock)
    clock.advance(10_000)  # exactly at exp: still valid, as in jjwt
    assert validator.validate(token).expiry_time_ms == (NOW_S + 10) * 1000
    clock.advance(1)
    refused(lambda: validator.validate(token), "expired")


def test_not_before_is_enforced(clock: ManualClock) -> None:
    token = hs256({"alg": "HS256"}, {"sub": "n", "nbf": NOW_S + 5}, SECRET)
    validator = TokenValidator(SECRET, ("HS256",), clock=clock)
    refused(lambda: validator.validate(token), "not valid yet")
    clock.advance(5_000)
    assert validator.validate(token).role == "n"


def test_a_wrong_signature_is_refused(clock: ManualClock) -> None:
    token = create_token("w", bytes(32))
    refused(
        lambda: TokenValidator(SECRET, ("HS256",), clock=clock).validate(token),
        "signature does not verify",
    )
    other, _ = key_pair("RS256")
    _, public_der = key_pair("RS256")
    public = decode_public_key(public_der)
    refused(
        lambda: TokenValidator(public, ("RS256",), clock=clock).validate(
            create_token("w", other)
        ),
        "signature does not verify",
    )


def test_alg_none_is_refused(clock: ManualClock) -> None:
    unsigned = (
        b64url(b'{"alg":"none"}') + "." + b64url(b'{"sub":"admin"}') + "."
    )
    validator = TokenValidator(SECRET, ("HS256",), clock=clock)
    refused(lambda: validator.validate(unsigned), "not accepted")
    _, public_der = key_pair("RS256")
    public = decode_public_key(public_der)
    refused(
        lambda: TokenValidator(public, ("RS256",), clock=clock).validate(unsigned),
        "not accepted",
    )


def test_hmac_signed_with_the_public_key_is_refused(clock: ManualClock) -> None:
    """Algorithm confusion: an attacker signs HS256 with the broker's public key."""
    _, public_der = key_pair("RS256")
    public = decode_public_key(public_der)
    for key_bytes in (
        public_der,
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    ):
        forged = hs256({"alg": "HS256"}, {"sub": "admin"}, key_bytes)
        validator = TokenValidator(public, accepted_algorithms(public, "RS256"), clock=clock)
        refused(lambda v=validator, t=forged: v.validate(t), "not accepted")


def test_a_secret_key_broker_refuses_key_pair_tokens(clock: ManualClock) -> None:
    private, _ = key_pair("ES256")
    refused(
        lambda: TokenValidator(SECRET, ("HS256",), clock=clock).validate(
            create_token("x", private)
        ),
        "not accepted",
    )


def test_an_ec_key_accepts_only_its_curves_algorithm() -> None:
    _, public_der = key_pair("ES256")
    assert accepted_algorithms(decode_public_key(public_der), "ES512") == ("ES256",)
    with pytest.raises(ValueError, match="secret"):
        accepted_algorithms(decode_public_key(public_der), "HS256")


@pytest.mark.parametrize(
    "token",
    [
        "",
        "   ",
        "abc",
        "a.b.c",
        "a.b",
        b64url(b'{"alg":"HS256"}') + "." + b64url(b"[1]") + ".x",
        "\x00\xff.\x00.\x00",
    ],
)
def test_malformed_tokens_are_refused(token: str, clock: ManualClock) -> None:
    refused(
        lambda: TokenValidator(SECRET, ("HS256",), clock=clock).validate(token),
        "blank|malformed|signature",
    )


def test_a_payload_that_is_not_an_object_is_refused(clock: ManualClock) -> None:
    token = hs256({"alg": "HS256"}, [1, 2], SECRET)  # type: ignore[arg-type]
    refused(
        lambda: TokenValidator(SECRET, ("HS256",), clock=clock).validate(token),
        "not a JSON object",
    )


@pytest.mark.parametrize("exp", ["soon", True, None])
def test_a_non_numeric_exp_is_refused(exp: object, clock: ManualClock) -> None:
    token = hs256({"alg": "HS256"}, {"sub": "s", "exp": exp}, SECRET)
    validator = TokenValidator(SECRET, ("HS256",), clock=clock)
    if exp is None:
        assert validator.validate(token).expiry_time_ms is None
    else:
        refused(lambda: validator.validate(token), "exp is not a number")


def test_the_role_comes_from_the_auth_claim(clock: ManualClock) -> None:
    token = hs256({"alg": "HS256"}, {"sub": "s", "role": ["r1", "r2"]}, SECRET)
    validator = TokenValidator(SECRET, ("HS256",), auth_claim="role", clock=clock)
    assert validator.validate(token).role == "r1"
    no_role = hs256({"alg": "HS256"}, {"role": 5}, SECRET)
    refused(lambda: validator.validate(no_role), "no role")


def test_the_audience_must_match(clock: ManualClock) -> None:
    validator = TokenValidator(
        SECRET, ("HS256",), audience_claim="aud", audience="broker-a", clock=clock
    )
    ok = hs256({"alg": "HS256"}, {"sub": "s", "aud": "broker-a"}, SECRET)
    in_list = hs256({"alg": "HS256"}, {"sub": "s", "aud": ["x", "broker-a"]}, SECRET)
    assert validator.validate(ok).role == "s"
    assert validator.validate(in_list).role == "s"
    for claims in ({"sub": "s", "aud": "broker-b"}, {"sub": "s"}, {"sub": "s", "aud": ["x"]}):
        token = hs256({"alg": "HS256"}, claims, SECRET)
        refused(lambda t=token: validator.validate(t), "audience")


def test_reasons_never_repeat_the_token(clock: ManualClock) -> None:
    token = create_token("secret-role", bytes(32), expiry_time_s=NOW_S - 1)
    with pytest.raises(AuthenticationError) as info:
        TokenValidator(SECRET, ("HS256",), clock=clock).validate(token)
    assert token not in str(info.value)
    assert "secret-role" not in str(info.value)


def test_a_public_key_configured_as_the_secret_is_refused() -> None:
    _, public_der = key_pair("RS256")
    with pytest.raises(ValueError, match="asymmetric key"):
        TokenValidator(public_der, ("HS256",))
    with pytest.raises(ValueError, match="asymmetric key"):
        create_token("r", public_der, "HS256")
