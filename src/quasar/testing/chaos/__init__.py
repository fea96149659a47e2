"""A seeded chaos runner: a randomized workload under process faults, judged by the
history checker (``quasar chaos``; see ``docs/reliability.md``).

Modules: ``schedule`` (seed to plan), ``workload`` (the worker processes),
``recorder`` (their JSON-lines histories), ``faults`` (inject/heal), ``runner``
(the run) and ``report`` (history replay and the summary).
"""
