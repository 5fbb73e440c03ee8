"""Open a trace in the Perfetto UI: serve one file on loopback until Ctrl-C (``traceprobe view``).

ui.perfetto.dev opens ``https://ui.perfetto.dev/#!/?url=<url>`` by fetching
``<url>`` from the page, so the server must allow that origin (CORS header
``Access-Control-Allow-Origin: https://ui.perfetto.dev``), as Perfetto's own
``open_trace_in_ui`` script does. :class:`OneFileServer` listens on 127.0.0.1 only,
answers ``GET /<name>`` with the file (any other path: 404), as often as it is asked
(reloading the page fetches it again), until the caller interrupts it (Ctrl-C) or
sets its ``stop`` event. Nothing else on the machine is reachable through it.
"""

from __future__ import annotations

import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

UI = "https://ui.perfetto.dev"
"""The Perfetto UI's origin, the only one the server allows."""


class _Handler(BaseHTTPRequestHandler):
    server: OneFileServer

    def _cors(self) -> None:
        self.send_header("Access-Control-Allow-Origin", UI)
        self.send_header("Access-Control-Allow-Methods", "GET, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "*")
        self.send_header("Cache-Control", "no-store")

    def do_OPTIONS(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(204)
        self._cors()
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        srv = self.server
        if unquote(urlsplit(self.path).path) != "/" + srv.name:
            self.send_response(404)
            self._cors()
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = srv.file.stat().st_size
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        with open(srv.file, "rb") as f:
            shutil.copyfileobj(f, self.wfile, 1 << 20)
        srv.served = True
        srv.fetches += 1

    def log_message(self, format: str, *args: object) -> None:  # quiet: the command prints what matters
        return


class OneFileServer(HTTPServer):
    """Serves ``file`` as ``/<its name>`` on ``127.0.0.1:port`` (0: any free port) until stopped.

    Attributes:
        file: the file served.
        name: its name in the URL.
        served: True once a GET of the file completed; ``fetches`` how many did.
        stop: set it (from another thread) to end :meth:`serve_until_stopped` within one poll.
    """

    def __init__(self, file: str | Path, port: int = 0) -> None:
        self.file = Path(file)
        self.name = self.file.name
        self.served = False
        self.fetches = 0
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", port), _Handler)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/NAME``."""
        return f"http://127.0.0.1:{self.server_address[1]}/{quote(self.name)}"

    @property
    def ui_url(self) -> str:
        """The Perfetto UI link that opens :attr:`url`."""
        return f"{UI}/#!/?url={self.url}"

    def serve_until_stopped(self, poll_s: float = 0.5) -> None:
        """Answer requests until :attr:`stop` is set or Ctrl-C (``KeyboardInterrupt``, raised on); the socket is closed
        on return."""
        self.timeout = poll_s
        try:
            while not self.stop.is_set():
                self.handle_request()
        finally:
            self.server_close()
