"""What the local fakes of MTurk and Prolific share: a quiet, keep-alive HTTP request handler."""
from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler


class FakeApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:  # quiet
        pass
