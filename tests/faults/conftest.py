"""The AWS fault suite reuses the provider tests' loopback guard and account fixture, with its own
moto server on 127.0.0.1 (killed if it does not stop: SIGKILLed clients may hold it busy)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.conftest import aws, loopback_only, moto_server  # noqa: F401


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url
