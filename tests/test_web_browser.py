"""The live web card in a real browser: Playwright driving headless /usr/bin/chromium.

Skipped (with the reason) when chromium is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from test_gateway_sse import Live, rpc, serving

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"chromium is missing ({CHROMIUM} not found): the browser test did not run; install it with `apt-get install chromium`",
)
playwright_api = pytest.importorskip("playwright.async_api", reason="the playwright package is missing: the browser test did not run")
expect = playwright_api.expect

HOSTILE = "<img src=x onerror=\"window.__pwned='img'\"><script>window.__pwned='script'</script>"


@pytest.fixture
async def live(redis: Redis) -> AsyncIterator[Live]:
    async with serving(redis) as server:
        yield server


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Any]:
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            context = await browser.new_context(viewport={"width": 900, "height": 760}, locale="en-GB", timezone_id="Europe/Berlin")
            page = await context.new_page()
            page.console_errors = []
            page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
            yield page
        finally:
            await browser.close()


def plan(*steps: tuple[str, str]) -> list[dict[str, str]]:
    return [{"step": s, "status": st} for s, st in steps]


async def test_live_card_updates_without_reload_and_runs_no_agent_html(live: Live, page: Any, tmp_path: Path) -> None:
    put = lambda **card: rpc(live.base, "progressCard.put", sessionKey="web-1", **card)  # noqa: E731
    await put(plan=plan(("Reproduce", "in_progress"), ("Fix", "pending")), markdown="First look.")

    await page.goto(f"{live.base}/sessions/web-1?token=writer")
    assert page.url == f"{live.base}/sessions/web-1"  # the token moved into the cookie
    card = page.locator("#pc-card")
    await expect(card.locator("progress")).to_have_attribute("aria-label", "Steps · 0/2")
    await expect(card.locator('li[aria-label="Reproduce, in progress"]')).to_be_visible()
    await page.evaluate("window.__marker = 'same document'")

    # Revision 2: the checklist changes, and the note and a step carry hostile HTML.
    second = await put(
        plan=plan(("Reproduce", "completed"), (f"Fix {HOSTILE}", "in_progress")),
        markdown=f"Found it. {HOSTILE} Still safe.",
    )
    assert second["revision"] == 2
    await expect(card.locator('li[aria-label="Reproduce, completed"]')).to_be_visible(timeout=5000)
    await expect(card.locator("progress")).to_have_attribute("aria-label", "Steps · 1/2")
    assert await page.evaluate("window.__marker") == "same document"  # no reload happened
    await expect(card.locator(".pc-note")).to_contain_text("Still safe.")
    await expect(card.locator(".pc-step--in_progress")).to_contain_text("<img src=x")  # shown as text
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    assert await card.locator("img").count() == 0
    assert await card.locator("script").count() == 0
    assert await page.locator("img").count() == 0

    # The last update, in local time (from updatedAt, formatted by the browser).
    stored = await rpc(live.base, "progressCard.get", sessionKey="web-1")
    updated = page.locator("#pc-updated")
    await expect(updated).to_have_attribute("datetime", stored["updatedAt"])
    assert (await updated.inner_text()) != stored["updatedAt"]

    # A refresh that fails keeps the last card and says so, until one succeeds.
    async def unavailable(route: Any) -> None:
        await route.fulfill(status=503, content_type="application/json", body='{"ok": false, "error": {"code": "unavailable", "message": "store down"}}')

    await page.route("**/v1/card?*", unavailable)
    await put(plan=plan(("Reproduce", "completed"), ("Fix", "completed")), markdown="Done.")
    notice = page.locator("#pc-notice")
    await expect(notice).to_be_visible(timeout=5000)
    await expect(notice).to_contain_text("Showing the last card; retrying")
    await expect(card.locator("progress")).to_have_attribute("aria-label", "Steps · 1/2")
    await page.screenshot(path=str(tmp_path / "retry.png"), full_page=True)
    await page.unroute("**/v1/card?*")
    await expect(card.locator("progress")).to_have_attribute("aria-label", "Steps · 2/2", timeout=10_000)
    await expect(notice).to_be_hidden()

    # A clear shows the empty card, still without a reload.
    await put()
    await expect(card).to_contain_text("No progress card", timeout=5000)
    assert await page.evaluate("window.__marker") == "same document"

    await put(plan=plan(("Reproduce", "completed"), ("Fix", "blocked"), ("Ship", "pending")), markdown="**Waiting** for review.")
    await expect(card.locator('li[aria-label="Fix, blocked"]')).to_be_visible(timeout=5000)
    await page.screenshot(path=str(tmp_path / "card.png"), full_page=True)
    policy_errors = [e for e in page.console_errors if "Content Security Policy" in e or "TrustedHTML" in e]
    assert policy_errors == []


async def test_login_form_in_the_browser(live: Live, page: Any) -> None:
    await rpc(live.base, "progressCard.put", sessionKey="web-2", markdown="Behind the login.")
    await page.goto(f"{live.base}/sessions/web-2")
    await page.fill("#pc-token", "reader")
    await page.click("button[type=submit]")
    await expect(page.locator("#pc-card")).to_contain_text("Behind the login.")
    assert page.url == f"{live.base}/sessions/web-2"
    cookies = await page.context.cookies()
    token = next(c for c in cookies if c["name"] == "progresscast_token")
    assert token["httpOnly"] and token["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # scripts cannot read the token
