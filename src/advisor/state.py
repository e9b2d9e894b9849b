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

import functools
import json
import os
import secrets
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from advisor.errors import UserInputError

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
CREATE TABLE IF NOT EXISTS leases (
  name TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  purpose TEXT NOT NULL,
  acquired_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
"""

#: the layout this code writes (``PRAGMA user_version``): 0 is the unversioned layout before the
#: lease table, brought up to date on open; a newer number is refused (an older advisor must not
#: write a layout it does not know)
SCHEMA_VERSION = 1


@functools.cache
def _expected_columns() -> dict[str, frozenset[str]]:
    """Each table of :data:`SCHEMA` and its columns, read from an in-memory copy of it."""
    mem = sqlite3.connect(":memory:")
    try:
        mem.executescript(SCHEMA)
        names = [str(r[0]) for r in mem.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n: frozenset(str(r[1]) for r in mem.execute(f"PRAGMA table_info({n})"))
                for n in names}
    finally:
        mem.close()
#: how long a lease holds without a renewal; a holder renews it every third of that
LEASE_TTL_S = 300.0
_MAGIC = b"SQLite format 3\x00"
_HINT_MOVE = ("move it away (or set ADVISOR_HOME to another folder), then run "
              "'advisor status --reconcile' or 'advisor down NAME --all-regions' for each "
              "deployment")

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


class StateWriteError(UserInputError):
    """The state file refused a write (read-only, disk full, locked for too long).

    Exit 2 with a hint: whatever the clouds did before it is found again by
    ``advisor status --reconcile`` once the file can be written."""

    def __init__(self, path: Path, exc: BaseException, message: str | None = None) -> None:
        self.path = path
        super().__init__(message or f"the state file {path} cannot be written: {exc}",
                         hint=f"make {path} and its folder writable, then run 'advisor status "
                         "--reconcile' to bring it up to date with the clouds")


class LeaseHeld(UserInputError):
    """Another advisor process holds the deployment's lease: nothing was done."""

    def __init__(self, name: str, owner: str, purpose: str, since: str) -> None:
        host, pid, _ = (owner.split(":") + ["", "", ""])[:3]
        self.name, self.owner, self.purpose, self.since = name, owner, purpose, since
        where = f"pid {pid}" + ("" if host == socket.gethostname() else f" on {host}")
        super().__init__(f"deployment {name} is being {purpose} by another advisor process "
                         f"({where} since {since}); wait for it, or run 'advisor status {name}'")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OSError:
        return True
    try:  # a zombie (killed, not yet reaped) is dead for our purpose
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _holder_gone(owner: str) -> bool:
    """The owner is a process on this host that no longer runs."""
    host, pid, _ = (owner.split(":") + ["", "", ""])[:3]
    return host == socket.gethostname() and pid.isdigit() and not _pid_alive(int(pid))


class Lease:
    """One advisor process's hold on one deployment name (``Store.acquire``): a context manager
    that renews itself every third of its ``ttl`` on its own connection while held and is
    released on exit. A lease whose holder died (a dead pid on this host) or that was not
    renewed in time is taken over by the next ``acquire``."""

    def __init__(self, store: Store, name: str, owner: str, ttl: float, purpose: str) -> None:
        self.store, self.name, self.owner, self.ttl, self.purpose = (store, name, owner, ttl,
                                                                     purpose)
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self) -> bool:
        ok = self.store.renew(self.name, self.owner, self.ttl)
        self.lost = self.lost or not ok
        return ok

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        with suppress(UserInputError, sqlite3.Error):  # a dead pid frees it anyway
            self.store.release(self.name, self.owner)

    def _beat(self) -> None:
        db: sqlite3.Connection | None = None
        try:
            while not self._stop.wait(self.ttl / 3):
                db = db or Store._connect(self.store.path)
                cur = db.execute("UPDATE leases SET expires_at=? WHERE name=? AND owner=?",
                                 (_at(self.ttl), self.name, self.owner))
                if cur.rowcount == 0:
                    self.lost = True
                    return
        except sqlite3.Error:
            return  # the next acquire sees an expired lease; the holder goes on
        finally:
            if db is not None:
                db.close()

    def __enter__(self) -> Lease:
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name=f"lease-{self.name}",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _at(after_s: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() + after_s, UTC).isoformat(timespec="milliseconds")


class Store:
    """The deployments database. Every method is one short transaction."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self._warned: set[str] = set()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                self._create()
            self._check_file()
            self._db = self._connect(self.path)
            self._open_schema()
        except sqlite3.DatabaseError as exc:
            with suppress(AttributeError, sqlite3.Error):
                self._db.close()
            raise UserInputError(f"the state file {self.path} cannot be used: {exc}",
                                 hint=_HINT_MOVE) from exc
        except OSError as exc:
            raise UserInputError(f"the state file {self.path} cannot be opened: "
                                 f"{exc.strerror or exc}", hint="make it (and its folder) "
                                 "readable and writable, or " + _HINT_MOVE) from exc
        with suppress(OSError):
            self.path.chmod(0o600)

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA busy_timeout = 30000")
        return db

    def _create(self) -> None:
        """A new state file appears whole: it is made under a temporary name and linked into
        place, so that a file of 0 bytes at ``path`` always means a lost state, never one that
        another process is creating at this moment."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            db = self._connect(tmp)
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.close()
            with suppress(OSError):
                tmp.chmod(0o600)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError:  # a file system without hard links: the race is back, but rare
                with suppress(FileExistsError), open(self.path, "xb") as f:
                    f.write(tmp.read_bytes())
        finally:
            for extra in ("", "-wal", "-shm", "-journal"):
                with suppress(OSError):
                    Path(f"{tmp}{extra}").unlink()

    def _check_file(self) -> None:
        """An empty or foreign file is refused before SQLite sees it (SQLite would read an empty
        file as an empty database: every deployment gone without a word)."""
        if not self.path.is_file():
            raise self._unusable("it is not a file")
        with open(self.path, "rb") as f:
            head = f.read(len(_MAGIC))
        if not head:
            raise self._unusable("it is empty (0 bytes); the deployments it recorded are "
                                 "lost, not absent")
        if head != _MAGIC:
            raise self._unusable("it is not an SQLite database")

    def _unusable(self, why: str) -> UserInputError:
        return UserInputError(f"the state file {self.path} cannot be used: {why}",
                              hint=_HINT_MOVE)

    def _open_schema(self) -> None:
        db = self._db
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise UserInputError(f"the state file {self.path} cannot be used: it has layout "
                                 f"version {version}; this advisor knows up to {SCHEMA_VERSION}",
                                 hint="upgrade advisor (a newer one wrote this file), or set "
                                 "ADVISOR_HOME to another folder")
        problems = [str(r[0]) for r in db.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            more = f", and {len(problems) - 1} more" if len(problems) > 1 else ""
            raise self._unusable(f"it is damaged (quick_check: {problems[0][:200]}{more})")
        tables = {str(r[0]) for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
        expected = _expected_columns()
        if version == 0 and tables and not tables & set(expected):
            # never write advisor's tables into another program's database
            raise self._unusable("it is another program's SQLite database (tables: "
                                 + ", ".join(sorted(tables)[:5]) + ")")
        for table in sorted(tables & set(expected)):
            have = {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}
            missing = sorted(expected[table] - have)
            if missing:
                raise self._unusable(f"its table {table} lacks the columns "
                                     f"{', '.join(missing[:5])} (replaced or from another "
                                     "program)")
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA foreign_keys = ON")
        if version < SCHEMA_VERSION:
            # an older layout: every table is CREATE IF NOT EXISTS, so bringing it up to date is
            # creating what is missing, then the version, in one transaction
            db.execute("BEGIN IMMEDIATE")
            try:
                if int(db.execute("PRAGMA user_version").fetchone()[0]) < SCHEMA_VERSION:
                    for stmt in SCHEMA.split(";"):
                        if stmt.strip():
                            db.execute(stmt)
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            except BaseException:
                with suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def close(self) -> None:
        self._db.close()

    def _warn(self, key: str, message: str) -> None:
        """A damaged row is skipped (or read without its damaged part) and said once, on
        stderr: one bad row must not make the rest of the file, or ``down``, unusable."""
        if key not in self._warned:
            self._warned.add(key)
            print(f"warning: {message}", file=sys.stderr)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise StateWriteError(self.path, exc) from exc
        try:
            yield db
        except BaseException as exc:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError):
                raise StateWriteError(self.path, exc) from exc
            raise
        else:
            try:
                db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                with suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise StateWriteError(self.path, exc) from exc

    # -- leases: one launcher per name ------------------------------------------------------
    def acquire(self, name: str, ttl: float = LEASE_TTL_S, purpose: str = "launched") -> Lease:
        """Take the lease on ``name`` (one transaction, ``BEGIN IMMEDIATE``): a free name, an
        expired lease, or one whose holder died on this host. Held by anyone else: `LeaseHeld`
        at once (exit 2), and nothing is done. Use the result as a context manager."""
        owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        now = _at()
        with self._tx() as db:
            row = db.execute("SELECT * FROM leases WHERE name=?", (name,)).fetchone()
            if row is not None:
                if row["expires_at"] > now and not _holder_gone(row["owner"]):
                    raise LeaseHeld(name, row["owner"], row["purpose"], row["acquired_at"])
                why = "expired" if row["expires_at"] <= now else "its process is gone"
                self._event(db, name, "lease", f"took over the lease of {row['owner']} "
                            f"({row['purpose']} since {row['acquired_at']}): {why}")
            db.execute("INSERT INTO leases (name, owner, purpose, acquired_at, expires_at)"
                       " VALUES (?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET owner=excluded.owner,"
                       " purpose=excluded.purpose, acquired_at=excluded.acquired_at,"
                       " expires_at=excluded.expires_at",
                       (name, owner, purpose, now, _at(ttl)))
        return Lease(self, name, owner, ttl, purpose)

    def renew(self, name: str, owner: str, ttl: float = LEASE_TTL_S) -> bool:
        """Push the expiry on; False when the lease is no longer ``owner``'s."""
        with self._tx() as db:
            cur = db.execute("UPDATE leases SET expires_at=? WHERE name=? AND owner=?",
                             (_at(ttl), name, owner))
            return cur.rowcount == 1

    def release(self, name: str, owner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM leases WHERE name=? AND owner=?", (name, owner))

    def lease(self, name: str) -> dict[str, str] | None:
        """Who holds ``name`` now (owner, purpose, acquired_at, expires_at), if anyone."""
        row = self._db.execute("SELECT * FROM leases WHERE name=?", (name,)).fetchone()
        return dict(row) if row else None

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
        out = []
        for r in rows:
            try:
                data = json.loads(r["data"])
                if not isinstance(data, dict):
                    raise ValueError(f"data is {type(data).__name__}, not an object")
                out.append(Event(seq=r["seq"], at=r["at"], kind=r["kind"],
                                 message=r["message"], data=data))
            except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
                self._warn(f"event {r['seq']}", f"{self.path}: event #{r['seq']} of {name} is "
                           f"damaged ({_short(exc)}); skipped")
        return out

    def _deployment(self, row: sqlite3.Row) -> Deployment:
        """One deployment; a damaged instance or resource row is skipped, a damaged spec read
        as empty, each with a warning: ``down`` must stay possible."""
        name = row["name"]
        inst: list[InstanceRow] = []
        for r in self._db.execute("SELECT * FROM instances WHERE deployment=? ORDER BY id",
                                  (name,)):
            try:
                inst.append(InstanceRow(id=r["id"], provider=r["provider"], region=r["region"],
                                        zone=r["zone"], instance_type=r["instance_type"],
                                        state=r["state"], private_ip=r["private_ip"],
                                        public_ip=r["public_ip"]))
            except ValueError as exc:
                self._warn(f"instance {name} {r['id']}", f"{self.path}: an instance row of "
                           f"{name} is damaged ({_short(exc)}); skipped")
        res: list[ResourceRow] = []
        for r in self._db.execute("SELECT * FROM resources WHERE deployment=?"
                                  " ORDER BY kind, id", (name,)):
            try:
                res.append(ResourceRow(kind=r["kind"], id=r["id"], region=r["region"]))
            except ValueError as exc:
                self._warn(f"resource {name} {r['id']}", f"{self.path}: a resource row of "
                           f"{name} is damaged ({_short(exc)}); skipped")
        try:
            spec = json.loads(row["spec"])
            if not isinstance(spec, dict):
                raise ValueError(f"spec is {type(spec).__name__}, not an object")
        except (ValueError, TypeError) as exc:
            self._warn(f"spec {name}", f"{self.path}: the launch spec of {name} is damaged "
                       f"({_short(exc)}); read as empty (pass the provider options again)")
            spec = {}
        fields: dict[str, Any] = {k: row[k] for k in (
            "provider", "model", "ctx", "instance_type", "region", "zone", "status",
            "created_at", "updated_at")}
        try:
            return Deployment(name=name, spec=spec, instances=inst, resources=res, **fields)
        except ValueError as exc:
            self._warn(f"deployment {name}", f"{self.path}: the record of {name} is damaged "
                       f"({_short(exc)}); its damaged fields are read as unknown")
        clean: dict[str, Any] = {}
        for k, v in fields.items():
            want = int if k == "ctx" else str
            clean[k] = v if isinstance(v, want) else None
        clean["ctx"] = clean["ctx"] if clean["ctx"] is not None else 0
        for k in ("provider", "model", "status", "created_at", "updated_at"):
            clean[k] = clean[k] if clean[k] is not None else "?"
        return Deployment(name=str(name), spec=spec, instances=inst, resources=res, **clean)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160]
