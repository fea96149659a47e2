"""Pulsar-compatible admin REST API (the ``/admin/v2`` subset quasar serves)."""

from quasar.admin.api import AdminBroker
from quasar.admin.app import create_admin_app

__all__ = ["AdminBroker", "create_admin_app"]
