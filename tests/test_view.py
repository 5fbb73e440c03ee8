"""``traceprobe view``: the one-file server, checked with a real HTTP client on loopback."""

from __future__ import annotations

import http.client
import threading

import pytest
from typer.testing import CliRunner

from traceprobe.cli import app
from traceprobe.cli.serve import UI, OneFileServer


def _serve(path):
    server = OneFileServer(path, 0)
    t = threading.Thread(target=server.serve_until_fetched, kwargs={"poll_s": 0.05}, daemon=True)
    t.start()
    return server, t


def _get(server, path, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request(method, path)
    res = conn.getresponse()
    body = res.read()
    conn.close()
    return res, body


def test_serves_once_with_cors(tmp_path):
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
    t.join(timeout=10)
    assert not t.is_alive() and server.served  # stopped after one fetch
    with pytest.raises(OSError):  # and the port is closed
        _get(server, "/my%20trace.pftrace")


def test_view_command_prints_the_url(tmp_path, monkeypatch):
    f = tmp_path / "t.pftrace"
    f.write_bytes(b"x")
    monkeypatch.setattr(OneFileServer, "serve_until_fetched", lambda self, poll_s=0.5: self.server_close())
    res = CliRunner().invoke(app, ["view", str(f), "--no-browser", "--port", "0"])
    assert res.exit_code == 0, res.output
    assert "open https://ui.perfetto.dev/#!/?url=http://127.0.0.1:" in res.stderr and "/t.pftrace" in res.stderr
    assert "ssh -L " in res.stderr and ":127.0.0.1:" in res.stderr  # most GPU machines are reached over SSH
    res = CliRunner().invoke(app, ["view", str(tmp_path / "missing.pftrace"), "--no-browser"])
    assert res.exit_code == 2 and "no such file" in res.stderr
