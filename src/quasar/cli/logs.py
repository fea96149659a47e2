"""Logging setup for the command line."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Control characters and Unicode line breaks, escaped as Python escapes them. Names a
# client chooses (topics, subscriptions, producers, roles) reach log messages; without
# this a name holding a newline would forge log lines of its own.
_UNPRINTABLE = {
    code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    for code in (*range(0x20), 0x7F, 0x85, 0x2028, 0x2029)
}


class OneLineFormatter(logging.Formatter):
    """Formats each record's message on one line: control characters in it are
    escaped. A traceback, appended after the message, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        return super().formatMessage(record).translate(_UNPRINTABLE)


class _CliHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler this module installed, so a second call replaces it."""


def configure_logging(level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send log records at ``level`` and above to ``stream`` (stderr) in one readable
    line each.

    Only the handler installed here is replaced on a second call; handlers others
    installed (pytest's, an embedding application's) are left alone.

    Raises:
        ValueError: ``level`` is not a logging level name.
    """
    name = level.upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of {LOG_LEVELS}")
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _CliHandler)]:
        root.removeHandler(handler)
    handler = _CliHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(OneLineFormatter(LOG_FORMAT))
    root.addHandler(handler)
    root.setLevel(name)
