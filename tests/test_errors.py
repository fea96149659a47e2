"""The error hierarchy: attributes every class carries, and admin answers mapped back."""

from __future__ import annotations

import pickle

import pytest

import quasar.client as qc
from quasar import errors
from quasar.errors import (
    AdminError,
    AlreadyExistsError,
    BadRequestError,
    ConflictError,
    InvalidAdminResponse,
    InvalidResourceError,
    InvalidValueError,
    NotAcceptableError,
    NotAuthorizedError,
    PreconditionFailedError,
    QuasarError,
    ResourceNotFoundError,
    error_for_http_status,
)


def _all_error_classes() -> list[type[QuasarError]]:
    found: list[type[QuasarError]] = []
    todo: list[type[QuasarError]] = [QuasarError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _all_error_classes(), ids=lambda c: c.__name__)
def test_every_class_has_the_attributes_callers_branch_on(
    cls: type[QuasarError],
) -> None:
    assert cls.code is None or isinstance(cls.code, errors.ServerError)
    assert isinstance(cls.http_status, int) and 400 <= cls.http_status <= 599
    assert isinstance(cls.retryable, bool)


ADMIN_CLASSES = [
    BadRequestError,
    InvalidValueError,
    NotAuthorizedError,
    ResourceNotFoundError,
    NotAcceptableError,
    ConflictError,
    AlreadyExistsError,
    PreconditionFailedError,
    InvalidResourceError,
]


@pytest.mark.parametrize("cls", ADMIN_CLASSES, ids=lambda c: c.__name__)
def test_an_admin_answer_maps_back_to_a_class_that_catches_the_raised_one(
    cls: type[AdminError],
) -> None:
    raised = cls("the reason")
    answered = error_for_http_status(raised.http_status, str(raised))
    # `except type(answered)` catches both the server-side and the client-side error.
    assert isinstance(raised, type(answered))
    assert answered.http_status == answered.status == raised.http_status
    assert answered.reason == "the reason"
    assert answered.remote and not raised.remote
    assert not answered.retryable


@pytest.mark.parametrize(
    ("status", "retryable"), [(403, False), (418, False), (500, True), (503, True)]
)
def test_a_status_without_a_class_keeps_its_status(status: int, retryable: bool) -> None:
    answered = error_for_http_status(status, "why")
    assert type(answered) is AdminError
    assert answered.http_status == answered.status == status
    assert answered.retryable is retryable
    assert answered.remote and str(answered) == "why"


def test_admin_errors_survive_pickling() -> None:
    # Spark sends task errors between processes by pickling them.
    for exc in (
        error_for_http_status(404, "gone"),
        error_for_http_status(503, "busy"),
        InvalidAdminResponse("not JSON"),
    ):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc)
        assert (back.http_status, back.retryable, back.remote, str(back)) == (
            exc.http_status,
            exc.retryable,
            exc.remote,
            str(exc),
        )


def test_the_client_name_for_admin_errors_is_their_root() -> None:
    assert qc.AdminApiError is AdminError
    assert isinstance(error_for_http_status(409, "exists"), qc.AdminApiError)
    assert isinstance(InvalidAdminResponse("x"), qc.PulsarException)
