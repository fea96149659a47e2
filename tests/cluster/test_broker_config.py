"""What ``quasar broker`` refuses to start with (checked before anything opens)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from quasar.config import ServiceConfiguration
from quasar.server.cluster_broker import ClusterConfigurationError, check_cluster_config


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
