"""PySpark data source ``quasar`` (batch/streaming source and exactly-once sink).

Placeholder: the connector is built on quasar's transactions in a later step. It will
use only ``quasar.client`` and ``quasar.protocol`` (enforced by tests/test_layering.py).
"""
