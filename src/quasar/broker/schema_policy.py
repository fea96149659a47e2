"""A namespace's schema rules with the broker's defaults filled in."""

from __future__ import annotations

from quasar.config import PolicyDefaults
from quasar.resources.models import Policies

from .schema import SchemaPolicy

__all__ = ["schema_policy_of"]


def schema_policy_of(policies: Policies | None, defaults: PolicyDefaults) -> SchemaPolicy:
    """The rules of a namespace (None: no such namespace, the broker's defaults).

    Pulsar's UNDEFINED strategy means "the broker's ``schemaCompatibilityStrategy``";
    unset booleans mean the broker's ``isAllowAutoUpdateSchemaEnabled`` and
    ``isSchemaValidationEnforced``.
    """
    strategy = "UNDEFINED" if policies is None else policies.schema_compatibility_strategy
    if strategy == "UNDEFINED":
        strategy = defaults.schema_compatibility_strategy
    auto_update = None if policies is None else policies.is_allow_auto_update_schema
    enforced = None if policies is None else policies.schema_validation_enforced
    return SchemaPolicy(
        strategy=strategy,
        allow_auto_update=(
            defaults.is_allow_auto_update_schema_enabled if auto_update is None else auto_update
        ),
        validation_enforced=(
            defaults.is_schema_validation_enforced if enforced is None else enforced
        ),
    )
