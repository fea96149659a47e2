"""AuthorizationService: Pulsar's rules over real namespace policies and tenants."""

from __future__ import annotations

from dataclasses import replace

import pytest

from quasar.auth.authorization import AuthorizationService, role_matches
from quasar.config import AuthorizationConfig, ServiceConfiguration
from quasar.protocol import TopicName
from quasar.resources.models import AuthPolicies, Policies, TenantInfo
from quasar.resources.store import PulsarResources
from quasar.storage.metadata.memory import MemoryMetadataStore

NS = "acme/orders"
TOPIC = TopicName.parse(f"persistent://{NS}/placed")
OTHER = TopicName.parse(f"persistent://{NS}/shipped")


def service(
    resources: PulsarResources, wildcards: bool = False, enabled: bool = True
) -> AuthorizationService:
    config = AuthorizationConfig(
        authorization_enabled=enabled,
        super_user_roles=("root",),
        authorization_allow_wildcards_matching=wildcards,
    )
    return AuthorizationService(config, resources)


@pytest.fixture
def resources() -> PulsarResources:
    res = PulsarResources(MemoryMetadataStore())
    res.bootstrap_standalone("standalone")
    res.tenants.create("acme", TenantInfo(("acme-admin",), ("standalone",)))
    res.namespaces.create(NS, Policies(replication_clusters=("standalone",)))
    return res


def set_auth(resources: PulsarResources, auth: AuthPolicies, mode: str = "None") -> None:
    resources.namespaces.update(
        NS, lambda p: replace(p, auth_policies=auth, subscription_auth_mode=mode)
    )


def test_off_allows_everyone_even_without_a_role(resources: PulsarResources) -> None:
    authz = service(resources, enabled=False)
    assert authz.can_produce(TOPIC, None)
    assert authz.is_superuser("anyone")
    assert AuthorizationService.allow_all().can_consume(TOPIC, None, "s")


def test_enabled_needs_the_metadata() -> None:
    with pytest.raises(ValueError, match="metadata"):
        AuthorizationService(AuthorizationConfig(authorization_enabled=True), None)


def test_the_configuration_refuses_authorization_without_authentication() -> None:
    with pytest.raises(ValueError, match="authenticationEnabled"):
        ServiceConfiguration.load(env={}, overrides={"authorizationEnabled": "true"})


def test_superuser_and_tenant_admin(resources: PulsarResources) -> None:
    authz = service(resources)
    assert authz.is_superuser("root") and not authz.is_superuser("acme-admin")
    assert authz.is_tenant_admin("acme", "root")
    assert authz.is_tenant_admin("acme", "acme-admin")
    assert not authz.is_tenant_admin("public", "acme-admin")
    assert not authz.is_tenant_admin("no-such-tenant", "acme-admin")
    assert not authz.is_tenant_admin("acme", None)
    # A tenant admin may use every topic of its tenant.
    assert authz.can_produce(TOPIC, "acme-admin")
    assert authz.can_consume(TOPIC, "acme-admin", "s")


def test_no_grant_no_access(resources: PulsarResources) -> None:
    authz = service(resources)
    assert not authz.can_produce(TOPIC, "app")
    assert not authz.can_consume(TOPIC, "app", "s")
    assert not authz.can_lookup(TOPIC, "app")
    assert not authz.can_produce(TOPIC, None)


def test_namespace_grant_covers_every_topic(resources: PulsarResources) -> None:
    set_auth(resources, AuthPolicies(namespace_auth={"app": frozenset({"produce"})}))
    authz = service(resources)
    assert authz.can_produce(TOPIC, "app") and authz.can_produce(OTHER, "app")
    assert authz.can_lookup(TOPIC, "app")
    assert not authz.can_consume(TOPIC, "app", "s")
    assert not authz.allows_in_namespace(NS, "app", "consume")
    assert authz.allows_in_namespace(NS, "app", "produce")


def test_topic_grant_covers_that_topic_and_its_partitions(
    resources: PulsarResources,
) -> None:
    grant = {TOPIC.full: {"reader": frozenset({"consume"})}}
    set_auth(resources, AuthPolicies(destination_auth=grant))
    authz = service(resources)
    assert authz.can_consume(TOPIC, "reader", "s")
    assert authz.can_consume(TOPIC.partition(3), "reader", "s")
    assert authz.can_lookup(TOPIC.partition(0), "reader")
    assert not authz.can_consume(OTHER, "reader", "s")
    assert not authz.can_produce(TOPIC, "reader")


def test_subscription_roles_and_prefix_mode(resources: PulsarResources) -> None:
    consume = frozenset({"consume"})
    auth = AuthPolicies(
        namespace_auth={"app": consume, "other": consume},
        subscription_auth_roles={"billing": frozenset({"app"})},
    )
    set_auth(resources, auth)
    authz = service(resources)
    assert authz.can_consume(TOPIC, "app", "billing")
    assert not authz.can_consume(TOPIC, "other", "billing")
    assert authz.can_consume(TOPIC, "other", "audit")
    # Lookup does not check the subscription rules.
    assert authz.can_lookup(TOPIC, "other")
    set_auth(resources, auth, mode="Prefix")
    assert authz.can_consume(TOPIC, "other", "other-audit")
    assert not authz.can_consume(TOPIC, "other", "audit")


def test_wildcards_only_when_enabled(resources: PulsarResources) -> None:
    produce = frozenset({"produce"})
    set_auth(resources, AuthPolicies(namespace_auth={"etl-*": produce, "*-ops": produce}))
    assert not service(resources).can_produce(TOPIC, "etl-7")
    authz = service(resources, wildcards=True)
    assert authz.can_produce(TOPIC, "etl-7")
    assert authz.can_produce(TOPIC, "site-ops")
    assert not authz.can_produce(TOPIC, "app")


@pytest.mark.parametrize(
    ("pattern", "role", "expected"),
    [
        ("*", "anyone", True),
        ("a*", "abc", True),
        ("a*", "bac", False),
        ("*c", "abc", True),
        ("*c", "cab", False),
        ("a*c", "abc", False),  # only a leading or trailing * is a pattern
        ("abc", "abc", True),
    ],
)
def test_role_patterns(pattern: str, role: str, expected: bool) -> None:
    assert role_matches(pattern, role, wildcards=True) is expected
    assert role_matches(pattern, role, wildcards=False) is (pattern == role)


@pytest.mark.parametrize(
    "name",
    [
        "persistent://acme/orders/__change_events",
        "persistent://acme/orders/__transaction_buffer_snapshot",
        "persistent://acme/orders/placed-s__transaction_pending_ack",
        "persistent://pulsar/system/__transaction_log_0",
    ],
)
def test_system_topics_are_closed_to_tenants(
    resources: PulsarResources, name: str
) -> None:
    everything = frozenset({"produce", "consume"})
    set_auth(resources, AuthPolicies(namespace_auth={"app": everything}))
    authz = service(resources)
    topic = TopicName.parse(name)
    for role in ("app", "acme-admin"):
        assert not authz.can_produce(topic, role)
        assert not authz.can_consume(topic, role, "s")
        assert not authz.can_lookup(topic, role)
    assert authz.can_consume(topic, "root", "s")


def test_grants_are_read_afresh(resources: PulsarResources) -> None:
    authz = service(resources)
    assert not authz.can_produce(TOPIC, "app")
    set_auth(resources, AuthPolicies(namespace_auth={"app": frozenset({"produce"})}))
    assert authz.can_produce(TOPIC, "app")
    set_auth(resources, AuthPolicies())
    assert not authz.can_produce(TOPIC, "app")
