"""``quasar tokens``: the commands of ``pulsar tokens``, end to end."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import hashes, hmac, serialization

from quasar.cli.main import main
from quasar.cli.tokens import parse_relative_time_s

# ``quasar`` commands configure the root logger; each test gets it back as it was.
pytestmark = pytest.mark.usefixtures("restore_logging")

SECRET = bytes(range(32))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["tokens", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.key"
    path.write_bytes(SECRET)
    return path


def test_create_secret_key_writes_raw_bytes_to_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.key"
    status, out, _ = run(capsys, "create-secret-key", "--output", str(path))
    assert (status, out) == (0, "")
    assert len(path.read_bytes()) == 32
    run(capsys, "create-secret-key", "-a", "HS512", "-o", str(path))
    assert len(path.read_bytes()) == 64


def test_create_secret_key_base64_to_stdout_without_newline(
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    assert main(["tokens", "create-secret-key", "-b"]) == 0
    out = capsysbinary.readouterr().out
    assert not out.endswith(b"\n")
    assert len(base64.b64decode(out, validate=True)) == 32


def test_create_secret_key_raw_to_stdout(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert main(["tokens", "create-secret-key"]) == 0
    assert len(capsysbinary.readouterr().out) == 32


def test_create_key_pair_writes_der_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    status, _, _ = run(
        capsys, "create-key-pair", "-a", "ES256",
        "--output-private-key", str(private), "--output-public-key", str(public),
    )
    assert status == 0
    serialization.load_der_private_key(private.read_bytes(), password=None)
    serialization.load_der_public_key(public.read_bytes())


def test_create_key_pair_needs_both_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "create-key-pair", "--output-private-key", "x")
    assert status == 2
    assert "--output-public-key" in err


def test_create_prints_pulsars_token_layout(
    secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(
        capsys, "create", "--subject", "test-user", "--secret-key", secret_file.as_uri()
    )
    assert status == 0 and out.endswith("\n")
    token = out.strip()
    assert jwt.get_unverified_header(token) == {"alg": "HS256"}
    assert jwt.decode(token, SECRET, algorithms=["HS256"]) == {"sub": "test-user"}


def test_create_with_expiry_and_headers(
    secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = int(time.time())
    status, out, _ = run(
        capsys, "create", "-s", "u", "-e", "2h", "-sk", str(secret_file),
        "-hs", "kid=key-1", "-hs", "x=y",
    )
    assert status == 0
    token = out.strip()
    assert jwt.get_unverified_header(token) == {"alg": "HS256", "kid": "key-1", "x": "y"}
    claims = jwt.decode(token, SECRET, algorithms=["HS256"])
    assert before + 7200 <= claims["exp"] <= int(time.time()) + 7200


def test_create_needs_exactly_one_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "create", "-s", "u")[0] == 2
    both = run(capsys, "create", "-s", "u", "-sk", "a", "-pk", "b")
    assert both[0] == 2 and "not allowed with" in both[2]


def test_create_with_a_bad_key_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "create", "-s", "u", "-sk", "c2hvcnQ=")
    assert (status, out) == (1, "")
    assert "at least 256" in err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("30s", 30), ("30m", 1800), ("2h", 7200), ("1d", 86400),
     ("1w", 604800), ("10y", 10 * 365 * 86400)],
)
def test_relative_times(text: str, seconds: int) -> None:
    assert parse_relative_time_s(text) == seconds


def test_a_bad_expiry_time_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "create", "-s", "u", "-e", "1x", "-sk", "a")
    assert status == 2 and "relative time" in err


def test_key_pair_create_validate_show_through_key_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    run(
        capsys, "create-key-pair",
        "--output-private-key", str(private), "--output-public-key", str(public),
    )
    status, out, _ = run(
        capsys, "create", "-s", "svc", "-e", "1h", "--private-key", private.as_uri()
    )
    assert status == 0
    token = out.strip()
    assert jwt.get_unverified_header(token) == {"alg": "RS256"}

    status, out, _ = run(capsys, "validate", token, "--public-key", public.as_uri())
    assert status == 0
    claims = json.loads(out)
    assert claims["sub"] == "svc" and "exp" in claims

    status, out, _ = run(capsys, "show", token)
    header, separator, payload = out.splitlines()
    assert (json.loads(header), separator) == ({"alg": "RS256"}, "---")
    assert json.loads(payload) == claims


def test_validate_with_the_secret_key_and_token_sources(
    tmp_path: Path, secret_file: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = run(capsys, "create", "-s", "u", "-sk", str(secret_file))[1].strip()
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    assert run(capsys, "validate", "-f", str(token_file), "-sk", str(secret_file)) == (
        0, '{"sub":"u"}\n', ""
    )
    monkeypatch.setenv("TOKEN", token)
    assert run(capsys, "show")[1] == '{"alg":"HS256"}\n---\n{"sub":"u"}\n'
    monkeypatch.delenv("TOKEN")
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO(token + "\n"))
    assert run(capsys, "show", "-i")[0] == 0


def test_validate_refuses_a_wrong_key_and_an_expired_token(
    tmp_path: Path, secret_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.key"
    other.write_bytes(bytes(32))
    token = run(capsys, "create", "-s", "u", "-sk", str(other))[1].strip()
    status, out, err = run(capsys, "validate", token, "-sk", str(secret_file))
    assert (status, out) == (1, "")
    assert "not valid" in err and "signature" in err

    expired = jwt.encode({"sub": "u", "exp": int(time.time()) - 10}, SECRET, "HS256")
    status, _, err = run(capsys, "validate", expired, "-sk", str(secret_file))
    assert status == 1 and "expired" in err


def test_validate_refuses_an_hmac_token_on_a_public_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private, public = tmp_path / "private.key", tmp_path / "public.key"
    run(
        capsys, "create-key-pair",
        "--output-private-key", str(private), "--output-public-key", str(public),
    )
    signing_input = (
        base64.urlsafe_b64encode(b'{"alg":"HS256"}').rstrip(b"=")
        + b"."
        + base64.urlsafe_b64encode(b'{"sub":"admin"}').rstrip(b"=")
    )
    mac = hmac.HMAC(public.read_bytes(), hashes.SHA256())
    mac.update(signing_input)
    forged = (
        signing_input + b"." + base64.urlsafe_b64encode(mac.finalize()).rstrip(b"=")
    ).decode()
    status, _, err = run(capsys, "validate", forged, "-pk", str(public))
    assert status == 1 and "not accepted" in err


def test_show_without_a_token_fails_clearly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOKEN", raising=False)
    status, _, err = run(capsys, "show")
    assert status == 1 and "TOKEN" in err
    status, _, err = run(capsys, "show", "not-a-token")
    assert status == 1 and "compact JWT" in err


def test_the_installed_command_line(tmp_path: Path, secret_file: Path) -> None:
    """The same through a real process, as an operator runs it."""
    command = [sys.executable, "-m", "quasar.cli.main", "tokens"]
    created = subprocess.run(
        [*command, "create", "-s", "proc", "-sk", f"file://{secret_file}"],
        capture_output=True, text=True, check=True,
    )
    shown = subprocess.run(
        [*command, "show", created.stdout.strip()],
        capture_output=True, text=True, check=True,
    )
    assert shown.stdout == '{"alg":"HS256"}\n---\n{"sub":"proc"}\n'
