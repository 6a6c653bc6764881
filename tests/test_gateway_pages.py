"""The web page over HTTP: sign-in and its cookie, the session list, one card page,
the card fragment the page re-fetches, and the security headers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.config.gateway import GatewayToken
from progresscast.gateway import create_app
from progresscast.model.asks import AskInput
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore
from test_gateway_rpc import gateway_settings

PLAN = {"plan": [{"step": "Reproduce", "status": "completed"}, {"step": "Fix <it>", "status": "in_progress"}], "markdown": "**Hi**"}


@pytest.fixture
async def client(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(gateway_settings(), redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c


async def put(store: CardStore, session: str, data: dict = PLAN, agent: str = "main") -> None:
    await store.put(Owner(agent, session), CardInput.parse(data))


def signed_in(client: httpx.AsyncClient, token: str = "writer") -> httpx.AsyncClient:
    client.cookies.set("progresscast_token", token)
    return client


# -- signing in ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/sessions/ticket-1"])
async def test_pages_without_a_token_show_the_login_form(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 401
    assert 'action="/login"' in response.text and 'name="token"' in response.text
    assert f'name="next" value="{path}"' in response.text


async def test_token_in_the_address_moves_into_an_httponly_strict_cookie(
    client: httpx.AsyncClient, store: CardStore
) -> None:
    await put(store, "ticket-1")
    response = await client.get("/sessions/ticket-1?token=reader&agentId=main")
    assert response.status_code == 303
    assert response.headers["location"] == "/sessions/ticket-1?agentId=main"  # the token is gone
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("progresscast_token=reader;")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie
    follow = await client.get(response.headers["location"])
    assert follow.status_code == 200 and 'id="pc-live"' in follow.text


async def test_the_cookie_is_secure_over_https(redis: Redis) -> None:
    app = create_app(gateway_settings(), redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="https://gw") as c:
        response = await c.get("/?token=reader")
    assert "Secure" in response.headers["set-cookie"]


async def test_a_wrong_token_in_the_address_is_401_and_sets_nothing(client: httpx.AsyncClient) -> None:
    response = await client.get("/?token=nope")
    assert response.status_code == 401 and "not valid" in response.text
    assert "set-cookie" not in response.headers


async def test_a_token_link_never_silently_replaces_a_signed_in_session(
    client: httpx.AsyncClient, store: CardStore
) -> None:
    # A link on the card, `[x](/?token=ATTACKER)`, is one click: it must not sign the
    # viewer in as the link's token.
    await put(store, "ticket-1")
    response = await signed_in(client, "reader").get("/sessions/ticket-1?token=writer")
    assert response.status_code == 409 and "Sign out first" in response.text
    assert "set-cookie" not in response.headers
    same = await client.get("/sessions/ticket-1?token=reader")  # the token it already has: fine
    assert same.status_code == 303 and same.headers["location"] == "/sessions/ticket-1"


@pytest.mark.parametrize("site", ["same-origin", "same-site", "cross-site"])
async def test_a_token_link_followed_from_a_page_does_not_sign_in(client: httpx.AsyncClient, site: str) -> None:
    response = await client.get("/?token=reader", headers={"Sec-Fetch-Site": site})
    assert response.status_code == 401 and "followed from a page" in response.text
    assert "set-cookie" not in response.headers and "reader" not in response.text
    opened = await client.get("/?token=reader", headers={"Sec-Fetch-Site": "none"})  # typed or pasted
    assert opened.status_code == 303 and opened.headers["set-cookie"].startswith("progresscast_token=reader;")


async def test_login_form_sets_the_cookie_and_goes_back(client: httpx.AsyncClient) -> None:
    response = await client.post("/login", data={"token": "reader", "next": "/sessions/ticket-1"})
    assert response.status_code == 303 and response.headers["location"] == "/sessions/ticket-1"
    assert "HttpOnly" in response.headers["set-cookie"]
    bad = await client.post("/login", data={"token": "nope", "next": "/"})
    assert bad.status_code == 401 and "not valid" in bad.text and "set-cookie" not in bad.headers


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"])
async def test_login_never_redirects_off_site(client: httpx.AsyncClient, target: str) -> None:
    response = await client.post("/login", data={"token": "reader", "next": target})
    assert response.headers["location"] == "/"


@pytest.mark.parametrize("headers", [
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
    {"Origin": "https://evil.example"},  # a browser that does not send Sec-Fetch-Site
])
async def test_a_login_posted_from_another_site_does_not_sign_in(client: httpx.AsyncClient,
                                                                 headers: dict[str, str]) -> None:
    # Another site's form would sign the browser in as its token (login CSRF).
    response = await client.post("/login", data={"token": "reader", "next": "/"}, headers=headers)
    assert response.status_code == 403 and "another site" in response.text and "set-cookie" not in response.headers
    own = await client.post("/login", data={"token": "reader", "next": "/"},
                            headers={"Sec-Fetch-Site": "same-origin", "Origin": "http://testserver"})
    assert own.status_code == 303 and own.headers["set-cookie"].startswith("progresscast_token=reader;")


async def test_logout_drops_the_cookie(client: httpx.AsyncClient) -> None:
    response = await signed_in(client).post("/logout")
    assert response.status_code == 303
    assert re.search(r'progresscast_token="?"?;.*Max-Age=0', response.headers["set-cookie"])


async def test_a_stale_cookie_shows_the_login_form_and_is_dropped(client: httpx.AsyncClient) -> None:
    response = await signed_in(client, "revoked").get("/")
    assert response.status_code == 401 and "no longer valid" in response.text
    assert "Max-Age=0" in response.headers["set-cookie"]


async def test_a_token_without_read_scope_gets_403(client: httpx.AsyncClient) -> None:
    response = await signed_in(client, "noscope").get("/")
    assert response.status_code == 403 and "operator.read" in response.text


# -- the pages ----------------------------------------------------------------


@pytest.mark.backends
async def test_index_lists_only_the_sessions_the_viewer_may_see(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "team-a")
    await put(store, "other", {"markdown": "private"})
    await put(store, "team-b", {"markdown": "research note"}, agent="research")
    page = (await signed_in(client, "team").get("/")).text
    assert 'href="/sessions/agent:main:team-a"' in page and 'href="/sessions/agent:research:team-b"' in page
    assert "other" not in page and "private" not in page
    assert 'aria-label="Steps · 1/2"' in page  # each listed session shows its card
    everyone = (await signed_in(client, "reader").get("/")).text
    assert 'href="/sessions/agent:main:other"' in everyone


@pytest.mark.backends
async def test_an_index_flooded_by_another_writer_still_lists_the_viewers_sessions(
    client: httpx.AsyncClient, store: CardStore
) -> None:
    await put(store, "team-a")
    for i in range(210):  # someone else's sessions, all newer
        await put(store, f"flood-{i:03}", {"markdown": "x"})
    page = (await signed_in(client, "team").get("/")).text
    assert 'href="/sessions/agent:main:team-a"' in page and "flood-" not in page
    # A token that sees everything pages through all of it, each session once.
    seen: list[str] = []
    url: str | None = "/"
    while url:
        text = (await signed_in(client, "reader").get(url)).text
        seen += re.findall(r'href="/sessions/(agent:main:[^"]+)"', text)
        more = re.search(r'<a href="(/\?after=[^"]+)">Older sessions', text)
        url = more.group(1).replace("&amp;", "&") if more else None
    assert len(seen) == len(set(seen)) == 211
    assert seen[0] == "agent:main:flood-209" and "agent:main:team-a" in seen  # newest first


@pytest.mark.backends
async def test_session_page_shows_the_rendered_card_and_its_update_time(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "ticket-1")
    card = await store.get(Owner("main", "ticket-1"))
    assert card is not None
    response = await signed_in(client).get("/sessions/ticket-1")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    fragment = page[page.index('id="pc-card"') :]
    assert fragment.index("<progress") < fragment.index('class="pc-steps"')  # progress bar first
    assert 'aria-label="Steps · 1/2"' in page
    assert "Fix &lt;it&gt;" in page and "<it>" not in page  # agent text escaped
    assert f'datetime="{card.updatedAt}"' in page
    assert 'data-session-key="ticket-1"' in page and 'data-agent-id="main"' in page
    assert '<script src="/static/live.js" defer></script>' in page


@pytest.mark.parametrize(
    ("path", "agent", "session"),
    [
        ("/sessions/agent:research:r-1", "research", "r-1"),
        ("/sessions/r-1?agentId=research", "research", "r-1"),
        ("/sessions/" + quote("agent:main:dir/with/slash", safe=":"), "main", "dir/with/slash"),
    ],
)
async def test_agent_qualified_and_odd_keys_open_their_own_card(
    client: httpx.AsyncClient, store: CardStore, path: str, agent: str, session: str
) -> None:
    await put(store, session, {"markdown": f"card of {agent}"}, agent=agent)
    response = await signed_in(client).get(path)
    assert response.status_code == 200
    assert f"card of {agent}" in response.text and f'data-agent-id="{agent}"' in response.text


async def test_session_page_refuses_other_sessions_and_unknown_agents(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "other", {"markdown": "private"})
    refused = await signed_in(client, "team").get("/sessions/other")
    assert refused.status_code == 403 and "private" not in refused.text
    unknown = await signed_in(client).get("/sessions/agent:ghost:x")
    assert unknown.status_code == 400 and "ghost" in unknown.text


async def test_card_fragment_is_json_with_html_and_update_time(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "ticket-1")
    response = await signed_in(client).get("/v1/card", params={"sessionKey": "ticket-1"})
    assert response.headers["cache-control"] == "no-store"
    result = response.json()["result"]
    assert result["revision"] == 1 and result["displayKey"] == "agent:main:ticket-1"
    assert result["html"].startswith('<div class="pc-progress"><progress aria-label="Steps · 1/2"') and result["updatedAt"].endswith("Z")
    empty = (await client.get("/v1/card", params={"sessionKey": "nothing"})).json()["result"]
    assert empty["revision"] is None and empty["updatedAt"] is None and "No progress card" in empty["html"]


async def test_card_fragment_takes_bearer_tokens_and_enforces_the_rules(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "other", {"markdown": "private"})
    assert (await client.get("/v1/card", params={"sessionKey": "other"})).status_code == 401
    headers = {"Authorization": "Bearer team"}
    refused = await client.get("/v1/card", params={"sessionKey": "other"}, headers=headers)
    assert refused.status_code == 403 and "private" not in refused.text
    assert (await client.get("/v1/card", params={"sessionKey": "x", "agentId": "ghost"}, headers=headers)).json()["error"]["code"] == "unknown_agent"
    assert (await client.get("/v1/card", headers=headers)).status_code == 400
    noscope = await client.get("/v1/card", params={"sessionKey": "other"}, headers={"Authorization": "Bearer noscope"})
    assert noscope.status_code == 403


# -- headers and static files ---------------------------------------------------


async def test_pages_carry_a_strict_csp_and_no_inline_script(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "ticket-1", {"markdown": "note <script>alert(1)</script> <img src=x onerror=alert(2)>"})
    for path in ["/", "/sessions/ticket-1"]:
        response = await signed_in(client).get(path)
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
        scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", response.text, re.S)
        assert scripts == [""], scripts  # only the external live.js, never a script body
        assert "<img" not in response.text


async def test_static_script_and_style_are_served(client: httpx.AsyncClient) -> None:
    js = await client.get("/static/live.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    assert "EventSource" in js.text and "innerHTML" in js.text
    css = await client.get("/static/page.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


async def test_session_page_marks_unfinished_steps_paused_when_the_run_ended(client: httpx.AsyncClient, store: CardStore) -> None:
    owner = Owner("main", "ticket-1")
    await store.start_run(owner, "r1")
    await put(store, "ticket-1")
    live = (await signed_in(client).get("/sessions/ticket-1")).text
    assert "pc-step--in_progress" in live and "pc-step--paused" not in live
    await store.end_run(owner, "r1", RunState.canceled)
    page = (await client.get("/sessions/ticket-1")).text
    assert 'aria-label="Fix &lt;it&gt;, paused"' in page
    assert (await client.get("/v1/card", params={"sessionKey": "ticket-1"})).json()["result"]["paused"] is True


async def test_the_token_redirect_keeps_escapes_so_it_names_the_same_session(client: httpx.AsyncClient, store: CardStore) -> None:
    await put(store, "pct%41", {"markdown": "the escaped one"})
    await put(store, "pctA", {"markdown": "a different session"})
    response = await client.get("/sessions/agent:main:pct%2541?token=reader&x=a%26b")
    assert response.status_code == 303
    assert response.headers["location"] == "/sessions/agent:main:pct%2541?x=a%26b"
    shown = await signed_in(client, "reader").get(response.headers["location"])
    assert "the escaped one" in shown.text and "a different session" not in shown.text


async def test_last_update_keeps_its_time_after_a_clear(client: httpx.AsyncClient, store: CardStore) -> None:
    owner = Owner("main", "ticket-1")
    await put(store, "ticket-1")
    written = (await store.get(owner)).updatedAt  # type: ignore[union-attr]
    await store.clear(owner)
    page = (await signed_in(client).get("/sessions/ticket-1")).text
    stamp = re.search(r'<time id="pc-updated" class="pc-local-time" datetime="([^"]+)">', page)
    assert stamp is not None and stamp.group(1) >= written and "none yet" not in page
    result = (await client.get("/v1/card", params={"sessionKey": "ticket-1"})).json()["result"]
    assert result["updatedAt"] == stamp.group(1) and result["revision"] is None


async def test_the_card_shows_how_its_run_ended_and_the_final_answer(client: httpx.AsyncClient, store: CardStore) -> None:
    owner = Owner("main", "ticket-1")
    await store.start_run(owner, "r1")
    await put(store, "ticket-1", {"plan": [{"step": "Confirm access", "status": "blocked"}]})
    await store.update_activity(owner, answer="Waiting on **you** for access.")
    await store.end_run(owner, "r1", RunState.failed)
    page = (await signed_in(client).get("/sessions/ticket-1")).text
    assert "Run failed" in page and "Blocked: Confirm access" in page
    assert 'aria-label="Confirm access, blocked"' in page  # not paused: it still waits for a person
    assert "Waiting on <strong>you</strong> for access." in page


async def test_an_unknown_session_is_a_404_page_not_an_empty_card(client: httpx.AsyncClient, store: CardStore) -> None:
    response = await signed_in(client).get("/sessions/never-written")
    assert response.status_code == 404
    assert "No such session" in response.text and "agent:main:never-written" in response.text
    assert 'id="pc-live"' not in response.text and "No progress card" not in response.text
    # One that was written and then cleared is known: its page shows it (empty).
    owner = Owner("main", "cleared")
    await put(store, "cleared")
    await store.clear(owner)
    assert (await client.get("/sessions/cleared")).status_code == 200
    # So is one with only a run or activity so far.
    await store.start_run(Owner("main", "just-started"), "r1")
    assert (await client.get("/sessions/just-started")).status_code == 200


# -- answering from the page ----------------------------------------------------


@pytest.fixture
async def answering(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway with Ana's token besides the test tokens: it may read and answer."""
    settings = gateway_settings()
    settings.gateway.tokens.append(GatewayToken(token="ana", name="Ana", scopes=["operator.read", "operator.answer"]))
    app = create_app(settings, redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c


PAGE_CALL = {"X-Progresscast": "1", "Sec-Fetch-Site": "same-origin", "Origin": "http://gw"}
"""What the page's script sends with an RPC call (the browser adds the last two)."""


async def page_rpc(client: httpx.AsyncClient, method: str, headers: dict[str, str] = PAGE_CALL, **params: object) -> httpx.Response:
    return await client.post("/v1/rpc", json={"method": method, "params": params}, headers=headers)


async def test_the_page_draws_answer_controls_only_for_a_token_that_may_answer(
    answering: httpx.AsyncClient, store: CardStore
) -> None:
    owner = Owner("main", "ticket-1")
    await put(store, "ticket-1")
    await store.start_run(owner, "r1", stoppable=True)
    await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "Deploy <prod>?"}))
    for path in ("/sessions/ticket-1", "/"):
        shown = (await signed_in(answering, "ana").get(path)).text
        assert "Deploy &lt;prod&gt;?" in shown and 'class="pc-ask__option" data-option="Allow"' in shown
        assert 'class="pc-stop"' in shown
        shown = (await signed_in(answering, "reader").get(path)).text
        assert "Deploy &lt;prod&gt;?" in shown and "pc-ask__option" not in shown and "pc-stop" not in shown
    fragment = (await signed_in(answering, "ana").get("/v1/card", params={"sessionKey": "ticket-1"})).json()["result"]
    assert 'data-option="Deny"' in fragment["html"]
    fragment = (await signed_in(answering, "reader").get("/v1/card", params={"sessionKey": "ticket-1"})).json()["result"]
    assert "Deploy &lt;prod&gt;?" in fragment["html"] and "pc-ask__option" not in fragment["html"]


async def test_the_page_answers_with_its_cookie_and_a_read_token_cannot(answering: httpx.AsyncClient, store: CardStore) -> None:
    owner = Owner("main", "ticket-1")
    await put(store, "ticket-1")
    ask = await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "Deploy?"}))
    answer = {"sessionKey": "ticket-1", "askId": ask.ask_id, "options": ["Allow"]}

    refused = await page_rpc(signed_in(answering, "reader"), "progressCard.answer", **answer)
    assert refused.status_code == 403 and "operator.answer" in refused.json()["error"]["message"]
    assert (await store.asks.get(owner, ask.ask_id))[0].state.value == "open"  # type: ignore[union-attr]

    answered = await page_rpc(signed_in(answering, "ana"), "progressCard.answer", **answer)
    assert answered.status_code == 200 and answered.json()["result"]["answered"] is True
    stored, _ = await store.asks.get(owner, ask.ask_id)
    assert stored is not None and stored.answer is not None
    assert stored.answer.options == ("Allow",) and stored.answer.by.name == "Ana"


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ({}, "no header: a plain form post from anywhere"),
        ({"X-Progresscast": "0"}, "not the page's header"),
        ({"X-Progresscast": "1", "Sec-Fetch-Site": "cross-site"}, "another site"),
        ({"X-Progresscast": "1", "Sec-Fetch-Site": "same-site"}, "another origin of the same site"),
        ({"X-Progresscast": "1", "Origin": "http://evil.example"}, "another origin (no Sec-Fetch-Site)"),
    ],
)
async def test_the_cookie_is_no_credential_for_rpc_without_the_pages_own_call(
    answering: httpx.AsyncClient, store: CardStore, headers: dict[str, str], why: str
) -> None:
    owner = Owner("main", "ticket-1")
    ask = await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "Deploy?"}))
    response = await page_rpc(
        signed_in(answering, "ana"), "progressCard.answer", headers, sessionKey="ticket-1", askId=ask.ask_id, options=["Allow"]
    )
    assert response.status_code == 401, why
    assert (await store.asks.get(owner, ask.ask_id))[0].state.value == "open", why  # type: ignore[union-attr]


async def test_the_cookie_calls_only_the_pages_methods(answering: httpx.AsyncClient, store: CardStore) -> None:
    response = await page_rpc(signed_in(answering, "writer"), "progressCard.put", sessionKey="ticket-1", markdown="x")
    assert response.status_code == 403
    assert response.json()["error"]["message"].startswith("method: is not one the page may call with its sign-in")
    assert await store.get(Owner("main", "ticket-1")) is None
    # Stop, though, is one of them.
    owner = Owner("main", "ticket-1")
    await store.start_run(owner, "r1", stoppable=True)
    stopped = await page_rpc(signed_in(answering, "ana"), "run.stop", sessionKey="ticket-1")
    assert stopped.status_code == 200 and stopped.json()["result"]["stop"]["by"]["name"] == "Ana"
    mark = await store.asks.stop_mark(owner, "r1")
    assert mark is not None and mark.by.name == "Ana"
