"""What the caller of a service may do: the scope of the principal a request acts for, held in a context
variable that the API's authentication middleware sets for the request (`entered`), and checked inside the
services that write or take a project's name, so every way in (REST, SQL, the console, MCP, `/v1`, an agent's
tools) meets the same rule.

- no principal (auth off, the CLI, the in-process worker, background merges) and the login user: full access;
- a **read-only** key: no writes (`require_write`): 403 "This API key is read-only: <action> is not allowed";
- a **project** key: only its projects (`require_project`, `visible`); the global objects (data sources,
  uploaded files, projects themselves, SQL queries of every project) are out of its reach (`require_global`),
  also through an agent's tools.

Work a request starts in the background (`asyncio.create_task`) inherits the request's scope; a write is
refused before it is queued, so the worker never runs one for a read-only key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from agentkb.errors import Forbidden


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: a logged-in user or a named API key, with the key's scope: `read_only` (no
    writes), `projects` (lower-cased names of the only projects it may use; None: every project)."""

    kind: Literal["user", "key"]
    name: str
    read_only: bool = False
    projects: frozenset[str] | None = None

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.name}"


_current: ContextVar[Principal | None] = ContextVar("agentkb_principal", default=None)


def current() -> Principal | None:
    """The principal the running code acts for; None: nobody in particular (full access)."""
    return _current.get()


@contextmanager
def entered(principal: Principal | None) -> Iterator[None]:
    """Act for `principal` inside the block (the middleware wraps each request in it)."""
    token = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(token)


def require_write(action: str) -> None:
    """403 for a read-only key: `action` (e.g. "creating an agent") changes something."""
    principal = _current.get()
    if principal is not None and principal.read_only:
        raise Forbidden(f"This API key is read-only: {action} is not allowed", title="Read-only API key")


def _limited(principal: Principal) -> str:
    names = ", ".join(sorted(principal.projects or ()))
    return f"This API key is limited to the project(s) {names}"


def allowed(project: str) -> bool:
    """Whether the current principal may use the project named `project` (names match case-insensitively,
    as project lookups do)."""
    principal = _current.get()
    return principal is None or principal.projects is None or project.lower() in principal.projects


def require_project(project: str) -> None:
    """403 for a project key when `project` is not one of its projects."""
    principal = _current.get()
    if principal is not None and not allowed(project):
        raise Forbidden(
            f"{_limited(principal)}: project {project} is not allowed", title="Project not allowed"
        )


def require_global(action: str) -> None:
    """403 for a project key: `action` reaches beyond projects (data sources, uploaded files, projects
    themselves)."""
    principal = _current.get()
    if principal is not None and principal.projects is not None:
        raise Forbidden(f"{_limited(principal)}: {action} is not allowed", title="Project-scoped API key")


def scoped() -> bool:
    """Whether the current principal is limited to some projects."""
    principal = _current.get()
    return principal is not None and principal.projects is not None


def visible(projects: Iterable[str]) -> list[str]:
    """The names among `projects` the current principal may see."""
    return [name for name in projects if allowed(name)]
