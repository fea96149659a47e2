"""Which implementation runs for each optional C extension, and why.

``_syncio`` (``quasar.storage.file``) writes and syncs a whole group commit with the
GIL released once; ``_batchsplit`` (``quasar.protocol``) splits batches of plain
records for consumers. Both are optional: when one is missing (no C compiler at
install time) or fails to import, a pure-Python path does the same work, slower.
That must never happen unnoticed, so the broker logs the state of each at start-up
(``log_native_extensions``), ``quasar standalone --version`` prints it
(``status_lines``) and ``/metrics`` exports it as
``quasar_native_extension_active{extension="..."}``.

The packages record their own import failure (``SYNCIO_IMPORT_ERROR``,
``BATCHSPLIT_IMPORT_ERROR``) so that they import nothing from here; this module sits
above both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from quasar.protocol import batch
from quasar.storage.file import disk

__all__ = ["NativeExtension", "log_native_extensions", "native_extensions", "status_lines"]


@dataclass(frozen=True)
class NativeExtension:
    """One optional C extension and the outcome of importing it."""

    name: str
    module: str
    fallback: str  # what runs instead when the extension is missing
    import_error: ImportError | None

    @property
    def active(self) -> bool:
        return self.import_error is None

    def status(self) -> str:
        """``"native"``, or the fallback that runs and the import error."""
        if self.import_error is None:
            return "native"
        return f"Python fallback ({self.fallback}): {self.import_error}"


def native_extensions() -> tuple[NativeExtension, ...]:
    """The state of every optional extension, read now (tests may change it)."""
    return (
        NativeExtension(
            "_syncio",
            "quasar.storage.file._syncio",
            "one os.pwrite and os.fdatasync call per file",
            disk.SYNCIO_IMPORT_ERROR,
        ),
        NativeExtension(
            "_batchsplit",
            "quasar.protocol._batchsplit",
            "batches split by Python code",
            batch.BATCHSPLIT_IMPORT_ERROR,
        ),
    )


def status_lines() -> list[str]:
    """One ``"<extension>: <status>"`` line per extension."""
    return [f"{ext.name}: {ext.status()}" for ext in native_extensions()]


def log_native_extensions(log: logging.Logger) -> None:
    """INFO for each extension in use, WARNING with the import error for each one
    whose Python fallback runs."""
    for ext in native_extensions():
        if ext.active:
            log.info("native extension %s is active", ext.module)
        else:
            log.warning(
                "native extension %s is not available, its Python fallback runs (%s): %s",
                ext.module,
                ext.fallback,
                ext.import_error,
            )
