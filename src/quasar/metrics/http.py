"""``GET /metrics``: the broker's registry, in the format the scraper accepts."""

from __future__ import annotations

from aiohttp import web
from prometheus_client.registry import CollectorRegistry

from .exposition import exposition

METRICS_REGISTRY_KEY = web.AppKey("quasar.metrics.registry", CollectorRegistry)

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    body, content_type = exposition(
        request.app[METRICS_REGISTRY_KEY], request.headers.get("Accept")
    )
    return web.Response(body=body, headers={"Content-Type": content_type})
