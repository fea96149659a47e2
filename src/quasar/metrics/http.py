"""``GET /metrics``: the broker's registry, in the format the scraper accepts."""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client.registry import CollectorRegistry

from .exposition import Snapshot, exposition

METRICS_REGISTRY_KEY = web.AppKey("quasar.metrics.registry", CollectorRegistry)

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    # The collectors read broker state, which lives on the event loop, so they run
    # here, in one pass. Writing the text is most of a scrape's cost with many topics
    # (tens of series per topic, every label escaped), and touches no broker state: it
    # runs in a worker thread, so the loop keeps serving clients meanwhile.
    snapshot = Snapshot(request.app[METRICS_REGISTRY_KEY].collect())
    body, content_type = await asyncio.get_running_loop().run_in_executor(
        None, exposition, snapshot, request.headers.get("Accept")
    )
    return web.Response(body=body, headers={"Content-Type": content_type})
