"""Slack's signed routes refuse a request whose timestamp or signature cannot even be
read with a plain 401 — before the signing secret is used, and without a traceback."""

from __future__ import annotations

import hashlib
import hmac
import time

import httpx
import pytest
from redis.asyncio import Redis

from test_gateway_slow_clients import logged, platform_settings, platforms

BODY = b"command=%2Fprogresscast&text=help&channel_id=C0TEST0001&user_id=U1"


def signed(timestamp: str, body: bytes = BODY) -> str:
    secret = platform_settings().channels.slack.signingSecret  # type: ignore[union-attr]
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@pytest.mark.parametrize("path", ["/slack/commands", "/slack/events"])
async def test_a_timestamp_or_signature_that_is_no_number_is_a_quiet_401(redis: Redis, path: str) -> None:
    now = str(int(time.time()))
    cases: list[tuple[bytes, bytes]] = [
        *((stamp.encode(), signed(now).encode()) for stamp in ("abc", "1e9", "nan", "inf", "-inf", "", "12.5", "9" * 5000)),
        (now.encode(), b"v0=\xff\xfe"),  # not ASCII: hmac.compare_digest refuses to compare it
    ]
    async with platforms(redis) as base, httpx.AsyncClient(timeout=5) as client:
        with logged() as log:
            for stamp, signature in cases:
                headers = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}
                response = await client.post(f"{base}{path}", content=BODY, headers=headers)
                assert response.status_code == 401, (stamp[:20], response.text)
        assert log.records == [], [r.getMessage() for r in log.records]
        # The same request, rightly signed, is taken: the check is not merely closed.
        good = await client.post(
            f"{base}/slack/commands", content=BODY,
            headers={"X-Slack-Request-Timestamp": now, "X-Slack-Signature": signed(now)},
        )
        assert good.status_code == 200, good.text
