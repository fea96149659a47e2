"""``AuthorizationService``: what an authenticated role may do, by Pulsar's rules.

Built once at broker start-up from the ``authorization`` configuration section and
asked by the binary protocol's command handlers and the admin API. With
``authorizationEnabled=false`` every question is answered yes. Otherwise:

* a super-user (``superUserRoles``) may do anything;
* a tenant admin (a super-user, or a role in the tenant's ``adminRoles``) manages the
  tenant's namespaces, topics, policies and grants;
* any other role needs a grant of an action (``produce``, ``consume``, ...) in the
  namespace's ``auth_policies``: on the whole namespace (``namespace_auth``), or on
  the topic (``destination_auth``, by full name; a partition is covered by its
  partitioned topic's grant). With ``authorizationAllowWildcardsMatching`` a grant to
  ``prefix*``, ``*suffix`` or ``*`` covers the roles it matches;
* consuming also passes the subscription's rules: a subscription with roles in
  ``subscription_auth_roles`` admits only those, and with the namespace's
  ``subscription_auth_mode`` ``Prefix`` a subscription name must start with the role;
* looking a topic up needs ``produce`` or ``consume``.

System topics (the ``pulsar/system`` namespace, transaction logs, buffer snapshots,
pending-ack logs and other ``__``-prefixed topics) belong to the broker: only
super-users may touch them, whatever the grants say.

Every answer reads the metadata store afresh, so a grant or revocation holds for the
next request. A role of ``None`` (no authentication) is never authorized when
authorization is on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from quasar.config import AuthorizationConfig
from quasar.errors import ResourceNotFoundError
from quasar.protocol.topic_name import (
    TopicName,
    is_hidden_from_listings,
    is_system_topic,
)
from quasar.resources.models import Policies
from quasar.resources.store import PulsarResources

__all__ = ["PRODUCE", "CONSUME", "AuthorizationService", "role_matches"]

PRODUCE = "produce"
CONSUME = "consume"

_WILDCARD = "*"
TRANSACTION_COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"


def role_matches(pattern: str, role: str, wildcards: bool) -> bool:
    """Whether a grant to ``pattern`` covers ``role``: the same name, or with
    ``wildcards`` a ``*``-pattern (``*`` alone, ``prefix*``, ``*suffix``)."""
    if pattern == role:
        return True
    if not wildcards or _WILDCARD not in pattern:
        return False
    if pattern == _WILDCARD:
        return True
    if pattern.endswith(_WILDCARD):
        return role.startswith(pattern[:-1])
    if pattern.startswith(_WILDCARD):
        return role.endswith(pattern[1:])
    return False


def _granted(
    grants: Mapping[str, Iterable[str]], role: str, action: str, wildcards: bool
) -> bool:
    exact = grants.get(role)
    if exact is not None and action in exact:
        return True
    return wildcards and any(
        action in actions and role_matches(pattern, role, wildcards)
        for pattern, actions in grants.items()
    )


class AuthorizationService:
    """Answers who may do what; see the module docstring for the rules."""

    def __init__(
        self, config: AuthorizationConfig, resources: PulsarResources | None
    ) -> None:
        """``resources`` (the metadata store) may be None only with authorization off.

        Raises:
            ValueError: authorization is enabled without ``resources``.
        """
        self.enabled = config.authorization_enabled
        self._super_users = frozenset(config.super_user_roles)
        self._wildcards = config.authorization_allow_wildcards_matching
        if self.enabled and resources is None:
            raise ValueError("authorization needs the metadata store's resources")
        self._resources = resources

    @classmethod
    def allow_all(cls) -> AuthorizationService:
        """The service of ``authorizationEnabled=false``: every question is yes."""
        return cls(AuthorizationConfig(), None)

    @property
    def _store(self) -> PulsarResources:
        assert self._resources is not None  # enabled implies resources (__init__)
        return self._resources

    # -- roles ---------------------------------------------------------------------
    def set_super_user_roles(self, roles: Iterable[str]) -> None:
        """Replace the super-user roles (``superUserRoles`` is dynamic in Pulsar);
        every later question is answered with the new set."""
        self._super_users = frozenset(roles)

    def is_superuser(self, role: str | None) -> bool:
        """Whether ``role`` may do anything (always true with authorization off)."""
        if not self.enabled:
            return True
        return role is not None and role in self._super_users

    def is_tenant_admin(self, tenant: str, role: str | None) -> bool:
        """A super-user, or a role in ``tenant``'s ``adminRoles`` (false for a tenant
        that does not exist)."""
        if self.is_superuser(role):
            return True
        if role is None:
            return False
        try:
            info = self._store.tenants.get(tenant)
        except ResourceNotFoundError:
            return False
        return role in info.admin_roles

    # -- topics --------------------------------------------------------------------
    def can_produce(self, topic: TopicName, role: str | None) -> bool:
        return self.allows(topic, role, PRODUCE)

    def can_consume(
        self, topic: TopicName, role: str | None, subscription: str | None = None
    ) -> bool:
        """Consume grant, and (with a ``subscription``) the subscription's rules; a
        tenant admin passes without them, as in Pulsar."""
        decided = self._decided(topic, role)
        if decided is not None:
            return decided
        assert role is not None  # _decided answers for a missing role
        policies = self._namespace_policies(topic)
        if policies is None:
            return False
        if subscription is not None:
            allowed = policies.auth_policies.subscription_auth_roles.get(subscription)
            if allowed and role not in allowed:
                return False
            if policies.subscription_auth_mode == "Prefix" and not subscription.startswith(
                role
            ):
                return False
        return self._topic_grant(topic, policies, role, (CONSUME,))

    def can_lookup(self, topic: TopicName, role: str | None) -> bool:
        """Where a topic is, its partitions, its schema: produce or consume. Every
        authenticated role may look up the transaction-coordinator assign topic."""
        if role is not None and topic.base.full == TRANSACTION_COORDINATOR_ASSIGN:
            # Clients find the transaction coordinators through its partitions (one
            # per coordinator); it holds no data, and without it no role but a
            # super-user could open a transaction. Who may act on a transaction is
            # the coordinator's check (its owner).
            return True
        return self._allows_any(topic, role, (PRODUCE, CONSUME))

    def allows(self, topic: TopicName, role: str | None, action: str) -> bool:
        """Whether ``role`` holds ``action`` on ``topic`` (granted on the topic, its
        partitioned topic or its namespace, or as an admin of its tenant)."""
        return self._allows_any(topic, role, (action,))

    # -- namespaces ----------------------------------------------------------------
    def allows_in_namespace(self, namespace: str, role: str | None, action: str) -> bool:
        """Whether ``role`` holds ``action`` on the whole namespace (e.g. ``consume``
        to list its topics), or administers its tenant."""
        tenant = namespace.split("/", 1)[0]
        if self.is_tenant_admin(tenant, role):
            return True
        if role is None:
            return False
        try:
            policies = self._store.namespaces.get(namespace)
        except ResourceNotFoundError:
            return False
        return _granted(
            policies.auth_policies.namespace_auth, role, action, self._wildcards
        )

    # -- internals -----------------------------------------------------------------
    def _decided(self, topic: TopicName, role: str | None) -> bool | None:
        """The answer that needs no grant: yes for super-users and the tenant's
        admins, no without a role or on a system topic; None: the grants decide."""
        if self.is_superuser(role):
            return True
        if role is None or is_system_topic(topic) or is_hidden_from_listings(topic):
            return False
        if self.is_tenant_admin(topic.tenant, role):
            return True
        return None

    def _allows_any(
        self, topic: TopicName, role: str | None, actions: tuple[str, ...]
    ) -> bool:
        decided = self._decided(topic, role)
        if decided is not None:
            return decided
        assert role is not None  # _decided answers for a missing role
        policies = self._namespace_policies(topic)
        return policies is not None and self._topic_grant(topic, policies, role, actions)

    def _namespace_policies(self, topic: TopicName) -> Policies | None:
        try:
            return self._store.namespaces.get(topic.namespace_name)
        except ResourceNotFoundError:
            return None

    def _topic_grant(
        self, topic: TopicName, policies: Policies, role: str, actions: tuple[str, ...]
    ) -> bool:
        """A grant of one of ``actions`` on the namespace, the topic or its
        partitioned topic."""
        auth = policies.auth_policies
        grant_sets = [auth.namespace_auth]
        for name in dict.fromkeys((topic.full, topic.base.full)):
            grants = auth.destination_auth.get(name)
            if grants is not None:
                grant_sets.append(grants)
        return any(
            _granted(grants, role, action, self._wildcards)
            for grants in grant_sets
            for action in actions
        )
