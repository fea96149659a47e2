"""The connector's credentials and TLS options, without Spark: parsing, what reaches
the clients and the admin calls, and what never shows in a repr or an error."""

from __future__ import annotations

import json
import pickle
import ssl
from pathlib import Path

import pytest

from pyspark_quasar.options import (
    ClientSecurity,
    ConnectionOptions,
    SinkOptions,
    SourceOptions,
    admin_url_for,
)
from pyspark_quasar.plan import ReadSettings
from pyspark_quasar.security import admin_ssl_context, check_security, client_options
from quasar.client import AuthenticationBasic, AuthenticationToken
from quasar.testing.certs import TestCerts, make_test_certs

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
SECRET = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.c2lnbmF0dXJl"
PASSWORD = "hunter2-very-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("spark-certs"), client_role="spark")


def spark_options(**options: str) -> dict[str, str]:
    """Options as Spark hands them to a data source: keys lower-cased."""
    return {k.lower(): v for k, v in options.items()}


def test_admin_url_follows_the_service_url_scheme() -> None:
    assert admin_url_for("pulsar://h:6650") == "http://h:8080"
    assert admin_url_for("pulsar+ssl://h:6651") == "https://h:8443"
    assert admin_url_for("pulsar+ssl://a:6651,b:6651") == "https://a:8443"
    assert admin_url_for("pulsar+ssl://[::1]:6651") == "https://[::1]:8443"
    conn = ConnectionOptions.parse({"service.url": "pulsar+ssl://broker.example:6651"})
    assert conn.admin_url == "https://broker.example:8443"
    assert conn.service_tls and conn.admin_tls


@pytest.mark.parametrize(
    "key",
    [
        "pulsar.client.operationTimeoutMs",
        "pulsar.client.useKeyStoreTls",
        "pulsar.client.tlsTrustStorePath",
        "pulsar.client.authparam",
    ],
)
def test_unknown_pulsar_client_options_are_refused_by_name(key: str) -> None:
    options = spark_options(**{"service.url": "pulsar://h:6650", "topic": "t", key: "x"})
    with pytest.raises(ValueError, match=key.lower()) as info:
        SourceOptions.parse(options, streaming=False)
    assert "pulsar.client.authPluginClassName" in str(info.value)
    with pytest.raises(ValueError, match=key.lower()):
        SinkOptions.parse(options)


def test_pulsar_admin_options_are_refused() -> None:
    options = spark_options(
        **{"service.url": "pulsar://h:6650", "pulsar.admin.authParams": f"token:{SECRET}"}
    )
    with pytest.raises(ValueError, match="pulsar.admin.authparams") as info:
        SinkOptions.parse(options)
    assert SECRET not in str(info.value)


def test_security_options_are_parsed_from_spark_lower_cased_keys(certs: TestCerts) -> None:
    options = spark_options(
        **{
            "service.url": "pulsar+ssl://localhost:6651",
            "topic": "t",
            "pulsar.client.authPluginClassName": TOKEN_PLUGIN,
            "pulsar.client.authParams": f"token:{SECRET}",
            "pulsar.client.tlsTrustCertsFilePath": str(certs.ca_cert),
            "pulsar.client.tlsAllowInsecureConnection": "false",
            "pulsar.client.tlsHostnameVerificationEnable": "true",
        }
    )
    opts = SourceOptions.parse(options, streaming=False)
    assert opts.conn.security == ClientSecurity(
        auth_plugin=TOKEN_PLUGIN,
        auth_params=f"token:{SECRET}",
        tls_trust_certs_file_path=str(certs.ca_cert),
        tls_hostname_verification_enable=True,
    )
    check_security(opts.conn)
    kwargs = client_options(opts.conn)
    auth = kwargs.pop("authentication")
    assert isinstance(auth, AuthenticationToken) and auth.token() == SECRET
    assert kwargs == {
        "admin_url": "https://localhost:8443",
        "tls_trust_certs_file_path": str(certs.ca_cert),
        "tls_allow_insecure_connection": False,
        "tls_validate_hostname": True,
        "tls_certificate_file_path": None,
        "tls_private_key_file_path": None,
    }
    ctx = admin_ssl_context(opts.conn)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_secrets_stay_out_of_reprs_and_survive_pickling() -> None:
    basic = json.dumps({"userId": "spark", "password": PASSWORD})
    options = {
        "service.url": "pulsar://h:6650",
        "topic": "t",
        "pulsar.client.authPluginClassName": "basic",
        "pulsar.client.authParams": basic,
    }
    source = SourceOptions.parse(options, streaming=True)
    sink = SinkOptions.parse(options)
    settings = ReadSettings.of(source)
    for obj in (source, sink, settings, source.conn, source.conn.security, settings.conn):
        assert PASSWORD not in repr(obj)
        assert PASSWORD not in str(obj)
    # Executors get the settings pickled and build the credentials themselves.
    shipped = pickle.loads(pickle.dumps(settings))
    auth = client_options(shipped.conn)["authentication"]
    assert isinstance(auth, AuthenticationBasic)
    assert auth.auth_data() == f"spark:{PASSWORD}".encode()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pulsar.client.authParams": f"token:{SECRET}"}, "needs pulsar.client.authPlugin"),
        ({"pulsar.client.tlsTrustCertsFilePath": "/ca.pem"}, "nothing would use them"),
        ({"pulsar.client.tlsAllowInsecureConnection": "maybe"}, "true or false"),
        ({"service.url": "http://h:8080"}, "pulsar://host:port or pulsar\\+ssl"),
        ({"admin.url": "h:8080"}, "http:// or https://"),
    ],
)
def test_inconsistent_options_fail_when_parsed(options: dict[str, str], message: str) -> None:
    given = {"service.url": "pulsar://h:6650", **options}
    with pytest.raises(ValueError, match=message) as info:
        SinkOptions.parse(given)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("plugin", "params", "message"),
    [
        ("org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2", "{}", "unknown auth plugin"),
        (TOKEN_PLUGIN, "", "no token"),
        ("basic", f"userId:spark,password:{PASSWORD}", "not valid JSON"),
        (TLS_PLUGIN, "tlsCertFile:/c.pem", "tlsKeyFile is missing"),
    ],
)
def test_credentials_are_checked_when_the_query_is_defined(
    plugin: str, params: str, message: str
) -> None:
    conn = ConnectionOptions.parse(
        {
            "service.url": "pulsar://h:6650",
            "pulsar.client.authPluginClassName": plugin,
            "pulsar.client.authParams": params,
        }
    )
    with pytest.raises(ValueError, match=message) as info:
        check_security(conn)
    assert "pulsar.client.authPluginClassName" in str(info.value)
    assert PASSWORD not in str(info.value)


def test_tls_settings_are_checked_when_the_query_is_defined(
    certs: TestCerts, tmp_path: Path
) -> None:
    tls_auth = {
        "pulsar.client.authPluginClassName": TLS_PLUGIN,
        "pulsar.client.authParams": f"tlsCertFile:{certs.client_cert},tlsKeyFile:{certs.client_key}",
    }
    with pytest.raises(ValueError, match="needs a pulsar\\+ssl:// service.url"):
        check_security(ConnectionOptions.parse({"service.url": "pulsar://h:6650", **tls_auth}))
    conn = ConnectionOptions.parse(
        {
            "service.url": "pulsar+ssl://localhost:6651",
            "pulsar.client.tlsTrustCertsFilePath": str(certs.ca_cert),
            **tls_auth,
        }
    )
    check_security(conn)
    kwargs = client_options(conn)
    assert kwargs["tls_certificate_file_path"] == str(certs.client_cert)
    assert kwargs["tls_private_key_file_path"] == str(certs.client_key)
    missing = ConnectionOptions.parse(
        {
            "service.url": "pulsar+ssl://localhost:6651",
            "pulsar.client.tlsTrustCertsFilePath": str(tmp_path / "no-such-ca.pem"),
        }
    )
    with pytest.raises(ValueError, match="pulsar.client.tls"):
        check_security(missing)
    twice = ConnectionOptions.parse(
        {
            "service.url": "pulsar+ssl://localhost:6651",
            "pulsar.client.tlsCertificateFilePath": str(certs.broker_cert),
            "pulsar.client.tlsKeyFilePath": str(certs.broker_key),
            **tls_auth,
        }
    )
    with pytest.raises(ValueError, match="give the client certificate once"):
        check_security(twice)
