"""The live web dashboard at ``/``: its static page and its one data endpoint.

::

    GET /                              -> the page (index.html)
    GET /dashboard/{app.js,chart.js,app.css,favicon.svg}
    GET /admin/v2/quasar/dashboard     -> the snapshot (quasar.broker.dashboard)

The page and its scripts ship in the package (``dashboard_static/``) and load
without credentials: they hold no data. Everything the page shows comes from
``/admin/v2/quasar/dashboard`` and the transaction abort route, which the page
calls with the operator's credentials, so with authentication on the data stays
behind it. The data endpoint is quasar's own (Pulsar has no such route), under
quasar's prefix, and for super-users only: it shows every tenant's topics and every
role's transactions.

The assets are answered with a Content-Security-Policy that allows only this
origin's own scripts and styles: topic names, subscription names and transaction
owners are chosen by clients, and the page renders them as text; the policy is a
second wall should a rendering bug ever let markup through.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from quasar.admin.access import AUTHENTICATED, SUPERUSER, access
from quasar.admin.http import json_response
from quasar.broker.dashboard import DashboardSnapshot
from quasar.errors import AdminError

__all__ = ["DASHBOARD_ASSET_PATHS", "DASHBOARD_KEY", "DATA_PATH", "routes"]

routes = web.RouteTableDef()

DASHBOARD_KEY = web.AppKey("quasar.admin.dashboard", DashboardSnapshot)
DATA_PATH = "/admin/v2/quasar/dashboard"

# URL path -> (file under dashboard_static/, content type). A fixed table, so no
# request path is ever joined to a file system path.
_ASSETS = {
    "/": ("index.html", "text/html"),
    "/dashboard/app.js": ("app.js", "text/javascript"),
    "/dashboard/chart.js": ("chart.js", "text/javascript"),
    "/dashboard/app.css": ("app.css", "text/css"),
    "/dashboard/favicon.svg": ("favicon.svg", "image/svg+xml"),
}
#: Paths served without credentials (the authentication middleware lets them
#: through): the page and its scripts, which carry no broker data.
DASHBOARD_ASSET_PATHS = frozenset(_ASSETS)

_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Always revalidate: an upgraded broker must not run last version's script.
    "Cache-Control": "no-cache",
}


def _asset(path: str) -> web.Response:
    name, content_type = _ASSETS[path]
    body = resources.files("quasar.admin").joinpath("dashboard_static", name).read_bytes()
    return web.Response(
        body=body,
        content_type=content_type,
        charset="utf-8",
        headers=_SECURITY_HEADERS,
    )


# The rule is stated for completeness: these paths are open (DASHBOARD_ASSET_PATHS),
# so neither authentication nor authorization runs for them.
@access(AUTHENTICATED)
async def asset(request: web.Request) -> web.Response:
    return _asset(request.path)


# One route per file, with fixed paths: the open paths are exact paths, and no
# path parameter can name anything else.
for _path in _ASSETS:
    routes.get(_path)(asset)


@routes.get(DATA_PATH)
@access(SUPERUSER)
async def dashboard_data(request: web.Request) -> web.Response:
    snapshot = request.app.get(DASHBOARD_KEY)
    if snapshot is None:
        # An admin app built without a running broker behind it (a tool's or a
        # test's): there is nothing to show.
        raise AdminError("Broker is not ready", http_status=503)
    return json_response(snapshot.snapshot())
