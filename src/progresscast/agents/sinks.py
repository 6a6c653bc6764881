"""Where the agent tools write: the card store itself, or a gateway's RPC.

The MCP server and the hooks bind one owner (agent + session) and then only read the
card, write it (optionally compare-and-set), and update the activity. A `CardSink`
is that much, over either path; `StoreSink` talks to Redis, `GatewaySink` to
`POST /v1/rpc` with a bearer token. Both raise `CardError` for a write that breaks a
rule, `Conflict` for a stale `expectedRevision` and `SinkError` when the other side
is unreachable or refuses the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from redis.exceptions import RedisError

from ..model.card import CardError, CardInput, StepCounts, WriteResult
from ..model.owners import Owner
from ..store.cards import CardStore, StoreError

if TYPE_CHECKING:  # the hooks never talk to a gateway: they need not pay for importing httpx
    import httpx


class SinkError(Exception):
    """The store or gateway did not answer, or refused the caller (one line, for a human)."""


class Conflict(Exception):
    """A compare-and-set write found the card at another revision."""

    def __init__(self, revision: int | None) -> None:
        super().__init__(f"the card is at revision {revision}")
        self.revision = revision


@dataclass(frozen=True)
class Snapshot:
    """The card as read for a read-modify-write: the revision to expect, and its note."""

    revision: int | None
    """None when the card is empty and the revision is not known (a gateway read)."""
    markdown: str | None


class CardSink(Protocol):
    owner: Owner

    async def snapshot(self) -> Snapshot: ...

    async def put(self, card: CardInput, *, expected_revision: int | None = None) -> WriteResult: ...

    async def activity(
        self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None
    ) -> None: ...


class StoreSink:
    def __init__(self, store: CardStore, owner: Owner) -> None:
        self.store = store
        self.owner = owner

    async def snapshot(self) -> Snapshot:
        try:
            # Revision first: a write landing between the two reads makes the card newer
            # than the revision, so the compare-and-set against it fails and is retried.
            revision = await self.store.revision(self.owner)
            card = await self.store.get(self.owner)
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None
        return Snapshot(revision=revision, markdown=card.markdown if card else None)

    async def put(self, card: CardInput, *, expected_revision: int | None = None) -> WriteResult:
        try:
            return await self.store.put(self.owner, card, expected_revision=expected_revision)
        except StoreError as exc:
            if exc.field == "expectedRevision":
                raise Conflict(exc.revision) from None
            raise
        except RedisError as exc:
            raise SinkError(f"the card store is not answering: {exc}") from None

    async def activity(
        self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None
    ) -> None:
        try:
            await self.store.update_activity(self.owner, headline=headline, answer=answer, tool=tool)
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
    """The same, through a gateway: `progressCard.get/put` and `activity.put`."""

    def __init__(self, gateway: Gateway, owner: Owner) -> None:
        self.gateway = gateway
        self.owner = owner

    def _owner_params(self) -> dict[str, Any]:
        return {"sessionKey": self.owner.session_key, "agentId": self.owner.agent_id}

    async def snapshot(self) -> Snapshot:
        card = await self.gateway.call("progressCard.get", self._owner_params())
        if not isinstance(card, dict):
            return Snapshot(revision=None, markdown=None)
        return Snapshot(revision=card.get("revision"), markdown=card.get("markdown"))

    async def put(self, card: CardInput, *, expected_revision: int | None = None) -> WriteResult:
        given = {k: v for k, v in card.to_json().items() if v is not None}
        params: dict[str, Any] = {**self._owner_params(), **given}
        if expected_revision is not None:
            params["expectedRevision"] = expected_revision
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
