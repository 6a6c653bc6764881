"""Where the agent tools write: the card store itself, or a gateway's RPC.

The MCP server and the hooks bind one owner (agent + session) and then only write the
card (optionally compare-and-set), write its plan alone keeping the note, and update
the activity. A `CardSink` is that much, over either path; `StoreSink` calls the store's
write path itself, `GatewaySink` the same through `POST /v1/rpc` with a bearer token.
Each write is admitted by when it arrived (`arrived`, a `time.monotonic()` reading,
default now; through a gateway, when the request reached it), so a reset that lands
in between refuses it on either path. Both raise `CardError` for a write that breaks a
rule (or that a reset refused), `Conflict` for a stale `expectedRevision` and
`SinkError` when the other side is unreachable or refuses the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from ..model.asks import Actor, Answer, Ask, AskInput, AskKind, AskState, StopMark
from ..model.card import CardError, CardInput, Step, StepCounts, WriteResult
from ..model.owners import Owner
from ..model.timing import Usage
from ..model.view import RunState
from ..store.cards import CardStore, StoreError
from .asking import Waited, ask_and_wait

if TYPE_CHECKING:  # the hooks never talk to a gateway: they need not pay for importing httpx
    import httpx


class SinkError(Exception):
    """The store or gateway did not answer, or refused the caller (one line, for a human)."""


class Conflict(Exception):
    """A compare-and-set write found the card at another revision."""

    def __init__(self, revision: int | None) -> None:
        super().__init__(f"the card is at revision {revision}")
        self.revision = revision


class CardSink(Protocol):
    owner: Owner

    async def put(
        self, card: CardInput, *, expected_revision: int | None = None, arrived: float | None = None
    ) -> WriteResult: ...

    async def put_plan(self, steps: Sequence[Step], *, arrived: float | None = None) -> WriteResult:
        """Replace the plan, keeping the card's note (in the same write: nothing written in
        between is overwritten with an old note)."""
        ...

    async def activity(
        self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None
    ) -> None: ...

    async def run_active(self) -> bool | None:
        """Is a run of the owner active? None: not known here."""
        ...

    async def start_run(self, run_id: str) -> None: ...

    async def end_run(self, run_id: str, state: RunState, usage: Usage | None = None) -> None:
        """End the run if it is still the current one (else nothing), with what it used."""
        ...

    async def ask(self, body: AskInput, wait: float) -> Waited:
        """Ask the session's followers and wait up to `wait` seconds (asking.ask_and_wait)."""
        ...

    async def stop_mark(self) -> StopMark | None:
        """The Stop pressed on the current run, where this path can tell (None: none, or not known)."""
        ...


class StoreSink:
    def __init__(self, store: CardStore, owner: Owner) -> None:
        self.store = store
        self.owner = owner

    async def put(
        self, card: CardInput, *, expected_revision: int | None = None, arrived: float | None = None
    ) -> WriteResult:
        try:
            return await self.store.put(self.owner, card, expected_revision=expected_revision, arrived=arrived)
        except StoreError as exc:
            if exc.field == "expectedRevision":
                raise Conflict(exc.revision) from None
            raise
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def put_plan(self, steps: Sequence[Step], *, arrived: float | None = None) -> WriteResult:
        try:
            return await self.store.put_plan(self.owner, steps, arrived=arrived)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def activity(
        self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None
    ) -> None:
        try:
            await self.store.update_activity(self.owner, headline=headline, answer=answer, tool=tool)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def run_active(self) -> bool | None:
        try:
            return (await self.store.view(self.owner)).run is RunState.active
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def start_run(self, run_id: str) -> None:
        try:  # stoppable: a Stop pressed in chat is told to the agent (`stop_mark`)
            await self.store.start_run(self.owner, run_id, stoppable=True)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def end_run(self, run_id: str, state: RunState, usage: Usage | None = None) -> None:
        try:
            await self.store.end_run(self.owner, run_id, state, usage=usage)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def ask(self, body: AskInput, wait: float) -> Waited:
        try:
            return await ask_and_wait(self.store, self.owner, [body], wait)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def stop_mark(self) -> StopMark | None:
        try:
            return await self.store.asks.stop_mark(self.owner)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None


class Gateway:
    """A gateway's RPC endpoint, called with one bearer token."""

    def __init__(self, client: httpx.AsyncClient, url: str, token: str) -> None:
        self.client = client
        self.url = url.rstrip("/") + "/v1/rpc"
        self.token = token

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """One RPC call; the answer's `result`, or the error raised as ours."""
        import httpx

        try:
            response = await self.client.post(
                self.url,
                json={"method": method, "params": params},
                headers={"Authorization": f"Bearer {self.token}"},
            )
        except httpx.HTTPError as exc:
            raise SinkError(f"the gateway {self.url} is not answering: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            raise SinkError(f"the gateway {self.url} answered HTTP {response.status_code}, not JSON") from None
        if isinstance(body, dict) and body.get("ok") is True:
            return body.get("result")
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            raise SinkError(f"the gateway {self.url} answered HTTP {response.status_code}")
        message = str(error.get("message", "refused"))
        if error.get("code") == "conflict" and error.get("field") == "expectedRevision":
            revision = error.get("revision")
            raise Conflict(revision if isinstance(revision, int) else None)
        if response.status_code == 400 and isinstance(error.get("field"), str):
            raise CardError(error["field"], str(error.get("rule", message)))
        raise SinkError(f"the gateway refused: {message}")

    async def hello(self) -> dict[str, Any]:
        result = await self.call("hello", {})
        return result if isinstance(result, dict) else {}


class GatewaySink:
    """The same, through a gateway: `progressCard.put` and `activity.put`."""

    def __init__(self, gateway: Gateway, owner: Owner) -> None:
        self.gateway = gateway
        self.owner = owner

    def _owner_params(self) -> dict[str, Any]:
        return {"sessionKey": self.owner.session_key, "agentId": self.owner.agent_id}

    async def put(
        self, card: CardInput, *, expected_revision: int | None = None, arrived: float | None = None
    ) -> WriteResult:
        given = {k: v for k, v in card.to_json().items() if v is not None}
        params: dict[str, Any] = {**self._owner_params(), **given}
        if expected_revision is not None:
            params["expectedRevision"] = expected_revision
        return await self._put(params, arrived)

    async def put_plan(self, steps: Sequence[Step], *, arrived: float | None = None) -> WriteResult:
        plan = [s.to_json() for s in steps]
        return await self._put({**self._owner_params(), "plan": plan, "keepMarkdown": True}, arrived)

    async def _put(self, params: dict[str, Any], arrived: float | None) -> WriteResult:
        # (`arrived` is not sent: the gateway admits the write by when the request
        # reached it, a moment later.)
        result = await self.gateway.call("progressCard.put", params)
        steps = result.get("steps")
        return WriteResult(
            revision=result["revision"],
            steps=StepCounts(**steps) if steps else None,
            cleared=bool(result.get("cleared")),
        )

    async def activity(
        self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None
    ) -> None:
        given = {k: v for k, v in {"headline": headline, "answer": answer, "tool": tool}.items() if v is not None}
        await self.gateway.call("activity.put", {**self._owner_params(), **given})

    async def run_active(self) -> bool | None:
        return None  # the RPC does not say (a run's state is read by no RPC method)

    async def start_run(self, run_id: str) -> None:
        await self.gateway.call("run.start", {**self._owner_params(), "runId": run_id})

    async def end_run(self, run_id: str, state: RunState, usage: Usage | None = None) -> None:
        params = {**self._owner_params(), "runId": run_id, "state": state.value}
        if usage is not None and not usage.empty:
            params["usage"] = usage.to_json()
        try:
            await self.gateway.call("run.end", params)
        except SinkError:
            pass  # not the current run any more (409), or the gateway is gone: nothing to end

    async def ask(self, body: AskInput, wait: float) -> Waited:
        """`progressCard.ask`, then `waitAnswer` (at most a minute a call) until the ask
        ends or `wait` passes; an ask still open then is withdrawn."""
        import time

        deadline = time.monotonic() + wait
        params = {**self._owner_params(), **body.model_dump(exclude_none=True), "kind": body.kind.value}
        made = await self.gateway.call("progressCard.ask", params)
        ask_id = made["askId"]
        got: dict[str, Any] = {"state": "open"}
        try:
            while got.get("state") == "open" and (left := deadline - time.monotonic()) > 0:
                waiting = {**self._owner_params(), "askId": ask_id, "timeoutSeconds": min(60, left)}
                got = await self.gateway.call("progressCard.waitAnswer", waiting)
        finally:
            if got.get("state") == "open":
                await self.gateway.call("progressCard.withdraw", {**self._owner_params(), "askId": ask_id})
        answer = got.get("answer")
        if got.get("state") != "answered" or not isinstance(answer, dict):
            return Waited()
        return Waited(answered=(Ask(
            ask_id=ask_id, kind=AskKind(body.kind.value), prompt=body.prompt, state=AskState.answered,
            answer=Answer(
                by=Actor.from_json(answer.get("by")), at_ms=0,
                options=tuple(str(o) for o in answer.get("options") or ()),
                text=answer.get("text") if isinstance(answer.get("text"), str) else None,
            ),
        ),))

    async def stop_mark(self) -> StopMark | None:
        return None  # no RPC method reads it: through a gateway, runs are not offered a Stop
