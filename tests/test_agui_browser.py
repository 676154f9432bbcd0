"""The AG-UI example page (examples/agui: the calculator through @ag-ui/client's HttpAgent) in a real browser:
Debian's chromium driven by Playwright (executable_path; no browser download). A person asks, approves in the
page, types the number the agent's page tool asks for, and reloads the page onto the same thread.

The page is served as examples/agui/serve.py serves it: the endpoint mounted at /agui beside the page's files.
Screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Page, async_playwright, expect
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

import rein
from rein import settings
from rein.client import ReinClient
from rein.examples.calculator import agent as calculator
from rein.web.agui import app
from tests.support.processes import ROOT
from tests.test_agui import serve

pytestmark = pytest.mark.timeout(180)
PAGE = ROOT / "examples" / "agui"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run"]
WAIT_MS = 30_000


@pytest_asyncio.fixture(loop_scope="session")
async def site(dev) -> AsyncIterator[tuple[str, ReinClient, str]]:
    assert (PAGE / "dist" / "app.js").exists(), "build the page: cd examples/agui && npm ci && npm run build"
    queue = f"agui-page-{uuid.uuid4().hex[:8]}"
    endpoint = app(dev.client, agents=[calculator], task_queue=queue)
    page = Starlette(routes=[Mount("/agui", app=endpoint), Mount("/", app=StaticFiles(directory=PAGE, html=True))],
                     lifespan=lambda _: endpoint.router.lifespan_context(endpoint))
    url, server, task = await serve(page)
    async with rein.create_worker(dev.client, agents=[calculator], task_queue=queue):
        yield url, ReinClient(dev.client, queue), endpoint.state.agui.auth.local  # no sign-in set: REIN_HOME's token
        server.should_exit = True
        await task


async def ask(page: Page, text: str) -> None:
    await page.fill("#text", text)
    await page.click("#send")


async def test_the_page_chats_approves_and_runs_its_tool(site) -> None:
    url, runs, token = site
    thread_id = f"page-{uuid.uuid4().hex[:8]}"
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = await browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(f"{url}/?thread={thread_id}#token={token}")  # the link serve.py prints
        assert "token" not in page.url and token not in page.url  # taken into sessionStorage, gone from the address
        await ask(page, "What is 12 + 30, times 2?")
        approve = page.get_by_role("button", name="Approve")
        await expect(page.locator("#ask")).to_contain_text("Approve add", timeout=WAIT_MS)
        await page.screenshot(path=str(ARTIFACTS / "agui-approval.png"))
        await approve.click()
        await expect(page.locator("#ask")).to_contain_text("Approve multiply", timeout=WAIT_MS)
        await approve.click()
        await expect(page.locator("#log")).to_contain_text("The answer is 84.", timeout=WAIT_MS)
        # the agent asks the page's own tool for a number; the person types it
        await ask(page, "What is my number plus 5?")
        try:
            await expect(page.locator("#ask")).to_contain_text("asks for a number", timeout=WAIT_MS)
        except AssertionError:
            print(await page.locator("body").inner_text(), errors, await runs.thread(thread_id))
            raise
        assert (await runs.thread(thread_id)).status == "waiting_input"
        await page.fill("#number", "37")
        await page.get_by_role("button", name="Send number").click()
        await expect(page.locator("#ask")).to_contain_text("Approve add", timeout=WAIT_MS)
        await approve.click()
        await expect(page.locator("#log")).to_contain_text("The answer is 42.", timeout=WAIT_MS)
        await page.screenshot(path=str(ARTIFACTS / "agui-answered.png"))
        assert errors == []
        view = await runs.thread(thread_id)
        assert (view.turns, view.status) == (2, "idle")
        approvers = {d.approver for d in (await runs.session(thread_id)).decisions}
        assert approvers == {settings.current().identity}  # who signed in (the local token: the local person), never a process id
        # the same thread in a reloaded page: the conversation is the thread's, not the page's
        await page.reload()
        await expect(page.locator("#log")).to_contain_text("The answer is 84.", timeout=WAIT_MS)
        await expect(page.locator("#log")).to_contain_text("The answer is 42.", timeout=WAIT_MS)
        assert errors == []
        await browser.close()
