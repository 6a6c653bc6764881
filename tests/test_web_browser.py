"""The live web card in a real browser: Playwright driving headless /usr/bin/chromium.

Skipped (with the reason) when chromium is not installed; `.ci/run` installs it.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.config.gateway import GatewayToken
from progresscast.gateway import create_app
from progresscast.gateway.server import serve_app
from progresscast.http.server import address, bind
from progresscast.model.asks import AskInput, AskState
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from test_gateway_rpc import gateway_settings
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


SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "web-card-states.png"
BAR_NOTE = (
    '<progress aria-label="Tests · 3/7" value="3" max="7" onclick="window.__pwned=1"></progress>\n\n'
    "**Checking** [results](https://example.com).<br>Next step.<script>window.__pwned=2</script>\n\n"
    + "\n\n".join(f"Finding {i}: the query plan scans `orders` again." for i in range(1, 4))
)
STATES = ["completed", "in_progress", "pending", "blocked", "skipped", "paused"]


async def test_web_card_states_read_without_emoji_and_what_needs_a_person_comes_first(live: Live, page: Any, tmp_path: Path) -> None:
    """Every step state (and a failed run) on two cards: the note's bar pinned with its
    label, `k of N done` visible, the blocked line above the checklist, six distinct
    marks drawn without any emoji font. UPDATE_SCREENSHOTS=1 refreshes the picture in docs/."""
    live_plan = plan(
        ("Read the ticket", "completed"),
        ("Skip the flaky benchmark", "skipped"),
        ("Write the migration", "in_progress"),
        ("Get DBA approval", "blocked"),
        ("Deploy to staging", "pending"),
    )
    live_plan[3]["note"] = "waiting for the on-call DBA"
    await rpc(live.base, "run.start", sessionKey="states-live", runId="r1")
    await rpc(live.base, "progressCard.put", sessionKey="states-live", plan=live_plan, markdown=BAR_NOTE)
    await rpc(live.base, "activity.put", sessionKey="states-live", headline="Running the migration tests")
    await rpc(live.base, "run.start", sessionKey="states-paused", runId="r2")
    await rpc(
        live.base, "progressCard.put", sessionKey="states-paused",
        plan=plan(("Reproduce", "completed"), ("Fix", "in_progress"), ("Ship", "pending")), markdown="Stopped for the night.",
    )
    await rpc(live.base, "run.end", sessionKey="states-paused", runId="r2", state="failed")

    await page.goto(f"{live.base}/sessions/states-live?token=writer")
    card = page.locator("#pc-card")
    await expect(card.locator(".pc-activity__headline")).to_have_text("Running the migration tests")
    # where things are, measured in one go (the live page may swap the card in between calls)
    where = await page.evaluate(
        """() => Object.fromEntries(['.pc-attention--blocked', '.pc-steps', '.pc-note-bar', '.pc-note',
            '.pc-step--blocked .pc-sr'].map(s => [s, document.querySelector('#pc-card ' + s).getBoundingClientRect().toJSON()]))"""
    )
    # k of N, visible beside the steps bar
    count = card.locator(".pc-progress__text")
    await expect(count).to_be_visible()
    await expect(count).to_have_text("2 of 5 done")
    # what needs a person, above the checklist
    blocked = card.locator(".pc-attention--blocked")
    await expect(blocked).to_have_text("Blocked: Get DBA approval")
    assert where[".pc-attention--blocked"]["bottom"] <= where[".pc-steps"]["top"]
    # the note's own bar: kept (its refused attribute dropped), pinned above the note, label shown
    bar = card.locator(".pc-note-bar")
    await expect(bar.locator(".pc-note-bar__label")).to_be_visible()
    await expect(bar.locator(".pc-note-bar__label")).to_have_text("Tests · 3/7")
    await expect(bar.locator('progress[aria-label="Tests · 3/7"][value="3"][max="7"]')).to_have_count(1)
    assert await bar.locator("progress").get_attribute("onclick") is None
    note = card.locator(".pc-note")
    assert where[".pc-note-bar"]["bottom"] <= where[".pc-note"]["top"]
    assert await bar.evaluate("el => getComputedStyle(el).position") == "sticky"
    # <br> breaks the line; the script's text never shows, and nothing ran
    assert "Checking results.\nNext step." in await note.inner_text()
    assert "__pwned" not in await card.inner_text()
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    # the state in words for screen readers, hidden from sight
    sr = card.locator(".pc-step--blocked .pc-sr")
    await expect(sr).to_have_text(", blocked")
    box = where[".pc-step--blocked .pc-sr"]
    assert box["width"] <= 1 and box["height"] <= 1

    # both cards on the index page: every state once, marks told apart by pixels alone
    await page.goto(f"{live.base}/")
    await expect(page.locator(".pc-summary")).to_have_count(2)
    pictures = {}
    for state in STATES:
        mark = page.locator(f".pc-step--{state} .pc-mark").first
        await expect(mark).to_be_visible()
        assert (await mark.inner_text()) == ""  # drawn by CSS, not a glyph
        pictures[state] = await mark.screenshot()
    assert len(set(pictures.values())) == len(STATES), "two states look the same"
    failed = page.locator(".pc-attention--failed .pc-mark")
    assert await failed.screenshot() not in pictures.values()
    shot = SCREENSHOT if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / SCREENSHOT.name
    shot.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(shot), full_page=True)


async def test_the_history_timeline_reads_in_local_time_and_the_active_step_keeps_its_running_time(live: Live, page: Any) -> None:
    """The page's browser is in Europe/Berlin (the fixture): each line shows its time there."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    put = lambda **card: rpc(live.base, "progressCard.put", sessionKey="web-h", **card)  # noqa: E731
    await put(plan=plan(("Confirm access", "in_progress"), ("Repair", "pending")))
    await put(plan=plan(("Confirm access", "blocked"), ("Repair", "pending")))
    await page.goto(f"{live.base}/sessions/web-h?token=writer")
    timeline = page.locator("#pc-history .pc-timeline")
    blocked = timeline.locator("li", has_text="⛔ Confirm access blocked")
    await expect(blocked).to_have_count(1)
    entries = await rpc(live.base, "progressCard.history", sessionKey="web-h")
    at = datetime.fromisoformat(entries[0]["at"].replace("Z", "+00:00")).astimezone(ZoneInfo("Europe/Berlin"))
    await expect(blocked.locator("time")).to_have_text(f"{at:%H:%M}")
    assert await blocked.locator("time").get_attribute("datetime") == entries[0]["at"]
    assert await page.locator("#pc-history .pc-running").count() == 0  # nothing is in progress

    # A change lands: the timeline grows without a reload, and the step now running says for how long.
    await page.evaluate("window.__marker = 'same document'")
    await put(plan=plan(("Confirm access", "completed"), ("Repair", "in_progress")))
    newest = timeline.locator("li").first
    await expect(newest).to_contain_text("✅ Confirm access done · ▶ Repair started", timeout=5000)
    running = page.locator("#pc-history .pc-running")
    await expect(running).to_contain_text("Repair in progress for")
    await expect(running.locator("time.pc-since")).to_have_text(re.compile(r"^\d+ s$"))
    assert await page.evaluate("window.__marker") == "same document"
    assert await timeline.locator("li").count() == 3
    # Agent text in the timeline is text, never markup.
    await put(plan=plan((f"Fix {HOSTILE}", "in_progress")))
    await expect(timeline.locator("li").first).to_contain_text("<img src=x", timeout=5000)
    assert await page.evaluate("typeof window.__pwned") == "undefined"
    assert await page.locator("#pc-history img").count() == 0
    policy_errors = [e for e in page.console_errors if "Content Security Policy" in e or "TrustedHTML" in e]
    assert policy_errors == []


# -- answering from the card ------------------------------------------------------

ASK_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "web-card-ask.png"


@asynccontextmanager
async def serving_with_ana(redis: Redis) -> AsyncIterator[Live]:
    """The test gateway with Ana's token besides the test tokens: she may read and answer."""
    settings = gateway_settings()
    settings.gateway.tokens.append(GatewayToken(token="ana", name="Ana", scopes=["operator.read", "operator.answer"]))
    app = create_app(settings, redis)
    sock = bind("127.0.0.1:0")
    started = asyncio.Event()
    task = asyncio.create_task(serve_app(app, sock, started=started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield Live(address(sock), app)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_person_answers_and_stops_from_the_card(redis: Redis, store: CardStore, page: Any, tmp_path: Path) -> None:
    """Ana's page: the ask's buttons answer it (the store has her answer, the card says
    so), a typed answer survives the card redrawing under it, Stop takes two presses.
    A read token's page shows the ask without controls. UPDATE_SCREENSHOTS=1 refreshes
    the picture in docs/."""
    owner = Owner("main", "deploy-42")
    async with serving_with_ana(redis) as live:
        await store.start_run(owner, "r1", stoppable=True)
        await store.put(owner, CardInput.parse({
            "plan": plan(("Build the release", "completed"), ("Run the migrations", "in_progress"), ("Switch traffic", "pending")),
            "markdown": "Migrations are ready for **production**.",
        }))
        await store.update_activity(owner, headline="Waiting for approval", tool="Bash: alembic upgrade head")
        detail = f"`alembic upgrade head` on **prod-db** (3 migrations, ~2 min of locks). {HOSTILE}"
        approval = await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "Run the migrations on production?", "detail": detail}))

        await page.goto(f"{live.base}/sessions/deploy-42?token=ana")
        card = page.locator("#pc-card")
        first = card.locator(f'.pc-ask[data-ask-id="{approval.ask_id}"]')
        await expect(first.locator(".pc-ask__prompt")).to_have_text("Run the migrations on production?")
        await expect(first.locator(".pc-ask__detail strong")).to_have_text("prod-db")
        await expect(first.locator("button.pc-ask__option")).to_have_text(["Allow", "Deny"])
        await expect(card.locator("button.pc-stop")).to_have_text("Stop")
        await page.evaluate("window.__marker = 'same document'")

        # A second ask arrives while the page is open (an `ask.changed` over the event stream).
        text_ask = await store.asks.open(owner, AskInput.parse({"kind": "text", "prompt": "Which maintenance window?"}))
        second = card.locator(f'.pc-ask[data-ask-id="{text_ask.ask_id}"]')
        await expect(second.locator("textarea")).to_be_visible(timeout=5000)
        shot = ASK_SCREENSHOT if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / ASK_SCREENSHOT.name
        shot.parent.mkdir(parents=True, exist_ok=True)
        await card.screenshot(path=str(shot))

        # Press Allow: the store has Ana's answer, and the card says so.
        await first.locator("button", has_text="Allow").click()
        await expect(first.locator(".pc-ask__outcome")).to_have_text("Answered by Ana: Allow", timeout=5000)
        assert await first.locator("button").count() == 0
        answered, _ = await store.asks.get(owner, approval.ask_id)
        assert answered is not None and answered.state is AskState.answered and answered.answer is not None
        assert answered.answer.options == ("Allow",) and answered.answer.by.name == "Ana"

        # Half-typed, the card redraws (the agent writes): the text stays; then it is sent.
        box = second.locator("textarea")
        await box.fill("Tonight at")
        await store.update_activity(owner, headline="Still waiting for the window")
        await expect(card.locator(".pc-activity__headline")).to_have_text("Still waiting for the window", timeout=5000)
        await expect(box).to_have_value("Tonight at")
        await box.press_sequentially(" 22:00")
        await second.locator("button.pc-ask__send").click()
        await expect(second.locator(".pc-ask__outcome")).to_have_text("Answered by Ana: Tonight at 22:00", timeout=5000)
        typed, _ = await store.asks.get(owner, text_ask.ask_id)
        assert typed is not None and typed.answer is not None and typed.answer.text == "Tonight at 22:00"

        # Stop: the first press only asks to be sure; the second records it.
        stop = card.locator("button.pc-stop")
        await stop.click()
        await expect(stop).to_have_text("Press again to stop")
        assert await store.asks.stop_mark(owner) is None
        await stop.click()
        await expect(card.locator(".pc-stopping")).to_have_text("Stopping — Ana", timeout=5000)
        mark = await store.asks.stop_mark(owner, "r1")
        assert mark is not None and mark.by.name == "Ana"
        assert await card.locator("button").count() == 0
        assert await page.evaluate("window.__marker") == "same document"
        assert await page.evaluate("typeof window.__pwned") == "undefined"

        # A read token's page: the ask, no controls.
        third = await store.asks.open(owner, AskInput.parse({"kind": "choice", "prompt": "Notify the team?", "options": ["Yes", "No"]}))
        reader = await page.context.browser.new_page()
        await reader.goto(f"{live.base}/sessions/deploy-42?token=reader")
        waiting = reader.locator(f'#pc-card .pc-ask[data-ask-id="{third.ask_id}"]')
        await expect(waiting.locator(".pc-ask__prompt")).to_have_text("Notify the team?")
        await expect(waiting.locator(".pc-ask__read-only")).to_be_visible()
        assert await reader.locator("#pc-card button").count() == 0
        await reader.close()
    policy_errors = [e for e in page.console_errors if "Content Security Policy" in e or "TrustedHTML" in e]
    assert policy_errors == []


async def test_an_ask_that_runs_out_reads_expired_without_a_reload(redis: Redis, store: CardStore, page: Any) -> None:
    """Nothing is written when an ask's time runs out; the page looks again then."""
    owner = Owner("main", "deploy-43")
    async with serving_with_ana(redis) as live:
        await store.put(owner, CardInput.parse({"markdown": "Waiting."}))
        short = await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "Quick?", "timeoutSeconds": 2}))
        await page.goto(f"{live.base}/sessions/deploy-43?token=ana")
        ask_el = page.locator(f'#pc-card .pc-ask[data-ask-id="{short.ask_id}"]')
        await expect(ask_el.locator("button.pc-ask__option")).to_have_count(2)
        await expect(ask_el.locator(".pc-ask__outcome")).to_have_text("Expired: no answer came in time", timeout=8000)
        assert await ask_el.locator("button").count() == 0
