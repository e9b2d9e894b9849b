"""Issue 33, hostile inputs round two: files that are not files, paths that leave their folder,
secret references without meaning, addresses and ranges that pass a pattern but are wrong,
names that would sweep every cloud, escapes in echoed input, duplicate JSON keys. Each case
runs the real CLI in a subprocess (a hang is a failure at 30 s): exit 2, one line, no
traceback, nothing written where it should not be."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import advisor
from advisor.clouds.base import opens_world

ADVISOR = shutil.which("advisor", path=str(Path(sys.executable).parent)) or shutil.which("advisor")
REPO = Path(__file__).resolve().parents[2]
LAUNCH = REPO / "templates" / "vllm-launch.sh"


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 30
         ) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([ADVISOR, *argv], capture_output=True, text=True, timeout=timeout,
                          env=full, check=False)


def _one_line(res: subprocess.CompletedProcess[str], says: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stdout[-300:], res.stderr[-300:])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert says in lines[0], lines[0]


# -- one way to read a file -------------------------------------------------------------------
def _layer(tmp_path: Path) -> Path:
    root = tmp_path / "layer"
    (root / "instances").mkdir(parents=True)
    return root


def test_a_fifo_in_a_catalog_layer_is_a_problem_not_a_hang(tmp_path):
    root = _layer(tmp_path)
    os.mkfifo(root / "instances" / "aws.yaml")
    t0 = time.monotonic()
    res = _run("catalog", "validate", str(root), timeout=30)
    assert time.monotonic() - t0 < 30
    assert res.returncode == 2 and "not a regular file" in res.stdout, res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_a_link_to_dev_zero_in_a_catalog_layer_is_refused_unread(tmp_path):
    root = _layer(tmp_path)
    (root / "instances" / "gcp.yaml").symlink_to("/dev/zero")
    res = _run("catalog", "validate", str(root))
    assert res.returncode == 2 and "not a regular file" in res.stdout
    assert "MemoryError" not in res.stdout + res.stderr


def test_catalog_topology_write_stays_inside_the_catalog(tmp_path):
    cat = tmp_path / "cat"
    (cat / "instances").mkdir(parents=True)
    (cat / "instances" / "aws.yaml").write_text("schema_version: 1\ninstances: []\n")
    outside = tmp_path / "x.yaml"
    outside.write_text("keep me\n")
    from tests.catalog.test_nccl_topology import TWO_NODES

    xml = tmp_path / "t.xml"
    xml.write_text(TWO_NODES)
    for bad in ("../../x:p5.48xlarge", "..:p5.48xlarge", "aws:../p5"):
        res = _run("catalog", "topology", str(xml), "--instance", bad, "--source",
                   "https://example.org/t.xml", "--as-of", "2026-01-01", "--write",
                   "--catalog", str(cat))
        _one_line(res, "is not a provider or type name")
    assert outside.read_text() == "keep me\n"


def test_a_duplicate_key_in_config_json_is_refused(tmp_path):
    cfg = json.loads((REPO / "catalogs/models/meta-llama--Meta-Llama-3-8B-Instruct.json")
                     .read_text())
    text = json.dumps(cfg)[:-1] + ', "hidden_size": 1024}'
    path = tmp_path / "config.json"
    path.write_text(text)
    _one_line(_run("fit", "--model", str(path), "--gpu", "H100-SXM", "--ctx", "4096"),
              "appears twice")


# -- secret references with meaning ------------------------------------------------------------
@pytest.mark.parametrize(("ref", "says"), [
    ("file:/dev/zero", "not under /proc, /sys or /dev"),
    ("file:/proc/self/environ", "not under /proc, /sys or /dev"),
    ("file:/etc/../etc/shadow", "no '.' or '..' segments"),
    ("file:relative/key", "absolute path"),
    ("file:/etc/advisor/key\n", "absolute path"),
])
def test_file_references_must_mean_a_file(tmp_path, ref, says):
    res = _run("render", "--model", "qwen3-8b", "--ctx", "4096", "--instance",
               "aws:g6e.2xlarge", "--api-key-ref", ref, "--out", str(tmp_path / "out"))
    _one_line(res, says)
    assert not (tmp_path / "out").exists()


def test_a_raw_secret_given_as_a_reference_is_never_echoed(tmp_path):
    secret = "sk-live-9f8e7d6c5b4a3f2e1d0c"
    res = _run("render", "--model", "qwen3-8b", "--ctx", "4096", "--instance",
               "aws:g6e.2xlarge", "--api-key-ref", secret, "--out", str(tmp_path / "out"))
    _one_line(res, "not a reference")
    assert secret not in res.stderr + res.stdout


@pytest.mark.parametrize(("content", "says"), [
    ("", "empty or blank"), ("   \n\t\n", "empty or blank"), ("None\n", "not a key"),
    ("null", "not a key"),
])
def test_the_launcher_refuses_a_key_that_is_not_one(tmp_path, content, says):
    key = tmp_path / "key"
    key.write_text(content)
    env = {"PATH": os.environ["PATH"], "ADVISOR_GPUS": "0", "ADVISOR_MODEL": "m/m",
           "ADVISOR_PORT": "8000", "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096",
           "ADVISOR_GPU_MEM_UTIL": "0.9", "ADVISOR_API_KEY_REF": f"file:{key}",
           "ADVISOR_BUS_IDS": "", "ADVISOR_SYSFS_ROOT": str(tmp_path / "sys"),
           "ADVISOR_VENV": str(tmp_path / "venv")}
    (tmp_path / "sys").mkdir()
    run = subprocess.run(["bash", str(LAUNCH)], env=env, capture_output=True, text=True,
                         timeout=30, check=False)
    assert run.returncode == 1 and says in run.stderr, run.stderr


def test_the_launcher_reads_no_fifo_as_a_key(tmp_path):
    fifo = tmp_path / "key"
    os.mkfifo(fifo)
    env = {"PATH": os.environ["PATH"], "ADVISOR_GPUS": "0", "ADVISOR_MODEL": "m/m",
           "ADVISOR_PORT": "8000", "ADVISOR_TP": "1", "ADVISOR_MAX_MODEL_LEN": "4096",
           "ADVISOR_GPU_MEM_UTIL": "0.9", "ADVISOR_API_KEY_REF": f"file:{fifo}",
           "ADVISOR_BUS_IDS": "", "ADVISOR_SYSFS_ROOT": str(tmp_path / "sys")}
    (tmp_path / "sys").mkdir()
    run = subprocess.run(["bash", str(LAUNCH)], env=env, capture_output=True, text=True,
                         timeout=30, check=False)
    assert run.returncode == 1 and "not a regular file" in run.stderr


# -- addresses, ranges, names ------------------------------------------------------------------
@pytest.mark.parametrize("host", ["00", "0.0", "....", "ffff", "127.1", "010.0.0.1",
                                  "127.0.0.1\n"])
def test_a_host_is_an_ip_address_written_in_full(tmp_path, host):
    res = _run("render", "--model", "qwen3-8b", "--ctx", "4096", "--instance",
               "aws:g6e.2xlarge", "--api-key-ref", "aws-ssm:/advisor/key", "--host", host,
               "--out", str(tmp_path / "out"))
    _one_line(res, "is not an IP address")


def test_the_whole_internet_is_warned_about_from_the_union_of_ranges():
    assert opens_world(["0.0.0.0/1", "128.0.0.0/1"]) == ["0.0.0.0/1 + 128.0.0.0/1"]
    assert opens_world(["0.0.0.0/1", "10.0.0.0/8"]) == []
    assert opens_world(["::/1", "8000::/1", "203.0.113.0/24"]) == ["::/1 + 8000::/1"]
    res = advisor.provision("llama-3-8b", 8192, provider="aws", dry_run=True,
                            api_key_ref="aws-ssm:/advisor/key",
                            hf_token_ref="aws-ssm:/advisor/hf",
                            allow_cidrs=["0.0.0.0/1", "128.0.0.0/1"])
    assert any("0.0.0.0/1 + 128.0.0.0/1 open the vLLM port(s) to the whole internet" in w
               for w in res.warnings), res.warnings


@pytest.mark.parametrize("name", ["", "UPPER", "a b", "x\n", "-lead"])
def test_down_refuses_a_name_no_launch_could_have_made_before_any_sweep(tmp_path, name):
    t0 = time.monotonic()
    res = _run("down", "--yes", "--", name, env={"ADVISOR_HOME": str(tmp_path)})
    _one_line(res, "is not usable on every cloud")
    assert time.monotonic() - t0 < 10  # no region was swept


def test_escapes_in_echoed_input_never_reach_the_terminal():
    res = _run("recommend", "--model", "llama-3-8b", "--ctx", "8192", "--region",
               "x\x1b]0;pwned\x07\x1b[2Jy")
    assert res.returncode == 2 and "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "\\x1b" in res.stderr


@pytest.mark.parametrize("value", ["llama-3-8b\n", "meta-llama/Llama-3.1-8B\n"])
def test_a_trailing_newline_passes_no_pattern(tmp_path, value):
    res = _run("render", "--model", value, "--ctx", "4096", "--instance", "aws:g6e.2xlarge",
               "--api-key-ref", "aws-ssm:/advisor/key", "--out", str(tmp_path / "out"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


# -- the SDK's door ----------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "says"), [
    (lambda: advisor.fit("llama-3-8b", 123), "gpu must be str"),
    (lambda: advisor.estimate("llama-3-8b", None, input_len=1, output_len=1), "gpu must be str"),
    (lambda: advisor.boot_status(123), "dep must be Deployment"),
    (lambda: advisor.load_catalog(environ=["x"]), "environ must be"),
    (lambda: advisor.engine_profile(1.5), "version must be"),
    (lambda: advisor.recommend("llama-3-8b", "8192"), "ctx"),
])
def test_the_sdk_answers_a_wrong_type_with_a_user_input_error(call, says):
    with pytest.raises(advisor.UserInputError, match=says):
        call()


def test_a_bus_id_is_never_turned_into_an_emoji():
    """rich reads ':ab:' as an emoji code: 0000:ab:00.0 printed as 0000🆎00.0."""
    res = _run("topology", "--sysfs-root", "/nonexistent-root-for-the-test")
    assert "\U0001f18e" not in res.stderr + res.stdout
    import contextlib
    import io

    from advisor.cli import output as out

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out._consoles.cache_clear()
        out.line("GPU 0000:ab:00.0 on node 1")
    out._consoles.cache_clear()
    assert "0000:ab:00.0" in buf.getvalue()


# -- what doctor prints, people paste ---------------------------------------------------------
@pytest.mark.parametrize("name", ["x;touch $(id).service", "a b.service", "x\n.service",
                                  "$(reboot).service", "${IFS}x.service", "`id`.service"])
def test_a_cgroup_name_that_is_no_unit_name_never_reaches_a_fix(name):
    from advisor.host.doctor import _unit

    assert _unit(f"0::/system.slice/{name}") is None
    assert _unit("0::/system.slice/vllm@0.service") == "vllm@0.service"


@pytest.mark.parametrize("argv", [
    ["--api-key", "s3cret"], ["--api-key=s3cret"], ["--api_key", "s3cret"],
    ["--api_key=s3cret"], ["--api-k", "s3cret"], ["--api-ke=s3cret"], ["--hf_token", "s3cret"],
    ["--hf-tok=s3cret"],
])
def test_every_spelling_vllm_accepts_for_a_secret_flag_is_redacted(argv):
    from advisor.host.doctor import _has, redact

    shown = redact(["vllm", "serve", "m", *argv])
    assert "s3cret" not in " ".join(shown)
    if "api" in argv[0]:
        assert _has(["vllm", "serve", "m", *argv], "--api-key")  # so: a key is set


# -- state that never blocks with an internal error ----------------------------------------------
def _sqlite(path: Path, *stmts: str) -> None:
    import sqlite3

    db = sqlite3.connect(path)
    for s in stmts:
        db.execute(s)
    db.commit()
    db.close()


@pytest.mark.parametrize("command", [["status"], ["down", "x", "--yes"]])
def test_another_programs_database_is_refused_and_left_untouched(tmp_path, command):
    _sqlite(tmp_path / "state.db", "create table foo(x)")
    res = _run(*command, env={"ADVISOR_HOME": str(tmp_path)})
    _one_line(res, "another program's SQLite database")
    import sqlite3

    db = sqlite3.connect(tmp_path / "state.db")
    assert [r[0] for r in db.execute("select name from sqlite_master")] == ["foo"]
    db.close()


def test_a_replaced_table_is_one_line_not_an_internal_error(tmp_path):
    assert _run("status", env={"ADVISOR_HOME": str(tmp_path)}).returncode == 0
    _sqlite(tmp_path / "state.db", "drop table deployments",
            "create table deployments(weird int)")
    for command in (["status"], ["down", "x", "--yes"]):
        _one_line(_run(*command, env={"ADVISOR_HOME": str(tmp_path)}),
                  "its table deployments lacks the columns")


@pytest.mark.parametrize(("region", "provider"), [
    ("mars-1 ; rm", "aws"), ("../x", "aws"), (7, "aws"), ("us-east-1", "oracle"),
    ("us-east-1\n", "aws"),
])
def test_a_damaged_event_is_skipped_with_a_word_not_a_stop(tmp_path, capsys, region, provider):
    from advisor.provisioning import _places
    from advisor.state import Store

    st = Store(tmp_path / "state.db")
    st.begin("dmg", "aws", "llama-3-8b", 8192, {"region": "us-west-2"})
    st.event("dmg", "intent", "launch", {"region": region, "provider": provider})
    st.event("dmg", "intent", "launch", {"region": "eu-west-1", "provider": "aws"})
    dep = st.get("dmg")
    assert dep is not None
    places = _places(st, dep)
    assert ("aws", "eu-west-1") in places  # the rest is still found
    assert all(isinstance(r, str) and "\n" not in r and " " not in r for _, r in places)
    assert all(p in ("aws", "gcp", "azure") for p, _ in places)
    assert "no place advisor launches: skipped" in capsys.readouterr().err


# -- two launchers, two state files: the cloud-side token ---------------------------------------
def test_two_state_files_ask_aws_with_the_same_client_token(tmp_path):
    """AWS makes one instance per ClientToken (a repeat with other parameters is refused with
    IdempotentParameterMismatch). Two launches of one name from two state files — two attempt
    ids — send the same token, so the second cannot make a second instance."""
    bodies = []
    for home in ("a", "b"):
        from advisor.state import Store

        res = advisor.provision("llama-3-8b", 8192, provider="aws", dry_run=True,
                                name="twice", api_key_ref="aws-ssm:/advisor/key",
                                hf_token_ref="aws-ssm:/advisor/hf",
                                store=Store(tmp_path / home / "state.db"))
        run = next(c for c in res.requests[0]["calls"] if c["call"] == "ec2.RunInstances")
        bodies.append(run["body"])
    tokens = [b.get("ClientToken") for b in bodies]
    assert tokens[0] and tokens[0] == tokens[1]
    # a token that names the state file or the attempt would let each launcher make its own
    assert "state.db" not in tokens[0] and len(tokens[0]) <= 64


def test_a_repeated_token_is_one_line_that_says_where_the_first_launch_is():
    from botocore.exceptions import ClientError

    from advisor.clouds.aws.compute import AwsProvider

    exc = ClientError({"Error": {"Code": "IdempotentParameterMismatch",
                                 "Message": "token used with other parameters"}},
                      "RunInstances")
    err = AwsProvider().classify(exc)
    assert err.code == "IdempotentParameterMismatch" and err.scope == "fatal"
    assert "advisor down NAME" in (err.hint or "")
