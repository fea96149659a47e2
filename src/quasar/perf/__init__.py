"""``quasar perf``: a load generator for Pulsar-protocol brokers, like ``pulsar-perf``.

Modules:

* ``main`` / ``options``: the command line (``quasar perf produce|consume|pubsub|sink``);
* ``run`` / ``pubsub``: one run in this process, or a producer and a consumer in two;
* ``quasar_driver`` / ``pulsar_driver``: the workers on quasar's asyncio client or on
  the official C++-backed ``pulsar-client``;
* ``recorder`` / ``reporter`` / ``summary`` / ``histogram`` / ``schedule``: samples,
  live progress, the end-of-run figures, bounded-memory percentiles and the fixed-rate
  schedule that keeps latency free of coordinated omission;
* ``sink``: a null broker that receipts and forwards without storing, the baseline
  for what the load generator itself can do on a machine.
"""
