"""``traceprobe view``: the one-file server, checked with a real HTTP client on loopback."""

from __future__ import annotations

import http.client
import threading
import time

import pytest
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.cli.serve import UI, OneFileServer


def _serve(path):
    server = OneFileServer(path, 0)
    t = threading.Thread(target=server.serve_until_stopped, kwargs={"poll_s": 0.05}, daemon=True)
    t.start()
    return server, t


def _get(server, path, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request(method, path)
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res, body


def test_serves_until_stopped_with_cors(tmp_path):
    """The file is served as often as it is asked for (a reload fetches it again), until the server is stopped; the
    port is closed then."""
    f = tmp_path / "my trace.pftrace"
    data = bytes(range(256)) * 4000
    f.write_bytes(data)
    server, t = _serve(f)
    assert server.ui_url == f"{UI}/#!/?url=http://127.0.0.1:{server.server_address[1]}/my%20trace.pftrace"
    res, _ = _get(server, "/other.pftrace")  # not the file: 404, and the server goes on
    assert res.status == 404 and t.is_alive()
    res, _ = _get(server, "/my%20trace.pftrace", "OPTIONS")  # a CORS preflight
    assert res.status == 204 and res.getheader("Access-Control-Allow-Origin") == UI and t.is_alive()
    res, body = _get(server, "/my%20trace.pftrace")
    assert res.status == 200 and body == data
    assert res.getheader("Access-Control-Allow-Origin") == "https://ui.perfetto.dev"
    assert int(res.getheader("Content-Length")) == len(data)
    assert t.is_alive()  # still serving after the first fetch
    res, body = _get(server, "/my%20trace.pftrace")  # the page reloaded
    deadline = time.monotonic() + 10  # (the server counts a fetch once its last byte is written: after the client read it)
    while server.fetches < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert res.status == 200 and body == data and server.fetches == 2
    server.stop.set()  # (Ctrl-C in the command)
    t.join(timeout=10)
    assert not t.is_alive() and server.served
    with pytest.raises(OSError):  # and the port is closed
        _get(server, "/my%20trace.pftrace")


def test_view_command_prints_the_url(tmp_path, monkeypatch):
    f = tmp_path / "t.pftrace"
    f.write_bytes(b"x")
    monkeypatch.setattr(OneFileServer, "serve_until_stopped", lambda self, poll_s=0.5: self.server_close())
    res = CliRunner().invoke(app, ["view", str(f), "--no-browser", "--port", "0"])
    assert res.exit_code == 0, res.output
    assert "open https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" in res.stderr and "/t.pftrace" in res.stderr
    assert "ssh -L " in res.stderr and ":127.0.0.1:" in res.stderr  # most GPU machines are reached over SSH
    res = CliRunner().invoke(app, ["view", str(tmp_path / "missing.pftrace"), "--no-browser"])
    assert res.exit_code == 2 and "no such file" in res.stderr


def test_view_command_serves_two_requests_then_stops_on_ctrl_c(tmp_path, monkeypatch):
    """The command itself: two fetches of the file, then Ctrl-C: exit 0, and it says how often the file was sent."""
    f = tmp_path / "t.pftrace"
    f.write_bytes(b"trace bytes")
    got = []

    def serve(self, poll_s=0.5):
        t = threading.Thread(target=real, args=(self, 0.05), daemon=True)
        t.start()
        for _ in range(2):
            got.append(_get(self, "/t.pftrace")[1])
        self.stop.set()
        t.join(timeout=10)
        raise KeyboardInterrupt

    real = OneFileServer.serve_until_stopped
    monkeypatch.setattr(OneFileServer, "serve_until_stopped", serve)
    res = CliRunner().invoke(app, ["view", str(f), "--no-browser", "--port", "0"])
    assert got == [b"trace bytes", b"trace bytes"]
    assert res.exit_code == 0, res.output
    assert "until Ctrl-C" in res.stderr and "sent " in res.stderr and "2 time(s)" in res.stderr
