"""The policy objects a consumer is configured with, named as in ``pulsar``.

``pulsar.ConsumerDeadLetterPolicy`` and ``pulsar.ConsumerBatchReceivePolicy`` are
accepted too: :func:`dead_letter_policy_of` and :func:`batch_receive_policy_of` turn
either into ours, so code written for ``pulsar`` runs unchanged.
"""

from __future__ import annotations

from typing import Any

from quasar.client.exceptions import InvalidConfiguration


class ConsumerDeadLetterPolicy:
    """When and where a consumer dead-letters messages (``pulsar.ConsumerDeadLetterPolicy``).

    Raises:
        ValueError: ``max_redeliver_count`` below 1, as in ``pulsar``.
    """

    def __init__(
        self,
        max_redeliver_count: int,
        dead_letter_topic: str | None = None,
        initial_subscription_name: str | None = None,
    ) -> None:
        if max_redeliver_count is None or max_redeliver_count < 1:
            raise ValueError("max_redeliver_count must be greater than 0")
        self._max_redeliver_count = int(max_redeliver_count)
        self._dead_letter_topic = dead_letter_topic or ""
        self._initial_subscription_name = initial_subscription_name or ""

    @property
    def max_redeliver_count(self) -> int:
        return self._max_redeliver_count

    @property
    def dead_letter_topic(self) -> str:
        """The configured topic; empty means ``<topic>-<subscription>-DLQ``."""
        return self._dead_letter_topic

    @property
    def initial_subscription_name(self) -> str:
        """A subscription created with the dead-letter topic's producer, so what is
        dead-lettered is retained from the first message; empty: none."""
        return self._initial_subscription_name

    def __repr__(self) -> str:
        return (
            f"ConsumerDeadLetterPolicy(max_redeliver_count={self._max_redeliver_count}, "
            f"dead_letter_topic={self._dead_letter_topic!r}, "
            f"initial_subscription_name={self._initial_subscription_name!r})"
        )


def dead_letter_policy_of(value: Any) -> ConsumerDeadLetterPolicy | None:
    """Ours, or the official ``pulsar.ConsumerDeadLetterPolicy`` (same properties).

    Raises:
        InvalidConfiguration: anything else.
    """
    if value is None or isinstance(value, ConsumerDeadLetterPolicy):
        return value
    try:
        return ConsumerDeadLetterPolicy(
            value.max_redeliver_count,
            value.dead_letter_topic or None,
            value.initial_subscription_name or None,
        )
    except AttributeError:
        raise InvalidConfiguration(
            f"dead_letter_policy must be a ConsumerDeadLetterPolicy, "
            f"not {type(value).__name__}"
        ) from None


class ConsumerBatchReceivePolicy:
    """How much ``batch_receive()`` returns (``pulsar.ConsumerBatchReceivePolicy``).

    A batch is complete when it holds ``max_num_message`` messages or
    ``max_num_bytes`` payload bytes, or when ``timeout_ms`` passed; a limit below 1
    (or, for the timeout, below 0) is no limit. Without a policy a consumer uses
    Pulsar's default: no count limit, 10 MiB, 100 ms.

    Raises:
        ValueError: no limit at all, as in ``pulsar``.
    """

    def __init__(self, max_num_message: int, max_num_bytes: int, timeout_ms: int) -> None:
        if max_num_message <= 0 and max_num_bytes <= 0 and timeout_ms <= 0:
            raise ValueError(
                "At least one of maxNumMessages, maxNumBytes and timeoutMs must be "
                "specified."
            )
        self.max_num_message = int(max_num_message)
        self.max_num_bytes = int(max_num_bytes)
        self.timeout_ms = int(timeout_ms)

    def __repr__(self) -> str:
        return (
            f"ConsumerBatchReceivePolicy({self.max_num_message}, "
            f"{self.max_num_bytes}, {self.timeout_ms})"
        )


DEFAULT_BATCH_RECEIVE_POLICY = ConsumerBatchReceivePolicy(-1, 10 * 1024 * 1024, 100)


def batch_receive_policy_of(value: Any) -> ConsumerBatchReceivePolicy:
    """Ours, the official ``pulsar.ConsumerBatchReceivePolicy``, or the default.

    Raises:
        InvalidConfiguration: anything else.
    """
    if value is None:
        return DEFAULT_BATCH_RECEIVE_POLICY
    if isinstance(value, ConsumerBatchReceivePolicy):
        return value
    try:
        inner = value.policy()
        return ConsumerBatchReceivePolicy(
            inner.getMaxNumMessages(), inner.getMaxNumBytes(), inner.getTimeoutMs()
        )
    except AttributeError:
        raise InvalidConfiguration(
            f"batch_receive_policy must be a ConsumerBatchReceivePolicy, "
            f"not {type(value).__name__}"
        ) from None
