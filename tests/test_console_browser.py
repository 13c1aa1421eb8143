"""The web console end to end in headless Chromium (Debian's `chromium`, driven by Playwright through its
`executable_path`): create a knowledge base, upload a file, watch its job finish, search it, chat with an
agent over it and see a step and the answer; register a data source and list its tables; log in.

Skipped, with the reason, only where Chromium (or the Playwright package) is absent; `.ci/run` installs
Chromium where it can. With `AGENTKB_CONSOLE_SCREENSHOTS=<dir>` each page is also saved there as a PNG
(docs/console/ holds the set shown in the README)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp
from tests.helpers import create_agent, served_with_login, stub_llm
from tests.openai_stub import OpenAIStub, text

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
USER, PASSWORD = "browser-admin", "a browser password"
TIMEOUT_MS = 120_000  # a job embeds with the real local model; the machine may be busy


def chromium_path() -> str | None:
    given = os.environ.get("AGENTKB_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip(
            "Chromium is not installed (Debian: apt-get install chromium; or set AGENTKB_CHROMIUM to a "
            "Chromium binary): the console's browser tests need it"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the Playwright package is not installed (pip install -e '.[dev]')"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def shot(page: Any, name: str, *, full_page: bool = True) -> None:
    """Save a screenshot when AGENTKB_CONSOLE_SCREENSHOTS names a folder (normal runs keep docs as they are)."""
    folder = os.environ.get("AGENTKB_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=full_page)


def assert_labelled(page: Any) -> None:
    """Every visible form control has a label (or an aria-label) a screen reader can read."""
    unlabelled = page.evaluate(
        """() => Array.from(document.querySelectorAll('input, select, textarea'))
            .filter(e => e.type !== 'hidden' && !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
            .map(e => e.name || e.id)"""
    )
    assert unlabelled == [], f"form controls without a label: {unlabelled}"


def test_kb_upload_job_search_and_agent_chat(page: Any, base_url: str, tmp_path: Path) -> None:
    # plain names (they show in the screenshots): no other test uses them on the session's database
    kb, agent = "lighthouse_kb", "keeper"
    page.goto(f"{base_url}/console")
    page.wait_for_selector("h1:has-text('Knowledge bases')")
    assert_labelled(page)

    page.fill("#kb-name", kb)
    page.click("button:has-text('Create')")
    page.wait_for_selector(f"h1:has-text('{kb}')")
    assert page.url.endswith(f"/console/projects/mindsdb/knowledge_bases/{kb}")  # the address follows
    assert_labelled(page)

    notes = tmp_path / "lighthouse_notes.md"
    notes.write_text(
        "# Lighthouse notes\n\nThe keeper lights the lamp at dusk and logs every passing ship.\n\n"
        "Pelicans nest on the rocks below the lighthouse each spring.\n"
    )
    page.set_input_files("#file", str(notes))
    page.click("button:has-text('Upload and insert')")
    job = page.locator("li.job").first
    job.wait_for()
    # the job's event stream moves it along, without reloading the page, until it has succeeded
    page.wait_for_selector("li.job [data-job-state]:has-text('succeeded')")
    assert "documents 1" in job.locator("[data-job-counts]").inner_text()
    page.wait_for_selector("[data-kb-documents]:has-text('1')")  # the counts are refreshed

    page.fill("#q", "when is the lamp lit")
    page.fill("#filters", "")
    page.click("form.search button[type=submit]")
    page.wait_for_selector("#results .hit")
    first = page.locator("#results .hit").first
    assert "lamp at dusk" in first.inner_text()
    assert "relevance" in first.locator(".hit-head").inner_text()
    assert "?searched=1" in page.url  # the search is a link that can be shared
    shot(page, "knowledge-base")

    page.click("text=Browse documents and chunks")
    page.wait_for_selector("fieldset.doc")
    assert "Pelicans nest" in page.locator("fieldset.doc").first.inner_text()
    shot(page, "documents")

    page.click("nav[aria-label=Main] >> text=Knowledge bases")
    page.wait_for_selector(f"th:has-text('{kb}')")
    shot(page, "knowledge-bases")

    page.click("nav[aria-label=Main] >> text=Agents")
    page.wait_for_selector("#agent-name")
    page.fill("#agent-name", agent)
    page.select_option("#provider", "extractive")
    page.select_option("#knowledge_bases", kb)
    page.fill("#prompt_template", "Answer from the lighthouse notes.")
    page.click("button:has-text('Create')")
    page.wait_for_selector(f"h1:has-text('{agent}')")
    assert_labelled(page)

    # keyboard only: type the question and press Enter
    page.focus("#question")
    page.keyboard.type("When does the keeper light the lamp?")
    page.keyboard.press("Enter")
    step = page.locator(".turn .step").first
    step.wait_for()
    assert "kb_" in step.locator(".tool-call").inner_text()  # the tool called, with its input
    answer = page.locator(".turn .answer")
    answer.wait_for()
    assert "lamp at dusk" in answer.inner_text()
    assert kb in answer.locator(".citations").inner_text()
    query = page.locator(".turn .step", has_text="kb_query_tool").first  # kb_list_tool comes first
    query.locator(".observation summary").click()
    assert "dusk" in query.locator(".observation pre").inner_text()
    shot(page, "agent-chat")

    page.click("nav[aria-label=Main] >> text=Agents")
    page.wait_for_selector(f"th:has-text('{agent}')")
    shot(page, "agents")

    phone = page.context.browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    small.goto(f"{base_url}/console/projects/mindsdb/knowledge_bases/{kb}?searched=1&q=pelicans&hybrid=1")
    small.wait_for_selector("#results .hit")
    wide = small.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
    assert not wide, "the page is wider than a phone's screen"
    shot(small, "knowledge-base-phone", full_page=False)
    phone.close()


def test_data_source_register_and_tables(page: Any, base_url: str, tmp_path: Path) -> None:
    name = "fleet"
    db_file = tmp_path / "fleet.db"
    with sqlite3.connect(db_file) as conn:
        conn.execute("CREATE TABLE ships (name TEXT, tonnage INTEGER)")
        conn.execute("CREATE TABLE voyages (ship TEXT, port TEXT)")
    page.goto(f"{base_url}/console/data_sources")
    assert_labelled(page)
    page.fill("#ds-name", name)
    page.select_option("#ds-engine", "sqlite")
    page.fill("#ds-file", str(db_file))
    page.click("button:has-text('Register')")
    page.wait_for_selector(f"h1:has-text('{name}')")
    page.click("button:has-text('Test the connection')")
    page.wait_for_selector("#test-result:has-text('The connection works')")
    page.click("text=List tables")
    page.wait_for_selector("#tables li")
    assert page.locator("#tables li").all_inner_texts() == ["ships", "voyages"]
    shot(page, "data-source")
    page.click("nav[aria-label=Main] >> text=Data sources")
    page.wait_for_selector(f"th:has-text('{name}')")
    shot(page, "data-sources")


@pytest.fixture(scope="module")
def secured(pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    with served_with_login(
        pg_url, tmp_path_factory.mktemp("console-browser"), "console_browser", USER, PASSWORD
    ) as app:
        yield app


def test_login_form(page: Any, secured: ServedApp) -> None:
    page.goto(f"{secured.url}/console/projects/mindsdb/agents")
    page.wait_for_selector("h1:has-text('Log in')")
    assert_labelled(page)
    shot(page, "login")
    page.fill("#username", USER)
    page.fill("#password", "wrong")
    page.click("button:has-text('Log in')")
    page.wait_for_selector("[role=alert]:has-text('Invalid username or password')")
    page.fill("#password", PASSWORD)
    page.press("#password", "Enter")
    page.wait_for_selector("h1:has-text('Agents')")  # back where the visit began
    assert f"Signed in as {USER}" in page.inner_text("header")
    page.click("button:has-text('Log out')")
    page.wait_for_selector("h1:has-text('Log in')")


def test_chat_shows_the_answer_as_the_model_writes_it(page: Any, base_url: str, stub: OpenAIStub) -> None:
    """An LLM agent's answer appears word by word (a draft) while the model is still writing (the stub stops
    after two words until the page has shown them), then settles into the answer block."""
    agent = f"writer_{uuid.uuid4().hex[:6]}"
    with httpx.Client(base_url=base_url, timeout=60) as client:
        create_agent(client, agent, model=stub_llm(stub))
    stub.resume.clear()
    stub.script(text("The lamp is lit at dusk.", halt_after=2))
    try:
        page.goto(f"{base_url}/console/projects/mindsdb/agents/{agent}")
        page.fill("#question", "When is the lamp lit?")
        page.keyboard.press("Enter")
        draft = page.locator(".turn .draft")
        draft.wait_for()
        page.wait_for_function("() => document.querySelector('.turn .draft').textContent.includes('lamp')")
        assert page.locator(".turn .answer").count() == 0  # the model has not finished
    finally:
        stub.resume.set()
    answer = page.locator(".turn .answer")
    answer.wait_for()
    assert "The lamp is lit at dusk." in answer.inner_text()
    assert page.locator(".turn .draft").count() == 0
