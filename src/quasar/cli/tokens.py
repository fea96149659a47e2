"""``quasar tokens``: Pulsar's ``pulsar tokens`` tool for JWT keys and tokens.

::

    quasar tokens create-secret-key [-a HS256] [-o FILE] [-b]
    quasar tokens create-key-pair [-a RS256] --output-private-key F --output-public-key F
    quasar tokens create -s SUBJECT [-e 1h|3d|10y|30m|...] (-sk KEY | -pk KEY) [-a ALG]
                         [-hs NAME=VALUE ...]
    quasar tokens show [TOKEN | -i | -f FILE]             (else $TOKEN)
    quasar tokens validate [TOKEN | -i | -f FILE] (-sk KEY | -pk KEY) [-a ALG]

A KEY is a ``data:`` URL, a ``file:`` URL, a file path or base64
(``quasar.auth.token_keys``). Secret keys are written as raw bytes (base64 text with
``-b``), key pairs as DER, so the files work with Pulsar's tools and brokers.
Exit status: 0 success, 1 a failed operation (an invalid token, an unreadable key),
2 a usage error.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quasar.auth.token_keys import (
    HMAC_ALGORITHMS,
    KEY_PAIR_ALGORITHMS,
    SIGNATURE_ALGORITHMS,
    create_key_pair,
    create_secret_key,
    decode_private_key,
    decode_public_key,
    decode_secret_key,
    read_key_value,
)
from quasar.auth.tokens import (
    TokenValidator,
    accepted_algorithms,
    create_token,
    hmac_algorithms_for,
)
from quasar.errors import AuthenticationError

__all__ = ["add_tokens_parser", "parse_relative_time_s", "run_tokens"]

# Pulsar's RelativeTimeUtil units; a bare number is seconds.
_UNIT_SECONDS = {
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86_400,
    "w": 7 * 86_400,
    "y": 365 * 86_400,
}
_RELATIVE_TIME = re.compile(r"^(\d+)([smhdwy]?)$")


def parse_relative_time_s(text: str) -> int:
    """Seconds in a relative time such as ``30m``, ``2h``, ``3d``, ``10y`` or ``90``.

    Raises:
        argparse.ArgumentTypeError: not a number with an optional unit.
    """
    match = _RELATIVE_TIME.match(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid relative time {text!r}; expected a number and a unit among "
            "s, m (minutes), h, d, w, y (e.g. 30m, 2h, 3d, 10y)"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value


def _add_token_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", nargs="?", help="the token (else -i, -f or $TOKEN)")
    parser.add_argument(
        "-i", "--stdin", action="store_true", help="read the token from standard input"
    )
    parser.add_argument("-f", "--token-file", metavar="FILE", help="read the token from a file")


def add_tokens_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> None:
    """Register ``tokens`` and its commands on the top-level subparsers."""
    tokens = subparsers.add_parser(
        "tokens", parents=parents, help="create and inspect JWT keys and tokens"
    )
    cmds = tokens.add_subparsers(dest="command", required=True, metavar="COMMAND")

    secret = cmds.add_parser("create-secret-key", help="create a new secret key")
    secret.set_defaults(tokens_command=_create_secret_key)
    secret.add_argument(
        "-a", "--signature-algorithm", default="HS256", choices=HMAC_ALGORITHMS,
        help="the algorithm the key is for (default HS256)",
    )
    secret.add_argument("-o", "--output", metavar="FILE", help="write the key to FILE")
    secret.add_argument(
        "-b", "--base64", action="store_true", help="write base64 text, not raw bytes"
    )

    pair = cmds.add_parser("create-key-pair", help="create a new private/public key pair")
    pair.set_defaults(tokens_command=_create_key_pair)
    pair.add_argument(
        "-a", "--signature-algorithm", default="RS256", choices=KEY_PAIR_ALGORITHMS,
        help="the algorithm the keys are for (default RS256)",
    )
    pair.add_argument("--output-private-key", metavar="FILE", required=True)
    pair.add_argument("--output-public-key", metavar="FILE", required=True)

    create = cmds.add_parser("create", help="create a new token")
    create.set_defaults(tokens_command=_create)
    create.add_argument(
        "-s", "--subject", required=True, help="the role the token stands for"
    )
    create.add_argument(
        "-e", "--expiry-time", type=parse_relative_time_s, metavar="TIME",
        help="relative expiry (e.g. 30m, 1h, 3d, 10y); default: never expires",
    )
    _add_key_options(create, "-pk", "--private-key", "the private key")
    create.add_argument(
        "-a", "--signature-algorithm", choices=SIGNATURE_ALGORITHMS,
        help="the signature algorithm (default: the strongest the key fits)",
    )
    create.add_argument(
        "-hs", "--headers", type=_header, action="append", default=[],
        metavar="NAME=VALUE", help="an extra JWS header (repeatable)",
    )

    show = cmds.add_parser("show", help="print a token's header and claims")
    show.set_defaults(tokens_command=_show)
    _add_token_source(show)

    validate = cmds.add_parser("validate", help="check a token's signature and expiry")
    validate.set_defaults(tokens_command=_validate)
    _add_token_source(validate)
    _add_key_options(validate, "-pk", "--public-key", "the public key")
    validate.add_argument(
        "-a", "--signature-algorithm", default="RS256", choices=KEY_PAIR_ALGORITHMS,
        help="the public key's algorithm (default RS256)",
    )


def _add_key_options(
    parser: argparse.ArgumentParser, short: str, long: str, what: str
) -> None:
    keys = parser.add_mutually_exclusive_group(required=True)
    keys.add_argument(
        "-sk", "--secret-key", metavar="KEY", help="the secret key (data:, file:, path, base64)"
    )
    keys.add_argument(short, long, metavar="KEY", help=f"{what} (data:, file:, path, base64)")


def _write(data: bytes, output: str | None) -> None:
    if output is not None:
        Path(output).write_bytes(data)
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _create_secret_key(args: argparse.Namespace) -> None:
    key = create_secret_key(args.signature_algorithm)
    # Without a newline, as Pulsar writes it: the output is the key itself.
    _write(base64.b64encode(key) if args.base64 else key, args.output)


def _create_key_pair(args: argparse.Namespace) -> None:
    private, public = create_key_pair(args.signature_algorithm)
    Path(args.output_private_key).write_bytes(private)
    Path(args.output_public_key).write_bytes(public)


def _create(args: argparse.Namespace) -> None:
    if args.secret_key is not None:
        key: Any = decode_secret_key(read_key_value(args.secret_key))
    else:
        key = decode_private_key(read_key_value(args.private_key))
    expiry = None
    if args.expiry_time is not None:
        expiry = int(time.time()) + args.expiry_time
    token = create_token(
        args.subject, key, args.signature_algorithm, expiry, dict(args.headers)
    )
    print(token)


def _read_token(args: argparse.Namespace) -> str:
    if args.token is not None:
        token: str = args.token
    elif args.stdin:
        token = sys.stdin.readline()
    elif args.token_file is not None:
        token = Path(args.token_file).read_text(encoding="utf-8")
    elif os.environ.get("TOKEN"):
        token = os.environ["TOKEN"]
    else:
        raise ValueError(
            "the token needs to be given as an argument, with --stdin, with "
            "--token-file or in the TOKEN environment variable"
        )
    return token.strip()


def _segment(token: str, index: int) -> str:
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWT (three base64url parts joined by '.')")
    part = parts[index]
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"part {index + 1} of the token is not base64url UTF-8") from None


def _show(args: argparse.Namespace) -> None:
    # Decoded as written, without verification, as Pulsar's `tokens show` does.
    token = _read_token(args)
    header, payload = _segment(token, 0), _segment(token, 1)
    print(header)
    print("---")
    print(payload)


def _validate(args: argparse.Namespace) -> None:
    token = _read_token(args)
    if args.secret_key is not None:
        secret = decode_secret_key(read_key_value(args.secret_key))
        validator = TokenValidator(secret, hmac_algorithms_for(secret))
    else:
        public = decode_public_key(read_key_value(args.public_key))
        validator = TokenValidator(
            public, accepted_algorithms(public, args.signature_algorithm)
        )
    result = validator.validate(token)
    print(json.dumps(dict(result.claims), separators=(",", ":")))


def run_tokens(args: argparse.Namespace) -> int:
    """Run the chosen ``tokens`` command; 0 on success, 1 on any error (printed)."""
    command: Callable[[argparse.Namespace], None] = args.tokens_command
    try:
        command(args)
    except AuthenticationError as exc:
        print(f"error: the token is not valid: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
