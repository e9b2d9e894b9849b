"""The AWS fault suite reuses the provider tests' loopback guard and account fixture, with its own
moto server on 127.0.0.1 (killed if it does not stop: SIGKILLed clients may hold it busy)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.providers.conftest import _free_port, aws, loopback_only  # noqa: F401


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail("moto server did not start")
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
