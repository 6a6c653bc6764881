"""The emulated Slack workspace's Web API methods, without HTTP: parameters in, a result
or a `SlackError` out. The channels live here; `slackapi` serves them, paces them and
injects faults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._slack_state import SlackChannel, SlackError, SlackMessage, Task, new_ts
from .slack_blocks import MAX_MESSAGE_TEXT, InvalidBlocks, check_blocks

TEAM_ID = "T0PROGRESS"
BOT_USER_ID = "U0PROGRESS"
BOT_ID = "B0PROGRESS"

WRITES = frozenset(
    {"chat.postMessage", "chat.update", "chat.delete", "chat.startStream", "chat.appendStream", "chat.stopStream"}
)
"""The methods that change what a channel shows."""
SESSION_STATUSES = frozenset({"active", "processing", "suspended", "closed"})
"""What `agents.sessions.setStatus` accepts as `status`."""
_TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
MAX_TASK_TEXT = 256
MAX_STREAM_MARKDOWN = 12_000

Method = Callable[[dict[str, Any]], dict[str, Any]]


class FakeSlack:
    """One workspace with one app. ``on_post`` hears of every new message (the app's or
    a person's), so the server can send it to the app's Events API."""

    def __init__(self, channels: list[str] | tuple[str, ...], *, on_post: Callable[[SlackMessage], None]) -> None:
        self.team_id = TEAM_ID
        self.bot_user_id = BOT_USER_ID
        self.on_post = on_post
        self.channels: dict[str, SlackChannel] = {}
        for cid in channels:
            self.add_channel(cid)
        self.users: dict[str, str] = {}
        """People by user id: their handle (`users.info`'s `name`), as presses and
        messages of the tests name them."""
        self.ephemeral: list[SlackMessage] = []
        """Messages only one person sees (`chat.postEphemeral`), in order: never in a channel."""
        self.methods: dict[str, Method] = {
            "auth.test": self._auth_test,
            "users.info": self._user_info,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "agents.sessions.setStatus": self._set_session_status,
        }
        self.sessions: dict[tuple[str, str], str] = {}
        """Each thread's agent session status: (channel, thread_ts) → status."""
        self.session_history: list[tuple[str, str, str]] = []
        """Every status set, in order: (channel, thread_ts, status)."""

    def add_channel(self, channel_id: str, name: str | None = None) -> SlackChannel:
        channel = self.channels.get(channel_id)
        if channel is None:
            channel = self.channels[channel_id] = SlackChannel(channel_id, name or channel_id.lower())
        return channel

    def post(self, channel: SlackChannel, msg: SlackMessage) -> None:
        """A new message in the channel, told to ``on_post``."""
        channel.messages[msg.ts] = msg
        self.on_post(msg)

    def _channel_of(self, params: dict[str, Any]) -> SlackChannel:
        cid = params.get("channel")
        if not cid:
            raise SlackError("channel_not_found")
        channel = self.channels.get(str(cid))
        if channel is None:
            raise SlackError("channel_not_found")
        if channel.archived:
            raise SlackError("is_archived")
        if not channel.app_member:
            raise SlackError("not_in_channel")
        return channel

    def _content(self, params: dict[str, Any], *, update: bool) -> tuple[str | None, list[dict[str, Any]] | None]:
        text = params.get("text")
        blocks = params.get("blocks")
        if text is not None and not isinstance(text, str):
            text = str(text)
        if blocks is not None:
            try:
                check_blocks(blocks)
            except InvalidBlocks as e:
                raise SlackError("invalid_blocks", errors=e.errors, response_metadata={"messages": e.errors}) from None
        if not update and not text and not blocks:
            raise SlackError("no_text")
        if text and len(text) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        return text, blocks

    def _message(self, channel: SlackChannel, ts: Any) -> SlackMessage:
        msg = channel.messages.get(str(ts)) if ts else None
        if msg is None:
            raise SlackError("message_not_found")
        return msg

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://progresscast-test.slack.com/",
            "team": "progresscast test",
            "user": "progresscast",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _user_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user") or "")
        name = self.users.get(user)
        if name is None:
            raise SlackError("user_not_found")
        profile = {"display_name": name, "real_name": name.title()}
        return {"ok": True, "user": {"id": user, "team_id": self.team_id, "name": name, "real_name": name.title(),
                                     "is_bot": False, "profile": profile}}

    def _post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        text, blocks = self._content(params, update=False)
        user = str(params.get("user") or "")
        if user not in self.users:
            raise SlackError("user_not_in_channel")
        msg = SlackMessage(new_ts(), channel.id, BOT_USER_ID, text=text or "", blocks=blocks or [],
                           thread_ts=params.get("thread_ts") or None, bot_id=BOT_ID, editable=False,
                           recipient_user_id=user)
        self.ephemeral.append(msg)
        return {"ok": True, "message_ts": msg.ts}

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        text, blocks = self._content(params, update=False)
        thread_ts = params.get("thread_ts") or None
        msg = SlackMessage(
            new_ts(),
            channel.id,
            self.bot_user_id,
            text=text or "",
            blocks=list(blocks or []),
            thread_ts=str(thread_ts) if thread_ts else None,
            bot_id=BOT_ID,
            # Slack ignores reply_broadcast outside a thread.
            reply_broadcast=bool(thread_ts) and str(params.get("reply_broadcast", "")).lower() in ("1", "true"),
        )
        self.post(channel, msg)
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "message": msg.to_api()}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.from_bot or not msg.editable or msg.stream:
            raise SlackError("cant_update_message")
        text, blocks = self._content(params, update=True)
        if text is None and blocks is None:
            raise SlackError("no_text")
        if text is not None:
            msg.text = text
        if blocks is not None:  # omitted blocks are kept, [] removes them (as Slack does)
            msg.blocks = list(blocks)
        msg.edits += 1
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "text": msg.text, "message": msg.to_api()}

    def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.from_bot:
            raise SlackError("cant_delete_message")
        channel.deleted[msg.ts] = channel.messages.pop(msg.ts)
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _set_session_status(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread's agent session (made if it was not): `channel_id`, `thread_ts` (a
        message of the channel) and `status` (one of `SESSION_STATUSES`)."""
        status = params.get("status")
        if not isinstance(status, str) or status not in SESSION_STATUSES:
            raise SlackError("invalid_arguments")
        channel = self._channel_of({"channel": params.get("channel_id")})
        thread = params.get("thread_ts")
        if not isinstance(thread, str) or not thread:
            raise SlackError("invalid_arguments")
        if thread not in channel.messages:
            raise SlackError("thread_not_found")
        self.sessions[channel.id, thread] = status
        self.session_history.append((channel.id, thread, status))
        return {"ok": True, "status": status}

    def stop_streams(self, channel_id: str, thread_ts: str) -> list[str]:
        """Slack's stop button stops the app's streaming messages in the thread: their ts."""
        stopped = []
        for msg in self.channels[channel_id].messages.values():
            if msg.streaming and msg.thread_ts == thread_ts:
                msg.streaming = False
                stopped.append(msg.ts)
        return stopped

    def _page(self, messages: list[SlackMessage], params: dict[str, Any]) -> dict[str, Any]:
        try:
            limit = max(1, min(int(params.get("limit", 100)), 1000))
        except (TypeError, ValueError):
            limit = 100
        oldest, latest = params.get("oldest"), params.get("latest")
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")

        def keep(ts: str) -> bool:
            if oldest and (ts < str(oldest) or (ts == str(oldest) and not inclusive)):
                return False
            return not (latest and (ts > str(latest) or (ts == str(latest) and not inclusive)))

        chosen = [m for m in messages if keep(m.ts)]
        return {
            "ok": True,
            "messages": [m.to_api() for m in chosen[:limit]],
            "has_more": len(chosen) > limit,
            "pin_count": 0,
            "response_metadata": {"next_cursor": ""},
        }

    def _history(self, params: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages, newest first (replies live in conversations.replies)."""
        channel = self._channel_of(params)
        top = [m for m in channel.messages.values() if m.thread_ts is None or m.thread_ts == m.ts]
        return self._page(sorted(top, key=lambda m: m.ts, reverse=True), params)

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent first, then the replies, oldest first."""
        channel = self._channel_of(params)
        parent = self._message(channel, params.get("ts"))
        replies = (m for m in channel.messages.values() if m.thread_ts == parent.ts and m.ts != parent.ts)
        thread = [parent, *sorted(replies, key=lambda m: m.ts)]
        return self._page(thread, params)

    def _apply_chunks(self, msg: SlackMessage, params: dict[str, Any]) -> None:
        chunks = params.get("chunks") or []
        if not isinstance(chunks, list):
            raise SlackError("invalid_chunks")
        markdown = params.get("markdown_text")
        if markdown is not None:
            chunks = [*chunks, {"type": "markdown_text", "text": markdown}]
        for chunk in chunks:
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            if kind == "markdown_text":
                text = str(chunk.get("text", ""))
                if len(text) > MAX_STREAM_MARKDOWN:
                    raise SlackError("msg_too_long")
                msg.markdown += text
            elif kind == "plan_update":
                msg.plan_title = str(chunk.get("title", ""))[:MAX_TASK_TEXT]
            elif kind == "task_update":
                if not chunk.get("id") or not chunk.get("title") or chunk.get("status") not in _TASK_STATUSES:
                    raise SlackError("invalid_chunks")
                for name in ("title", "details", "output"):
                    if chunk.get(name) is not None and len(str(chunk[name])) > MAX_TASK_TEXT:
                        raise SlackError("invalid_chunks")
                msg.tasks[str(chunk["id"])] = Task(
                    str(chunk["id"]),
                    str(chunk["title"]),
                    str(chunk["status"]),
                    chunk.get("details"),
                    chunk.get("output"),
                )
            elif kind == "blocks":
                try:
                    check_blocks(chunk.get("blocks"))
                except InvalidBlocks as e:
                    raise SlackError("invalid_blocks", errors=e.errors) from None
                msg.blocks += list(chunk["blocks"])
            else:
                raise SlackError("invalid_chunks")

    def _start_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        thread_ts = params.get("thread_ts")
        if not thread_ts or str(thread_ts) not in channel.messages:
            raise SlackError(
                "invalid_arguments",
                response_metadata={"messages": ["[ERROR] thread_ts must be a message in the channel"]},
            )
        if channel.id.startswith(("C", "G")) and not (
            params.get("recipient_user_id") and params.get("recipient_team_id")
        ):
            raise SlackError(
                "invalid_arguments",
                response_metadata={
                    "messages": ["[ERROR] recipient_user_id and recipient_team_id are required in channels"]
                },
            )
        mode = params.get("task_display_mode", "timeline")
        if mode not in ("timeline", "plan"):
            raise SlackError("invalid_arguments")
        msg = SlackMessage(
            new_ts(),
            channel.id,
            self.bot_user_id,
            thread_ts=str(thread_ts),
            bot_id=BOT_ID,
            streaming=True,
            stream=True,
            task_display_mode=str(mode),
            recipient_user_id=params.get("recipient_user_id"),
            recipient_team_id=params.get("recipient_team_id"),
        )
        self._apply_chunks(msg, params)
        channel.messages[msg.ts] = msg
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _streaming_message(self, params: dict[str, Any]) -> tuple[SlackChannel, SlackMessage]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.streaming:
            raise SlackError("message_not_in_streaming_state")
        return channel, msg

    def _append_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, msg = self._streaming_message(params)
        self._apply_chunks(msg, params)
        msg.edits += 1
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _stop_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, msg = self._streaming_message(params)
        blocks = params.get("blocks")
        self._apply_chunks(msg, {k: v for k, v in params.items() if k != "blocks"})
        if blocks is not None:
            try:
                check_blocks(blocks)
            except InvalidBlocks as e:
                raise SlackError("invalid_blocks", errors=e.errors) from None
            msg.blocks = list(blocks)
        msg.streaming = False
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "message": msg.to_api()}



__all__ = ["BOT_ID", "BOT_USER_ID", "SESSION_STATUSES", "TEAM_ID", "WRITES", "FakeSlack", "Method"]
