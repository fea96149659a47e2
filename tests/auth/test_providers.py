"""The authentication providers and the service that assembles them, without a
network: htpasswd formats, the TLS common name, the token provider over a fake
validator, start-up refusals, the anonymous role and the HTTP rules."""

from __future__ import annotations

import base64
from typing import Any

import bcrypt
import pytest
from prometheus_client.registry import CollectorRegistry

from quasar.auth import (
    PROVIDER_CLASSES,
    AuthenticationConfigError,
    AuthenticationError,
    AuthenticationService,
    Peer,
)
from quasar.auth.basic import (
    BasicAuthConfigError,
    BasicAuthenticationProvider,
    load_htpasswd,
    read_basic_auth_conf,
    verify_hash,
)
from quasar.auth.tls import TlsAuthenticationProvider, common_name
from quasar.auth.token import TokenAuthenticationProvider
from quasar.auth.tokens import AuthenticatedToken
from quasar.config import ServiceConfiguration

PEER = Peer("127.0.0.1:5000")
BASIC = "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic"
TLS = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
TOKEN = "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"

# Written by independent tools: `openssl passwd -apr1 -salt r31..... secret` and the
# C library's crypt("secret", "ab").
APR1_SECRET = "$apr1$r31.....$G/cElGhD0cboYkZN5h5Ne/"
DES_SECRET = "abNANd1rDfiNc"


def bcrypt_hash(password: str, prefix: str = "$2y$") -> str:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
    return prefix + hashed[4:]


HTPASSWD = (
    f"alice:{bcrypt_hash('alice-pw')}\n"
    f"bob:{APR1_SECRET}\n"
    f"\n"
    f"carol:{DES_SECRET}\n"
).encode()


def config(**values: Any) -> ServiceConfiguration:
    return ServiceConfiguration.load(env={}, overrides=values)


# -- htpasswd ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("password", "hashed", "ok"),
    [
        ("secret", APR1_SECRET, True),
        ("Secret", APR1_SECRET, False),
        ("secret", DES_SECRET, True),
        ("secreT", DES_SECRET, False),
        ("pw", bcrypt_hash("pw", "$2y$"), True),
        ("pw", bcrypt_hash("pw", "$2b$"), True),
        ("no", bcrypt_hash("pw"), False),
        ("pw", "$2y$garbage", False),
        ("pw", "$apr1$broken", False),
        ("pw", "x", False),
    ],
    # bcrypt salts are random: fixed ids keep the test names the same in every run.
    ids=["apr1", "apr1-wrong-case", "des", "des-wrong-case", "bcrypt-2y", "bcrypt-2b",
         "bcrypt-wrong", "bcrypt-garbage", "apr1-broken", "unknown-format"],
)
def test_htpasswd_hash_formats(password: str, hashed: str, ok: bool) -> None:
    assert verify_hash(password, hashed) is ok


def test_htpasswd_lines_must_be_user_colon_hash() -> None:
    assert set(load_htpasswd(HTPASSWD)) == {"alice", "bob", "carol"}
    for bad in (b"alice\n", b"alice:x:y\n", b":hash\n", b"\xff:x\n"):
        with pytest.raises(BasicAuthConfigError):
            load_htpasswd(bad)


def test_basic_auth_conf_is_a_path_a_url_or_base64(tmp_path: Any) -> None:
    path = tmp_path / "htpasswd"
    path.write_bytes(HTPASSWD)
    encoded = base64.b64encode(HTPASSWD).decode()
    assert read_basic_auth_conf(str(path)) == HTPASSWD
    assert read_basic_auth_conf(f"file://{path}") == HTPASSWD
    assert read_basic_auth_conf(f"data:;base64,{encoded}") == HTPASSWD
    assert read_basic_auth_conf(encoded) == HTPASSWD
    for bad in ("", "/no/such/file/and not base64!", f"file://{tmp_path}/missing"):
        with pytest.raises(BasicAuthConfigError):
            read_basic_auth_conf(bad)


def test_basic_provider_role_is_the_user() -> None:
    provider = BasicAuthenticationProvider(load_htpasswd(HTPASSWD))
    assert provider.authenticate(b"alice:alice-pw", PEER).role == "alice"
    assert provider.authenticate(b"bob:secret", PEER).role == "bob"
    state = provider.authenticate(b"carol:secret", PEER)
    assert (state.role, state.auth_method, state.expires_at_s) == ("carol", "basic", None)
    for bad in (b"alice:wrong", b"nobody:x", b"alice", b"a:b:c", b"\xff\xfe", b""):
        with pytest.raises(AuthenticationError):
            provider.authenticate(bad, PEER)


# -- TLS ---------------------------------------------------------------------------------
CERT = {
    "subject": ((("countryName", "US"),), (("commonName", "client-1"),),
                (("commonName", "second"),)),
    "issuer": ((("commonName", "ca"),),),
}


def test_tls_role_is_the_first_common_name() -> None:
    assert common_name(CERT) == "client-1"
    state = TlsAuthenticationProvider().authenticate(b"", Peer("h:1", CERT))
    assert (state.role, state.auth_method) == ("client-1", "tls")


@pytest.mark.parametrize(
    "cert", [None, {}, {"subject": ((("organizationName", "x"),),)}, {"subject": 5},
             {"subject": (("not-a-pair",),)}],
)
def test_tls_without_a_common_name_fails(cert: Any) -> None:
    with pytest.raises(AuthenticationError):
        TlsAuthenticationProvider().authenticate(b"", Peer("h:1", cert))


# -- token (fake validator) ----------------------------------------------------------------
def fake_validator(token: str) -> AuthenticatedToken:
    if token == "good":
        return AuthenticatedToken("svc", 1_000_000)
    raise AuthenticationError("bad token")


def test_token_provider_calls_the_validator_with_the_bare_token() -> None:
    provider = TokenAuthenticationProvider(fake_validator)
    state = provider.authenticate(b"good", PEER)
    assert (state.role, state.auth_method, state.expires_at_s) == ("svc", "token", 1000.0)
    assert provider.authenticate(b"Bearer good", PEER).role == "svc"
    assert state.is_expired(1000.0) and not state.is_expired(999.0)
    for bad in (b"", b"  ", b"Bearer ", b"\xff", b"other"):
        with pytest.raises(AuthenticationError):
            provider.authenticate(bad, PEER)


def test_token_provider_is_registered_and_needs_a_key() -> None:
    cfg = config(authenticationEnabled=True, authenticationProviders=TOKEN)
    with pytest.raises(AuthenticationConfigError, match="tokenSecretKey or tokenPublicKey"):
        AuthenticationService.from_config(cfg)
    service = AuthenticationService.from_config(cfg, token_validator=lambda c: fake_validator)
    assert service is not None
    assert service.authenticate("token", b"good", PEER).role == "svc"


# -- the service ---------------------------------------------------------------------------
def test_pulsar_class_names_map_to_providers() -> None:
    assert {BASIC, TLS, TOKEN} == set(PROVIDER_CLASSES)


def test_disabled_authentication_builds_no_service() -> None:
    assert AuthenticationService.from_config(config()) is None


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"authenticationProviders": "com.example.Mine"}, "unknown authentication provider"),
        ({"authenticationProviders": BASIC}, "basicAuthConf is empty"),
        ({"authenticationProviders": BASIC, "basicAuthConf": "bm8tY29sb24taGVyZQo="},
         "not 'user:hash'"),
        ({}, "needs authenticationProviders or an anonymousUserRole"),
    ],
)
def test_bad_configuration_stops_start_up(values: dict[str, str], match: str) -> None:
    with pytest.raises(AuthenticationConfigError, match=match):
        AuthenticationService.from_config(config(authenticationEnabled=True, **values))


def basic_service(anonymous: str = "") -> AuthenticationService:
    service = AuthenticationService.from_config(
        config(
            authenticationEnabled=True,
            authenticationProviders=f"{BASIC},{TLS}",
            basicAuthConf=base64.b64encode(HTPASSWD).decode(),
            anonymousUserRole=anonymous,
        ),
        CollectorRegistry(),
    )
    assert service is not None
    return service


def test_binary_protocol_rules() -> None:
    service = basic_service()
    assert service.authenticate("basic", b"alice:alice-pw", PEER).role == "alice"
    with pytest.raises(AuthenticationError):
        service.authenticate("basic", b"alice:nope", PEER)
    with pytest.raises(AuthenticationError):  # no provider, no anonymous role
        service.authenticate("none", b"", PEER)
    with pytest.raises(AuthenticationError):
        service.authenticate("basic", b"alice:" + b"x" * 100_000, PEER)
    anonymous = basic_service(anonymous="guest")
    assert anonymous.authenticate("none", b"", PEER).role == "guest"
    assert anonymous.authenticate("kerberos", b"x", PEER).role == "guest"
    with pytest.raises(AuthenticationError):  # a provider's refusal is final
        anonymous.authenticate("basic", b"alice:nope", PEER)


def basic_header(user: str, password: str, scheme: str = "Basic") -> dict[str, str]:
    return {"Authorization": f"{scheme} " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_http_rules() -> None:
    service = basic_service()
    assert service.authenticate_http(basic_header("bob", "secret"), PEER).role == "bob"
    assert service.authenticate_http(basic_header("bob", "secret", "bASIC"), PEER).role == "bob"
    assert service.authenticate_http({}, Peer("h:1", CERT)).role == "client-1"
    for headers in ({}, basic_header("bob", "wrong"), {"Authorization": "Basic !!"},
                    {"Authorization": "Bearer abc"}):
        with pytest.raises(AuthenticationError):
            service.authenticate_http(headers, PEER)
    chosen = {**basic_header("bob", "secret"), "X-Pulsar-Auth-Method-Name": "tls"}
    with pytest.raises(AuthenticationError):  # the named provider alone decides
        service.authenticate_http(chosen, PEER)
    with pytest.raises(AuthenticationError):
        service.authenticate_http({"X-Pulsar-Auth-Method-Name": "nope"}, PEER)
    anonymous = basic_service(anonymous="guest")
    assert anonymous.authenticate_http(basic_header("bob", "wrong"), PEER).role == "guest"
    assert anonymous.authenticate_http({}, PEER).role == "guest"


def test_outcomes_are_counted() -> None:
    registry = CollectorRegistry()
    service = AuthenticationService.from_config(
        config(authenticationEnabled=True, authenticationProviders=BASIC,
               basicAuthConf=base64.b64encode(HTPASSWD).decode()),
        registry,
    )
    assert service is not None
    service.authenticate("basic", b"bob:secret", PEER)
    for data in (b"bob:wrong", b"garbage"):
        with pytest.raises(AuthenticationError):
            service.authenticate("basic", data, PEER)
    labels = {"provider_name": "AuthenticationProviderBasic", "auth_method": "basic"}
    value = registry.get_sample_value
    assert value("pulsar_authentication_success_total", labels) == 1
    assert value("pulsar_authentication_failures_total",
                 {**labels, "reason": "WrongCredentials"}) == 1
    assert value("pulsar_authentication_failures_total",
                 {**labels, "reason": "MalformedCredentials"}) == 1
