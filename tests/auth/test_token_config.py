"""The token-authentication settings: keys, defaults, and secrets kept out of output."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from quasar.cli.main import main
from quasar.config import MASKED_SECRET, ServiceConfiguration, TokenAuthenticationConfig

SECRET_B64 = base64.b64encode(bytes(range(32))).decode()


def load(**overrides: object) -> ServiceConfiguration:
    return ServiceConfiguration.load(env={}, overrides=overrides)


def test_defaults_are_pulsars() -> None:
    section = load().token_authentication
    assert section == TokenAuthenticationConfig()
    assert (section.token_secret_key, section.token_public_key) == ("", "")
    assert section.token_public_alg == "RS256"
    assert section.token_auth_claim == "sub"
    assert (section.token_audience_claim, section.token_audience) == ("", "")


def test_the_keys_are_read_from_every_source(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("tokenPublicAlg=ES256\ntokenAuthClaim=role\n")
    config = ServiceConfiguration.load(
        config_file=conf,
        env={"QUASAR_tokenAudienceClaim": "aud", "QUASAR_TOKEN_AUDIENCE": "b1"},
        overrides={"tokenSecretKey": SECRET_B64},
    )
    section = config.token_authentication
    assert section.token_public_alg == "ES256"
    assert section.token_auth_claim == "role"
    assert (section.token_audience_claim, section.token_audience) == ("aud", "b1")
    assert section.token_secret_key == SECRET_B64


def test_a_bad_public_alg_is_refused() -> None:
    with pytest.raises(ValueError, match="tokenPublicAlg"):
        load(tokenPublicAlg="HS256")


@pytest.mark.parametrize(
    "value", [SECRET_B64, "data:;base64," + SECRET_B64, "/etc/quasar/secret.key"]
)
def test_the_secret_key_is_masked_in_properties_and_repr(value: str) -> None:
    config = load(tokenSecretKey=value)
    text = config.to_properties()
    assert f"tokenSecretKey={MASKED_SECRET}\n" in text
    assert value not in text
    assert value not in repr(config)
    assert value not in repr(config.token_authentication)
    assert value not in str(config)


def test_a_file_url_names_where_the_secret_is_and_is_shown() -> None:
    text = load(tokenSecretKey="file:///etc/quasar/secret.key").to_properties()
    assert "tokenSecretKey=file:///etc/quasar/secret.key\n" in text


def test_an_unset_secret_key_round_trips(tmp_path: Path) -> None:
    config = load()
    assert "tokenSecretKey=\n" in config.to_properties()
    conf = tmp_path / "broker.conf"
    conf.write_text(config.to_properties())
    assert ServiceConfiguration.load(config_file=conf, env={}) == config


def test_quasar_config_never_prints_the_secret(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with caplog.at_level(logging.DEBUG):
            status = main(["config", "--set", f"tokenSecretKey={SECRET_B64}"])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    out, err = capsys.readouterr()
    assert status == 0
    assert f"tokenSecretKey={MASKED_SECRET}" in out
    assert SECRET_B64 not in out + err + caplog.text
