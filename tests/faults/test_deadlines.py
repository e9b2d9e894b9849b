"""Each command's overall deadline (issue 33): every cloud call checks it first, so a command
against a slow but healthy cloud ends within its deadline plus the one call in flight, with one
classified line (DeadlineExceeded), instead of running as long as the cloud makes it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from advisor.clouds import base
from advisor.clouds.base import (
    CALL_ATTEMPTS,
    COMMAND_DEADLINE_S,
    CONNECT_TIMEOUT_S,
    CloudError,
    check_deadline,
    command_deadline,
    deadline_s,
    read_timeout_s,
    remaining_s,
)
from tests.providers.test_aws import cli
from tests.providers.token_proxy import token_proxy


def test_the_deadlines_are_the_stated_ones(monkeypatch):
    monkeypatch.delenv("ADVISOR_DEADLINE_S", raising=False)
    assert COMMAND_DEADLINE_S == {"provision": 600.0, "down": 300.0, "status": 120.0,
                                  "refresh": 900.0}
    assert deadline_s("down") == 300.0
    monkeypatch.setenv("ADVISOR_DEADLINE_S", "7")
    assert deadline_s("down") == 7.0 and deadline_s("provision") == 7.0
    monkeypatch.setenv("ADVISOR_DEADLINE_S", "")
    assert deadline_s("status") == 120.0  # empty: unset
    from advisor.errors import UserInputError

    for bad in ("0", "-3", "1e9", "nan", "inf", "soon"):
        monkeypatch.setenv("ADVISOR_DEADLINE_S", bad)
        with pytest.raises(UserInputError) as exc:
            deadline_s("status")
        assert exc.value.exit_code == 2 and "1-86400" in exc.value.message, bad


def test_past_the_deadline_every_call_fails_at_once_and_nesting_keeps_the_outer_end(
        monkeypatch):
    monkeypatch.setenv("ADVISOR_DEADLINE_S", "1")
    assert remaining_s() is None
    check_deadline("aws")  # outside any command: no deadline
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    with command_deadline("down"):
        check_deadline("aws")
        with command_deadline("status", extra_s=50):  # cannot outlive the outer one
            assert remaining_s() == pytest.approx(1.0)
        now[0] += 0.6
        # a call's read bound is cut to what is left
        assert read_timeout_s() == pytest.approx(0.4)
        now[0] += 0.5
        with pytest.raises(CloudError) as exc:
            check_deadline("aws")
        err = exc.value
        assert err.code == "DeadlineExceeded" and err.scope == "fatal"
        assert "down ran past its 1 s deadline" in str(err)
        assert "ADVISOR_DEADLINE_S" in (err.hint or "")
    assert remaining_s() is None and base._deadline.get() is None


def test_each_thread_runs_under_its_own_deadline(monkeypatch):
    """Two threads of one capacity script: one inside a command past its deadline, the other
    inside none; the second is not stopped by the first's deadline."""
    import threading

    monkeypatch.setenv("ADVISOR_DEADLINE_S", "1")
    inside, outside = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def late() -> None:
        with command_deadline("down"):
            inside.set()
            seen["late"] = remaining_s()
            outside.wait(10)

    def free() -> None:
        inside.wait(10)
        seen["free"] = remaining_s()
        check_deadline("aws")  # no deadline here: no error
        outside.set()

    threads = [threading.Thread(target=late), threading.Thread(target=free)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert isinstance(seen["late"], float) and seen["free"] is None


def test_provision_waits_inside_its_deadline(monkeypatch):
    """provision's deadline grows by its --wait timeout (the wait polls the cloud)."""
    from advisor import provisioning

    seen = []

    def fake(*a, **kw):
        seen.append(remaining_s())

    monkeypatch.delenv("ADVISOR_DEADLINE_S", raising=False)
    wrapped = base.bounded("provision", lambda kw: kw["wait_timeout_s"] if kw.get("wait")
                           else 0.0)(fake)
    wrapped(wait=True, wait_timeout_s=100)
    wrapped(wait=False, wait_timeout_s=100)
    assert seen[0] == pytest.approx(700, abs=1) and seen[1] == pytest.approx(600, abs=1)
    # and the shipped entry points carry their deadlines
    assert provisioning.provision.__wrapped__ and provisioning.down.__wrapped__
    assert provisioning.status.__wrapped__


def test_a_bad_deadline_is_one_line_and_exit_2(aws, tmp_path: Path):
    for bad in ("abc", "0", "1e9"):
        r = cli({**aws, "ADVISOR_DEADLINE_S": bad, "ADVISOR_HOME": str(tmp_path)},
                "down", "some-name", "--provider", "aws", "--yes")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "ADVISOR_DEADLINE_S" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_a_slow_cloud_ends_down_and_reconcile_at_their_deadline(aws, moto_url, tmp_path: Path):
    """Every answer 0.25 s late: `down` of a name no state file knows sweeps every region by tag
    (dozens of calls); with a 2 s deadline it stops with one DeadlineExceeded line, within the
    deadline plus one call's bound."""
    with token_proxy(moto_url, delay_s=0.25) as (proxy, _log):
        env = {**aws, "AWS_ENDPOINT_URL": proxy, "ADVISOR_DEADLINE_S": "2",
               "ADVISOR_HOME": str(tmp_path / "home")}
        t0 = time.monotonic()
        r = cli(env, "down", "slow-cloud", "--provider", "aws", "--yes")
        took = time.monotonic() - t0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert "DeadlineExceeded" in lines[0] and "Traceback" not in r.stderr
    one_call = CALL_ATTEMPTS * (CONNECT_TIMEOUT_S + 2)  # the read bound is cut to <= 2 s
    assert took < 2 + one_call + 5, took  # + 5: the process's own start-up


def _past(monkeypatch):
    """A command whose deadline has passed."""
    monkeypatch.setenv("ADVISOR_DEADLINE_S", "1")
    now = [50.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    cm = command_deadline("status")
    cm.__enter__()
    now[0] += 5
    return cm


def test_every_cloud_checks_the_deadline_before_it_calls(monkeypatch, aws):
    """AWS (botocore's before-call event), GCP (the REST session) and Azure (azure-core's request
    hook): past the deadline, a find() fails with DeadlineExceeded and the endpoint is never
    asked."""
    from advisor.clouds.aws.compute import AwsProvider
    from advisor.clouds.azure.compute import AzureProvider
    from advisor.clouds.gcp.compute import GcpProvider
    from tests.providers.fake_azure import FakeArm, FakeCredential, transport

    asked: list[str] = []
    arm = FakeArm()
    gcp = GcpProvider(project="p", credentials=object(), endpoint="http://127.0.0.1:9")

    class Client:  # google-cloud-compute's clients: their methods are never called
        def __getattr__(self, name):
            def call(**_kw):
                asked.append(f"gcp {name}")
                raise AssertionError("the GCP endpoint was asked")
            return call

    class Session:  # the REST session (IAM, Secret Manager), never reached
        def request(self, *a, **kw):
            asked.append("gcp rest")
            raise AssertionError("the GCP endpoint was asked")

    monkeypatch.setattr(gcp, "_session", lambda: Session())
    monkeypatch.setattr(gcp, "_client", lambda kind: Client())
    providers = {"aws": AwsProvider(), "gcp": gcp,
                 "azure": AzureProvider(subscription_id="00000000-0000-0000-0000-000000000000",
                                        credential=FakeCredential(), transport=transport(arm),
                                        polling_interval=0, sleep=lambda _s: None)}
    cm = _past(monkeypatch)
    try:
        for name, p in providers.items():
            with pytest.raises(CloudError) as exc:
                p.find("late", {"aws": "us-east-1", "gcp": "us-central1",
                                "azure": "eastus"}[name])
            assert exc.value.code == "DeadlineExceeded" and exc.value.provider == name, exc.value
        with pytest.raises(CloudError) as exc:
            gcp._rest("GET", "http://127.0.0.1:9/x")
        assert exc.value.code == "DeadlineExceeded"
    finally:
        cm.__exit__(None, None, None)
    assert asked == []
