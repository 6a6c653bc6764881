"""`progresscast ask` as a person's chat sees it, for every platform's asks tests: the
command waits in its own process while the test presses the button the chat shows."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

CLI_PROMPT = "Deploy?"
OPTIONS = ("Now", "Later")


async def ask_and_press(redis_url: str, press: Callable[[], Awaitable[None]], session: str = "t1") -> str:
    """Run `progresscast ask` for `CLI_PROMPT` with `OPTIONS`, call `press` (which waits for the
    ask in its chat and presses `Later`), and return what the command printed; it must
    exit 0."""
    options = [arg for label in OPTIONS for arg in ("--option", label)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast", "--redis", redis_url, "ask", "--session", session, CLI_PROMPT,
        *options, "--timeout", "30", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        await press()
        out, err = await asyncio.wait_for(proc.communicate(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 0, err
    return out.decode()
