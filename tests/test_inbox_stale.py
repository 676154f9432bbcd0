"""A click in the inbox page decides only what its card showed: the real page in Debian's chromium (Playwright, no
browser download) against `rein serve` in its own process, a dev server and a worker whose model repeats its call
ids across turns (call_0 every time, as LiteLLM's fallback ids do: tests.support.wipe).

The card shows `wipe(target="alpha")` as call_0; meanwhile someone else approves it and the run asks
`wipe(target="prod")` as call_0 again. The person's click on the card they see is refused: the card then shows the
new call with a one-line notice, and prod does not run (the tool's own record, and the run's history: no decision
for the second call_0). The same for "Approve selected", and a card whose calls the memo cut (`more`).

`rein serve` reads the inbox once a minute here (`--poll 60`, the longest it takes), so a card stays as the person
saw it while someone decides elsewhere, as it does for a page whose list lags (a slow poll, a busy server); a page
that opens reads the list as it is then. One server, worker, `rein serve` and browser for the module.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Page, async_playwright, expect

import rein
from rein.client import ReinClient
from tests.support.processes import stop_process, wait_for_text
from tests.support.waiting import poll
from tests.support.web import start_rein_serve
from tests.support.wipe import approvals_taken, wipe_agent, wiped

pytestmark = pytest.mark.timeout(240)
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--no-first-run"]
SUFFIX = uuid.uuid4().hex[:6]
QUEUE = f"inbox-stale-{SUFFIX}"
AGENT = f"stale-wiper-{SUFFIX}"
ME = "alice@laptop"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


class Site:
    def __init__(self, runs: ReinClient, page: Page):
        self.runs, self.page = runs, page

    def card(self, run_id: str) -> Any:
        return self.page.locator(f'.item[data-run="{run_id}"]')

    async def waiting(self, prompt: str) -> str:
        """A run that waits for approval, listed with its wait (what a card needs to decide), and the page opened
        (or reloaded) after: it shows the list as it is now."""
        handle = await self.runs.start(AGENT, prompt)
        await poll(lambda: self._listed(handle.id), f"{handle.id} in the inbox", 30)
        return handle.id

    async def _listed(self, run_id: str) -> bool:
        return any(i.run_id == run_id and i.wait for i in await self.runs.inbox(agent=AGENT))

    async def listed_in(self, run_id: str, wait: str | None) -> bool:
        return any(i.run_id == run_id and i.wait == wait for i in await self.runs.inbox(agent=AGENT))

    async def asks_again(self, run_id: str, shown: str) -> Any:
        """The run's status once it waits on a later wait than `shown`."""
        async def later() -> Any:
            status = await self.runs.status(run_id)
            return status if status.status == "waiting_approval" and status.wait not in (None, shown) else None
        return await poll(later, f"{run_id} to ask again", 30)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def site(dev, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Site]:  # noqa: ANN001
    home = tmp_path_factory.mktemp("stale")
    log = home / "serve.log"
    process = None
    try:
        async with rein.create_worker(dev.client, agents=[wipe_agent(AGENT)], task_queue=QUEUE):
            process, _ = start_rein_serve(log, dev.client.service_client.config.target_host, QUEUE, poll="60",
                                          REIN_HOME=str(home), REIN_IDENTITY=ME)
            wait_for_text(log, "sign in: ", process, 30)
            link = log.read_text().split("sign in: ", 1)[1].split()[0]
            async with async_playwright() as driver:
                browser = await driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    await page.goto(link)  # signed in: the token from the link's fragment, in the tab's storage
                    await expect(page.locator("#who")).to_contain_text(ME)
                    yield Site(ReinClient(dev.client, QUEUE), page)
                finally:
                    ARTIFACTS.mkdir(exist_ok=True)
                    await page.screenshot(path=str(ARTIFACTS / "inbox-stale.png"), full_page=True)
                    await browser.close()
    finally:
        stop_process(process, 20)


async def test_a_stale_card_is_refused_shows_the_new_call_and_prod_never_runs(dev, site: Site) -> None:  # noqa: ANN001
    runs, page = site.runs, site.page
    run_id = await site.waiting("wipe alpha prod")
    await page.reload()
    card = site.card(run_id)
    await expect(card).to_contain_text('wipe(target="alpha")')
    shown = await card.get_attribute("data-wait")
    assert shown == (await runs.status(run_id)).wait

    await runs.approve(run_id)  # someone else, elsewhere: alpha runs, and the run asks prod as call_0 again
    now = await site.asks_again(run_id, shown)
    assert [(c.id, c.arguments) for c in now.pending_tool_calls] == [("call_0", {"target": "prod"})]
    await expect(card).to_contain_text('wipe(target="alpha")')  # the page still shows what the person saw

    await card.locator("button.approve").click()
    await expect(card.locator(".notice")).to_contain_text("Nothing was decided")
    await expect(card).to_contain_text('wipe(target="prod")')  # the run's new call, from the server
    await expect(card).not_to_contain_text('wipe(target="alpha")')
    assert await card.get_attribute("data-wait") == now.wait
    await expect(page.locator("#status")).to_contain_text(f"refused {run_id}: ")  # one line, naming what it waits on
    await expect(page.locator("#status")).to_contain_text(
        f'stale: wait {shown} is over; the run now waits on wait {now.wait} for approval of wipe(target="prod") [call_0]')
    assert wiped(run_id) == [("call_0", "alpha")]  # prod did not run
    assert await approvals_taken(dev.client, run_id) == 1  # the history: only the first approval was taken
    assert len((await runs.session(run_id)).decisions) == 1
    assert (await runs.status(run_id)).wait == now.wait

    await card.locator(".deny").click()  # the refreshed card decides what it shows now
    result = await asyncio.wait_for(runs.result(run_id), 60)
    assert result.output == "Done: 2 answered." and wiped(run_id) == [("call_0", "alpha")]
    decisions = (await runs.session(run_id)).decisions
    assert [(d.tool_call_id, d.approved, d.approver) for d in decisions][1:] == [("call_0", False, ME)]


async def test_approve_selected_applies_the_fresh_card_and_refuses_the_stale_one(dev, site: Site) -> None:  # noqa: ANN001
    runs, page = site.runs, site.page
    stale, fresh = await site.waiting("wipe alpha prod"), await site.waiting("wipe beta prod")
    await page.reload()
    await expect(site.card(stale)).to_contain_text('wipe(target="alpha")')
    await expect(site.card(fresh)).to_contain_text('wipe(target="beta")')
    shown = await site.card(stale).get_attribute("data-wait")
    await site.card(stale).locator(".pick").check()
    await site.card(fresh).locator(".pick").check()

    await runs.approve(stale)  # someone else decides one of the two
    await site.asks_again(stale, shown)
    await expect(site.card(stale)).to_contain_text('wipe(target="alpha")')

    await page.locator("#bulk-approve").click()
    await expect(page.locator("#status")).to_contain_text(f"applied {fresh} wipe(target=\"beta\") [call_0]")
    await expect(page.locator("#status")).to_contain_text(f"refused {stale}: ")
    await expect(page.locator("#status")).to_contain_text(f"stale: wait {shown} is over")
    await expect(site.card(stale).locator(".notice")).to_contain_text("Nothing was decided")
    await expect(site.card(stale)).to_contain_text('wipe(target="prod")')
    await poll(lambda: wiped(fresh), f"{fresh}'s approved wipe to run", 30)
    assert wiped(fresh) == [("call_0", "beta")]
    assert wiped(stale) == [("call_0", "alpha")]  # the stale one's prod did not run
    assert await approvals_taken(dev.client, stale) == 1 and await approvals_taken(dev.client, fresh) == 1
    assert await site.card(stale).locator(".pick").is_checked() is False  # what is selected is what was seen
    for run_id in (stale, fresh):
        await runs.cancel(run_id)


async def test_a_card_whose_calls_the_memo_cut_decides_only_the_calls_it_shows(site: Site) -> None:
    runs, page = site.runs, site.page
    targets = [f"t{n}" for n in range(10)]  # the waiting memo lists 8 calls (rein.core.inbox.MAX_CALLS)
    run_id = await site.waiting("wipe-all " + " ".join(targets))
    await page.reload()
    card = site.card(run_id)
    await expect(card.locator(".call")).to_have_count(8)
    await expect(card.locator(".more")).to_contain_text("+2 more not shown")
    await card.locator("button.approve").click()

    async def rest() -> Any:
        status = await runs.status(run_id)
        return status if status.waiting_on == ["call_8", "call_9"] else None
    after = await poll(rest, "the run to wait on the two calls the card did not show", 30)
    decided = {d.tool_call_id for d in (await runs.session(run_id)).decisions}
    assert decided == {f"call_{n}" for n in range(8)} and wiped(run_id) == []  # the batch waits for the rest
    await poll(lambda: site.listed_in(run_id, after.wait), "the inbox to list the next wait", 30)
    await page.reload()  # the list as it is now: the card of what the run waits on next
    await expect(card.locator(".call")).to_have_count(2)
    await expect(card).to_contain_text('wipe(target="t9")')
    await runs.cancel(run_id)
