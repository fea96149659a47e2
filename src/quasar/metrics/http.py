"""``GET /metrics``: the process registry in the Prometheus text format (0.0.4)."""

from __future__ import annotations

from aiohttp import web

from . import REGISTRY
from .exposition import CONTENT_TYPE, render

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    return web.Response(
        body=render(REGISTRY).encode(), headers={"Content-Type": CONTENT_TYPE}
    )
