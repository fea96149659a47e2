"""``authentication_from_plugin``: Pulsar's auth plugin names and ``authParams``
strings, as ``client.conf``, ``pulsar-admin --auth-plugin/--auth-params`` and the
Spark connector's ``pulsar.client.*`` options carry them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from quasar.client import (
    AuthenticationBasic,
    AuthenticationTLS,
    AuthenticationToken,
    aio,
)
from quasar.client.authentication import authentication_from_plugin
from quasar.client.exceptions import (
    ErrorGettingAuthenticationData,
    InvalidConfiguration,
)
from quasar.testing.certs import make_test_certs

JAVA = "org.apache.pulsar.client.impl.auth."
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcHAifQ.c2lnbmF0dXJl"
SECRET = "s3cret-Passw0rd"


@pytest.mark.parametrize("plugin", [JAVA + "AuthenticationToken", "token", "TOKEN"])
@pytest.mark.parametrize("params", [f"token:{JWT}", JWT, f" {JWT}\n", f"data:{JWT}"])
def test_token_params(plugin: str, params: str) -> None:
    auth = authentication_from_plugin(plugin, params)
    assert isinstance(auth, AuthenticationToken)
    assert auth.auth_data() == JWT.encode()
    assert auth.http_headers() == {"Authorization": f"Bearer {JWT}"}


def test_token_file_is_read_on_each_use(tmp_path: Path) -> None:
    path = tmp_path / "my token"
    path.write_text(JWT + "\n")
    for url in (path.as_uri(), "file:" + str(path).replace(" ", "%20")):
        auth = authentication_from_plugin("token", url)
        assert auth.auth_data() == JWT.encode()
    path.write_text("rotated.token.value")
    assert auth.auth_data() == b"rotated.token.value"
    path.unlink()
    with pytest.raises(ErrorGettingAuthenticationData, match="token file"):
        auth.auth_data()


def test_token_from_an_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = authentication_from_plugin("token", "env:QUASAR_TEST_TOKEN")
    monkeypatch.setenv("QUASAR_TEST_TOKEN", JWT)
    assert auth.auth_data() == JWT.encode()
    monkeypatch.delenv("QUASAR_TEST_TOKEN")
    with pytest.raises(ErrorGettingAuthenticationData, match="QUASAR_TEST_TOKEN"):
        auth.auth_data()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("", "no token"),
        ("token:", "no token"),
        ("tokne: " + SECRET, "white space"),
        ('{"token": "' + SECRET + '" }', "white space"),
        ("file://otherhost/" + SECRET, "must name a local file"),
        ("env:", "names no variable"),
    ],
)
def test_malformed_token_params(params: str, message: str) -> None:
    with pytest.raises(InvalidConfiguration, match=message) as info:
        authentication_from_plugin("token", params)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    "params",
    [
        json.dumps({"userId": "alice", "password": "pw:x"}),
        json.dumps({"username": "alice", "password": "pw:x"}),
    ],
)
def test_basic_params(params: str) -> None:
    auth = authentication_from_plugin(JAVA + "AuthenticationBasic", params)
    assert isinstance(auth, AuthenticationBasic)
    assert (auth.auth_method_name, auth.auth_data()) == ("basic", b"alice:pw:x")
    assert auth.http_headers() == {
        "Authorization": "Basic " + base64.b64encode(b"alice:pw:x").decode()
    }
    custom = authentication_from_plugin(
        "basic", json.dumps({"username": "a", "password": "p", "method": "custom"})
    )
    assert custom.auth_method_name == "custom"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (f"userId:alice,password:{SECRET}", "not valid JSON"),
        (json.dumps(["alice", SECRET]), "JSON object"),
        (json.dumps({"userId": "alice"}), "password must be a string"),
        (json.dumps({"password": SECRET}), "userId must be"),
        (json.dumps({"userId": "a", "username": "a", "password": SECRET}), "not both"),
        (json.dumps({"userId": "a", "password": SECRET, "pwd": SECRET}), "unknown keys"),
        (json.dumps({"userId": "a:b", "password": SECRET}), "cannot contain ':'"),
    ],
)
def test_malformed_basic_params(params: str, message: str) -> None:
    with pytest.raises(InvalidConfiguration, match=message) as info:
        authentication_from_plugin("basic", params)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    "params",
    [
        "tlsCertFile:/p/cert.pem,tlsKeyFile:/p/key.pem",
        " tlsKeyFile: /p/key.pem , tlsCertFile:/p/cert.pem ",
        json.dumps({"tlsCertFile": "/p/cert.pem", "tlsKeyFile": "/p/key.pem"}),
    ],
)
def test_tls_params(params: str) -> None:
    auth = authentication_from_plugin(JAVA + "AuthenticationTls", params)
    assert isinstance(auth, AuthenticationTLS)
    assert (auth.certificate_path, auth.private_key_path) == ("/p/cert.pem", "/p/key.pem")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ("tlsCertFile:/p/cert.pem", "tlsKeyFile is missing"),
        ("tlsCertFile:/c,tlsKeyFile:", "tlsKeyFile is missing"),
        ("/p/cert.pem,/p/key.pem", "not key:value"),
        ("tlsCertFile:/c,tlsKeyFile:/k,tlsTrustCerts:/t", "unknown keys"),
        ("{not json", "not valid JSON"),
    ],
)
def test_malformed_tls_params(params: str, message: str) -> None:
    with pytest.raises(InvalidConfiguration, match=message):
        authentication_from_plugin("tls", params)


@pytest.mark.parametrize(
    "plugin",
    [
        JAVA + "AuthenticationOAuth2",
        JAVA + "AuthenticationKeyStoreTls",
        "org.apache.pulsar.client.impl.auth.AuthenticationTokens",
        "",
    ],
)
def test_unknown_plugins_are_refused_by_name(plugin: str) -> None:
    with pytest.raises(InvalidConfiguration, match="unknown auth plugin") as info:
        authentication_from_plugin(plugin, f"token:{SECRET}")
    assert repr(plugin) in str(info.value)
    assert SECRET not in str(info.value)


def test_tls_authentication_is_the_client_certificate(tmp_path: Path) -> None:
    """The client presents AuthenticationTLS's certificate in the handshake; it needs
    a TLS URL, and it is given once."""
    certs = make_test_certs(tmp_path, client_role="alice")
    auth = AuthenticationTLS(str(certs.client_cert), str(certs.client_key))
    client = aio.Client(
        "pulsar+ssl://localhost:6651",
        authentication=auth,
        tls_trust_certs_file_path=str(certs.ca_cert),
    )
    assert client.config.tls.certificate_file_path == str(certs.client_cert)
    assert client.config.tls.private_key_file_path == str(certs.client_key)
    with pytest.raises(InvalidConfiguration, match="pulsar\\+ssl://"):
        aio.Client("pulsar://localhost:6650", authentication=auth)
    with pytest.raises(InvalidConfiguration, match="give the client certificate once"):
        aio.Client(
            "pulsar+ssl://localhost:6651",
            authentication=auth,
            tls_certificate_file_path=str(certs.broker_cert),
            tls_private_key_file_path=str(certs.broker_key),
        )
