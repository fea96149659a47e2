"""The ``quasar`` command line (entry point: ``quasar.cli.main:main``)."""
