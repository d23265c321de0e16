"""A real redis-server for the remote-tier tests: started on a free loopback port, in a
directory of its own, with nothing persisted."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process; ``url`` names it, ``client()`` talks to it (over TCP, without
    TLS). ``password`` makes it ask for one; ``unix_socket`` also listens at a socket file there
    (``unix_url``); ``tls`` (a directory holding ``server.pem``, ``server.key`` and ``ca.pem``)
    also listens with TLS (``tls_url``)."""

    def __init__(
        self,
        directory: Path,
        password: str | None = None,
        unix_socket: bool = False,
        tls: Path | None = None,
    ) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not on PATH (scripts/setup.sh installs it)")
        self.executable = executable
        self.directory = directory
        self.port = _free_port()
        login = "" if password is None else f":{password}@"
        self.url = f"redis://{login}127.0.0.1:{self.port}/0"
        self.options = [] if password is None else ["--requirepass", password]
        self.unix_url = None
        if unix_socket:
            path = directory / "redis.sock"
            self.unix_url = f"unix://{login}{path}"
            self.options += ["--unixsocket", str(path)]
        self.tls_url = None
        if tls is not None:
            tls_port = _free_port()
            self.tls_url = f"rediss://{login}127.0.0.1:{tls_port}/0"
            self.options += [
                "--tls-port",
                str(tls_port),
                "--tls-cert-file",
                str(tls / "server.pem"),
                "--tls-key-file",
                str(tls / "server.key"),
                "--tls-ca-cert-file",
                str(tls / "ca.pem"),
                "--tls-auth-clients",
                "no",
            ]
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.client().ping():
                    return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
