"""A seeded chaos runner: a randomized workload under process, network and disk
faults, judged by the history checker (``quasar chaos``; see ``docs/reliability.md``).

Modules: ``schedule`` (seed to plan), ``workload`` (the worker processes),
``recorder`` (their JSON-lines histories), ``faults`` (inject/heal; the process
faults), ``proxy_faults`` and ``disk_full`` (the other kinds), ``registry`` (every
kind), ``environment`` (the proxy and the tmpfs of a run), ``runner`` (the run) and
``report`` (history replay and the summary).
"""
