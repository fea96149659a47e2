"""``ClusterMember``: this broker as a member of a cluster (``quasar broker``).

It registers the broker (``registry``), owns the bundles it acquired (``ownership``),
answers lookups (owned here: Connect; owned elsewhere: Redirect to the owner; unowned:
the load manager's choice, acquired here when that is this broker or the lookup is
authoritative), refuses to serve topics of bundles it does not own, and unloads
bundles. It is the broker service's ``TopicOwnership``.

ZooKeeper session: on SUSPENDED (connection lost) or LOST (session expired) the
member stops serving every bundle at once: ``serving`` turns false (every topic
load, lookup and new producer or consumer is refused) and the topics of its bundles
are closed. A suspended session may come back within the session timeout with its
ephemeral nodes intact; the member then keeps the bundles whose nodes still name it.
After LOST ZooKeeper has deleted those nodes and other brokers may own the bundles:
the member forgets them and registers again on the new session.

Threading: kazoo reports session changes on its own thread; the listener only hands
them to the event loop, where all of the member's state lives.
"""

from __future__ import annotations

import asyncio
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

from .bundle_split import BundleLoad, SplitThresholds, bundle_to_split, write_split
from .coordinator_topics import placement_of
from .load_manager import LoadManager
from .load_shedding import SheddingSettings, bundle_to_shed
from .ownership import BundleOwnership, NamespaceEphemeralData
from .registry import BrokerRegistry, LoadReport, registration_of

__all__ = ["ClusterMember", "OwnedBundle"]

log = logging.getLogger(__name__)

OwnedBundle = tuple[str, BundleRange]  # (tenant/namespace, bundle)
# How often a start-up waiting for an earlier registration to expire looks again.
REGISTER_RETRY_S = 0.5


def bundle_key(namespace: str, bundle: BundleRange) -> str:
    return f"{namespace}/{bundle.name}"


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
        report_s = settings.load_balancer_report_update_min_interval_millis / 1000
        self.load_manager = LoadManager(
            pending_ttl_s=2 * report_s,
            pending_max_per_broker=settings.load_balancer_namespace_maximum_bundles,
        )
        self._report_s = report_s
        # Bounded by the namespaces' bundles (each at most
        # loadBalancerNamespaceMaximumBundles): only real bundles are ever acquired.
        self.owned: set[OwnedBundle] = set()
        # Bundles being given up: refused until their node is deleted, so that a
        # lookup meanwhile never adopts a node that is about to go.
        self._releasing: set[OwnedBundle] = set()
        # Bundle key -> when (monotonic) this member acquired or shed it: load
        # shedding leaves such a bundle alone for the grace period. Expired entries
        # go on every insertion, so it holds only bundles moved within one period.
        self._moved_at: dict[str, float] = {}
        self._grace_period_s = settings.load_balancer_shedding_grace_period_minutes * 60
        self._shedding_task: asyncio.Task[None] | None = None
        self.serving = False
        self._session_id: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._report_task: asyncio.Task[None] | None = None
        # The loop's heartbeat: a process stopped (SIGSTOP, a VM pause) longer than
        # the session timeout has lost its session, but kazoo notices only after the
        # loop may already have taken requests. A gap this long stops serving first.
        self._pause_limit_s = session_timeout_ms / 2000
        self._heartbeat_s = min(0.5, self._pause_limit_s / 4)
        self._last_beat = time.monotonic()
        self._heartbeat_task: asyncio.Task[None] | None = None
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
        self._loop = asyncio.get_running_loop()
        self._register_when_free()
        self._session_id = self._store.session_id
        self.serving = True
        self._store.add_session_listener(self._on_session_change)
        self._report_task = self._loop.create_task(self._report_periodically())
        if self._settings.load_balancer_shedding_enabled:
            self._shedding_task = self._loop.create_task(self._shed_periodically())
        self._last_beat = time.monotonic()
        self._heartbeat_task = self._loop.create_task(self._beat())
        log.info("registered as cluster member %s", self.broker_id)

    def _register_when_free(self) -> None:
        """Register; while the node of this broker id's previous run (killed before
        its session ended) still exists, wait for ZooKeeper to expire it, at most
        one session timeout and a half (blocking: nothing listens yet)."""
        deadline = time.monotonic() + 3 * self._pause_limit_s
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
        for task in (self._report_task, self._heartbeat_task, self._shedding_task):
            if task is not None:
                task.cancel()
        was_serving, self.serving = self.serving, False
        for owned in sorted(self.owned):
            await self._release(owned, delete_node=was_serving)
        if was_serving:
            self.registry.deregister()

    # -- TopicOwnership ----------------------------------------------------------------
    def check_serving(self, name: TopicName) -> None:
        self._require_serving()
        owned = self.bundle_of(name)
        if owned not in self.owned:
            raise ServiceNotReady(
                f"Namespace bundle {bundle_key(*owned)} is not served by broker "
                f"{self.broker_id}: look the topic up first"
            )

    def lookup(
        self, name: TopicName, authoritative: bool, listener: str, *, again: bool = True
    ) -> LookupAnswer:
        self._require_serving()
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
        urls = owner.urls
        return (urls.http_url_tls or urls.http_url) if secure else (
            urls.http_url or urls.http_url_tls
        )

    def admin_target(self, name: TopicName, authoritative: bool, secure: bool) -> str | None:
        """Where an admin request on topic ``name`` must go: ``None`` when this broker
        serves it (acquiring its bundle if it is the one to own it), else the web URL
        of the broker that does, as Pulsar redirects admin requests (307)."""
        answer = self.lookup(name, authoritative, "")
        if not answer.redirect:
            return None
        data = answer.data
        url = (data.http_url_tls or data.http_url) if secure else (
            data.http_url or data.http_url_tls
        )
        if url is None:
            raise ServiceNotReady(f"the owner of {name.full} has no web service URL")
        return url

    async def unload(self, owned: OwnedBundle) -> bool:
        """Unload a bundle this broker owns: refuse its topics, close them, delete
        the ownership node; the next lookup assigns it again. Returns whether this
        broker owned it."""
        if owned not in self.owned:
            return False
        self._require_serving()
        await self._release(owned, delete_node=True)
        self._report()
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
        self._require_serving()
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
        self._require_serving()
        namespace, parent = owned
        hashes = [
            topic_hash(placement_of(name).full)
            for bundle, name, _ in self._loaded_topics()
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
            self._report()
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
        self._report()

    async def split_overloaded(self) -> OwnedBundle | None:
        """Split the owned bundle most over Pulsar's split thresholds, if any
        (``quasar.cluster.bundle_split``); returns the bundle split."""
        settings = self._settings
        loads: dict[OwnedBundle, BundleLoad] = {}
        for owned, _, load in self._loaded_topics():
            loads.setdefault(owned, BundleLoad()).add(*load)
        counts = {ns: self.bundles(ns).num_bundles for ns, _ in loads}
        choice = bundle_to_split(
            loads, counts, SplitThresholds.of(settings),
            settings.load_balancer_namespace_maximum_bundles,
        )
        if choice is None:
            return None
        owned, reason = choice
        log.info("bundle %s is over a split threshold: %s", bundle_key(*owned), reason)
        await self.split(
            owned,
            settings.default_namespace_bundle_split_algorithm,
            settings.load_balancer_auto_unload_split_bundles_enabled,
        )
        return owned

    async def shed_load(self) -> OwnedBundle | None:
        """Unload one bundle when this member is the most loaded one by enough
        (``quasar.cluster.load_shedding``); returns the bundle unloaded."""
        settings = SheddingSettings.of(self._settings)
        now = time.monotonic()
        loads = {bundle_key(*owned): BundleLoad() for owned in self.owned}
        for owned, _, load in self._loaded_topics():
            loads[bundle_key(*owned)].add(*load)
        choice = bundle_to_shed(
            self.broker_id, self.registry.live_brokers(), loads, self._moved_at, now,
            settings,
        )
        if choice is None:
            return None
        key, reason = choice
        owned = next(o for o in self.owned if bundle_key(*o) == key)
        log.info("shedding bundle %s: %s", key, reason)
        self._note_moved(key)
        await self.unload(owned)
        return owned

    def _note_moved(self, key: str) -> None:
        if not self._settings.load_balancer_shedding_enabled:
            return
        now = time.monotonic()
        for moved, at in list(self._moved_at.items()):
            if now - at >= self._grace_period_s:
                del self._moved_at[moved]
        self._moved_at[key] = now

    async def _shed_periodically(self) -> None:
        interval_s = self._settings.load_balancer_shedding_interval_minutes * 60
        while True:
            await asyncio.sleep(interval_s)
            if not self.serving:
                continue
            try:
                await self.shed_load()
            except QuasarError as exc:  # tried again on the next interval
                log.warning("could not shed load: %s", exc)

    def _loaded_topics(
        self,
    ) -> Iterator[tuple[OwnedBundle, TopicName, tuple[int, float, float]]]:
        """Each loaded topic of an owned bundle: its bundle, its name and its load
        (sessions, messages and bytes in plus out per second). Each namespace's
        boundaries are read once per pass."""
        service = self._service
        namespaces: dict[str, BundlesData | None] = {}

        def owned_bundle(name: TopicName) -> OwnedBundle | None:
            placed = placement_of(name)
            ns = placed.namespace_name
            if ns not in namespaces:
                try:
                    namespaces[ns] = self.bundles(ns)
                except QuasarError:  # deleted meanwhile: its topics are closing
                    namespaces[ns] = None
            bundles = namespaces[ns]
            if bundles is None:
                return None
            owned = (ns, bundle_of(bundles, placed.full))
            return owned if owned in self.owned else None

        for topic in list(service.topics.values()):
            owned = owned_bundle(topic.topic_name)
            if owned is not None:
                yield owned, topic.topic_name, (
                    len(topic.producers) + topic.consumer_count(),
                    topic.rate_in.msg_rate + topic.rate_out.msg_rate,
                    topic.rate_in.byte_rate + topic.rate_out.byte_rate,
                )
        for np_topic in list(service.non_persistent.topics.values()):
            owned = owned_bundle(np_topic.topic_name)
            if owned is not None:
                yield owned, np_topic.topic_name, (
                    len(np_topic.producers) + np_topic.consumer_count(),
                    np_topic.rate_in.msg_rate,
                    np_topic.rate_in.byte_rate,
                )

    def require_serving(self) -> None:
        """Return if this member serves now: its session is connected and its loop
        was not paused (a pause is noticed here, at once).

        Raises:
            ServiceNotReady: it does not.
        """
        self._require_serving()

    # -- internals ---------------------------------------------------------------------
    def _require_serving(self) -> None:
        if self.serving and time.monotonic() - self._last_beat > self._pause_limit_s:
            self._paused()
        if not self.serving or self._store.session_state is not SessionState.CONNECTED:
            raise ServiceNotReady(
                f"Broker {self.broker_id} is not serving: its metadata-store session "
                "is not connected"
            )

    def _redirect(self, data: LookupData | None, listener: str) -> LookupAnswer:
        if data is None:
            raise ServiceNotReady(f"the broker do not have {listener} listener")
        return LookupAnswer(data, True, True)

    def _acquire(self, owned: OwnedBundle) -> tuple[bool, NamespaceEphemeralData]:
        acquired, owner = self.ownership.try_acquire(*owned)
        if acquired:
            self.owned.add(owned)
            self._note_moved(bundle_key(*owned))
            log.info("acquired bundle %s", bundle_key(*owned))
            self._report()
            for listener in self.on_bundle_acquired:
                listener(owned)
        return acquired, owner

    def _topics_of(self, owned_bundles: Iterable[OwnedBundle]) -> list[str]:
        wanted = set(owned_bundles)
        out = []
        for full, topic in list(self._service.topics.items()):
            try:
                if self.bundle_of(topic.topic_name) in wanted:
                    out.append(full)
            except QuasarError:  # namespace deleted meanwhile: close it too
                out.append(full)
        return out

    async def _close_topics(self, owned_bundles: Iterable[OwnedBundle]) -> None:
        service = self._service
        wanted = set(owned_bundles)
        for listener in self.on_bundles_closing:
            try:
                await listener(wanted)
            except Exception:
                log.exception("error stopping what the closing bundles hold")
        for np_topic in list(service.non_persistent.topics.values()):
            try:
                mine = self.bundle_of(np_topic.topic_name) in wanted
            except QuasarError:
                mine = True
            if mine:
                await np_topic.close()
        for full in self._topics_of(wanted):
            topic = service.topics.get(full)
            if topic is None:
                continue
            # Closed before it leaves the table, as a namespace unload does: a client
            # reconnecting meanwhile is refused instead of loading a second copy.
            try:
                await topic.close()
            except Exception:
                log.exception("error closing %s", full)
            if service.topics.get(full) is topic:
                del service.topics[full]

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

    def _report(self) -> None:
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

    async def _report_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._report_s)
            if not self.serving:
                continue
            self._report()
            if not self._settings.load_balancer_auto_bundle_split_enabled:
                continue
            try:
                await self.split_overloaded()
            except QuasarError as exc:  # tried again on the next report
                log.warning("could not split an overloaded bundle: %s", exc)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self._heartbeat_s)
            if self.serving and time.monotonic() - self._last_beat > self._pause_limit_s:
                self._paused()
            self._last_beat = time.monotonic()

    def _paused(self) -> None:
        """The loop stood still long enough for the session to expire: stop serving
        as on SUSPENDED, then serve again only once the session is confirmed."""
        log.warning(
            "the event loop stood still for %.1fs: treating the metadata-store session "
            "as suspended", time.monotonic() - self._last_beat,
        )
        self._last_beat = time.monotonic()
        self._session_changed(SessionState.SUSPENDED)
        self._spawn(self._confirm_session())

    async def _confirm_session(self) -> None:
        # kazoo reports SUSPENDED / LOST / CONNECTED if the session did end; if it
        # did not, nothing is reported, so look again until it is seen connected.
        while not self.serving:
            await asyncio.sleep(self._heartbeat_s)
            if self._store.session_state is SessionState.CONNECTED:
                await self._resume()

    def _on_session_change(self, state: SessionState) -> None:
        # kazoo's connection thread: hand over to the loop, never block here.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._session_changed, state)

    def _session_changed(self, state: SessionState) -> None:
        if state is SessionState.CONNECTED:
            self._spawn(self._resume())
            return
        if self.serving:
            log.warning(
                "metadata-store session %s: broker %s stops serving its %d bundles",
                state.value, self.broker_id, len(self.owned),
            )
        self.serving = False
        if state is SessionState.LOST:
            self._session_id = None
        self._spawn(self._close_topics(list(self.owned)))

    async def _resume(self) -> None:
        if self._store.session_state is not SessionState.CONNECTED or self.serving:
            return
        session_id = self._store.session_id
        try:
            if (
                session_id is not None
                and session_id == self._session_id
                and self.registry.is_registered()
            ):
                # The same session: its nodes survived; keep those that name us.
                self.owned = {o for o in self.owned if self.ownership.is_mine(*o)}
            else:
                # A new session: ZooKeeper deleted the old one's nodes, other brokers
                # may own those bundles now.
                self.owned.clear()
                self.registry.register()
                self._session_id = session_id
        except QuasarError as exc:
            log.warning("could not resume serving after reconnecting: %s", exc)
            return
        self.serving = True
        self._report()
        log.info("metadata-store session connected: broker %s serves again", self.broker_id)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
