"""A private Synapse homeserver on this machine: what the Matrix tests run against and
what `progresscast emulator matrix` starts (`matrix-synapse` comes with the test extra).

The server listens on a loopback port, keeps its data in SQLite in a temporary folder,
and reaches nothing outside this machine: no federation listener and no federation to
any domain, no trusted key servers, no URL previews, no stats, no registration but the
shared-secret admin API. Its rate limits are Synapse's defaults (`rc_message`: 0.2
events a second per user, bursts of 10); an admin account may be made exempt.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

SERVER_NAME = "pc.test"
CLIENT = "/_matrix/client/v3"
START_TIMEOUT = 120.0

_CONFIG = """\
server_name: "{server_name}"
pid_file: "{dir}/homeserver.pid"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{dir}/homeserver.db"
log_config: "{dir}/log.yaml"
media_store_path: "{dir}/media"
signing_key_path: "{dir}/signing.key"
registration_shared_secret: "{secret}"
macaroon_secret_key: "{macaroon}"
form_secret: "{form}"
report_stats: false
enable_registration: false
bcrypt_rounds: 4
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
url_preview_enabled: false
enable_metrics: false
presence:
  enabled: false
"""

_LOG = """\
version: 1
formatters:
  plain:
    format: "%(asctime)s %(name)s %(levelname)s %(message)s"
handlers:
  file:
    class: logging.FileHandler
    filename: "{dir}/homeserver.log"
    formatter: plain
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Account:
    user_id: str
    access_token: str
    device_id: str
    password: str = ""
    """What a Matrix app logs in with (with the user id)."""


class Synapse:
    """One Synapse process; `start` raises `Unavailable` saying why it cannot run here."""

    class Unavailable(Exception):
        pass

    def __init__(self, port: int = 0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pc-synapse-"))
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.secret = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in = 0.0
        self._names = itertools.count(1)

    def start(self) -> None:
        try:
            import synapse  # noqa: F401
            from signedjson.key import generate_signing_key, write_signing_keys
        except ImportError as exc:
            raise self.Unavailable(f"matrix-synapse is not installed ({exc}); pip install -e '.[test]'") from None
        began = time.monotonic()
        with (self.dir / "signing.key").open("w") as out:
            write_signing_keys(out, [generate_signing_key("a_test")])
        values = {
            "server_name": SERVER_NAME, "dir": self.dir, "port": self.port, "secret": self.secret,
            "macaroon": secrets.token_hex(16), "form": secrets.token_hex(16),
        }
        (self.dir / "homeserver.yaml").write_text(_CONFIG.format(**values))
        (self.dir / "log.yaml").write_text(_LOG.format(**values))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SYNAPSE_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "synapse.app.homeserver", "-c", str(self.dir / "homeserver.yaml")],
            cwd=self.dir, env=env, stdout=(self.dir / "stdout.log").open("wb"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                tail = (self.dir / "stdout.log").read_text(errors="replace")[-2000:]
                raise self.Unavailable(f"Synapse exited with status {self.proc.returncode}: {tail}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise self.Unavailable(f"Synapse did not answer within {START_TIMEOUT:.0f} s")
            time.sleep(0.05)
        self.started_in = time.monotonic() - began

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- accounts ------------------------------------------------------------------------

    def register(self, prefix: str, *, admin: bool = False, exempt: bool = False) -> Account:
        """A new user (shared-secret registration through the admin API); `exempt`: no
        rate limits for it (it must be an admin to say so for itself)."""
        name = f"{prefix}{next(self._names)}{secrets.token_hex(2)}"
        password = secrets.token_hex(8)
        nonce = httpx.get(f"{self.url}/_synapse/admin/v1/register", timeout=10).json()["nonce"]
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        mac.update(b"\x00".join([nonce.encode(), name.encode(), password.encode(), b"admin" if admin else b"notadmin"]))
        reply = httpx.post(
            f"{self.url}/_synapse/admin/v1/register",
            json={"nonce": nonce, "username": name, "password": password, "admin": admin, "mac": mac.hexdigest()},
            timeout=30,
        )
        reply.raise_for_status()
        data = reply.json()
        account = Account(data["user_id"], data["access_token"], data["device_id"], password)
        if exempt:
            assert admin, "only an admin may lift its own rate limits"
            path = f"/_synapse/admin/v1/users/{quote(account.user_id)}/override_ratelimit"
            self.request(account, "POST", path, {"messages_per_second": 0, "burst_count": 0})
        return account

    def request(self, who: Account, method: str, path: str, body: Any = None) -> Any:
        reply = httpx.request(
            method, f"{self.url}{path}", json=body, timeout=30, headers={"Authorization": f"Bearer {who.access_token}"}
        )
        if reply.status_code >= 400:
            raise AssertionError(f"{method} {path}: {reply.status_code} {reply.text}")
        return reply.json()

    # --- rooms ---------------------------------------------------------------------------

    def create_room(self, who: Account, *, invite: list[str] | None = None) -> str:
        """A private room `who` creates (and so administers), inviting `invite`."""
        body = {"preset": "private_chat", "invite": invite or []}
        return str(self.request(who, "POST", f"{CLIENT}/createRoom", body)["room_id"])


__all__ = ["CLIENT", "SERVER_NAME", "Account", "Synapse"]
