"""TLS settings without a broker process: the broker.conf keys, the server context
and its reload, the client's options and URLs, the client certificate's role."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from quasar.auth.tls import common_name as peer_common_name
from quasar.client.config import admin_url_for, is_tls_url, parse_service_url
from quasar.client.exceptions import InvalidConfiguration
from quasar.client.tls import ClientTlsOptions
from quasar.config import ServiceConfiguration, TlsConfig
from quasar.server.tls import (
    ServerTls,
    TlsConfigurationError,
    TlsHandshake,
    build_server_context,
)
from quasar.testing.certs import TestCerts, make_test_certs, write_signed_cert


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("certs"), client_role="alice")


def tls_config(certs: TestCerts, **kwargs: object) -> TlsConfig:
    settings: dict[str, object] = {
        "tls_certificate_file_path": str(certs.broker_cert),
        "tls_key_file_path": str(certs.broker_key),
        "tls_trust_certs_file_path": str(certs.ca_cert),
        **kwargs,
    }
    return TlsConfig(**settings)  # type: ignore[arg-type]


def load(**overrides: object) -> ServiceConfiguration:
    return ServiceConfiguration.load(env={}, overrides=overrides)


# ------------------------------------------------------------------ broker.conf keys


def test_tls_keys_from_a_broker_conf(tmp_path: Path, certs: TestCerts) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerServicePort=\n"
        "brokerServicePortTls=6651\n"
        "webServicePortTls=8443\n"
        f"tlsCertificateFilePath={certs.broker_cert}\n"
        f"tlsKeyFilePath={certs.broker_key}\n"
        "tlsRequireTrustedClientCertOnConnect=true\n"
        "tlsProtocols=TLSv1.3,TLSv1.2\n"
        "tlsCertRefreshCheckDurationSec=0\n"
    )
    config = ServiceConfiguration.load(config_file=conf, env={})
    assert config.broker.broker_service_port is None
    assert config.broker.broker_service_url is None
    assert config.broker.broker_service_url_tls == "pulsar+ssl://127.0.0.1:6651"
    assert config.broker.web_service_url == "http://127.0.0.1:8080"
    assert config.broker.web_service_url_tls == "https://127.0.0.1:8443"
    assert config.tls.tls_require_trusted_client_cert_on_connect is True
    assert config.tls.tls_protocols == ("TLSv1.3", "TLSv1.2")
    assert config.tls.tls_cert_refresh_check_duration_sec == 0
    # The effective configuration loads again as it was.
    again = tmp_path / "again.conf"
    again.write_text(config.to_properties())
    assert ServiceConfiguration.load(config_file=again, env={}) == config


def test_an_empty_port_from_the_environment_turns_the_listener_off() -> None:
    config = ServiceConfiguration.load(env={"QUASAR_webServicePort": ""})
    assert config.broker.web_service_port is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"brokerServicePortTls": 6651}, "tlsCertificateFilePath and tlsKeyFilePath"),
        ({"webServicePortTls": 8443}, "webServicePortTls set"),
        (
            {"brokerServicePort": ""},
            "brokerServicePort and brokerServicePortTls are both empty",
        ),
        ({"tlsProtocols": "TLSv1.3,SSLv3"}, "invalid value for tlsProtocols"),
        ({"tlsCertRefreshCheckDurationSec": -1}, "tlsCertRefreshCheckDurationSec"),
        ({"brokerServicePortTls": 70000}, "brokerServicePortTls"),
    ],
)
def test_bad_tls_settings_are_refused_at_load(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load(**overrides)


# ------------------------------------------------------------------ the server context


def test_the_client_certificate_rules(certs: TestCerts) -> None:
    assert build_server_context(tls_config(certs)).verify_mode == ssl.CERT_OPTIONAL
    required = tls_config(certs, tls_require_trusted_client_cert_on_connect=True)
    assert build_server_context(required).verify_mode == ssl.CERT_REQUIRED
    insecure = tls_config(certs, tls_allow_insecure_connection=True)
    assert build_server_context(insecure).verify_mode == ssl.CERT_NONE
    ranged = build_server_context(tls_config(certs, tls_protocols=("TLSv1.3", "TLSv1.2")))
    assert ranged.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ranged.maximum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tls_certificate_file_path": "/nonexistent.pem"}, "cannot be read"),
        ({"tls_trust_certs_file_path": "/nonexistent.pem"}, "tlsTrustCertsFilePath"),
        ({"tls_ciphers": ("NO-SUCH-CIPHER",)}, "tlsCiphers"),
    ],
)
def test_unusable_tls_settings_name_their_key(
    certs: TestCerts, change: dict[str, object], message: str
) -> None:
    with pytest.raises(TlsConfigurationError, match=message):
        build_server_context(tls_config(certs, **change))


def test_a_key_that_does_not_match_the_certificate_is_refused(certs: TestCerts) -> None:
    mismatched = tls_config(certs, tls_key_file_path=str(certs.client_key))
    with pytest.raises(TlsConfigurationError, match="not a PEM certificate chain"):
        build_server_context(mismatched)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _new_broker_cert(certs: TestCerts, directory: Path) -> tuple[Path, Path]:
    ca = (
        x509.load_pem_x509_certificate(certs.ca_cert.read_bytes()),
        load_pem_private_key(certs.ca_key.read_bytes(), password=None),
    )
    directory.mkdir(exist_ok=True)
    return write_signed_cert(directory, "broker", "localhost", ca, server=True)  # type: ignore[arg-type]


def test_changed_files_are_reloaded_after_the_check_interval(
    tmp_path: Path, certs: TestCerts
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certs.broker_cert.read_bytes())
    key.write_bytes(certs.broker_key.read_bytes())
    clock = FakeClock()
    tls = ServerTls(
        tls_config(
            certs,
            tls_certificate_file_path=str(cert),
            tls_key_file_path=str(key),
            tls_cert_refresh_check_duration_sec=300,
        ),
        clock=clock,
    )
    context = tls.context
    new_cert, new_key = _new_broker_cert(certs, tmp_path / "new")
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    tls.on_new_connection()  # within the interval: not looked at
    assert tls.reloads == 0
    clock.now = 300.0
    tls.on_new_connection()
    assert tls.reloads == 1
    assert tls.context is context  # reloaded in place: the HTTPS site shares it
    tls.on_new_connection()
    assert tls.reloads == 1  # unchanged files are not loaded again


def test_a_broken_replacement_keeps_the_previous_files(
    tmp_path: Path, certs: TestCerts, caplog: pytest.LogCaptureFixture
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certs.broker_cert.read_bytes())
    key.write_bytes(certs.broker_key.read_bytes())
    tls = ServerTls(
        tls_config(
            certs,
            tls_certificate_file_path=str(cert),
            tls_key_file_path=str(key),
            tls_cert_refresh_check_duration_sec=0,
        )
    )
    cert.write_text("not a certificate\n")
    tls.on_new_connection()
    assert tls.reloads == 0
    assert "keeping the previous ones" in caplog.text


# ------------------------------------------------------------------ the client


def test_service_urls() -> None:
    assert parse_service_url("pulsar+ssl://broker.example") == [("broker.example", 6651)]
    assert parse_service_url("pulsar+ssl://a:1,b") == [("a", 1), ("b", 6651)]
    assert is_tls_url("pulsar+ssl://a:1") and not is_tls_url("pulsar://a:1")
    assert admin_url_for("pulsar+ssl://broker.example:6651") == "https://broker.example:8443"


def test_client_tls_options_are_checked(certs: TestCerts, tmp_path: Path) -> None:
    with pytest.raises(InvalidConfiguration, match="go together"):
        ClientTlsOptions(certificate_file_path=str(certs.client_cert))
    with pytest.raises(InvalidConfiguration, match="tls_trust_certs_file_path"):
        ClientTlsOptions(trust_certs_file_path=str(tmp_path / "missing.pem")).context()
    with pytest.raises(InvalidConfiguration, match="tls_certificate_file_path"):
        ClientTlsOptions(
            certificate_file_path=str(certs.client_cert),
            private_key_file_path=str(certs.broker_key),
        ).context()
    ctx = ClientTlsOptions(
        trust_certs_file_path=str(certs.ca_cert), validate_hostname=True
    ).context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    insecure = ClientTlsOptions(allow_insecure_connection=True).context()
    assert insecure.verify_mode == ssl.CERT_NONE


def test_use_tls_must_agree_with_the_url(certs: TestCerts) -> None:
    import quasar.client.aio as aio

    with pytest.raises(InvalidConfiguration, match="use_tls"):
        aio.Client("pulsar://127.0.0.1:6650", use_tls=True)
    client = aio.Client(
        "pulsar+ssl://127.0.0.1:6651",
        use_tls=True,
        tls_trust_certs_file_path=str(certs.ca_cert),
    )
    assert client.config.use_tls
    assert client.admin_url == "https://127.0.0.1:8443"
    with pytest.raises(InvalidConfiguration, match="tls_trust_certs_file_path"):
        aio.Client("pulsar+ssl://127.0.0.1:6651", tls_trust_certs_file_path="/missing")


# ------------------------------------------------------------------ the client's role


def test_the_role_of_a_client_certificate_is_its_common_name() -> None:
    decoded = {
        "subject": (
            (("organizationName", "quasar tests"),),
            (("commonName", "alice"),),
            (("commonName", "second"),),
        )
    }
    assert peer_common_name(decoded) == "alice"
    assert peer_common_name({"subject": ((("organizationName", "x"),),)}) is None
    assert peer_common_name(None) is None


# ------------------------------------------------------------------ the handshake layer


class RecordingProtocol(asyncio.Protocol):
    """Stands in for the broker's connection: records what it is handed."""

    def __init__(self) -> None:
        self.made: asyncio.Future[asyncio.BaseTransport] = (
            asyncio.get_running_loop().create_future()
        )
        self.data = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made.set_result(transport)

    def data_received(self, data: bytes) -> None:
        self.data += data


async def test_the_handshake_layer_hands_over_the_verified_client_certificate(
    certs: TestCerts, caplog: pytest.LogCaptureFixture
) -> None:
    tls = ServerTls(tls_config(certs, tls_require_trusted_client_cert_on_connect=True))
    served: list[RecordingProtocol] = []

    def accept() -> TlsHandshake:
        served.append(RecordingProtocol())
        return TlsHandshake(tls, served[-1], "pulsar+ssl")

    server = await asyncio.get_running_loop().create_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client_tls = ClientTlsOptions(
            trust_certs_file_path=str(certs.ca_cert),
            certificate_file_path=str(certs.client_cert),
            private_key_file_path=str(certs.client_key),
        ).context()
        _, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_tls, server_hostname="localhost"
        )
        writer.write(b"hello")
        transport = await asyncio.wait_for(served[0].made, 10)
        assert peer_common_name(transport.get_extra_info("peercert")) == "alice"
        writer.close()
        await writer.wait_closed()

        # Without a client certificate: refused, and logged with the address.
        no_cert = ClientTlsOptions(trust_certs_file_path=str(certs.ca_cert)).context()
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=no_cert, server_hostname="localhost"
        )
        local = "{}:{}".format(*writer.get_extra_info("sockname")[:2])
        try:
            # TLS 1.3: the client learns of the refusal on its first read, as an
            # alert or as the end of the stream.
            answer = await asyncio.wait_for(reader.read(), 10)
        except (ssl.SSLError, ConnectionError):
            answer = b""
        assert answer == b""
        writer.close()
        assert not served[1].made.done()
        assert f"TLS handshake with {local} on the pulsar+ssl port failed" in caplog.text
        failures = tls.handshake_failures.collect()[0].samples
        assert [
            (sample.labels["listener"], sample.value)
            for sample in failures
            if sample.name.endswith("_total")
        ] == [("pulsar+ssl", 1.0)]
    finally:
        server.close()
        await server.wait_closed()
