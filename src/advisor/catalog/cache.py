"""A validated catalog, kept between runs so that each command does not re-read its YAML.

:func:`advisor.catalog.loader.load` parses and validates the catalog directories (the bundled
one plus ``--catalog`` / ``ADVISOR_CATALOG_DIR`` overlays) once, and stores the resulting
:class:`~advisor.catalog.catalog.Catalog` as a pickle in the user cache directory
(``~/.cache/advisor/catalog-<dirs>.pickle`` on Linux, ``$ADVISOR_HOME/cache/`` when that is
set). One file per list of directories; inside it, a key made of:

* the cache format, advisor's version, Python's and pydantic's versions;
* the bytes of the modules that define and build the catalog (so an edited checkout misses);
* for each directory, in order: its resolved path and the name and bytes of every file the
  loader can read (``*.yaml`` at the top, ``instances/``, ``models/``).

A file whose key differs (a changed catalog file, another version), that is larger than
:data:`MAX_BYTES`, not the user's own, unreadable or corrupt is ignored and rewritten; the
cache never changes what ``load`` returns, only how long it takes. Writes go to a temporary
file renamed into place, so a reader never sees half a file. ``ADVISOR_NO_CACHE=1`` turns the
cache off. Only successful loads are stored: a catalog with problems is rebuilt (and raises)
every time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.catalog.catalog import Catalog

#: bump when the layout of the file or of the key changes
FORMAT = b"advisor-catalog-cache/1\n"
#: a cache file larger than this is not read (the bundled catalog pickles to ~0.2 MiB)
MAX_BYTES = 64 * 2**20
#: set to 1 to neither read nor write the cache
DISABLE_VAR = "ADVISOR_NO_CACHE"
#: the modules whose code decides what a loaded catalog holds
_SOURCES = ("schema.py", "catalog.py", "loader.py", "cache.py", "prices.py")
#: cache files kept (one per list of directories); the least recently written go first
KEEP = 16


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    """``$ADVISOR_HOME/cache`` when ADVISOR_HOME is set, else the platform's user cache dir."""
    env = environ if environ is not None else os.environ
    home = env.get("ADVISOR_HOME")
    if home:
        return Path(home).expanduser() / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir("advisor"))


def enabled(environ: dict[str, str] | None = None) -> bool:
    return (environ if environ is not None else os.environ).get(DISABLE_VAR, "") in ("", "0")


def _add_file(h: hashlib._Hash, name: str, path: Path) -> None:
    from advisor.errors import UserInputError
    from advisor.inputs import read_bytes

    try:  # bounded: a FIFO or /dev/zero in a catalog tree must not hang the cache key
        data = read_bytes(path, limit=64 * 2**20, what="")
    except (OSError, UserInputError) as exc:  # the loader reports it; the key only has to differ
        data = f"<unreadable: {type(exc).__name__}: {exc}>".encode()
    h.update(f"{name}\0{len(data)}\0".encode())
    h.update(data)


def _add_dir(h: hashlib._Hash, label: str, path: Path) -> None:
    """Every entry directly inside ``path``: what the loader globs and reads lives there."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        h.update(f"{label}\0<missing>\0".encode())
        return
    for entry in entries:
        name = f"{label}/{entry.name}"
        if entry.is_file():
            _add_file(h, name, Path(entry.path))
        else:
            h.update(f"{name}\0<not a file>\0".encode())


def key(dirs: Sequence[Path]) -> bytes:
    """What the cached catalog of ``dirs`` depends on, as a digest."""
    import pydantic

    h = hashlib.sha256(FORMAT)
    from advisor._version import __version__

    h.update(f"{__version__}\0{sys.version}\0{pydantic.VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        _add_file(h, f"<advisor>/{name}", here / name)
    for cloud in sorted((here.parent / "clouds").glob("*/__init__.py")):
        # each cloud's descriptor names its reference region, which picks reference prices
        _add_file(h, f"<advisor>/clouds/{cloud.parent.name}", cloud)
    for i, d in enumerate(dirs):
        root = d.resolve()
        h.update(f"\0dir {i}\0{root}\0".encode())
        _add_dir(h, ".", root)
        _add_dir(h, "instances", root / "instances")
        _add_dir(h, "models", root / "models")
        _add_dir(h, "prices", root / "prices")
    return h.digest()


def path_for(dirs: Sequence[Path], environ: dict[str, str] | None = None) -> Path:
    """The cache file of this list of directories (their contents are checked inside it)."""
    names = "\0".join(str(d.resolve()) for d in dirs)
    return cache_dir(environ) / f"catalog-{hashlib.sha256(names.encode()).hexdigest()[:16]}.pickle"


def read(dirs: Sequence[Path], digest: bytes,
         environ: dict[str, str] | None = None) -> Catalog | None:
    """The cached catalog of ``dirs`` if its key is ``digest``; None when there is no usable,
    current one."""
    if not enabled(environ):
        return None
    try:
        return _read(path_for(dirs, environ), digest)
    except Exception:  # noqa: BLE001 - any unusable cache is a miss: rebuild silently
        return None


def _read(path: Path, want: bytes) -> Catalog | None:
    from advisor.catalog.catalog import Catalog

    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_BYTES:
            return None
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
            return None  # only a file this user wrote, that nobody else may change
        head = f.read(len(FORMAT) + len(want))
        if head != FORMAT + want:
            return None  # another version, another catalog: stale
        cat = pickle.loads(f.read(MAX_BYTES))  # noqa: S301 - the user's own file, checked
    return cat if isinstance(cat, Catalog) else None


def write(dirs: Sequence[Path], digest: bytes, cat: Catalog,
          environ: dict[str, str] | None = None) -> None:
    """Store ``cat``, built from ``dirs`` whose key was ``digest`` *before* they were read (a
    file changed meanwhile then misses next time); does nothing when that cannot be done."""
    if not enabled(environ):
        return
    tmp: str | None = None
    try:
        path = path_for(dirs, environ)
        data = FORMAT + digest + pickle.dumps(cat, protocol=pickle.HIGHEST_PROTOCOL)
        if len(data) > MAX_BYTES:
            return
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=".catalog-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
        _prune(path.parent)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _prune(folder: Path) -> None:
    """Keeps the :data:`KEEP` newest cache files (overlays of temporary directories pile up)."""
    files = []
    for p in folder.glob("catalog-*.pickle"):
        with contextlib.suppress(OSError):
            files.append((p.stat().st_mtime, p))
    for _, p in sorted(files, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            p.unlink()
