"""Every page of the web console in one router: what the console's door (`agentkb.console`) imports on the
first request under `/console`, so that a server start does not pay for the pages and their templates."""

from __future__ import annotations

from starlette.routing import Router

from agentkb.console import agents, data_sources, ingest, jobs, knowledge_bases, login

router = Router()
for module in (login, agents, knowledge_bases, ingest, data_sources, jobs):
    # the pages' own routes (their paths carry the console's prefix), not their routers nested: the request
    # metrics name a request by the template of the route in this list that matches it
    router.routes.extend(module.router.routes)
