"""Brokers as members of a cluster: registration, namespace bundles, bundle
ownership, the load manager's choice of owner, and LOOKUP's redirects
(``docs/cluster.md``).

It sits between the server and the broker: the server's composition root builds a
``ClusterMember`` for ``quasar broker`` and hands it to the broker service as its
``TopicOwnership``; the broker never imports it.
"""
