"""The e2e's stand-in for SkyPilot's internet probe (``tests/e2e/network_probe/sitecustomize.py``)."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading

import pytest

from tests.e2e.skypilot_loop import NETWORK_PROBE_DIR, NETWORK_PROBE_URL_ENV

PROBE = """
import asyncio
import sky.backends.backend_utils as b
print(b._TEST_IP_LIST)
asyncio.run(b.async_check_network_connection())
print("network up")
"""


@pytest.mark.slow
def test_skypilots_probe_answers_through_the_local_url_only_when_set() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        env = {**os.environ, "PYTHONPATH": str(NETWORK_PROBE_DIR), NETWORK_PROBE_URL_ENV: url}
        done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-1500:]
        assert done.stdout.split("\n")[:2] == [str([url]), "network up"]
        # Without the variable SkyPilot's own list stays (the module patches nothing).
        env.pop(NETWORK_PROBE_URL_ENV)
        listed = subprocess.run(
            [sys.executable, "-c", "import sky.backends.backend_utils as b; print(b._TEST_IP_LIST)"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "https://8.8.8.8" in listed.stdout
    finally:
        server.shutdown()
        server.server_close()
