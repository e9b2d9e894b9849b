"""The AWS fault suite reuses the provider tests' loopback guard and account fixture, and the
worker's moto server on 127.0.0.1 (tests/conftest.py moto_url; killed if it does not stop:
SIGKILLed clients may hold it busy)."""

from __future__ import annotations

from tests.providers.conftest import aws, loopback_only  # noqa: F401
