"""``TransactionCoordinatorRegistry``: the coordinators one broker hosts.

Coordinator ``n`` is partition ``n`` of ``pulsar/system/transaction_coordinator_assign``;
there are ``coordinator_count`` of them. Each has its own log managed ledger, named by
the broker through ``log_name(n)`` (``transaction_log_ledger_name`` gives Pulsar's
``pulsar/system/__transaction_log_<n>``). Which coordinators this broker should host
(namespace-bundle ownership) is the caller's decision.

Each coordinator also gets a terminated-transaction preserver (PIP-255) over the store
``preserver_store(n)`` returns (the broker's is the compacted topic
``pulsar/system/__terminated_txn_state_<n>``); without ``preserver_store`` there is
none, and an END_TXN for an ended transaction is ``TransactionNotFound`` as before.

Loading follows Pulsar's TC_CLIENT_CONNECT flow: ``connect(n)`` loads coordinator ``n``
if needed (open the ledger, replay, re-drive) and returns it; concurrent connects
share one load and its outcome. Requests go to ``get(n)`` / ``route(txn_id)``, which
never load: a coordinator that is not loaded, still recovering or fenced answers
``TransactionCoordinatorNotFound``, and the client reconnects. A coordinator whose log
append failed is dropped (and its ledger closed) so the next connect reloads it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from quasar.clock import Clock
from quasar.errors import (
    BrokerError,
    CorruptRecordError,
    PreconditionFailedError,
    TransactionCoordinatorNotFound,
)
from quasar.protocol import TopicName
from quasar.protocol.txn_id import TxnID
from quasar.storage.api import ManagedLedgerConfig, ManagedLedgerFactory, Position

from .batched_log import BatchedLogControl
from .buffer_client import TransactionBufferClient
from .coordinator import (
    CoordinatorConfig,
    CoordinatorStatus,
    TransactionCoordinator,
    TxnMeta,
)
from .coordinator.log import set_aside_entry
from .coordinator.ownership import BROKER, Caller
from .coordinator.preserver import PreserverStore
from .coordinator.preserver_format import TerminatedTxn
from .corrupt_records import CorruptLog, CorruptRecords
from .scheduler import AsyncioScheduler, Scheduler

log = logging.getLogger(__name__)

SYSTEM_NAMESPACE = "pulsar/system"
TRANSACTION_LOG_PREFIX = "__transaction_log_"
TRANSACTION_COORDINATOR_ASSIGN = f"persistent://{SYSTEM_NAMESPACE}/transaction_coordinator_assign"


def transaction_log_topic(tc_id: int) -> str:
    """``persistent://pulsar/system/__transaction_log_<tc_id>`` (Pulsar's name)."""
    return f"persistent://{SYSTEM_NAMESPACE}/{TRANSACTION_LOG_PREFIX}{tc_id}"


def transaction_log_ledger_name(tc_id: int) -> str:
    """The managed-ledger name of that topic (its persistence name)."""
    return TopicName.parse(transaction_log_topic(tc_id)).persistence_name


@dataclass(frozen=True)
class LoadFailure:
    """Why a coordinator last failed to load: the error, and for an unreadable record
    its log and position (what ``set_aside`` needs)."""

    error: str
    log_name: str | None
    position: str | None
    time_ms: int


@dataclass
class ClientTransactions:
    """What every coordinator knows about one client name's transactions."""

    client_name: str
    live: list[TxnMeta] = field(default_factory=list)  # OPEN, COMMITTING, ABORTING
    terminated: list[TerminatedTxn] = field(default_factory=list)  # preserved outcomes
    unavailable: list[int] = field(default_factory=list)  # coordinators not asked


class TransactionCoordinatorRegistry:
    """Loads, routes to and unloads this broker's transaction coordinators."""

    def __init__(
        self,
        factory: ManagedLedgerFactory,
        buffer_client: TransactionBufferClient,
        *,
        coordinator_count: int,
        clock: Clock,
        config: CoordinatorConfig | None = None,
        log_name: Callable[[int], str] = transaction_log_ledger_name,
        ledger_config: ManagedLedgerConfig | None = None,
        scheduler: Scheduler | None = None,
        preserver_store: Callable[[int], PreserverStore] | None = None,
        batched_log: BatchedLogControl | None = None,
        corrupt_records: CorruptRecords | None = None,
        owns: Callable[[int], bool] | None = None,
    ) -> None:
        """``owns(n)``: whether this broker may host coordinator ``n`` now (in a
        cluster, whether it owns the coordinator's bundle); ``None``: every one."""
        if coordinator_count < 1:
            raise ValueError("coordinator_count must be >= 1")
        self._factory = factory
        self._client = buffer_client
        self._count = coordinator_count
        self._clock = clock
        self._config = config if config is not None else CoordinatorConfig()
        self._log_name = log_name
        self._ledger_config = ledger_config
        self._scheduler: Scheduler = scheduler if scheduler is not None else AsyncioScheduler()
        self._preserver_store = preserver_store
        self._batched_log = batched_log
        self._owns = owns
        self._coordinators: dict[int, TransactionCoordinator] = {}
        self._loading: dict[int, asyncio.Task[TransactionCoordinator]] = {}
        self._unloading: dict[int, asyncio.Task[None]] = {}
        self._closed = False
        self._corrupt = corrupt_records if corrupt_records is not None else CorruptRecords()
        # Why each coordinator last failed to load (cleared by a load that succeeds),
        # for the admin's coordinatorStats.
        self.load_failures: dict[int, LoadFailure] = {}

    @property
    def coordinator_count(self) -> int:
        return self._count

    def loaded(self) -> list[int]:
        """Ids of the coordinators loaded (ready or not)."""
        return sorted(self._coordinators)

    def coordinators(self) -> list[TransactionCoordinator]:
        """The coordinators loaded (ready or not), by id (stats, metrics)."""
        return [self._coordinators[i] for i in sorted(self._coordinators)]

    # ------------------------------------------------------------------ loading

    async def start(self, tc_ids: Sequence[int] | None = None) -> None:
        """Load coordinators eagerly (all of them when ``tc_ids`` is ``None``).

        A coordinator that fails to load is logged and left unloaded; a later
        ``connect`` retries it.
        """
        ids = range(self._count) if tc_ids is None else tc_ids
        results = await asyncio.gather(*(self.connect(i) for i in ids), return_exceptions=True)
        for tc_id, res in zip(ids, results, strict=True):
            if isinstance(res, BaseException):
                log.warning("transaction coordinator %d failed to load: %s", tc_id, res)

    async def connect(self, tc_id: int) -> TransactionCoordinator:
        """TC_CLIENT_CONNECT: load coordinator ``tc_id`` if needed; return it ready.

        Raises:
            TransactionCoordinatorNotFound: unknown id, registry closed, not owned by
                this broker, or the load failed (retryable; the cause is chained).
        """
        self._check_id(tc_id)
        self._check_owned(tc_id)
        existing = self._coordinators.get(tc_id)
        if existing is not None and existing.status is CoordinatorStatus.READY:
            return existing
        task = self._loading.get(tc_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(tc_id))
            self._loading[tc_id] = task
            task.add_done_callback(lambda t: self._loading.pop(tc_id, None))
        return await asyncio.shield(task)

    async def _load(self, tc_id: int) -> TransactionCoordinator:
        pending_unload = self._unloading.get(tc_id)
        if pending_unload is not None:
            await asyncio.shield(pending_unload)
        old = self._coordinators.get(tc_id)
        if old is not None and old.status is CoordinatorStatus.READY:
            return old
        if old is not None:
            await self._unload(tc_id, old)
        try:
            ledger = await self._factory.open(self._log_name(tc_id), self._ledger_config)
        except Exception as exc:
            raise self._not_found(tc_id, f"cannot open its log: {exc}") from exc
        tc = TransactionCoordinator(
            tc_id,
            ledger,
            self._clock,
            self._config,
            self._client,
            scheduler=self._scheduler,
            on_fenced=self._on_fenced,
            preserver_store=(
                self._preserver_store(tc_id) if self._preserver_store is not None else None
            ),
            batched_log=self._batched_log,
        )
        self._coordinators[tc_id] = tc
        try:
            await tc.start()
        except BaseException as exc:
            await self._unload(tc_id, tc)
            if isinstance(exc, Exception):
                self._load_failed(tc_id, exc)
                raise self._not_found(tc_id, f"recovery failed: {exc}") from exc
            raise
        self.load_failures.pop(tc_id, None)
        if self._closed:
            await self._unload(tc_id, tc)
            raise self._not_found(tc_id, "the registry is closed")
        return tc

    def _on_fenced(self, tc: TransactionCoordinator) -> None:
        if self._coordinators.get(tc.tc_id) is tc and tc.tc_id not in self._unloading:
            task = asyncio.get_running_loop().create_task(self._unload(tc.tc_id, tc))
            self._unloading[tc.tc_id] = task
            task.add_done_callback(lambda t: self._unloading.pop(tc.tc_id, None))

    async def unload(self, tc_id: int) -> None:
        """Close coordinator ``tc_id`` and its log ledger (e.g. its bundle moved)."""
        task = self._loading.get(tc_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        tc = self._coordinators.get(tc_id)
        if tc is not None:
            await self._unload(tc_id, tc)

    async def _unload(self, tc_id: int, tc: TransactionCoordinator) -> None:
        if self._coordinators.get(tc_id) is tc:
            del self._coordinators[tc_id]
        await tc.close()
        try:
            await tc.ledger.close()
        except Exception:
            log.warning("closing the log of coordinator %d failed", tc_id, exc_info=True)

    async def close(self) -> None:
        """Unload every coordinator."""
        self._closed = True
        pending: list[asyncio.Task[TransactionCoordinator] | asyncio.Task[None]] = [
            *self._loading.values(),
            *self._unloading.values(),
        ]
        await asyncio.gather(*pending, return_exceptions=True)
        for tc_id, tc in list(self._coordinators.items()):
            await self._unload(tc_id, tc)

    def _load_failed(self, tc_id: int, exc: Exception) -> None:
        corrupt = exc if isinstance(exc, CorruptRecordError) else None
        if corrupt is not None:
            self._corrupt.found(CorruptLog.TRANSACTION_LOG, corrupt)
        log.error("transaction coordinator %d failed to load: %s", tc_id, exc)
        self.load_failures[tc_id] = LoadFailure(
            str(exc),
            corrupt.log_name if corrupt is not None else None,
            corrupt.position if corrupt is not None else None,
            self._clock.wall_ms(),
        )

    async def set_aside(self, tc_id: int, position: Position) -> bytes:
        """Set the unreadable entry at ``position`` of coordinator ``tc_id``'s log
        aside (``coordinator.log.set_aside_entry``), then load the coordinator again;
        returns the entry's bytes.

        Raises:
            PreconditionFailedError: the coordinator is serving (its log was read), or
                the entry is readable or already set aside.
            ResourceNotFoundError: no such entry.
            TransactionCoordinatorNotFound: unknown id. A load that fails again
                afterwards (at a further unreadable entry, say) is not raised: the
                entry is set aside all the same, and ``load_failures`` says why.
        """
        self._check_id(tc_id)
        self._check_owned(tc_id)
        existing = self._coordinators.get(tc_id)
        if existing is not None and existing.status is CoordinatorStatus.READY:
            raise PreconditionFailedError(
                f"Transaction coordinator {tc_id} is serving: its log has no unreadable entry"
            )
        await self.unload(tc_id)
        ledger = await self._factory.open(self._log_name(tc_id), self._ledger_config)
        try:
            data = await set_aside_entry(ledger, position)
        finally:
            await ledger.close()
        try:
            await self.connect(tc_id)
        except TransactionCoordinatorNotFound as exc:
            # The entry is set aside all the same; ``load_failures`` names what
            # stops the coordinator now (another unreadable entry, say).
            log.warning("coordinator %d still fails to load: %s", tc_id, exc)
        return data

    # ------------------------------------------------------------------ routing

    def get(self, tc_id: int) -> TransactionCoordinator:
        """The ready coordinator ``tc_id``.

        Raises:
            TransactionCoordinatorNotFound: unknown id, not loaded, recovering, closing.
        """
        self._check_id(tc_id)
        tc = self._coordinators.get(tc_id)
        if tc is None or tc.status is not CoordinatorStatus.READY:
            state = "not loaded" if tc is None else tc.status.value
            raise self._not_found(tc_id, state)
        return tc

    def route(self, txn_id: TxnID) -> TransactionCoordinator:
        """The coordinator of a transaction (by its most significant bits).

        Raises:
            TransactionCoordinatorNotFound: as ``get``.
        """
        return self.get(txn_id.most_bits)

    async def client_transactions(
        self,
        client_name: str,
        caller: Caller = BROKER,
        coordinators: Sequence[int] | None = None,
    ) -> ClientTransactions:
        """``client_name``'s live and preserved transactions on every coordinator (or
        on ``coordinators``), of the owners ``caller`` may act on
        (``Caller.may_act_on``).

        Coordinators are loaded as a TC_CLIENT_CONNECT would load them (after a
        restart nothing may have loaded them yet); one that cannot be loaded is listed
        in ``unavailable`` rather than failing the whole answer.
        """
        out = ClientTransactions(client_name)
        for tc_id in range(self._count) if coordinators is None else coordinators:
            try:
                tc = await self.connect(tc_id)
                live, terminated = tc.client_transactions(client_name, caller)
            except TransactionCoordinatorNotFound as exc:
                log.info("client transactions: coordinator %d unavailable: %s", tc_id, exc)
                out.unavailable.append(tc_id)
                continue
            out.live.extend(live)
            out.terminated.extend(terminated)
        return out

    # ------------------------------------------------------------------ helpers

    def _check_id(self, tc_id: int) -> None:
        if self._closed:
            raise self._not_found(tc_id, "the registry is closed")
        if not 0 <= tc_id < self._count:
            raise TransactionCoordinatorNotFound(
                f"Transaction coordinator with id {tc_id} not found"
            )

    def _check_owned(self, tc_id: int) -> None:
        # Only the owner of a coordinator's bundle may open its log: two brokers
        # appending to one log would interleave two coordinators' records.
        if self._owns is not None and not self._owns(tc_id):
            raise self._not_found(tc_id, "its bundle is not owned by this broker")

    @staticmethod
    def _not_found(tc_id: int, why: str) -> BrokerError:
        return TransactionCoordinatorNotFound(
            f"Transaction coordinator with id {tc_id} not found: {why}"
        )
