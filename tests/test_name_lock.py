"""One launcher per deployment name: the lease in the state file (issue 18, item 2).

Two `provision` of one name at once must launch one instance: the second refuses at once, in one
line, exit 2. A lease whose process died, or that expired, is taken over.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import UserInputError
from advisor.state import LeaseHeld, Store

REFUSAL = re.compile(r"^deployment (?P<name>[a-z0-9-]+) is being (launched|taken down) by another "
                     r"advisor process \(pid \d+ since [0-9T:.+-]+\); wait for it, or run "
                     r"'advisor status (?P=name)'$")


# -- the lease itself -----------------------------------------------------------------------------
def test_second_acquire_refuses_in_one_line_then_release_frees(tmp_path: Path) -> None:
    st, other = Store(tmp_path / "s.db"), Store(tmp_path / "s.db")
    with st.acquire("d1"), pytest.raises(LeaseHeld) as err:
        other.acquire("d1")
    assert st.lease("d1") is None
    with st.acquire("d1"):
        assert err.value.exit_code == 2 and err.value.hint is None
        assert REFUSAL.match(err.value.message), err.value.message
        assert st.lease("d1") is not None
        with other.acquire("d2"):  # another name is free
            pass
    assert st.lease("d1") is None
    with other.acquire("d1", purpose="taken down"), pytest.raises(
            LeaseHeld, match="is being taken down by another"):
        st.acquire("d1")


def test_expired_lease_is_taken_over_and_the_old_holder_knows(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.db")
    old = st.acquire("d1", ttl=0.05)  # not entered: nobody renews it
    time.sleep(0.1)
    new = Store(tmp_path / "s.db").acquire("d1")
    assert st.lease("d1")["owner"] == new.owner  # type: ignore[index]
    assert old.renew() is False and old.lost
    old.release()  # releases nothing of the new holder's
    assert st.lease("d1")["owner"] == new.owner  # type: ignore[index]
    assert any("took over" in e.message and "expired" in e.message for e in st.events("d1"))


def test_a_held_lease_renews_itself(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.db")
    with st.acquire("d1", ttl=0.3):
        time.sleep(0.8)  # more than two lifetimes: only renewals keep it
        with pytest.raises(LeaseHeld):
            Store(tmp_path / "s.db").acquire("d1")
    assert st.lease("d1") is None


def test_lease_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    code = ("import sys, time; from advisor.state import Store; "
            f"Store({str(path)!r}).acquire('d1').__enter__(); print('held', flush=True); "
            "time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        st = Store(path)
        with pytest.raises(LeaseHeld, match=f"pid {proc.pid} "):
            st.acquire("d1")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with st.acquire("d1") as lease:
            assert st.lease("d1")["owner"] == lease.owner  # type: ignore[index]
        assert any("its process is gone" in e.message for e in st.events("d1"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# -- provision and down hold it -------------------------------------------------------------------
def test_down_refuses_while_a_launch_holds_the_name(tmp_path: Path) -> None:
    from advisor.provisioning import down
    from tests.test_state_transitions import Cloud, running

    st = Store(tmp_path / "s.db")
    running(st)
    cloud = Cloud({"us-east-1": []})
    with Store(tmp_path / "s.db").acquire("d1"):
        with pytest.raises(LeaseHeld, match="d1 is being launched"):
            down("d1", store=st, backends={"aws": cloud})
        assert cloud.terminated == []  # nothing was done
    down("d1", store=st, backends={"aws": cloud})
    assert st.require("d1").status == "down" and st.lease("d1") is None


# -- the race against moto's server ---------------------------------------------------------------
pytest.importorskip("boto3")
pytest.importorskip("moto")
from tests.providers.conftest import aws, loopback_only  # noqa: E402,F401
from tests.providers.test_aws import TOKEN, by_tag, cli, ec2  # noqa: E402

ROUNDS = 20


def _provision(name: str, path: Path, barrier: threading.Barrier, out: dict[int, Any],
               who: int, catalog: Any) -> None:
    from advisor.clouds.aws.compute import AwsProvider
    from advisor.provisioning import provision

    prov = AwsProvider(sleep=lambda _s: None, waiter_delay=0)

    def slow(request: Any, **_: Any) -> None:
        time.sleep(0.3)  # a launch takes a while: the other process arrives meanwhile

    prov._client("ec2", "us-east-1").meta.events.register("before-send.ec2.RunInstances", slow)
    st = Store(path)
    barrier.wait()
    try:
        out[who] = provision("llama-3-8b", 8192, hf_token_ref="aws-ssm:/advisor/hf-token",
                             instance="aws:g6e.2xlarge", name=name, store=st,
                             catalog=catalog, backends={"aws": prov}).status
    except UserInputError as exc:
        out[who] = (exc.exit_code, exc.message)
    except Exception as exc:  # noqa: BLE001 - a failed round is counted, not hidden
        out[who] = ("error", repr(exc))


def test_two_provisions_of_one_name_launch_once(aws: dict[str, str],  # noqa: F811
                                                tmp_path: Path) -> None:
    from advisor.catalog import load

    path = tmp_path / "state.db"
    client = ec2()
    catalog = load()
    launched = refused = duplicates = 0
    for rnd in range(ROUNDS):
        name = f"race-{rnd}"
        out: dict[int, Any] = {}
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=_provision, args=(name, path, barrier, out, w,
                                                                 catalog))
                   for w in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        results = sorted(out.values(), key=str)
        assert len(results) == 2, out
        assert [r for r in results if r == "launched"] == ["launched"], (rnd, results)
        [loser] = [r for r in results if r != "launched"]
        assert isinstance(loser, tuple) and loser[0] == 2, (rnd, loser)
        assert REFUSAL.match(loser[1]) and f"deployment {name} " in loser[1], loser
        n = len(by_tag(client, name))
        launched += 1
        refused += 1
        duplicates += max(0, n - 1)
        assert n == 1, (rnd, n)
    assert (launched, refused, duplicates) == (ROUNDS, ROUNDS, 0)
    assert Store(path).lease("race-0") is None  # released by the winner


def test_two_cli_provisions_at_once(aws: dict[str, str]) -> None:  # noqa: F811
    """Two real `advisor provision` processes: one launches; the other refuses in one line with
    exit 2 (or, when it starts after the first finished, finds the instance: 'exists')."""
    client = ec2()
    for rnd in range(3):
        name = f"cli-race-{rnd}"
        args = ["provision", "--model", "llama-3-8b", *TOKEN, "--ctx", "8192", "--instance",
                "aws:g6e.2xlarge", "--name", name, "--yes", "--json"]
        with_threads: list[subprocess.CompletedProcess[str]] = []

        def one(into: list[subprocess.CompletedProcess[str]], argv: list[str]) -> None:
            into.append(cli(aws, *argv))

        threads = [threading.Thread(target=one, args=(with_threads, args)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(200)
        assert len(with_threads) == 2
        outcomes = []
        for r in with_threads:
            if r.returncode == 0:
                outcomes.append(json.loads(r.stdout)["status"])
            else:
                assert r.returncode == 2, r.stderr
                first = r.stderr.strip().splitlines()[0]
                assert REFUSAL.match(first.removeprefix("error: ")), r.stderr
                assert "Traceback" not in r.stderr
                outcomes.append("refused")
        assert outcomes.count("launched") == 1, outcomes
        assert len(by_tag(client, name)) == 1
