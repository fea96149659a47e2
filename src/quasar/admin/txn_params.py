"""Path and query values of the ``/admin/v3/transactions`` routes, validated.

Every value is a decimal integer in a bounded range; anything else is a 400 with a
reason naming the parameter, before the broker is asked anything.
"""

from __future__ import annotations

import re

from aiohttp import web

from quasar.errors import BadRequestError
from quasar.protocol.txn_id import TxnID

__all__ = [
    "INT64_MAX",
    "coordinator_id_query",
    "int_param",
    "optional_int_query",
    "txn_id_param",
]

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
# Digits of the longest value accepted (an int64), so a huge string is refused
# before it is converted.
_DIGITS_MAX = 19
_INTEGER = re.compile(rf"-?[0-9]{{1,{_DIGITS_MAX}}}")


def _integer(name: str, text: str, low: int, high: int) -> int:
    if not _INTEGER.fullmatch(text):
        raise BadRequestError(f"{name} {text!r} is not a decimal integer")
    value = int(text)
    if not low <= value <= high:
        raise BadRequestError(f"{name} {value} is out of range [{low}, {high}]")
    return value


def int_param(request: web.Request, name: str, low: int = 0, high: int = INT64_MAX) -> int:
    """The ``{name}`` path segment as an integer in ``[low, high]`` (400 otherwise)."""
    return _integer(name, request.match_info[name], low, high)


def optional_int_query(
    request: web.Request, name: str, low: int = 0, high: int = INT64_MAX
) -> int | None:
    """The ``name`` query parameter as an integer, or None when absent."""
    raw = request.query.get(name)
    return None if raw is None else _integer(name, raw, low, high)


def coordinator_id_query(request: web.Request) -> int | None:
    """The optional ``coordinatorId`` query parameter (Pulsar's Integer)."""
    return optional_int_query(request, "coordinatorId", 0, INT32_MAX)


def txn_id_param(request: web.Request) -> TxnID:
    """``{mostSigBits}/{leastSigBits}`` from the path: the coordinator id (Pulsar
    parses it as an int) and the sequence."""
    return TxnID(
        int_param(request, "mostSigBits", 0, INT32_MAX),
        int_param(request, "leastSigBits", 0, INT64_MAX),
    )
