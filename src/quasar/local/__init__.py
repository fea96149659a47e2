"""Server processes on this machine: ZooKeeper and quasar brokers as child processes.

``quasar cluster up`` (``quasar.cli.cluster_up``) supervises a cluster for trying
quasar out with these, and the test harness (``quasar.testing``) builds its brokers
and ZooKeeper servers on them. Nothing here is specific to tests: ports, timeouts
and directories are the caller's choice.
"""
