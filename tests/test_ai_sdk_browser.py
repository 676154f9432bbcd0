"""The AI SDK example page (examples/aisdk: React with `useChat` from npm, the calculator and the teller) in a real
browser: Debian's chromium driven by Playwright (executable_path; no browser download). A person asks, approves,
denies, leaves the page's own tool to another process, reloads mid-answer, and opens the chat in a second tab.

The page is served as examples/aisdk/serve.py serves it: the endpoint at /ai-sdk beside the page's files. One
browser for the module; screenshots go to tests/artifacts/.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

import rein
from rein.client import ReinClient
from rein.examples.calculator import agent as calculator
from rein.examples.planner import agent as planner
from rein.web.ai_sdk import app
from tests.agents.ai_sdk import FIRST, hold_file, story, teller
from tests.support.processes import ROOT
from tests.test_agui import serve
from tests.test_agui_browser import CHROMIUM, FLAGS

pytestmark = pytest.mark.timeout(180)
PAGE = ROOT / "examples" / "aisdk"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
WAIT_MS = 30_000


class Site:
    def __init__(self, url: str, runs: ReinClient, browser: Browser, token: str):
        self.url, self.runs, self.browser, self.token = url, runs, browser, token


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site(dev, tmp_path_factory) -> AsyncIterator[Site]:
    assert (PAGE / "dist" / "app.js").exists(), "build the page: cd examples/aisdk && npm ci && npm run build"
    os.environ["REINTEST_DIR"] = str(tmp_path_factory.mktemp("ai-sdk-page"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("aisdk_serve", PAGE / "serve.py")
    assert spec is not None and spec.loader is not None
    serve_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve_module)
    queue = f"ai-sdk-page-{uuid.uuid4().hex[:8]}"
    agents = [calculator, teller, planner]
    endpoint = app(dev.client, agents=agents, task_queue=queue)  # no sign-in set: REIN_HOME's token, as serve.py
    url, server, task = await serve(serve_module.site(endpoint))
    ARTIFACTS.mkdir(exist_ok=True)
    async with rein.create_worker(dev.client, agents=agents, task_queue=queue), async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield Site(url, ReinClient(dev.client, queue), browser, endpoint.state.ai_sdk.auth.local)
        await browser.close()
        server.should_exit = True
        await task


async def open_chat(site: Site, chat_id: str, agent: str = "calculator") -> tuple[Page, list[str]]:
    page = await site.browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(f"{site.url}/?chat={chat_id}&agent={agent}#token={site.token}")  # the link serve.py prints
    assert site.token not in page.url  # taken into the tab's sessionStorage, gone from the address bar
    await expect(page.locator("#send")).to_be_visible(timeout=WAIT_MS)
    return page, errors


async def ask(page: Page, text: str) -> None:
    await page.fill("#text", text)
    await page.click("#send")


async def test_a_person_asks_approves_denies_and_a_page_tool_is_answered_elsewhere(site: Site) -> None:
    chat_id = f"page-{uuid.uuid4().hex[:8]}"
    page, errors = await open_chat(site, chat_id)
    log = page.locator("#log")
    await ask(page, "What is 12 + 30, times 2?")
    await expect(page.locator(".approval")).to_contain_text("Approve add(a=12, b=30)?", timeout=WAIT_MS)
    await page.screenshot(path=str(ARTIFACTS / "ai-sdk-approval.png"))
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator(".approval")).to_contain_text("Approve multiply(a=42, b=2)?", timeout=WAIT_MS)
    await page.fill(".reason", "not today")
    await page.get_by_role("button", name="Deny").click()
    await expect(log).to_contain_text("multiply(a=42, b=2) denied: not today", timeout=WAIT_MS)
    await expect(log).to_contain_text("I could not compute that: a tool call was not approved.", timeout=WAIT_MS)
    # the agent asks the page's own tool for a number; nobody answers in this page
    await ask(page, "What is my number plus 5?")
    await expect(page.locator(".asks")).to_contain_text("The agent asks for a number", timeout=WAIT_MS)
    call = (await site.runs.status(chat_id)).pending_tool_calls[0]
    assert (await site.runs.thread(chat_id)).status == "waiting_input"
    await page.close()
    # another process brings the tool's output (rein's client: the same update a page's output is)
    taken = await site.runs.tool_results(chat_id, {call.id: "37"}, approver="ops", wait=True)
    assert taken.answered == [call.id]
    # the page, opened again on the chat, shows where the thread is: the next approval, from the thread
    page, errors_again = await open_chat(site, chat_id)
    await expect(page.locator(".approval")).to_contain_text("Approve add(a=5, b=37)?", timeout=WAIT_MS)
    await expect(page.locator("#log")).to_contain_text("pick_number(", timeout=WAIT_MS)
    await expect(page.locator("#log")).to_contain_text("→ 37", timeout=WAIT_MS)
    await page.get_by_role("button", name="Approve").click()
    await expect(page.locator("#log")).to_contain_text("The answer is 42.", timeout=WAIT_MS)
    await page.screenshot(path=str(ARTIFACTS / "ai-sdk-answered.png"))
    assert errors == errors_again == []
    view = await site.runs.thread(chat_id)
    assert (view.turns, view.status) == (2, "idle")
    await page.close()


async def test_a_reload_mid_answer_and_a_second_tab_resume_the_answer(site: Site) -> None:
    chat_id = f"page-{uuid.uuid4().hex[:8]}"
    question = f"Tell me a story {chat_id}"
    hold = hold_file(question)
    hold.touch()
    page, errors = await open_chat(site, chat_id, "teller")
    await ask(page, question)
    log = page.locator("#log")
    await expect(log).to_contain_text(FIRST.strip(), timeout=WAIT_MS)
    # reloaded mid-answer: the page loads the chat and resumes the answer under way (useChat's `resume`)
    await page.reload()
    await expect(log).to_contain_text(question, timeout=WAIT_MS)
    await expect(log).to_contain_text(FIRST.strip(), timeout=WAIT_MS)
    # a second tab opens the same chat mid-answer too
    second, second_errors = await open_chat(site, chat_id, "teller")
    await expect(second.locator("#log")).to_contain_text(FIRST.strip(), timeout=WAIT_MS)
    hold.unlink()
    for tab in (page, second):
        await expect(tab.locator(".assistant")).to_have_text(story(), timeout=WAIT_MS)
        await expect(tab.locator("#status")).to_have_text("ready", timeout=WAIT_MS)
    await second.screenshot(path=str(ARTIFACTS / "ai-sdk-second-tab.png"))
    assert errors == second_errors == []
    view = await site.runs.thread(chat_id)
    assert (view.turns, view.status) == (1, "idle")
    await page.close()
    await second.close()


async def test_a_person_sees_the_agents_list_and_changes_it_and_a_stale_tab_cannot_overwrite_it(site: Site) -> None:
    chat_id = f"page-{uuid.uuid4().hex[:8]}"
    page, errors = await open_chat(site, chat_id, "planner")
    state = page.locator("#state")
    await ask(page, "add milk and eggs")
    await expect(page.locator("#log")).to_contain_text("Done: added eggs (2 on the list).", timeout=WAIT_MS)
    await expect(state.locator("li")).to_have_text(["milk×", "eggs×"], timeout=WAIT_MS)
    # the person crosses milk off in the page: the thread's state changes, the agent's next tool sees it
    await page.get_by_role("button", name="remove milk").click()
    await expect(state.locator("li")).to_have_text(["eggs×"], timeout=WAIT_MS)
    assert (await site.runs.state(chat_id)).value == {"todos": ["eggs"]}
    # a second tab opens the chat; the agent changes the list from the first; the second tab's edit is stale
    second, second_errors = await open_chat(site, chat_id, "planner")
    await expect(second.locator("#state li")).to_have_text(["eggs×"], timeout=WAIT_MS)
    await ask(page, "add tea")
    await expect(state.locator("li")).to_have_text(["eggs×", "tea×"], timeout=WAIT_MS)
    await second.fill("#todo", "bread")
    await second.click("#add-todo")
    await expect(second.locator("#state-note")).to_contain_text("stale", timeout=WAIT_MS)
    await expect(second.locator("#state li")).to_have_text(["eggs×", "tea×"], timeout=WAIT_MS)  # shown anew
    assert (await site.runs.state(chat_id)).value == {"todos": ["eggs", "tea"]}  # the agent's change stands
    await page.screenshot(path=str(ARTIFACTS / "ai-sdk-state.png"))
    # reloaded: the list is the thread's
    await page.reload()
    await expect(page.locator("#state li")).to_have_text(["eggs×", "tea×"], timeout=WAIT_MS)
    assert errors == second_errors == []
    await page.close()
    await second.close()
