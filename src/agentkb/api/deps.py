"""Services for the routers, taken from the app's lifespan state (never module globals)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agentkb.service.container import Services


async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]
