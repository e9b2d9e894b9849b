"""The catalog cache: a loaded catalog equals a fresh one, and any change or damage rebuilds it."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from advisor import CatalogError
from advisor.catalog import cache, loader
from tests.conftest import PRIVATE_BOX


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own, empty cache directory."""
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(cache.DISABLE_VAR, raising=False)
    monkeypatch.delenv(loader.ENV_VAR, raising=False)
    return tmp_path / "home"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the loads that parsed and validated the YAML (a cache miss)."""
    calls: list[int] = []
    real = loader._build

    def counting(dirs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(dirs)

    monkeypatch.setattr(loader, "_build", counting)
    return calls


def _fresh(extra: list[Path] | None = None):  # type: ignore[no-untyped-def]
    old = os.environ.get(cache.DISABLE_VAR)
    os.environ[cache.DISABLE_VAR] = "1"
    try:
        return loader.load(extra)
    finally:
        if old is None:
            del os.environ[cache.DISABLE_VAR]
        else:
            os.environ[cache.DISABLE_VAR] = old


def _files(home: Path) -> list[Path]:
    return sorted((home / "cache").glob("catalog-*.pickle"))


def test_cached_catalog_equals_a_fresh_one(home, builds):
    first = loader.load()  # builds and stores
    second = loader.load()  # from the cache
    assert len(builds) == 1 and len(_files(home)) == 1
    fresh = _fresh()
    assert second == first == fresh
    assert second is not first  # a new object each time: callers may change theirs
    assert [second.describe(i) for i in second.instances.values()] == \
        [fresh.describe(i) for i in fresh.instances.values()]
    assert second.model_configs == fresh.model_configs


def test_cache_is_in_advisor_home_and_only_the_users(home):
    loader.load()
    [path] = _files(home)
    assert path.parent == home / "cache"
    assert path.stat().st_mode & 0o077 == 0
    assert not list(path.parent.glob("*.tmp"))  # the temporary file was renamed into place


def test_overlay_is_cached_and_a_changed_file_invalidates_it(make_catalog, builds):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    first = loader.load([d])
    assert first.instance("onprem:lab-box-1").price.on_demand_usd_per_hour == 1.5
    assert loader.load([d]) == first
    assert len(builds) == 1
    assert first == _fresh([d])
    path = d / "instances" / "onprem.yaml"
    text = path.read_text()
    stat = path.stat()
    # same size, same mtime: only the bytes tell
    path.write_text(text.replace("on_demand_usd_per_hour: 1.5", "on_demand_usd_per_hour: 2.5"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    changed = loader.load([d])
    assert len(builds) == 3  # the first, the uncached one above, and this
    assert changed.instance("onprem:lab-box-1").price.on_demand_usd_per_hour == 2.5
    assert changed == _fresh([d])


def test_a_new_file_in_an_overlay_invalidates_it(make_catalog, builds):
    d = make_catalog({"gpus.yaml": "gpus: []\n"})
    assert "onprem:lab-box-1" not in loader.load([d]).instances
    (d / "instances").mkdir()
    (d / "instances" / "onprem.yaml").write_text(
        "\n".join(line[4:] for line in PRIVATE_BOX.splitlines()))
    assert "onprem:lab-box-1" in loader.load([d]).instances
    assert len(builds) == 2


def test_each_list_of_directories_has_its_own_entry(make_catalog, home):
    d = make_catalog({"instances/onprem.yaml": PRIVATE_BOX})
    bundled = loader.load()
    overlaid = loader.load([d])
    assert "onprem:lab-box-1" in overlaid.instances
    assert "onprem:lab-box-1" not in bundled.instances
    assert len(_files(home)) == 2
    assert loader.load() == bundled and loader.load([d]) == overlaid


@pytest.mark.parametrize("damage", [
    b"",
    b"not a cache at all",
    cache.FORMAT,  # cut after the header
    "garbage-after-header",
    "truncated-pickle",
    "not-a-catalog",
])
def test_a_damaged_cache_file_is_ignored_and_rewritten(home, builds, damage):
    good = loader.load()
    [path] = _files(home)
    data = path.read_bytes()
    head = len(cache.FORMAT) + 32
    if damage == "garbage-after-header":
        damage = data[:head] + b"\x80\x05garbage"
    elif damage == "truncated-pickle":
        damage = data[: head + (len(data) - head) // 2]
    elif damage == "not-a-catalog":
        damage = data[:head] + pickle.dumps({"gpus": {}})
    assert isinstance(damage, bytes)
    path.write_bytes(damage)
    assert loader.load() == good
    assert len(builds) == 2
    assert path.read_bytes() == data  # rebuilt and stored again
    assert loader.load() == good and len(builds) == 2


def test_a_stale_key_is_a_miss(home, builds, monkeypatch):
    loader.load()
    monkeypatch.setattr("advisor._version.__version__", "0.0.0-other")
    loader.load()
    assert len(builds) == 2


def test_a_file_over_the_size_limit_is_not_read(home, builds, monkeypatch):
    loader.load()
    monkeypatch.setattr(cache, "MAX_BYTES", 1000)
    loader.load()
    assert len(builds) == 2


def test_a_file_others_may_write_is_not_read(home, builds):
    loader.load()
    [path] = _files(home)
    path.chmod(0o666)
    loader.load()
    assert len(builds) == 2
    assert path.stat().st_mode & 0o077 == 0  # replaced by one of the user's own


def test_a_broken_catalog_is_never_cached(make_catalog, home, builds):
    d = make_catalog({"gpus.yaml": "gpus: [{id: X}]\n"})
    for _ in range(2):
        with pytest.raises(CatalogError):
            loader.load([d])
    assert len(builds) == 2 and _files(home) == []


def test_no_cache_when_disabled_or_unwritable(home, builds, monkeypatch, tmp_path):
    monkeypatch.setenv(cache.DISABLE_VAR, "1")
    loader.load()
    loader.load()
    assert len(builds) == 2 and _files(home) == []
    monkeypatch.delenv(cache.DISABLE_VAR)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ADVISOR_HOME", str(blocker))  # <file>/cache cannot be made
    assert loader.load() == _fresh()


def test_old_entries_are_pruned(make_catalog, home, monkeypatch):
    monkeypatch.setattr(cache, "KEEP", 2)
    for i in range(4):
        loader.load([make_catalog({"instances/onprem.yaml": PRIVATE_BOX})])
        newest = max(_files(home), key=lambda p: p.stat().st_mtime_ns)
        os.utime(newest, ns=(0, 10**18 + i))  # strictly increasing whatever the clock says
    assert len(_files(home)) == 2


def test_cache_dir_without_advisor_home(monkeypatch):
    import platformdirs

    monkeypatch.delenv("ADVISOR_HOME")
    assert cache.cache_dir() == Path(platformdirs.user_cache_dir("advisor"))
