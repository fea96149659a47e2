"""``quasar admin`` with pulsar-admin's credential and TLS flags, against a real
broker process that serves the admin API over HTTPS only and authenticates with
tokens and TLS client certificates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from quasar.auth.token_keys import create_secret_key
from quasar.auth.tokens import create_token
from quasar.cli.main import main
from quasar.testing.certs import TestCerts, make_test_certs
from quasar.testing.process import BrokerProcess, free_port
from quasar.testing.secured import TOKEN_PROVIDER, token_settings

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

TLS_PROVIDER = "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
TLS_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationTls"
SECRET = create_secret_key()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCerts:
    return make_test_certs(tmp_path_factory.mktemp("cli-certs"), client_role="operator")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: TestCerts) -> Iterator[BrokerProcess]:
    settings = {
        "tlsCertificateFilePath": str(certs.broker_cert),
        "tlsKeyFilePath": str(certs.broker_key),
        "tlsTrustCertsFilePath": str(certs.ca_cert),
        **token_settings(SECRET, providers=f"{TOKEN_PROVIDER},{TLS_PROVIDER}"),
    }
    proc = BrokerProcess(
        tmp_path_factory.mktemp("cli-broker") / "data",
        settings=settings,
        tls_port=free_port(),
        https_port=free_port(),
        plaintext=False,
    ).start()
    yield proc
    assert proc.stop() == 0
    assert "Traceback" not in proc.read_log()


def admin(broker: BrokerProcess, *argv: str) -> int:
    return main(["--log-level", "WARNING", "admin", "--admin-url", broker.https_url, *argv])


def test_token_and_trusted_ca(
    broker: BrokerProcess, certs: TestCerts, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = create_token("operator", SECRET)
    trust = ("--tls-trust-cert-path", str(certs.ca_cert))
    auth = ("--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{token}")
    assert admin(broker, *auth, *trust, "--tls-enable-hostname-verification",
                 "tenants", "list") == 0
    assert "public" in capsys.readouterr().out.split()
    # The token from a file (Pulsar's file: URL), and the short plugin name.
    token_file = tmp_path / "operator.jwt"
    token_file.write_text(token + "\n")
    file_auth = ("--auth-plugin", "token", "--auth-params", token_file.as_uri())
    assert admin(broker, *file_auth, *trust, "topics", "create", "public/default/cli-t") == 0
    assert admin(broker, *file_auth, *trust, "topics", "list", "public/default") == 0
    assert "persistent://public/default/cli-t" in capsys.readouterr().out.split()


def test_tls_client_certificate(
    broker: BrokerProcess, certs: TestCerts, capsys: pytest.CaptureFixture[str]
) -> None:
    params = json.dumps({"tlsCertFile": str(certs.client_cert), "tlsKeyFile": str(certs.client_key)})
    assert admin(
        broker, "--auth-plugin", TLS_PLUGIN, "--auth-params", params,
        "--tls-trust-cert-path", str(certs.ca_cert), "namespaces", "list", "public",
    ) == 0
    assert "public/default" in capsys.readouterr().out.split()


@pytest.mark.parametrize(
    "auth",
    [
        (),
        ("--auth-plugin", TOKEN_PLUGIN, "--auth-params", f"token:{create_token('x', create_secret_key())}"),
    ],
    ids=["no-credentials", "token-signed-with-another-key"],
)
def test_missing_or_bad_credentials_get_401(
    broker: BrokerProcess, certs: TestCerts, auth: tuple[str, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert admin(broker, *auth, "--tls-trust-cert-path", str(certs.ca_cert),
                 "tenants", "list") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: 401 "), err
    if auth:
        assert auth[-1].removeprefix("token:") not in err


def test_an_untrusted_server_certificate_is_refused(
    broker: BrokerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    token = create_token("operator", SECRET)
    auth = ("--auth-plugin", "token", "--auth-params", token)
    # Without --tls-trust-cert-path the system's CAs are used, which never signed the
    # test CA's broker certificate.
    assert admin(broker, *auth, "tenants", "list") == 1
    err = capsys.readouterr().err
    assert "certificate verify failed" in err.lower(), err
    assert token not in err
    # Tests may switch verification off explicitly.
    assert admin(broker, *auth, "--tls-allow-insecure", "tenants", "list") == 0
    assert "public" in capsys.readouterr().out.split()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--auth-params", "token:abc"), "--auth-params needs --auth-plugin"),
        (("--auth-plugin", "oauth2", "--auth-params", "{}"), "unknown auth plugin 'oauth2'"),
        (("--auth-plugin", "basic", "--auth-params", "userId:u,password:hunter2"), "not valid JSON"),
        (("--tls-trust-cert-path", "/no/such/ca.pem"), "not readable PEM CA certificates"),
    ],
)
def test_flag_errors_are_reported_before_any_request(
    broker: BrokerProcess, argv: tuple[str, ...], message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert admin(broker, *argv, "tenants", "list") == 1
    err = capsys.readouterr().err
    assert message in err, err
    assert "hunter2" not in err


def test_tls_flags_with_a_plain_admin_url_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["admin", "--admin-url", "http://127.0.0.1:1", "--tls-allow-insecure", "tenants", "list"]
    assert main(["--log-level", "WARNING", *argv]) == 1
    assert "is not https://" in capsys.readouterr().err
