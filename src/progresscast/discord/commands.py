"""What `/progresscast` does in a Discord channel: the one chat-command handler every
platform shares (`channels/chat/commands.py`: parsing, access and pairing, who may change
what, the replies), with Discord's words for things (`SURFACE`).

The transport (`interactions.py`) turns a signed interaction into an `Invocation` and
sends the answer back as an ephemeral message; this module only hands it over: the
channel spoke (a channel paused for refusing the bot is called again), then the shared
handler answers.
"""

from __future__ import annotations

from ..channels.chat.commands import ChatCommands, Invocation, Surface
from ..channels.worker import ChannelWorker

SURFACE = Surface(
    prefix="/progresscast ",
    noun="channel",
    rich_name="Components V2 cards",
    rich_help="Components V2 cards (off: plain messages)",
)


class DiscordCommands:
    def __init__(self, worker: ChannelWorker) -> None:
        self.worker = worker
        self.commands = ChatCommands(worker, SURFACE)

    async def answer(self, inv: Invocation) -> str | None:
        """The text to show the person who typed the command (plain; the transport
        escapes it), or None: say nothing."""
        await self.worker.spoke(inv.destination)
        reply = await self.commands.handle(inv)
        return None if reply is None else reply.text


__all__ = ["SURFACE", "DiscordCommands"]
