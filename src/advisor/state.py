"""Where advisor remembers what it launched: one SQLite file.

The file lives in the platformdirs state directory (``~/.local/state/advisor/state.db`` on
Linux); ``ADVISOR_HOME`` moves it (the tests use that). Three tables:

* ``deployments`` — one row per deployment name: provider, model, status, the launch spec;
* ``instances`` and ``resources`` — what the cloud gave back (instances, security groups,
  firewall rules, network security groups, IAM roles), keyed by deployment;
* ``events`` — every intent, attempt and result, in order.

Provisioning writes its *intent* before it calls the cloud and the *result* after, so a crash in
between leaves a deployment in ``launching`` with an intent event that ``advisor status
--reconcile`` resolves by looking the deployment's tags up. Writes are short transactions
(``BEGIN IMMEDIATE``) on a WAL journal with a busy timeout, so two advisor processes at once
neither corrupt the file nor fail on a lock.

Nothing secret is stored: API keys are referred to (``aws-ssm:NAME``), never held.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from advisor.errors import OperationError, UserInputError

SCHEMA = """
CREATE TABLE IF NOT EXISTS deployments (
  name TEXT PRIMARY KEY,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  ctx INTEGER NOT NULL,
  instance_type TEXT,
  region TEXT,
  zone TEXT,
  status TEXT NOT NULL,
  spec TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS instances (
  deployment TEXT NOT NULL REFERENCES deployments(name) ON DELETE CASCADE,
  id TEXT NOT NULL,
  provider TEXT NOT NULL,
  region TEXT NOT NULL,
  zone TEXT,
  instance_type TEXT NOT NULL,
  state TEXT NOT NULL,
  private_ip TEXT,
  public_ip TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (deployment, id)
);
CREATE TABLE IF NOT EXISTS resources (
  deployment TEXT NOT NULL REFERENCES deployments(name) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  id TEXT NOT NULL,
  region TEXT NOT NULL,
  PRIMARY KEY (deployment, kind, id)
);
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  deployment TEXT NOT NULL,
  at TEXT NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  data TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_by_deployment ON events(deployment, seq);
"""

#: deployment statuses: launching (intent written, result not yet), running (an instance is
#: up), failed (every attempt failed, nothing left running), down (terminated and cleaned up)
STATUSES = ("launching", "running", "failed", "down")


class InstanceRow(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    provider: str
    region: str
    zone: str | None
    instance_type: str
    state: str
    private_ip: str | None = None
    public_ip: str | None = None


class ResourceRow(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str
    id: str
    region: str


class Event(BaseModel):
    model_config = ConfigDict(frozen=True)
    seq: int
    at: str
    kind: str
    message: str
    data: dict[str, Any]


class Deployment(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    provider: str
    model: str
    ctx: int
    instance_type: str | None
    region: str | None
    zone: str | None
    status: str
    spec: dict[str, Any]
    created_at: str
    updated_at: str
    instances: list[InstanceRow] = []
    resources: list[ResourceRow] = []


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def default_path() -> Path:
    home = os.environ.get("ADVISOR_HOME")
    if home:
        return Path(home).expanduser() / "state.db"
    import platformdirs

    return Path(platformdirs.user_state_dir("advisor")) / "state.db"


class Store:
    """The deployments database. Every method is one short transaction."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None,
                                       check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA busy_timeout = 30000")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UserInputError(f"the state file {self.path} cannot be used: {exc}",
                                 hint="move it away (or set ADVISOR_HOME to another folder) "
                                 "and run 'advisor status --reconcile' for each deployment"
                                 ) from exc
        with suppress(OSError):
            self.path.chmod(0o600)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")

    # -- writes -----------------------------------------------------------------------------
    def begin(self, name: str, provider: str, model: str, ctx: int,
              spec: dict[str, Any] | None = None) -> None:
        """Create the deployment (or take it up again) in ``launching``."""
        now = _now()
        with self._tx() as db:
            db.execute(
                "INSERT INTO deployments (name, provider, model, ctx, status, spec, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, 'launching', ?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET provider=excluded.provider,"
                " model=excluded.model, ctx=excluded.ctx, status='launching',"
                " spec=excluded.spec, updated_at=excluded.updated_at",
                (name, provider, model, ctx, json.dumps(spec or {}, sort_keys=True), now, now))
            self._event(db, name, "begin", f"deployment {name}: {model} ctx {ctx}")

    def intent(self, name: str, provider: str, instance_type: str, region: str,
               zone: str | None) -> None:
        """Written before the launch call: what is about to be asked of the cloud."""
        with self._tx() as db:
            db.execute("UPDATE deployments SET provider=?, instance_type=?, region=?, zone=?,"
                       " status='launching', updated_at=? WHERE name=?",
                       (provider, instance_type, region, zone, _now(), name))
            self._event(db, name, "intent",
                        f"launch {provider}:{instance_type} in {zone or region}",
                        {"provider": provider, "instance_type": instance_type,
                         "region": region, "zone": zone})

    def record_instance(self, name: str, inst: InstanceRow, status: str = "running") -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO instances (deployment, id, provider, region, zone, instance_type,"
                " state, private_ip, public_ip, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)"
                " ON CONFLICT(deployment, id) DO UPDATE SET state=excluded.state,"
                " zone=excluded.zone, private_ip=excluded.private_ip,"
                " public_ip=excluded.public_ip, updated_at=excluded.updated_at",
                (name, inst.id, inst.provider, inst.region, inst.zone, inst.instance_type,
                 inst.state, inst.private_ip, inst.public_ip, _now()))
            db.execute("UPDATE deployments SET status=?, instance_type=?, region=?, zone=?,"
                       " updated_at=? WHERE name=?",
                       (status, inst.instance_type, inst.region, inst.zone, _now(), name))
            self._event(db, name, "instance",
                        f"{inst.id} {inst.state} in {inst.zone or inst.region}",
                        inst.model_dump())

    def record_resource(self, name: str, res: ResourceRow) -> None:
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO resources (deployment, kind, id, region)"
                       " VALUES (?,?,?,?)", (name, res.kind, res.id, res.region))
            self._event(db, name, "resource", f"{res.kind} {res.id} in {res.region}",
                        res.model_dump())

    def forget_resources(self, name: str, region: str | None = None) -> None:
        with self._tx() as db:
            if region is None:
                db.execute("DELETE FROM resources WHERE deployment=?", (name,))
            else:
                db.execute("DELETE FROM resources WHERE deployment=? AND region=?",
                           (name, region))

    def set_instances_state(self, name: str, state: str) -> None:
        with self._tx() as db:
            db.execute("UPDATE instances SET state=?, updated_at=? WHERE deployment=?",
                       (state, _now(), name))

    def set_status(self, name: str, status: str, message: str | None = None) -> None:
        assert status in STATUSES, status
        with self._tx() as db:
            db.execute("UPDATE deployments SET status=?, updated_at=? WHERE name=?",
                       (status, _now(), name))
            self._event(db, name, "status", message or status)

    def event(self, name: str, kind: str, message: str, data: dict[str, Any] | None = None
              ) -> None:
        with self._tx() as db:
            self._event(db, name, kind, message, data)

    @staticmethod
    def _event(db: sqlite3.Connection, name: str, kind: str, message: str,
               data: dict[str, Any] | None = None) -> None:
        db.execute("INSERT INTO events (deployment, at, kind, message, data) VALUES (?,?,?,?,?)",
                   (name, _now(), kind, message, json.dumps(data or {}, sort_keys=True,
                                                            default=str)))

    # -- reads ------------------------------------------------------------------------------
    def get(self, name: str) -> Deployment | None:
        row = self._db.execute("SELECT * FROM deployments WHERE name=?", (name,)).fetchone()
        return self._deployment(row) if row else None

    def require(self, name: str) -> Deployment:
        dep = self.get(name)
        if dep is None:
            known = [d.name for d in self.all()]
            from advisor.errors import NotFoundError

            raise NotFoundError("deployment", name, known,
                                hint="'advisor status' lists the deployments advisor knows")
        return dep

    def all(self) -> list[Deployment]:
        rows = self._db.execute("SELECT * FROM deployments ORDER BY created_at, name").fetchall()
        return [self._deployment(r) for r in rows]

    def events(self, name: str) -> list[Event]:
        rows = self._db.execute("SELECT * FROM events WHERE deployment=? ORDER BY seq",
                                (name,)).fetchall()
        return [Event(seq=r["seq"], at=r["at"], kind=r["kind"], message=r["message"],
                      data=json.loads(r["data"])) for r in rows]

    def _deployment(self, row: sqlite3.Row) -> Deployment:
        name = row["name"]
        inst = [InstanceRow(id=r["id"], provider=r["provider"], region=r["region"],
                            zone=r["zone"], instance_type=r["instance_type"], state=r["state"],
                            private_ip=r["private_ip"], public_ip=r["public_ip"])
                for r in self._db.execute("SELECT * FROM instances WHERE deployment=?"
                                          " ORDER BY id", (name,))]
        res = [ResourceRow(kind=r["kind"], id=r["id"], region=r["region"])
               for r in self._db.execute("SELECT * FROM resources WHERE deployment=?"
                                         " ORDER BY kind, id", (name,))]
        try:
            spec = json.loads(row["spec"])
        except ValueError as exc:
            raise OperationError(f"the state file's record of {name} is damaged: {exc}") from exc
        return Deployment(name=name, provider=row["provider"], model=row["model"],
                          ctx=row["ctx"], instance_type=row["instance_type"],
                          region=row["region"], zone=row["zone"], status=row["status"],
                          spec=spec, created_at=row["created_at"],
                          updated_at=row["updated_at"], instances=inst, resources=res)
