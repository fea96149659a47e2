"""``ClusterMember``: this broker as a member of a cluster (``quasar broker``).

It registers the broker (``registry``), owns the bundles it acquired (``ownership``),
answers lookups (owned here: Connect; owned elsewhere: Redirect to the owner; unowned:
the load manager's choice, acquired here when that is this broker or the lookup is
authoritative), refuses to serve topics of bundles it does not own, and unloads and
splits bundles. It is the broker service's ``TopicOwnership``.

Beside it: whether it serves at all follows its ZooKeeper session
(``member_session``); closing and weighing the topics of its bundles is
``bundle_topics``; splitting and shedding on its own load is ``rebalancing``.
When the session comes back the member keeps the bundles whose nodes still name it
(the same session) or forgets them all and registers again (a new session: ZooKeeper
deleted its nodes and other brokers may own the bundles).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any

from quasar.broker.lookup_data import LookupData, lookup_data
from quasar.broker.service import BrokerService
from quasar.broker.topic_ownership import LookupAnswer
from quasar.config import LoadBalancerConfig
from quasar.errors import (
    MetadataError,
    QuasarError,
    ResourceNotFoundError,
    ServiceNotReady,
    TopicNotFound,
)
from quasar.protocol.topic_name import TopicName
from quasar.resources.bundles import (
    BundleRange,
    BundlesData,
    bundle_of,
    split_boundary,
    topic_hash,
)
from quasar.resources.store import NamespaceResources
from quasar.storage.metadata.zk_watch import SessionState
from quasar.storage.metadata.zookeeper import ZooKeeperMetadataStore

from .bundle_split import write_split
from .bundle_topics import (
    OwnedBundle,
    TopicLoad,
    bundle_key,
    close_topics,
    loaded_topics,
)
from .coordinator_topics import placement_of
from .load_manager import LoadManager
from .member_session import MemberSession
from .ownership import BundleOwnership, NamespaceEphemeralData
from .rebalancing import Rebalancing
from .registry import BrokerRegistry, LoadReport, registration_of

__all__ = ["ClusterMember", "OwnedBundle", "bundle_key"]

log = logging.getLogger(__name__)

# How often a start-up waiting for an earlier registration to expire looks again.
REGISTER_RETRY_S = 0.5


def _web_url(data: LookupData, secure: bool) -> str | None:
    """A broker's web URL for a request that came over TLS (``secure``) or not: the
    same kind if it has one, else the other."""
    if secure:
        return data.http_url_tls or data.http_url
    return data.http_url or data.http_url_tls


class ClusterMember:
    """Implements ``quasar.broker.topic_ownership.TopicOwnership``."""

    def __init__(
        self,
        service: BrokerService,
        store: ZooKeeperMetadataStore,
        broker_id: str,
        settings: LoadBalancerConfig,
        session_timeout_ms: int,
        configuration_store: ZooKeeperMetadataStore | None = None,
    ) -> None:
        """``session_timeout_ms``: the metadata-store session's timeout; a pause of
        the event loop longer than half of it is treated as a suspended session.
        ``configuration_store``: the store of the namespaces' policies when it is not
        ``store`` (``configurationMetadataStoreUrl``), a session of its own."""
        self._service = service
        self._store = store
        self._configuration_store = configuration_store
        self.broker_id = broker_id
        self._settings = settings
        registration = registration_of(broker_id, service.config.broker)
        self.registry = BrokerRegistry(store, registration)
        self.ownership = BundleOwnership(
            store, NamespaceEphemeralData(registration.urls, False, registration.listeners)
        )
        self.rebalancing = Rebalancing(self, settings)
        self.load_manager = LoadManager(
            pending_ttl_s=2 * self.rebalancing.report_s,
            pending_max_per_broker=settings.load_balancer_namespace_maximum_bundles,
        )
        # Bounded by the namespaces' bundles (each at most
        # loadBalancerNamespaceMaximumBundles): only real bundles are ever acquired.
        self.owned: set[OwnedBundle] = set()
        # Bundles being given up: refused until their node is deleted, so that a
        # lookup meanwhile never adopts a node that is about to go.
        self._releasing: set[OwnedBundle] = set()
        self.session = MemberSession(
            store, broker_id, session_timeout_ms, self._stop_serving, self._resume_serving
        )
        # Told before the topics of bundles this member stops serving are closed,
        # so what lives beside those topics (transaction coordinators) stops first.
        self.on_bundles_closing: list[Callable[[set[OwnedBundle]], Awaitable[None]]] = []
        # Told (on the loop, synchronously) of each bundle this member acquires.
        self.on_bundle_acquired: list[Callable[[OwnedBundle], None]] = []

    # -- life cycle --------------------------------------------------------------------
    def start(self) -> None:
        """Register and start serving (on the running loop).

        Raises:
            MetadataError: another live broker has this id, or the store failed.
        """
        self._register_when_free()
        self.session.start()
        self.rebalancing.start()
        log.info("registered as cluster member %s", self.broker_id)

    def _register_when_free(self) -> None:
        """Register; while the node of this broker id's previous run (killed before
        its session ended) still exists, wait for ZooKeeper to expire it, at most
        one session timeout and a half (blocking: nothing listens yet)."""
        deadline = time.monotonic() + 3 * self.session.pause_limit_s
        while True:
            try:
                self.registry.register()
                return
            except MetadataError:
                if time.monotonic() >= deadline:
                    raise
                log.warning(
                    "%s is registered already, by this broker's previous run or "
                    "another broker with the same id: waiting for it to go",
                    self.registry.path,
                )
                time.sleep(REGISTER_RETRY_S)

    async def stop(self) -> None:
        """Release every bundle (other brokers may take them at once) and leave."""
        self.rebalancing.stop()
        was_serving = self.session.stop()
        for owned in sorted(self.owned):
            await self._release(owned, delete_node=was_serving)
        if was_serving:
            self.registry.deregister()

    @property
    def serving(self) -> bool:
        """Whether this member serves: its session is connected (``member_session``)."""
        return self.session.serving

    @serving.setter
    def serving(self, value: bool) -> None:
        self.session.serving = value

    # -- TopicOwnership ----------------------------------------------------------------
    def check_serving(self, name: TopicName) -> None:
        self.session.require_serving()
        owned = self.bundle_of(name)
        if owned not in self.owned:
            raise ServiceNotReady(
                f"Namespace bundle {bundle_key(*owned)} is not served by broker "
                f"{self.broker_id}: look the topic up first"
            )

    def lookup(
        self, name: TopicName, authoritative: bool, listener: str, *, again: bool = True
    ) -> LookupAnswer:
        self.session.require_serving()
        owned = self.bundle_of(name)
        if owned in self.owned:
            return LookupAnswer(lookup_data(self._service.config.broker, listener), False)
        if owned in self._releasing:
            raise ServiceNotReady(f"Namespace bundle {bundle_key(*owned)} is being unloaded")
        owner = self.ownership.owner(*owned)
        if owner is None and self._bundle_after_seeing(name) != owned:
            # The boundaries were read before a split and the parent's ownership node
            # after it (the splitting owner deletes that node last): handing out the
            # parent would let two members serve its topics. This second read comes
            # after the node's absence was seen on the same session, so it sees the
            # split; the lookup starts over on the child.
            if not again:
                raise ServiceNotReady(
                    f"Namespace bundle {bundle_key(*owned)} is being split; retry"
                )
            return self.lookup(name, authoritative, listener, again=False)
        if owner is None:
            if not authoritative:
                target = self.load_manager.choose(
                    bundle_key(*owned), self.registry.live_brokers()
                )
                if target is None:
                    raise ServiceNotReady("No live broker can own the topic's bundle")
                if target.broker_id != self.broker_id:
                    return self._redirect(target.lookup_data(listener), listener)
            acquired, owner = self._acquire(owned)
            if acquired:
                return LookupAnswer(lookup_data(self._service.config.broker, listener), False)
        if owner == self.ownership.me:
            # Our URLs, but not a bundle this session acquired (those are in
            # ``owned``): the node of this broker's previous run, whose session has
            # not expired yet. It is never adopted; once ZooKeeper removes it the
            # bundle is acquired again (the client retries).
            raise ServiceNotReady(
                f"Namespace bundle {bundle_key(*owned)} is still held by an earlier "
                f"session of broker {self.broker_id}"
            )
        return self._redirect(owner.lookup_data(listener), listener)

    # -- bundles -----------------------------------------------------------------------
    def bundles(self, namespace: str) -> BundlesData:
        """The namespace's bundles (its policies, else the broker's default count).

        Raises:
            TopicNotFound: the namespace does not exist.
        """
        try:
            policies = self._service.resources.namespaces.get(namespace)
        except ResourceNotFoundError:
            raise TopicNotFound(f"Namespace {namespace} does not exist") from None
        if policies.bundles is not None:
            return policies.bundles
        return BundlesData.even(self._settings.default_number_of_namespace_bundles)

    def _bundle_after_seeing(self, name: TopicName) -> OwnedBundle:
        """The topic's bundle, read after an ownership node was read."""
        self._sync_policies(placement_of(name).namespace_name)
        return self.bundle_of(name)

    def _sync_policies(self, namespace: str) -> None:
        # One session reads in order, so a read of the policies after an ownership
        # node sees what was written before that node changed. Policies in another
        # store are read on another session: that one catches up with the leader
        # first, which orders it after the ownership read.
        if self._configuration_store is not None:
            self._configuration_store.sync(NamespaceResources.path(namespace))

    def bundle_of(self, name: TopicName) -> OwnedBundle:
        # A coordinator's own topics are served with the coordinator's bundle.
        name = placement_of(name)
        namespace = name.namespace_name
        return namespace, bundle_of(self.bundles(namespace), name.full)

    def owner_http_url(self, owned: OwnedBundle, secure: bool) -> str | None:
        """The web URL of the bundle's owner (``None``: nobody owns it)."""
        owner = self.ownership.owner(*owned)
        if owner is None:
            return None
        return _web_url(owner.urls, secure)

    def admin_target(self, name: TopicName, authoritative: bool, secure: bool) -> str | None:
        """Where an admin request on topic ``name`` must go: ``None`` when this broker
        serves it (acquiring its bundle if it is the one to own it), else the web URL
        of the broker that does, as Pulsar redirects admin requests (307)."""
        answer = self.lookup(name, authoritative, "")
        if not answer.redirect:
            return None
        url = _web_url(answer.data, secure)
        if url is None:
            raise ServiceNotReady(f"the owner of {name.full} has no web service URL")
        return url

    async def unload(self, owned: OwnedBundle) -> bool:
        """Unload a bundle this broker owns: refuse its topics, close them, delete
        the ownership node; the next lookup assigns it again. Returns whether this
        broker owned it."""
        if owned not in self.owned:
            return False
        self.session.require_serving()
        await self._release(owned, delete_node=True)
        self.report()
        log.info("unloaded bundle %s", bundle_key(*owned))
        return True

    @property
    def settings(self) -> LoadBalancerConfig:
        return self._settings

    def acquire(self, owned: OwnedBundle) -> bool:
        """Take an unowned bundle (an admin operation asked this member to act on
        it); returns whether this member owns it now.

        Raises:
            ServiceNotReady: this member is not serving.
            MetadataError: the store failed.
        """
        self.session.require_serving()
        if owned in self.owned:
            return True
        if owned in self._releasing:
            raise ServiceNotReady(f"Namespace bundle {bundle_key(*owned)} is being unloaded")
        owner = self.ownership.owner(*owned)
        if owner == self.ownership.me:  # an earlier session's node (see ``lookup``)
            raise ServiceNotReady(
                f"Namespace bundle {bundle_key(*owned)} is still held by an earlier "
                f"session of broker {self.broker_id}"
            )
        if owner is not None:
            return False
        # Read after the node was seen absent, so a split that deleted it is seen (as
        # in ``lookup``): a parent bundle is never acquired again.
        self._sync_policies(owned[0])
        if not self.bundles(owned[0]).contains(owned[1]):
            raise ResourceNotFoundError(f"Bundle {bundle_key(*owned)} does not exist")
        return self._acquire(owned)[0]

    async def split(
        self, owned: OwnedBundle, algorithm: str, unload: bool
    ) -> tuple[BundleRange, BundleRange] | None:
        """Split a bundle this broker owns in two, as Pulsar's owner does; returns
        the two halves, or ``None`` when this broker does not own the bundle.

        The halves' ownership nodes are created first (no member maps a topic to
        them before the new boundaries are stored), then the namespace's boundaries
        are replaced by a compare-and-set, then the parent's node is deleted. None of
        these steps awaits, so this member's topics of the parent are served
        throughout: each now falls in the half its hash is in. With ``unload`` the
        halves are unloaded afterwards, for the load manager to place them.

        Raises:
            PreconditionFailedError: unknown algorithm, nothing to divide, or the
                namespace has ``loadBalancerNamespaceMaximumBundles`` bundles.
            ConflictError: a half's ownership node is held by another broker.
            ServiceNotReady: this member is not serving.
        """
        if owned not in self.owned:
            return None
        self.session.require_serving()
        namespace, parent = owned
        hashes = [
            topic_hash(placement_of(name).full)
            for bundle, name, _ in self.loaded_topics()
            if bundle == owned
        ]
        boundary = split_boundary(parent, algorithm, hashes)
        children = (BundleRange(parent.low, boundary), BundleRange(boundary, parent.high))
        self._own_split(owned, boundary, children)
        log.info(
            "split bundle %s into %s and %s", bundle_key(*owned),
            children[0].name, children[1].name,
        )
        if unload:
            for child in children:
                if (namespace, child) in self.owned:
                    await self._release((namespace, child), delete_node=True)
            self.report()
        return children

    def _own_split(
        self, owned: OwnedBundle, boundary: int, children: tuple[BundleRange, BundleRange]
    ) -> None:
        settings = self._settings
        write_split(
            self.ownership, self._service.resources.namespaces, owned, boundary,
            max_bundles=settings.load_balancer_namespace_maximum_bundles,
            default_bundles=settings.default_number_of_namespace_bundles,
        )
        namespace = owned[0]
        self.owned.discard(owned)
        self.owned.update((namespace, child) for child in children)
        try:
            self.ownership.release(*owned)
        except QuasarError as exc:
            # Harmless once the boundaries no longer name it: lookups recompute the
            # bundle, and the session's end removes the node.
            log.warning("could not delete ownership of %s: %s", bundle_key(*owned), exc)
        self.report()

    async def split_overloaded(self) -> OwnedBundle | None:
        """Split the owned bundle most over Pulsar's split thresholds, if any
        (``quasar.cluster.bundle_split``); returns the bundle split."""
        return await self.rebalancing.split_overloaded()

    async def shed_load(self) -> OwnedBundle | None:
        """Unload one bundle when this member is the most loaded one by enough
        (``quasar.cluster.load_shedding``); returns the bundle unloaded."""
        return await self.rebalancing.shed_load()

    def loaded_topics(self) -> Iterator[tuple[OwnedBundle, TopicName, TopicLoad]]:
        """Each loaded topic of an owned bundle: its bundle, its name and its load
        (sessions, messages and bytes in plus out per second)."""
        return loaded_topics(self._service, self.owned, self.bundles)

    def require_serving(self) -> None:
        """Return if this member serves now: its session is connected and its loop
        was not paused (a pause is noticed here, at once).

        Raises:
            ServiceNotReady: it does not.
        """
        self.session.require_serving()

    # -- internals ---------------------------------------------------------------------
    def _redirect(self, data: LookupData | None, listener: str) -> LookupAnswer:
        if data is None:
            raise ServiceNotReady(f"the broker do not have {listener} listener")
        return LookupAnswer(data, True, True)

    def _acquire(self, owned: OwnedBundle) -> tuple[bool, NamespaceEphemeralData]:
        acquired, owner = self.ownership.try_acquire(*owned)
        if acquired:
            self.owned.add(owned)
            self.rebalancing.note_moved(bundle_key(*owned))
            log.info("acquired bundle %s", bundle_key(*owned))
            self.report()
            for listener in self.on_bundle_acquired:
                listener(owned)
        return acquired, owner

    async def _close_topics(self, owned_bundles: Iterable[OwnedBundle]) -> None:
        await close_topics(
            self._service, set(owned_bundles), self.bundle_of, self.on_bundles_closing
        )

    async def _release(self, owned: OwnedBundle, delete_node: bool) -> None:
        self.owned.discard(owned)
        self._releasing.add(owned)
        try:
            await self._close_topics([owned])
            if delete_node:
                try:
                    self.ownership.release(*owned)
                except QuasarError as exc:  # the session's end removes it anyway
                    log.warning(
                        "could not delete ownership of %s: %s", bundle_key(*owned), exc
                    )
        finally:
            self._releasing.discard(owned)

    def report(self) -> None:
        """Write this member's load report (a failure is logged: the next one retries)."""
        service = self._service
        topics = list(service.topics.values())
        load = LoadReport(
            tuple(sorted(bundle_key(*o) for o in self.owned)),
            len(topics),
            sum(t.rate_in.msg_rate for t in topics),
            sum(t.rate_out.msg_rate for t in topics),
            int(time.time() * 1000),
        )
        try:
            self.registry.report(load)
        except QuasarError as exc:
            log.warning("could not write the load report: %s", exc)

    def _stop_serving(
        self, state: SessionState, was_serving: bool
    ) -> Coroutine[Any, Any, None]:
        if was_serving:
            log.warning(
                "metadata-store session %s: broker %s stops serving its %d bundles",
                state.value, self.broker_id, len(self.owned),
            )
        return self._close_topics(list(self.owned))

    def _resume_serving(self, same_session: bool) -> None:
        if same_session and self.registry.is_registered():
            # The same session: its nodes survived; keep those that name us.
            self.owned = {o for o in self.owned if self.ownership.is_mine(*o)}
        else:
            # A new session: ZooKeeper deleted the old one's nodes, other brokers
            # may own those bundles now.
            self.owned.clear()
            self.registry.register()
        self.report()
