"""Configuration changed at run time: Pulsar's dynamic configuration.

A few settings may be changed while the broker runs, through
``POST /admin/v2/brokers/configuration/{name}/{value}``: those Pulsar marks dynamic
(``dynamic = true`` in its ``ServiceConfiguration``) and quasar implements. Each is
registered here with an *apply* callback that makes the running broker use the new
value; a key without one is refused (412), so a change is never accepted and then
silently ignored.

Changed values are stored in the metadata store, as Pulsar stores them, under
``/admin/configuration`` (one JSON object of strings), so they survive a restart: the
broker loads and applies them at start-up, over the values of its configuration file.
Deleting a change returns the key to its value from the file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from quasar.config import ServiceConfiguration, config_keys
from quasar.errors import NotFound, PreconditionFailedError
from quasar.storage.api import MetadataStore

__all__ = ["DYNAMIC_CONFIGURATION_PATH", "Apply", "DynamicConfiguration"]

log = logging.getLogger(__name__)

# Pulsar's path of the dynamic configuration in its metadata store.
DYNAMIC_CONFIGURATION_PATH = "/admin/configuration"

# Settings whose value may itself be a secret (the content of a credentials file),
# beyond those ``ServiceConfiguration.text_values`` masks already: the runtime view is
# read over HTTP, so anything that may be a secret is masked unless it is a file: URL.
RUNTIME_SECRET_KEYS = frozenset({"tokenSecretKey", "basicAuthConf"})
MASKED = "********"

# An apply callback gets the new effective configuration, with every change applied.
Apply = Callable[[ServiceConfiguration], None]


class DynamicConfiguration:
    """The registry of dynamic settings, the changes stored, and the effective values."""

    def __init__(self, static: ServiceConfiguration, store: MetadataStore) -> None:
        """``static``: the configuration the broker started with (file, environment,
        command line); ``store``: where changes are kept."""
        self._static = static
        self._store = store
        self._apply: dict[str, Apply] = {}
        self._overrides: dict[str, str] = {}
        self.effective = static

    def register(self, key: str, apply: Apply) -> None:
        """Make ``key`` dynamic; ``apply`` runs with the effective configuration
        whenever its value changes."""
        assert key in config_keys(), f"unknown configuration key {key}"
        assert key not in self._apply, f"{key} registered twice"
        self._apply[key] = apply

    def names(self) -> list[str]:
        """The keys that may be changed at run time, sorted."""
        return sorted(self._apply)

    def overrides(self) -> dict[str, str]:
        """The keys changed at run time and their values (as stored)."""
        return dict(sorted(self._overrides.items()))

    def runtime(self) -> dict[str, str]:
        """Every setting's effective value as text, secrets masked."""
        values = self.effective.text_values()
        for key in RUNTIME_SECRET_KEYS:
            value = values.get(key, "")
            if value and not value.startswith("file:"):
                values[key] = MASKED
        return values

    # -- start-up ------------------------------------------------------------------
    def load(self) -> None:
        """Apply the changes stored by earlier runs (call once, at start-up).

        A stored change that no longer applies (a key that is not dynamic any more,
        or a value this version refuses) is logged and left out, so that a bad stored
        value cannot keep the broker from starting; the operator sees it in the log
        and in ``configuration/values``, which lists only what is in effect.
        """
        stored = self._read()
        accepted: dict[str, str] = {}
        for key, value in stored.items():
            if key not in self._apply:
                log.error("stored dynamic configuration %s=%s ignored: %s is not "
                          "a dynamic configuration key", key, value, key)
                continue
            try:
                self._static.with_values({**accepted, key: value})
            except ValueError as exc:
                log.error("stored dynamic configuration %s=%s ignored: %s", key, value, exc)
                continue
            accepted[key] = value
        if accepted:
            self._set(accepted, changed=set(accepted))
            log.info("dynamic configuration applied: %s",
                     ", ".join(f"{k}={self.runtime()[k]}" for k in sorted(accepted)))

    # -- changes -------------------------------------------------------------------
    def update(self, key: str, value: str) -> None:
        """Change ``key`` to ``value``, durably, and apply it.

        Raises:
            PreconditionFailedError: ``key`` is not dynamic, or ``value`` is invalid.
        """
        self._require_dynamic(key)
        overrides = {**self._overrides, key: value}
        try:
            effective = self._static.with_values(overrides)
        except ValueError as exc:
            raise PreconditionFailedError(f"Invalid dynamic-config value: {exc}") from None
        self._write(overrides)
        self._set(overrides, changed={key}, effective=effective)
        log.info("dynamic configuration %s changed to %s", key, self.runtime()[key])

    def delete(self, key: str) -> None:
        """Return ``key`` to its value from the configuration file (a key never
        changed is left as it is, as Pulsar does).

        Raises:
            PreconditionFailedError: ``key`` is not dynamic, or the remaining
                changes are invalid without it.
        """
        self._require_dynamic(key)
        if key not in self._overrides:
            return
        overrides = {k: v for k, v in self._overrides.items() if k != key}
        try:
            effective = self._static.with_values(overrides)
        except ValueError as exc:
            raise PreconditionFailedError(f"Invalid dynamic-config value: {exc}") from None
        self._write(overrides)
        self._set(overrides, changed={key}, effective=effective)
        log.info("dynamic configuration %s reset to %s", key, self.runtime()[key])

    def _require_dynamic(self, key: str) -> None:
        if key not in self._apply:
            raise PreconditionFailedError(
                f"Can't update non-dynamic configuration {key!r}: the dynamic keys "
                f"are {', '.join(self.names())}"
            )

    def _set(
        self,
        overrides: Mapping[str, str],
        *,
        changed: set[str],
        effective: ServiceConfiguration | None = None,
    ) -> None:
        self._overrides = dict(overrides)
        self.effective = (
            effective if effective is not None else self._static.with_values(overrides)
        )
        # One callback may serve several keys (the configuration sections the
        # broker reads at each use): run each once.
        for apply in dict.fromkeys(self._apply[key] for key in sorted(changed)):
            apply(self.effective)

    # -- the stored changes ----------------------------------------------------------
    def _read(self) -> dict[str, str]:
        found = self._store.get(DYNAMIC_CONFIGURATION_PATH)
        if found is None:
            return {}
        try:
            data: Any = json.loads(found.value)
        except ValueError:
            log.error("stored dynamic configuration is not JSON: ignored")
            return {}
        if not isinstance(data, dict):
            log.error("stored dynamic configuration is not a JSON object: ignored")
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def _write(self, overrides: Mapping[str, str]) -> None:
        if overrides:
            body = json.dumps(dict(sorted(overrides.items()))).encode()
            self._store.put(DYNAMIC_CONFIGURATION_PATH, body)
            return
        try:
            self._store.delete(DYNAMIC_CONFIGURATION_PATH)
        except NotFound:
            pass
