"""The ``quasar`` command line: parsing, standalone/config/perf, logging setup.

The admin subcommand is exercised against a live test server in
``tests/admin/test_admin_cli.py``.
"""

from __future__ import annotations

import io
import logging
import sys
import types
from pathlib import Path

import pytest

from quasar.cli import logs
from quasar.cli.main import build_parser, main, standalone_config
from quasar.config import ServiceConfiguration

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")


@pytest.fixture
def fake_standalone(monkeypatch: pytest.MonkeyPatch) -> list[ServiceConfiguration]:
    """Replace the server module so ``quasar standalone`` records its config."""
    started: list[ServiceConfiguration] = []
    module = types.ModuleType("quasar.server.standalone")
    module.run = started.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "quasar.server.standalone", module)
    return started


def test_parser_standalone_arguments() -> None:
    args = build_parser().parse_args(
        [
            "standalone",
            "--config",
            "b.conf",
            "--data-dir",
            "/d",
            "--port",
            "7650",
            "--http-port",
            "9080",
            "--advertised-address",
            "h.example",
            "--set",
            "clusterName=c",
            "--set",
            "journalSyncData = false",
            "--log-level",
            "debug",
        ]
    )
    assert (args.config, args.data_dir, args.port, args.http_port) == (
        "b.conf",
        "/d",
        7650,
        9080,
    )
    assert args.advertised_address == "h.example"
    assert args.settings == [("clusterName", "c"), ("journalSyncData", "false")]
    assert args.log_level == "DEBUG"


def test_global_log_level_is_not_reset_by_subcommand() -> None:
    args = build_parser().parse_args(["--log-level", "warning", "standalone"])
    assert args.log_level == "WARNING"
    assert build_parser().parse_args(["standalone"]).log_level == "INFO"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["standalone", "--port", "x"],
        ["standalone", "--set", "novalue"],
        ["standalone", "--log-level", "LOUD"],
        ["standalone", "--unknown-flag"],
        ["admin"],
        ["admin", "topics", "create-partitioned-topic", "t"],
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("standalone", "config", "admin", "perf"):
        assert command in out


def test_standalone_builds_config_with_precedence(
    fake_standalone: list[ServiceConfiguration],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerServicePort=6001\nwebServicePort=6002\nclusterName=file\n")
    monkeypatch.setenv("QUASAR_WEB_SERVICE_PORT", "7002")
    monkeypatch.setenv("QUASAR_clusterName", "env")
    status = main(
        [
            "standalone",
            "--config",
            str(conf),
            "--port",
            "8001",
            "--data-dir",
            str(tmp_path),
        ]
        + ["--set", "clusterName=cli"]
    )
    assert status == 0
    (config,) = fake_standalone
    assert config.broker.broker_service_port == 8001  # flag beats file
    assert config.broker.web_service_port == 7002  # env beats file
    assert config.broker.cluster_name == "cli"  # --set beats env
    assert config.broker.data_dir == str(tmp_path)


def test_standalone_bad_config_exits_2(
    fake_standalone: list[ServiceConfiguration], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["standalone", "--set", "brokerServicePort=abc"]) == 2
    assert "brokerServicePort" in capsys.readouterr().err
    assert main(["standalone", "--set", "noSuchKey=1"]) == 2
    assert "noSuchKey" in capsys.readouterr().err
    assert main(["standalone", "--config", "/nonexistent/broker.conf"]) == 2
    assert fake_standalone == []






def test_standalone_config_helper_ignores_unset_flags() -> None:
    args = build_parser().parse_args(["standalone"])
    assert standalone_config(args, env={}) == ServiceConfiguration()


def test_config_command_prints_effective_config(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUASAR_brokerServicePort", "6111")
    assert main(["config", "--set", "transactionLogBatchedWriteEnabled=true"]) == 0
    out = capsys.readouterr().out
    assert "brokerServicePort=6111\n" in out
    assert "transactionLogBatchedWriteEnabled=true\n" in out


def test_config_command_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--set", "journalSyncData=maybe"]) == 2
    assert "journalSyncData" in capsys.readouterr().err


def test_perf_passes_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    module = types.ModuleType("quasar.perf.main")
    module.main = lambda argv: seen.append(argv) or 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "quasar.perf.main", module)
    assert main(["perf", "produce", "--rate", "10", "-n", "5"]) == 3
    assert main(["--log-level", "ERROR", "perf", "--rate", "1", "-h", "perf"]) == 3
    assert seen == [
        ["produce", "--rate", "10", "-n", "5"],
        ["--rate", "1", "-h", "perf"],
    ]




def test_configure_logging_format_and_replacement() -> None:
    first, second = io.StringIO(), io.StringIO()
    logs.configure_logging("debug", stream=first)
    logs.configure_logging("WARNING", stream=second)
    log = logging.getLogger("quasar.test")
    log.info("hidden")
    log.warning("shown %d", 1)
    assert first.getvalue() == ""
    line = second.getvalue().strip()
    assert line.endswith(" WARNING quasar.test: shown 1")
    assert line[:4].isdigit()  # asctime first
    with pytest.raises(ValueError):
        logs.configure_logging("chatty")


def test_a_name_a_client_chose_cannot_forge_log_lines() -> None:
    out = io.StringIO()
    logs.configure_logging("INFO", stream=out)
    log = logging.getLogger("quasar.test")
    log.info("loaded topic %s", "t\n2026-01-01 00:00:00,000 ERROR forged\r\x1b[2J\u2028")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed on %s", "a\nb")
    lines = out.getvalue().splitlines()
    assert lines[0].endswith(
        "loaded topic t\\x0a2026-01-01 00:00:00,000 ERROR forged\\x0d\\x1b[2J\\u2028"
    )
    assert lines[1].endswith("failed on a\\x0ab")
    assert lines[2] == "Traceback (most recent call last):"  # tracebacks keep their lines
    assert lines[-1] == "ValueError: boom"
