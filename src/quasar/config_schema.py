"""How a configuration section declares its settings: key, default and check.

A *section* is a frozen dataclass deriving from ``Section``; each subsystem defines its
own beside its code (``quasar.transaction.coordinator.config.CoordinatorConfig``) and
receives it as a constructor argument. ``quasar.config`` composes the sections into
the broker's ``ServiceConfiguration`` and reads them from files, environment variables
and overrides; this module sits below every subsystem so each can declare a section
without importing upward.

Each field is one of:

* ``setting(default, key, check)``: a ``broker.conf`` setting. ``key`` is Pulsar's
  name (``journalMaxGroupWaitMSec``), or its suffix inside a section that carries a
  key prefix; the field's name is that key in snake_case.
* ``tunable(default, check)``: a limit the subsystem needs but operators do not set (it
  has no key); tests and benchmarks change it when they build the section directly.
* ``section(cls, prefix)``: a nested section; ``prefix`` is prepended to its keys.

Building a section runs every check, so a section built directly in code is held to
the same rules as one loaded from a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = [
    "Check",
    "Section",
    "at_least",
    "non_empty",
    "one_of",
    "port",
    "section",
    "setting",
    "tunable",
]

# A check returns None when the value is acceptable, else what was expected.
Check = Callable[[Any], str | None]


def at_least(minimum: int | float) -> Check:
    """Accept numbers ``>= minimum``."""

    def check(value: Any) -> str | None:
        return None if value >= minimum else f"a number >= {minimum}"

    return check


def one_of(*choices: str) -> Check:
    """Accept exactly one of ``choices``."""

    def check(value: Any) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


def non_empty(value: Any) -> str | None:
    """Accept a non-empty string."""
    return None if value else "a non-empty string"


def port(value: Any) -> str | None:
    """Accept a TCP port; 0 asks the operating system for a free one."""
    return None if 0 <= value <= 65535 else "a port number 0..65535 (0 picks a free port)"


def setting(default: Any, key: str, check: Check | None = None) -> Any:
    """A ``broker.conf`` setting: its default, its key and an optional check."""
    return dataclasses.field(default=default, metadata={"key": key, "check": check})


def tunable(default: Any, check: Check | None = None) -> Any:
    """A value with no ``broker.conf`` key: only code that builds the section sets it."""
    return dataclasses.field(default=default, metadata={"key": None, "check": check})


def section(cls: type, prefix: str = "") -> Any:
    """A nested section; ``prefix`` is prepended to the keys of its settings."""
    return dataclasses.field(
        default_factory=cls, metadata={"section": True, "prefix": prefix}
    )


class Section:
    """Base of every section: runs the fields' checks when a section is built."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            check = f.metadata.get("check")
            if check is None:
                continue
            value = getattr(self, f.name)
            expected = check(value)
            if expected is not None:
                # The key is Pulsar's name (or its suffix in a prefixed section);
                # the field name tells which section it belongs to.
                label = f.metadata["key"] or f.name
                raise ValueError(
                    f"invalid value for {label} ({type(self).__name__}.{f.name}): "
                    f"{value!r}; expected {expected}"
                )
