"""State that cannot silently lose data (issue 18, item 3): a layout version, an integrity check on
open, an empty or foreign file refused, a damaged row skipped with a warning, and a state write
that fails after a cloud action repaired by ``status --reconcile``."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from advisor.errors import UserInputError
from advisor.provisioning import down, status
from advisor.state import SCHEMA_VERSION, StateWriteError, Store
from tests.test_state_transitions import NAME, Cloud, row, running

HINT = "advisor status --reconcile"

#: the layout before versions and leases (what an advisor of the previous release wrote)
V0 = """
CREATE TABLE deployments (name TEXT PRIMARY KEY, provider TEXT NOT NULL, model TEXT NOT NULL,
  ctx INTEGER NOT NULL, instance_type TEXT, region TEXT, zone TEXT, status TEXT NOT NULL,
  spec TEXT NOT NULL DEFAULT '{}', created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE instances (deployment TEXT NOT NULL REFERENCES deployments(name) ON DELETE CASCADE,
  id TEXT NOT NULL, provider TEXT NOT NULL, region TEXT NOT NULL, zone TEXT,
  instance_type TEXT NOT NULL, state TEXT NOT NULL, private_ip TEXT, public_ip TEXT,
  updated_at TEXT NOT NULL, PRIMARY KEY (deployment, id));
CREATE TABLE resources (deployment TEXT NOT NULL REFERENCES deployments(name) ON DELETE CASCADE,
  kind TEXT NOT NULL, id TEXT NOT NULL, region TEXT NOT NULL, PRIMARY KEY (deployment, kind, id));
CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, deployment TEXT NOT NULL,
  at TEXT NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL DEFAULT '{}');
INSERT INTO deployments VALUES ('old', 'aws', 'llama-3-8b', 8192, 'g6e.xlarge', 'us-east-1',
  'us-east-1a', 'running', '{}', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00');
INSERT INTO events (deployment, at, kind, message, data) VALUES ('old', '2026-01-01', 'intent',
  'launch', '{"region": "us-east-1"}');
"""


def refused(path: Path, match: str) -> UserInputError:
    with pytest.raises(UserInputError, match=match) as err:
        Store(path)
    assert err.value.exit_code == 2 and "\n" not in err.value.message
    assert err.value.hint and "status --reconcile" in err.value.hint
    return err.value


# -- the file on open -----------------------------------------------------------------------------
def test_a_new_file_gets_the_current_version(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").begin("d", "aws", "m", 1)
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("s.db")) == []


def test_an_empty_file_is_an_error_never_no_deployments(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    err = refused(path, "empty")
    assert str(path) in err.message and "down NAME --all-regions" in (err.hint or "")
    assert path.stat().st_size == 0  # not turned into a fresh database


def test_the_cli_says_so_in_one_line_exit_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from advisor.cli import app

    home = tmp_path / "home"
    home.mkdir()
    (home / "state.db").write_bytes(b"")
    r = CliRunner().invoke(app, ["status"], env={"ADVISOR_HOME": str(home)})
    assert r.exit_code == 2, r.output
    assert "no deployments" not in r.output.lower() and "empty (0 bytes)" in r.output


def test_a_foreign_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_text('{"deployments": []}\n' * 50)
    refused(path, "not an SQLite database")


def test_a_newer_layout_is_refused(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").begin("d", "aws", "m", 1)
    db = sqlite3.connect(tmp_path / "s.db")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(UserInputError, match=f"layout version {SCHEMA_VERSION + 1}") as err:
        Store(tmp_path / "s.db")
    assert "upgrade advisor" in (err.value.hint or "")


def test_an_unversioned_file_is_brought_up_to_date_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    db = sqlite3.connect(path)
    db.executescript(V0)
    db.close()
    st = Store(path)
    assert st.require("old").status == "running" and st.events("old")[0].kind == "intent"
    with st.acquire("old"):  # the lease table exists now
        pass
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_damaged_page_fails_the_integrity_check(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    st = Store(path)
    for i in range(300):
        st.event("d", "attempt", f"attempt {i} " + "x" * 200)
    st.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    for k in range(2, 6):  # the b-tree headers of a few table pages
        for off in range(k * page, k * page + 8):
            data[off] = 0xA5
    path.write_bytes(bytes(data))
    refused(path, "cannot be used")


def test_many_processes_creating_the_file_at_once_never_see_it_empty(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            Store(path).event("d", "hello", "hi")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(Store(path).events("d")) == 16


# -- damaged rows ---------------------------------------------------------------------------------
def test_a_damaged_event_or_spec_is_skipped_with_a_warning_and_down_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.db"
    st = Store(path)
    running(st)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO events (deployment, at, kind, message, data) VALUES "
                   "(?, 'x', 'intent', 'torn', '{\"region\": \"us-ea')", (NAME,))
        db.execute("INSERT INTO events (deployment, at, kind, message, data) VALUES "
                   "(?, 'x', 'intent', 'list', '[1, 2]')", (NAME,))
        db.execute("UPDATE deployments SET spec='{not json' WHERE name=?", (NAME,))
    st = Store(path)
    kinds = [e.kind for e in st.events(NAME)]
    assert "intent" in kinds and all(e.message not in ("torn", "list") for e in st.events(NAME))
    err = capsys.readouterr().err
    assert err.count("warning:") == 2 and "damaged" in err and "skipped" in err
    assert st.require(NAME).spec == {}
    assert "launch spec" in capsys.readouterr().err
    cloud = Cloud({"us-east-1": [row("i-1")]})
    res = down(NAME, store=st, backends={"aws": cloud})
    assert "i-1" in res.removed and st.require(NAME).status == "down"


# -- a state write that fails after the cloud acted -----------------------------------------------
def test_down_whose_state_write_fails_is_one_line_and_reconcile_repairs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.db"
    st = Store(path)
    running(st)
    cloud = Cloud({"us-east-1": [row("i-1")]})
    real_terminate = cloud.terminate

    def terminate_then_readonly(deployment: str, region: str) -> list[str]:
        out = real_terminate(deployment, region)
        # the file turns read-only (as root, chmod would not stop a write)
        st._db.execute("PRAGMA query_only = ON")
        return out

    monkeypatch.setattr(cloud, "terminate", terminate_then_readonly)
    with pytest.raises(StateWriteError) as err:
        down(NAME, store=st, backends={"aws": cloud})
    e = err.value
    assert e.exit_code == 2 and "\n" not in e.message
    assert e.message.startswith(f"{NAME} was taken down (removed: i-1")
    assert "readonly" in e.message and HINT in (e.hint or "")
    assert cloud.held == {}  # the cloud part happened
    st._db.execute("PRAGMA query_only = OFF")
    assert Store(path).require(NAME).status == "running"  # what the file still says

    [dep] = status(NAME, reconcile=True, store=Store(path), backends={"aws": Cloud()})
    assert dep.status == "down" and [i.state for i in dep.instances] == ["terminated"]
    assert dep.resources == []


def test_a_state_write_that_fails_before_the_cloud_acts_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    st = Store(path)
    running(st)
    st._db.execute("PRAGMA query_only = ON")
    cloud = Cloud({"us-east-1": [row("i-1")]})
    with pytest.raises(StateWriteError, match="cannot be written") as err:
        down(NAME, store=st, backends={"aws": cloud})
    assert err.value.exit_code == 2 and cloud.terminated == [] and cloud.held != {}


def test_reconcile_after_a_launch_still_marks_a_vanished_launch_failed(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.db")
    running(st)
    [dep] = status(NAME, reconcile=True, store=st, backends={"aws": Cloud()})
    assert dep.status == "failed"
