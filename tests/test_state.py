"""The deployments database: intent before result, two processes at once, a broken file."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from advisor.errors import UserInputError
from advisor.state import InstanceRow, ResourceRow, Store, default_path


def _writer(path: str, who: int, n: int) -> None:
    st = Store(path)
    for i in range(n):
        st.event("shared", "attempt", f"writer {who} step {i}")
        st.record_instance("shared", InstanceRow(id=f"i-{who}-{i}", provider="aws",
                                                 region="us-east-1", zone="us-east-1a",
                                                 instance_type="g6e.xlarge", state="pending"))
    st.close()


def test_two_processes_write_at_once_without_loss(tmp_path):
    path = tmp_path / "state.db"
    st = Store(path)
    st.begin("shared", "aws", "llama-3-8b", 8192)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 60)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    dep = st.require("shared")
    assert len(dep.instances) == 120
    events = [e for e in st.events("shared") if e.kind == "attempt"]
    assert len(events) == 120
    assert sorted({e.message.split(" step")[0] for e in events}) == ["writer 0", "writer 1"]
    seqs = [e.seq for e in st.events("shared")]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_intent_then_result_and_resources(tmp_path):
    st = Store(tmp_path / "s.db")
    st.begin("d1", "gcp", "qwen3-8b", 4096, {"model": "Qwen/Qwen3-8B"})
    st.intent("d1", "gcp", "g2-standard-8", "us-central1", "us-central1-a")
    dep = st.require("d1")
    assert dep.status == "launching" and dep.zone == "us-central1-a" and dep.instances == []
    st.record_resource("d1", ResourceRow(kind="firewall", id="advisor-d1-vllm",
                                         region="us-central1"))
    st.record_instance("d1", InstanceRow(id="d1", provider="gcp", region="us-central1",
                                         zone="us-central1-a", instance_type="g2-standard-8",
                                         state="running"))
    dep = st.require("d1")
    assert dep.status == "running" and [i.id for i in dep.instances] == ["d1"]
    assert [r.id for r in dep.resources] == ["advisor-d1-vllm"]
    assert [e.kind for e in st.events("d1")] == ["begin", "intent", "resource", "instance"]
    st.forget_resources("d1")
    st.set_status("d1", "down")
    assert st.require("d1").resources == [] and st.require("d1").status == "down"


def test_state_file_is_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "s.db"
    Store(path).begin("d2", "aws", "llama-3-8b", 8192)
    assert path.stat().st_mode & 0o077 == 0


def test_unknown_deployment_and_broken_file(tmp_path):
    st = Store(tmp_path / "s.db")
    st.begin("alpha", "aws", "m", 1)
    with pytest.raises(UserInputError, match="did you mean 'alpha'"):
        st.require("alphq")
    bad = tmp_path / "broken.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserInputError, match="cannot be used"):
        Store(bad)


def test_advisor_home_moves_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "h"))
    assert default_path() == Path(tmp_path / "h" / "state.db")
