"""What ``quasar broker`` refuses to start with (checked before anything opens)."""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from quasar.config import ServiceConfiguration
from quasar.server.cluster_broker import ClusterConfigurationError, check_cluster_config
from quasar.server.peer_tls import broker_client_tls_context
from quasar.server.tls import build_server_context
from quasar.testing.certs import TestCerts, make_test_certs


def _config(**overrides: str) -> ServiceConfiguration:
    return ServiceConfiguration.load(env={}, overrides=overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"transactionCoordinatorEnabled": "false"}, "metadataStoreUrl"),
        (
            {"metadataStoreUrl": "zk:127.0.0.1:2181", "brokerServicePort": "",
             "brokerServicePortTls": "6651", "tlsCertificateFilePath": "/tls/broker.pem",
             "tlsKeyFilePath": "/tls/broker.key"},
            "brokerServicePort",
        ),
        (
            {
                "metadataStoreUrl": "zk:127.0.0.1:2181",
                "authenticationEnabled": "true",
                "authenticationProviders":
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            },
            "brokerClientAuthenticationPlugin",
        ),
        (
            {
                "metadataStoreUrl": "zk:127.0.0.1:2181",
                "transactionCoordinatorEnabled": "false",
                "webServicePort": "",
            },
            "webServicePort",
        ),
    ],
)
def test_a_member_needs_zookeeper_and_what_its_coordinators_need(
    overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(ClusterConfigurationError, match=message):
        check_cluster_config(_config(**overrides))


def test_quasar_broker_without_zookeeper_exits_with_a_usage_error(tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "quasar.cli.main", "broker", "--data-dir", str(tmp_path),
         "--set", "transactionCoordinatorEnabled=false"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "metadataStoreUrl" in done.stderr


def test_a_member_of_an_uninitialized_cluster_does_not_start(zk_url: str, tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "quasar.cli.main", "broker", "--data-dir", str(tmp_path),
         "--port", "0", "--http-port", "0",
         "--set", "transactionCoordinatorEnabled=false",
         "--set", f"metadataStoreUrl={zk_url}", "--set", "clusterName=nowhere"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert "initialize-cluster-metadata" in done.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("certs"), client_role="member")


def _tls_member(certs: TestCerts, **overrides: str) -> dict[str, str]:
    """A TLS-only member with transactions whose broker client uses TLS."""
    return {
        "metadataStoreUrl": "zk:127.0.0.1:2181",
        "brokerServicePort": "",
        "webServicePort": "",
        "brokerServicePortTls": "6651",
        "webServicePortTls": "8443",
        "tlsCertificateFilePath": str(certs.broker_cert),
        "tlsKeyFilePath": str(certs.broker_key),
        "brokerClientTlsEnabled": "true",
        "brokerClientTrustCertsFilePath": str(certs.ca_cert),
        **overrides,
    }


def test_a_tls_only_member_with_a_tls_broker_client_may_run_transactions(
    certs: TestCerts,
) -> None:
    check_cluster_config(_config(**_tls_member(certs)))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"brokerServicePortTls": "", "brokerServicePort": "6650"}, "needs brokerServicePortTls:"),
        ({"webServicePortTls": "", "webServicePort": "8080"}, "needs webServicePortTls:"),
        ({"brokerClientTrustCertsFilePath": ""}, "needs brokerClientTrustCertsFilePath"),
        (
            {"brokerClientTrustCertsFilePath": "/nonexistent/ca.pem"},
            "brokerClientTrustCertsFilePath=/nonexistent/ca.pem: not readable",
        ),
        ({"brokerClientCertificateFilePath": "/tls/member.pem"}, "go together"),
        ({"brokerClientKeyFilePath": "/tls/member.key"}, "go together"),
        (
            {"brokerClientCertificateFilePath": "/nonexistent/member.pem",
             "brokerClientKeyFilePath": "/nonexistent/member.key"},
            "brokerClientCertificateFilePath=/nonexistent/member.pem: the file cannot be read",
        ),
        # Without brokerClientTlsEnabled members use the plaintext port, never TLS.
        ({"brokerClientTlsEnabled": "false"}, "brokerServicePort: .*brokerClientTlsEnabled"),
    ],
)
def test_what_a_tls_broker_client_needs(
    certs: TestCerts, overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(ClusterConfigurationError, match=message):
        check_cluster_config(_config(**_tls_member(certs, **overrides)))


def test_a_trust_file_that_is_not_pem_is_refused(certs: TestCerts, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ClusterConfigurationError, match="not readable PEM"):
        check_cluster_config(
            _config(**_tls_member(certs, brokerClientTrustCertsFilePath=str(junk)))
        )


def test_the_key_store_form_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="brokerClientTlsEnabledWithKeyStore.*PEM files only"):
        _config(brokerClientTlsEnabledWithKeyStore="true")


def test_the_broker_client_context_follows_pulsars_keys(certs: TestCerts) -> None:
    assert broker_client_tls_context(_config().tls) is None
    ctx = broker_client_tls_context(_config(**_tls_member(certs)).tls)
    assert ctx is not None
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    checked = broker_client_tls_context(
        _config(**_tls_member(certs, tlsHostnameVerificationEnabled="true")).tls
    )
    assert checked is not None and checked.check_hostname
    # As Pulsar's broker client: tlsAllowInsecureConnection accepts any certificate,
    # and then needs no trust file.
    insecure = broker_client_tls_context(
        _config(**_tls_member(
            certs, tlsAllowInsecureConnection="true", brokerClientTrustCertsFilePath=""
        )).tls
    )
    assert insecure is not None and insecure.verify_mode == ssl.CERT_NONE


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> str:
    """The TLS version two contexts agree on, over memory buffers (no sockets)."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {id(c): False, id(s): False}
    for _ in range(10):  # a handshake takes a few round trips; bounded
        for end in (c, s):
            if not done[id(end)]:
                try:
                    end.do_handshake()
                    done[id(end)] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return str(c.version())
    raise AssertionError("handshake did not finish")


def test_broker_client_tls_protocols_and_ciphers_restrict_the_member(
    certs: TestCerts,
) -> None:
    member = _tls_member(
        certs,
        brokerClientTlsProtocols="TLSv1.2",
        brokerClientTlsCiphers="ECDHE-RSA-AES128-GCM-SHA256",
        tlsTrustCertsFilePath=str(certs.ca_cert),
    )
    ctx = broker_client_tls_context(_config(**member).tls)
    assert ctx is not None
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-RSA-AES128-GCM-SHA256"]
    # The other member's listener agrees on TLS 1.2 when it allows it, and the
    # handshake fails when it only allows TLS 1.3.
    assert _handshake(ctx, build_server_context(_config(**member).tls)) == "TLSv1.2"
    tls13_only = build_server_context(_config(**member, tlsProtocols="TLSv1.3").tls)
    with pytest.raises(ssl.SSLError):
        _handshake(ctx, tls13_only)
    unrestricted = broker_client_tls_context(_config(**_tls_member(certs)).tls)
    assert unrestricted is not None
    assert _handshake(unrestricted, tls13_only) == "TLSv1.3"


def test_unusable_broker_client_tls_ciphers_and_protocols_are_refused(
    certs: TestCerts,
) -> None:
    with pytest.raises(ClusterConfigurationError, match="brokerClientTlsCiphers=NO-SUCH"):
        check_cluster_config(
            _config(**_tls_member(certs, brokerClientTlsCiphers="NO-SUCH"))
        )
    with pytest.raises(ValueError, match="brokerClientTlsProtocols"):
        _config(brokerClientTlsProtocols="SSLv3")


TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"


def test_the_tls_plugin_presents_its_certificate_to_the_other_members(
    certs: TestCerts,
) -> None:
    for params in (
        f"tlsCertFile:{certs.client_cert},tlsKeyFile:{certs.client_key}",
        f'{{"tlsCertFile": "{certs.client_cert}", "tlsKeyFile": "{certs.client_key}"}}',
    ):
        config = _config(**_tls_member(
            certs, brokerClientAuthenticationPlugin=TLS_PLUGIN,
            brokerClientAuthenticationParameters=params,
        ))
        check_cluster_config(config)
        assert broker_client_tls_context(config.tls, config.authentication) is not None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"brokerClientTlsEnabled": "false", "brokerServicePort": "6650"},
         "AuthenticationTls needs brokerClientTlsEnabled=true"),
        ({"brokerClientAuthenticationParameters": "tlsCertFile:/tls/member.pem"},
         "tlsCertFile:<path>,tlsKeyFile:<path>"),
        ({"brokerClientAuthenticationParameters":
          "tlsCertFile:/nonexistent/m.pem,tlsKeyFile:/nonexistent/m.key"},
         "tlsCertFile=/nonexistent/m.pem: the file cannot be read"),
    ],
)
def test_what_the_tls_plugin_needs(
    certs: TestCerts, overrides: dict[str, str], message: str
) -> None:
    settings = {
        "brokerClientAuthenticationPlugin": TLS_PLUGIN,
        "brokerClientAuthenticationParameters": "tlsCertFile:/a.pem,tlsKeyFile:/a.key",
        **overrides,
    }
    with pytest.raises(ClusterConfigurationError, match=message):
        check_cluster_config(_config(**_tls_member(certs, **settings)))
