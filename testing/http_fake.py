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

    def lose_response_if_asked(self, server, key: str) -> bool:
        """Simulate a response lost on the way back (the call took effect, the client never
        hears so) when the test asked for it on `key`: the connection is cut."""
        if server.lose_response_next[key] <= 0:
            return False
        server.lose_response_next[key] -= 1
        server.stats["lost_responses"] += 1
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True
