"""Admin API errors and how any error becomes an HTTP answer.

Pulsar answers every admin error with a JSON body ``{"reason": "..."}`` and a status
that says what kind of error it was; this module does the same for every
``QuasarError`` (using its ``http_status``). The resource errors shared with the broker
core live in ``quasar.broker.resources`` (the broker layer cannot import this one);
they are re-exported here so admin code has one place to import errors from.
"""

from __future__ import annotations

from typing import ClassVar

from quasar.broker.resources import (
    AlreadyExistsError,
    ConflictError,
    InvalidResourceError,
    InvalidValueError,
    NotAcceptableError,
    PreconditionFailedError,
    ResourceError,
    ResourceNotFoundError,
)
from quasar.errors import QuasarError

__all__ = [
    "AdminError",
    "AlreadyExistsError",
    "BadRequestError",
    "ConflictError",
    "InvalidResourceError",
    "InvalidValueError",
    "NotAcceptableError",
    "PreconditionFailedError",
    "ResourceError",
    "ResourceNotFoundError",
    "error_body",
]


class AdminError(QuasarError):
    """Base for errors that only the admin API raises."""


class BadRequestError(AdminError):
    """The request itself is malformed: bad JSON, a body of the wrong shape (400)."""

    http_status: ClassVar[int] = 400


def error_body(exc: BaseException) -> dict[str, str]:
    """The ``{"reason": ...}`` body for ``exc``."""
    reason = str(exc) or type(exc).__name__
    return {"reason": reason}
