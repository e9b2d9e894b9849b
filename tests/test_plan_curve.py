"""``advisor plan --rps-range A:B [--points N] [--plot FILE]`` and ``advisor.fleet_curve``: the
cheapest fleet across a range of loads, where the cheapest offer changes, and the chart.

Each figure is checked against what it claims to be: the cheapest fleet at a load against
``plan --rps`` run at that load, a crossover against :func:`advisor.core.load.crossover` and
against the bills :func:`advisor.core.load.size_fleet` gives either side of it, the chart by
decoding the file it wrote."""

from __future__ import annotations

import inspect
import json
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import advisor
from advisor.cli import fleet as fleet_cli
from advisor.core.load import (
    DEFAULT_CURVE_POINTS,
    MAX_CURVE_POINTS,
    CurveLine,
    crossover,
    curve_loads,
    line_shape,
    size_fleet,
    staircase,
)
from tests.small_catalog import small_catalog

MODEL = ["--model", "llama-3.1-8b", "--ctx", "8192"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def curve_json() -> dict:
    """The docs' curve, on the bundled catalog, at 10 loads (one run for the module)."""
    from typer.testing import CliRunner

    from advisor.cli import app

    r = CliRunner().invoke(app, ["plan", *MODEL, "--rps-range", "0.5:40", "--points", "10",
                                 "--json"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _bill(line: dict, rps: float) -> float:
    return size_fleet(rps=rps, users=None, rps_per_replica=line["rps_per_replica"],
                      users_per_replica=1, replicas_per_instance=max(1, line[
                          "replicas_per_instance"]), nodes=line["nodes_per_replica"],
                      usd_per_hour=line["usd_per_hour"]).usd_per_month


def _shape(line: dict) -> tuple[float, int, int, float]:
    """crossover()'s (req/s a replica, replicas an instance, nodes a replica, $/h), by hand."""
    return (line["rps_per_replica"], max(1, line["replicas_per_instance"]),
            line["nodes_per_replica"], line["usd_per_hour"])


# -- the loads -------------------------------------------------------------------------------
def test_loads_are_log_spaced_and_include_both_ends():
    loads = curve_loads(0.5, 40, 16)
    assert loads[0] == 0.5 and loads[-1] == 40 and len(loads) == 16
    ratios = [b / a for a, b in zip(loads, loads[1:], strict=False)]
    step = (40 / 0.5) ** (1 / 15)
    assert all(abs(r / step - 1) < 1e-3 for r in ratios), ratios  # equal ratios: geometric
    # linear spacing would put one load below 3 req/s; this puts 7
    assert sum(x < 3 for x in loads) == 7
    assert len(curve_loads(1, 1.0001, 50)) < 50  # rounded to 4 figures: distinct loads only
    with pytest.raises(ValueError):
        curve_loads(2, 1, 5)


def test_the_cli_keeps_the_cores_defaults():
    # the CLI holds its own copy so that --help loads no pydantic module
    assert fleet_cli.DEFAULT_CURVE_POINTS == DEFAULT_CURVE_POINTS
    assert fleet_cli.MAX_CURVE_POINTS == MAX_CURVE_POINTS
    sig = inspect.signature(advisor.fleet_curve)
    assert sig.parameters["points"].default == DEFAULT_CURVE_POINTS


# -- the cheapest at each load is plan --rps's first -----------------------------------------
def test_cheapest_at_each_load_is_the_min_over_plan_rps(cli, curve_json):
    points = curve_json["points"]
    assert [p["rps"] for p in points] == curve_loads(0.5, 40, 10)
    leaders = set()
    for p in points:
        r = cli("plan", *MODEL, "--rps", repr(p["rps"]), "--top", "1000", "--json")
        assert r.exit_code == 0, r.stderr
        fleets = json.loads(r.stdout)
        bills = sorted(f["usd_per_month"] for f in fleets)
        cheapest = [f"{f['provider']}:{f['instance']}" for f in fleets
                    if f["usd_per_month"] == bills[0]]
        assert p["cheapest"]["usd_per_month"] == bills[0]
        assert p["cheapest"]["option"] in cheapest
        assert p["cheapest"]["instances"] == next(
            f["instances"] for f in fleets
            if f"{f['provider']}:{f['instance']}" == p["cheapest"]["option"])
        assert p["next_best"]["usd_per_month"] == bills[1]
        assert p["fleets"] == len(fleets)
        leaders.add(p["cheapest"]["option"])
    assert len(leaders) >= 2  # the range is chosen so that the answer changes


def test_the_sdk_curve_on_the_small_catalog_is_plan_rps_too():
    cat = small_catalog()
    c = advisor.fleet_curve("llama-3-8b", 8192, rps_from=0.2, rps_to=50, points=5,
                            catalog=cat)
    assert isinstance(c, advisor.CostCurve)
    for p in c.points:
        fleets = advisor.fleet("llama-3-8b", 8192, rps=p.rps, catalog=cat)
        assert p.cheapest.usd_per_month == min(f.usd_per_month for f in fleets)
        assert p.cheapest.option == f"{fleets[0].provider}:{fleets[0].instance}"
    assert c.price_dates and all(len(d) == 10 and d[4] == "-" for d in c.price_dates)


def test_each_drawn_line_is_the_bill_plan_gives_at_each_load(curve_json):
    loads = [p["rps"] for p in curve_json["points"]]
    assert 2 <= len(curve_json["lines"]) <= 4
    for line in curve_json["lines"]:
        model = CurveLine.model_validate(line)
        xs, ys = staircase(model, loads[0], loads[-1])
        assert xs[0] == loads[0] and xs[-1] == loads[-1] and len(xs) == len(ys)
        for rps, bill in zip(loads, line["usd_per_month"], strict=True):
            if bill is None:
                continue
            assert bill == pytest.approx(_bill(line, rps))
            # the staircase holds the same bill on the tread that holds this load
            i = max(k for k, x in enumerate(xs) if x < rps) if rps > xs[0] else 0
            assert ys[i] == pytest.approx(bill)


# -- crossovers ------------------------------------------------------------------------------
def test_crossovers_are_crossover_by_hand(curve_json):
    lines = {line["option"]: line for line in curve_json["lines"]}
    crossings = curve_json["crossovers"]
    assert crossings, "the docs' range has a crossover"
    assert any(x["pick_changes"] for x in crossings)
    for x in crossings:
        a, b = lines[x["versus"]], lines[x["option"]]
        load, usd_b, usd_a = crossover(_shape(a), _shape(b))
        assert (x["rps"], x["usd_per_month"], x["versus_usd_per_month"]) == (load, usd_b, usd_a)
        assert 0.5 <= x["rps"] < 40
        # just above: the option is cheaper; below, at every load from 0, it never was
        assert _bill(b, load + 1e-3) < _bill(a, load + 1e-3)
        below = [load * k / 400 for k in range(1, 400)]
        assert all(_bill(b, r) >= _bill(a, r) for r in below)
    # every pair of drawn offers where one is cheaper per request and crosses in range is there
    names = list(lines)
    expected = 0
    for i, m in enumerate(names):
        for n in names[i + 1:]:
            for first, other in ((m, n), (n, m)):
                hit = crossover(line_shape(CurveLine.model_validate(lines[first])),
                                line_shape(CurveLine.model_validate(lines[other])))
                expected += hit is not None and 0.5 <= hit[0] < 40
    assert len(crossings) == expected


def test_pick_changes_where_the_cheapest_drawn_offer_changes(curve_json):
    lines = curve_json["lines"]
    for x in curve_json["crossovers"]:
        def cheapest(rps: float) -> str:
            return min(lines, key=lambda ln: _bill(ln, rps))["option"]
        changes = cheapest(x["rps"] - 1e-3) == x["versus"] and cheapest(
            x["rps"] + 1e-3) == x["option"]
        assert x["pick_changes"] == changes, x


def test_the_table_names_each_load_and_the_changes(cli, curve_json):
    r = cli("plan", *MODEL, "--rps-range", "0.5:40", "--points", "10", env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.stderr
    rows = {cells[1]: cells[2:] for line in r.stdout.splitlines()
            if len(cells := [c.strip() for c in line.split("\u2502")]) > 2}
    assert len(rows) == len(curve_json["points"])
    for p in curve_json["points"]:
        best, nxt = p["cheapest"], p["next_best"]
        assert rows[f"{p['rps']:.4g}"][:5] == [
            best["option"], str(best["instances"]), f"{best['usd_per_month']:,.0f}",
            nxt["option"], f"{nxt['usd_per_month']:,.0f}"]
    for x in curve_json["crossovers"]:
        said = f"Above {x['rps']:.3g} req/s, {x['option']} is the cheaper fleet" in r.stdout
        assert said == x["pick_changes"]


# -- the chart -------------------------------------------------------------------------------
def test_png_chart(cli, tmp_path):
    out = tmp_path / "curve.png"
    r = cli("plan", *MODEL, "--rps-range", "0.5:40", "--points", "6", "--plot", str(out))
    assert r.exit_code == 0, r.stderr
    data = out.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    import matplotlib.image

    pixels = matplotlib.image.imread(str(out))
    assert pixels.shape[0] >= 500 and pixels.shape[1] >= 900
    assert pixels.std() > 0.05  # drawn on, not a blank canvas
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.png"]  # no temporary left


def test_svg_chart_has_its_labels_and_caption(cli, tmp_path, curve_json):
    out = tmp_path / "curve.SVG"
    r = cli("plan", *MODEL, "--rps-range", "0.5:40", "--points", "10", "--plot", str(out),
            "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == curve_json  # --json and --plot together: the same curve
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg")
    text = " ".join(t.strip() for t in root.itertext() if t.strip())
    for needle in ("load (requests/s, log scale)", "monthly cost of the fleet (US$/month",
                   "llama-3.1-8b", "ctx 8192", "TPOT \u2264 50 ms", "TTFT \u2264 2000 ms",
                   curve_json["price_dates"][-1], *(ln["option"] for ln in curve_json["lines"])):
        assert needle in text, needle
    for x in curve_json["crossovers"]:
        assert (f"{x['rps']:.3g} req/s: {x['option']}" in text) == x["pick_changes"]


def test_an_interrupted_write_leaves_the_old_file(cli, tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    out = tmp_path / "curve.svg"
    out.write_text("old")

    def half(self, f, **kw):
        f.write(b"<svg")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", half)
    r = cli("plan", *MODEL, "--rps-range", "1:4", "--points", "3", "--plot", str(out))
    assert r.exit_code == 2 and "No space left" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert out.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["curve.svg"]


# -- bad input: exit 2, one line, nothing written --------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["--rps", "5", "--rps-range", "1:5"], "not both"),
    ([], "--rps R or --rps-range A:B"),
    (["--rps-range", "40:0.5"], "end must be above the start"),
    (["--rps-range", "5:5"], "end must be above the start"),
    (["--rps-range", "0:5"], "--rps-range start must be positive"),
    (["--rps-range", "-1:5"], "--rps-range start must be positive"),
    (["--rps-range", "1:2e6"], "--rps-range end must be at most 1e+06"),
    (["--rps-range", "nan:5"], "finite"),
    (["--rps-range", "1:inf"], "finite"),
    (["--rps-range", "abc"], "is not A:B"),
    (["--rps-range", "1:2:3"], "is not A:B"),
    (["--rps-range", "1:5", "--points", "1"], "--points must be a whole number from 2 to 200"),
    (["--rps-range", "1:5", "--points", "201"], "--points must be a whole number from 2"),
    (["--rps", "5", "--points", "8"], "--points goes with --rps-range"),
    (["--rps", "5", "--plot", "{tmp}/c.svg"], "--plot goes with --rps-range"),
    (["--rps-range", "1:5", "--plot", "{tmp}/c.pdf"], "as .svg or .png, not .pdf"),
    (["--rps-range", "1:5", "--plot", "{tmp}/curve"], "a file without a suffix"),
    (["--rps-range", "1:5", "--plot", "{tmp}/no/such/c.svg"], "cannot write there: no folder"),
    (["--rps-range", "1:5", "--plot", "{tmp}/adir.svg"], "cannot write there: it is a folder"),
    (["--rps-range", "1:5", "--plot", "/proc/version/c.png"], "cannot write there"),
    (["--rps-range", "0.5:1e6", "--points", "2"], "no fleet of at most 64 instances"),
])
def test_bad_input_exits_2_in_one_line(cli, tmp_path, args, needle):
    (tmp_path / "adir.svg").mkdir()
    r = cli("plan", *MODEL, *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert "hint:" in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir.svg"]


def test_without_matplotlib_plot_is_refused_with_the_install_line(cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: ImportError
    r = cli("plan", *MODEL, "--rps-range", "1:5", "--plot", str(tmp_path / "c.svg"))
    assert r.exit_code == 2
    assert r.stderr.startswith("error: --plot needs matplotlib: pip install 'advisor[plot]'")
    assert len(r.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    # the table alone needs no matplotlib
    r = cli("plan", *MODEL, "--rps-range", "1:5", "--points", "3")
    assert r.exit_code == 0 and "req/s" in r.stdout


def test_the_sdk_refuses_a_bad_range():
    with pytest.raises(advisor.UserInputError) as e:
        advisor.fleet_curve("llama-3-8b", 8192, rps_from=3, rps_to=math.nan)
    assert "--rps-range end" in e.value.message and e.value.hint
    with pytest.raises(advisor.UserInputError, match="--lines"):
        advisor.fleet_curve("llama-3-8b", 8192, rps_from=1, rps_to=3, lines=0)


# -- matplotlib is loaded on the --plot path only --------------------------------------------
def test_matplotlib_is_imported_only_for_plot(tmp_path):
    script = (
        "import contextlib, io, sys\n"
        "import advisor, advisor.cli\n"
        "from advisor.cli import main\n"
        "seen = []\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['plan', *{MODEL!r}, '--rps', '2'])\n"
        "    seen.append('matplotlib' in sys.modules)\n"
        f"    main(['plan', *{MODEL!r}, '--rps-range', '1:4', '--points', '3', '--json'])\n"
        "    seen.append('matplotlib' in sys.modules)\n"
        f"    main(['plan', *{MODEL!r}, '--rps-range', '1:4', '--points', '3', "
        f"'--plot', {str(tmp_path / 'c.svg')!r}])\n"
        "    seen.append('matplotlib' in sys.modules)\n"
        "print(seen)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, check=False, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[False, False, True]"
    assert (tmp_path / "c.svg").is_file()
