"""quasar: a transactional publish-subscribe broker that speaks the Apache Pulsar
binary protocol.

The packages, from the bottom up (``docs/ARCHITECTURE.md`` explains each and the rules
between them): ``errors``, ``clock`` and ``config_schema``; ``protocol`` (sans-IO wire
protocol) and ``storage`` (managed ledgers, cursors, metadata); ``transaction``
(coordinators, transaction buffers, pending acks) and ``resources`` (the admin
model); ``config``; ``broker``; ``admin``, ``metrics`` and ``transport``; ``server``;
and beside them the ``client``, with ``perf`` and ``testing`` on top of it, and
``cli``, the ``quasar`` command.
"""
