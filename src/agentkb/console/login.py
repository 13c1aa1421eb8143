"""The console's front door: `/console` (to the default project's knowledge bases), the login form (a
login with the server's user name and password, or an API key), and logging out."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Form, Request, Response

from agentkb.console.render import ConsoleRoute, page, see_other, services_of
from agentkb.console.session import (
    LOGIN_PATH,
    PREFIX,
    SESSION_COOKIE,
    check_csrf,
    cookie_header,
    is_https,
    safe_next,
)
from agentkb.errors import AgentKBError, TooManyRequests, Unauthorized

router = APIRouter(prefix=PREFIX, route_class=ConsoleRoute, include_in_schema=False)


@router.get("")
async def home(request: Request) -> Response:
    project = services_of(request).settings.default_project
    return see_other(f"{PREFIX}/projects/{project}/knowledge_bases")


@router.get("/switch")
async def switch(request: Request, project: str = "") -> Response:
    """The project chooser of the navigation bar."""
    found = await services_of(request).projects.get(project)
    return see_other(f"{PREFIX}/projects/{found.name}/knowledge_bases")


@router.get("/login")
async def login_form(request: Request, next: str = "") -> Response:
    auth_on = await services_of(request).auth.enabled()
    return await page(request, "login.html", nav=False, next=safe_next(next), auth_on=auth_on, error=None)


@router.post("/login", dependencies=[Depends(check_csrf)])
async def login(
    request: Request,
    username: str = Form(""),
    password: str = Form(""),
    api_key: str = Form(""),
    next: str = Form(""),
) -> Response:
    """A login token from the auth service (the same as `POST /api/login`), kept in the session cookie;
    or, when an API key is given instead, a session token standing for the key (never the key itself), so
    that logging out ends it."""
    auth = services_of(request).auth
    client = request.client.host if request.client else None  # the login throttle counts per address
    try:
        if api_key.strip():
            credential = api_key.strip()
            await auth.throttle.check_client(client)
            try:
                token = await auth.key_session(credential)
            except Unauthorized:
                wait = await auth.throttle.credential_failed(client)
                if wait is not None:
                    raise auth.throttle.refusal(wait) from None
                raise
        else:
            token = await auth.login(username, password, client)
        auth.throttle.trust(token.token)
    except AgentKBError as exc:
        answer = await page(
            request,
            "login.html",
            nav=False,
            next=safe_next(next),
            auth_on=await auth.enabled(),
            error=exc.detail,
            username=username,
            status=exc.status,
        )
        if isinstance(exc, TooManyRequests):
            answer.headers["Retry-After"] = str(exc.retry_after_s)
        return answer
    response = see_other(safe_next(next))
    response.headers.append(
        "set-cookie",
        cookie_header(
            SESSION_COOKIE, token.token, secure=is_https(request.scope), max_age=int(token.expires_in_s)
        ),
    )
    return response


@router.post("/logout", dependencies=[Depends(check_csrf)])
async def logout(request: Request) -> Response:
    """End the console's session, a login's or one opened with an API key (the key itself stays valid: it is
    revoked with `agentkb keys revoke`)."""
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        await services_of(request).auth.logout(token)
    response = see_other(LOGIN_PATH)
    response.headers.append(
        "set-cookie", cookie_header(SESSION_COOKIE, "", secure=is_https(request.scope), max_age=0)
    )
    return response
