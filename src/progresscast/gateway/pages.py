"""The web page: the list of sessions, one live card, login and logout.

The page holds the token in a cookie (`HttpOnly`, `SameSite=Strict`, and `Secure`
over https), set by the login form or by opening any page with `?token=…` (which
then redirects to the same address without it, so the token does not stay in the
address bar or the history). A `?token=` link signs in only a browser that is not
signed in, and only when opened directly, not followed from a page (`_link_login`).
Its script is a static file: with the Content-Security-Policy the app sends, no
inline script runs at all, and the only HTML it inserts is the fragment the server
rendered and sanitized.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from jinja2 import Environment, StrictUndefined
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from .. import metrics
from ..config.base import RenderSettings
from ..http.auth import ANSWER, COOKIE, READ, Grant, bearer, cookie, same_origin
from ..http.body import read_body
from ..model.card import CardError
from ..model.owners import Owner
from ..model.view import View
from ..render.templates import loader
from .state import Gateway, gateway_of, raw_path, raw_query, readable_owner

LOGIN_BODY = 8 * 1024
"""The login form's body: a token and where to go next."""
PAGE_SIZE = 50
"""Sessions per page of the index; a link leads to the next page."""
INDEX_SCAN = 2000
"""Index entries one request of the index page reads at most."""
HISTORY_SHOWN = 20
"""History entries on a session page (the newest)."""

# -- templates ----------------------------------------------------------------


@lru_cache(maxsize=4)
def _environment(override: str | None) -> Environment:
    env = Environment(
        loader=loader(override),  # the renderers' lookup: override, then packaged templates
        autoescape=True,
        undefined=StrictUndefined,
        auto_reload=False,
    )
    env.filters["session_url"] = session_url
    return env


def page(gw: Gateway, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _environment(gw.settings.templates.dir).get_template(f"pages/{name}.j2").render(**context)
    return HTMLResponse(html, status_code=status)


def session_url(owner: Owner) -> str:
    # The display key names agent and session in one path; `/` inside a key is escaped.
    return "/sessions/" + quote(owner.display_key, safe=":@")


# -- the card fragment --------------------------------------------------------


def render_card(gw: Gateway, view: View, *, can_answer: bool = False, now_ms: int | None = None) -> str:
    """The web renderer's fragment: escaped and sanitized there, inserted as is here.
    `can_answer`: the viewer's token may answer asks and stop runs (the page draws the
    controls; the RPC checks the scope again when they are used)."""
    from ..render import render_web  # imported late: the renderers load templates on first use

    # The web card has no line limits, so the chat defaults of RenderSettings do not bite.
    metrics.RENDERS.labels("web").inc()
    return render_web(
        view, RenderSettings(), templates_dir=gw.settings.templates.dir, can_answer=can_answer, now_ms=now_ms
    )


@dataclass(frozen=True)
class CardShown:
    owner: Owner
    html: Markup
    revision: int | None
    updated_at: str | None
    paused: bool
    history_html: Markup | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "sessionKey": self.owner.session_key,
            "agentId": self.owner.agent_id,
            "displayKey": self.owner.display_key,
            "revision": self.revision,
            "updatedAt": self.updated_at,
            "paused": self.paused,
            "html": str(self.html),
        }
        if self.history_html is not None:
            out["historyHtml"] = str(self.history_html)
        return out


async def show(gw: Gateway, owner: Owner, *, history: bool = False, can_answer: bool = False) -> CardShown:
    """The card as the page shows it; with `history`, its timeline too (a session page);
    `can_answer`: with the controls to answer its asks and stop its run."""
    view = await gw.store.view(owner)
    card = view.card
    history_html = None
    now_ms = int(time.time() * 1000)
    if history:
        from ..render.history import render_web_history

        entries = await gw.store.history(owner, limit=HISTORY_SHOWN)
        # Markup: rendered from plain text by an autoescaping template.
        history_html = Markup(render_web_history(entries, card, now_ms, templates_dir=gw.settings.templates.dir))
    return CardShown(
        owner=owner,
        # Markup: the fragment comes from the web renderer, which escapes and sanitizes.
        # the live run's times as of this read (renderers read no clock)
        html=Markup(render_card(gw, view.at(now_ms / 1000), can_answer=can_answer, now_ms=now_ms)),
        revision=card.revision if card else None,
        # Without a card (cleared), when it was cleared — or last changed otherwise.
        updated_at=card.updatedAt if card else await gw.store.last_change(owner),
        paused=view.paused,
        history_html=history_html,
    )


# -- who is looking -----------------------------------------------------------


def _secure(request: Request) -> bool:
    """https as the request arrived (a trusted proxy's `X-Forwarded-Proto` included), or
    the public address people open is https (a proxy this process cannot see)."""
    return request.url.scheme == "https" or gateway_of(request).settings.gateway.public_https


def _with_cookie(response: Response, request: Request, token: str) -> Response:
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="strict", secure=_secure(request), path="/"
    )
    return response


def _without_token(request: Request) -> str:
    """The address as sent, less `token=…`: built from the raw path and query, so an
    escape such as `%2541` stays one and names the same session."""
    raw: bytes | None = request.scope.get("raw_path")
    path = raw.decode("latin-1") if raw is not None else quote(request.url.path, safe="/:@")
    query_string: bytes = request.scope.get("query_string", b"")
    parts = [p for p in query_string.decode("latin-1").split("&") if p and unquote(p.split("=", 1)[0]) != "token"]
    return path + (f"?{'&'.join(parts)}" if parts else "")


def _safe_next(value: str | None) -> str:
    """Only a path on this site (no `//host`, no scheme) may be a redirect target."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    return value


class PageRefusal(Exception):
    """An answer made as a page; raised, and sent by the app's exception handler."""

    def __init__(self, response: Response) -> None:
        self.response = response


def answers_with_pages(request: Request) -> None:
    """From here on, errors this request raises are answered as pages, not JSON."""
    request.state.page = True


def error_page(request: Request, status: int, message: str) -> Response:
    """An ApiError or a store error raised by a page's route, as a page."""
    gw = gateway_of(request)
    if status == 503:
        message = "The card store is not answering; reload to try again."
        return page(gw, "error", status, title="Store unavailable", message=message, signed_in=True)
    return page(gw, "error", status, title="Not possible", message=message, signed_in=True)


def viewer(request: Request) -> Grant:
    """The grant of the person at the page, or a PageRefusal carrying the answer."""
    answers_with_pages(request)
    gw = gateway_of(request)
    given = request.query_params.get("token")
    if given is not None:
        raise PageRefusal(_link_login(gw, request, given))
    token = cookie(request)
    grant = gw.tokens.grant(token)
    if grant is None:
        message = "Your token is no longer valid; sign in again." if token else None
        response = login_page(gw, request, message, status=401)
        if token:
            response.delete_cookie(COOKIE, path="/")
        raise PageRefusal(response)
    if not grant.can(READ):
        raise PageRefusal(
            page(gw, "error", 403, title="Not allowed", message=f"This token lacks the scope {READ}.", signed_in=True)
        )
    return grant


LINK_FOLLOWED = "That sign-in link was followed from a page; sign in here, or open the link directly."
"""Why a `?token=` link a page led to does not sign in."""
CROSS_SITE_LOGIN = "That sign-in came from another site; sign in here."
"""Why a login form posted from another site does not sign in (login CSRF)."""


def _link_login(gw: Gateway, request: Request, given: str) -> Response:
    """A page opened with `?token=…`. A link is one click away for anyone who can show
    one (an agent's note, a chat, another site), so it is never a silent login as
    someone else (login CSRF): a browser signed in with another token stays so (a page
    says to sign out first), and a link the browser says it followed from a page
    (`Sec-Fetch-Site` other than `none`) gets the login form. Opened directly — typed,
    pasted, from a terminal or another app, or by a client that sends no
    `Sec-Fetch-Site` — it signs in, keeping the token in the cookie and dropping it
    from the address."""
    if gw.tokens.grant(given) is None:
        return login_page(gw, request, "That token is not valid.", status=401)
    current = cookie(request)
    if current and current != given and gw.tokens.grant(current) is not None:
        return page(
            gw, "error", 409, title="Already signed in",
            message="This browser is signed in with another token. Sign out first to use this link.",
            signed_in=True,
        )
    if request.headers.get("sec-fetch-site", "none") != "none" and current != given:
        return login_page(gw, request, LINK_FOLLOWED, status=401)
    return _with_cookie(RedirectResponse(_without_token(request), 303), request, given)


def login_page(
    gw: Gateway, request: Request, message: str | None = None, *, status: int = 200, next_url: str | None = None
) -> HTMLResponse:
    target = next_url or (_without_token(request) if request.url.path != "/login" else "/")
    return page(gw, "login", status, message=message, next_url=_safe_next(target), signed_in=False)


# -- routes -------------------------------------------------------------------


def _next_page(after: tuple[int, str]) -> str:
    return "/?" + urlencode({"after": f"{after[0]}:{after[1]}"})


def _cursor(value: str | None) -> tuple[int, str] | None:
    """`?after=<ms>:<displayKey>`: the last session of the previous page."""
    ms, _, key = (value or "").partition(":")
    return (int(ms), key) if ms.isdigit() and key else None


async def index(request: Request) -> Response:
    """The sessions the token may see, newest first, PAGE_SIZE at a time. The filter
    runs before the page is cut, so nobody else's sessions can push one off the list;
    one request reads at most INDEX_SCAN entries of the index from where the last page
    stopped (a link leads on), so a token that may see few of many sessions never makes
    one request read the whole index."""
    gw = gateway_of(request)
    grant = viewer(request)
    known = gw.settings.agents.known_set
    after = _cursor(request.query_params.get("after"))
    shown: list[CardShown] = []
    more: str | None = None
    last: tuple[int, str] | None = None
    scanned = 0
    async for display_key, ms in gw.store.owners(after=after):
        owner = Owner.from_display_key(display_key)
        # Agents no longer configured cannot be opened; sessions not granted are not listed.
        if owner and owner.agent_id in known and grant.may_touch(owner):
            if len(shown) == PAGE_SIZE:
                assert last is not None
                more = _next_page(last)
                break
            shown.append(await show(gw, owner, can_answer=grant.can(ANSWER)))
            last = (ms, display_key)
        scanned += 1
        if scanned >= INDEX_SCAN:
            more = _next_page((ms, display_key))
            break
    return page(gw, "index", sessions=shown, more=more, first=after is None, signed_in=True)


async def session(request: Request) -> Response:
    gw = gateway_of(request)
    grant = viewer(request)
    key = raw_path(request).removeprefix(request.scope.get("root_path", "")).removeprefix("/sessions/")
    try:
        owner = gw.owner(key, raw_query(request).get("agentId") or None)
    except CardError as exc:
        raise PageRefusal(page(gw, "error", 400, title="No such session", message=str(exc), signed_in=True)) from None
    if not grant.may_touch(owner):
        message = f"This token may not see {owner.display_key}."
        raise PageRefusal(page(gw, "error", 403, title="Not allowed", message=message, signed_in=True))
    if await gw.store.last_change(owner) is None and await gw.store.revision(owner) == 0:
        # Nothing ever wrote to it (a typo, or an agent that has not started): say so,
        # rather than show an empty card as if it were one.
        message = (
            f"No session {owner.display_key}: nothing has written to it yet. Its page shows the card "
            "once an agent writes one; check the session key (and the agent)."
        )
        raise PageRefusal(page(gw, "error", 404, title="No such session", message=message, signed_in=True))
    shown = await show(gw, owner, history=True, can_answer=grant.can(ANSWER))
    return page(gw, "session", card=shown, signed_in=True)


async def card_fragment(request: Request) -> Response:
    """`GET /v1/card?sessionKey=…[&agentId=…][&history=1]`: the rendered card as JSON,
    for the page (with `history=1`, its timeline too)."""
    gw = gateway_of(request)
    owner = readable_owner(request)
    grant = gw.tokens.grant(bearer(request) or cookie(request))  # the one readable_owner accepted
    can_answer = grant is not None and grant.can(ANSWER)
    shown = await show(gw, owner, history=request.query_params.get("history") == "1", can_answer=can_answer)
    return JSONResponse({"ok": True, "result": shown.to_json()}, headers={"Cache-Control": "no-store"})


async def login_form(request: Request) -> Response:
    gw = gateway_of(request)
    return login_page(gw, request, next_url=request.query_params.get("next"))


async def login(request: Request) -> Response:
    gw = gateway_of(request)
    answers_with_pages(request)
    if not same_origin(request):  # another site's form signing the browser in as its token
        return login_page(gw, request, CROSS_SITE_LOGIN, status=403)
    body = await read_body(request, limit=LOGIN_BODY)
    form = dict(parse_qsl(body.decode("utf-8", "replace")))
    token = form.get("token", "").strip()
    target = _safe_next(form.get("next"))
    if gw.tokens.grant(token) is None:
        return login_page(gw, request, "That token is not valid.", status=401, next_url=target)
    return _with_cookie(RedirectResponse(target, 303), request, token)


async def logout(request: Request) -> Response:
    response = RedirectResponse("/login", 303)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request))
    return response
