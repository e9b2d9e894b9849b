"""``advisor doctor``'s monitoring contract (issue 32): ``--check`` exit codes by cause,
``--ignore CODE``, the versioned JSON and its shipped JSON Schema, and bad input as one line
with exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from advisor.host.doctor import CODES, EXIT_CODES, SCHEMA, diagnose, json_schema
from tests.doctor_trees import FakeProc, make_host, make_proc
from tests.test_doctor import GPUS, KEYED, NODES, SERVE, _tp4, host, tp1

DOCS = Path(__file__).resolve().parents[1] / "docs" / "own-server.md"

#: g5.48xlarge: 8 A10G, 192 vCPUs on 2 sockets, every GPU's numa_node -1 (the public lstopo /
#: sysfs printouts the issue's scenarios were built from)
G5_NODES = {0: "0-47,96-143", 1: "48-95,144-191"}
G5_GPUS = [(f"0000:{b}:00.0", -1) for b in ("16", "17", "18", "19", "1a", "1b", "1c", "1d")]


def g5_server() -> list[FakeProc]:
    """A correctly run TP 8 server: keyed, loopback, the whole host's CPUs, each worker on
    its own GPU's device file."""
    argv = [*SERVE, "--tensor-parallel-size", "8"]
    env = {**KEYED, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    all_cpus = "0-191"
    procs = [FakeProc(pid=100, argv=argv, env=env, cpus=all_cpus),
             FakeProc(pid=101, ppid=100, argv=["VLLM::EngineCore"], env=env, cpus=all_cpus)]
    procs += [FakeProc(pid=110 + r, ppid=101, argv=[f"VLLM::Worker_TP{r}"], env=env,
                       cpus=all_cpus, maps=[("default", {0: 50, 1: 50})], nvidia_minors=[r])
              for r in range(8)]
    return procs


def run(cli, root: Path, *args: str):
    return cli("doctor", "--proc-root", str(root), "--sysfs-root", str(root), *args)


def test_check_exit_code_per_cause(tmp_path, cli):
    cases = {
        0: host(tmp_path / "ok", tp1("0-7", [("bind:0", {0: 5})])),
        1: host(tmp_path / "findings", tp1("8-15", [("bind:0", {0: 5})])),
        3: host(tmp_path / "none", [FakeProc(pid=1, argv=["/sbin/init"])]),
        4: host(tmp_path / "unverified", g5_server(), nodes=G5_NODES, gpus=G5_GPUS),
    }
    for rc, root in cases.items():
        r = run(cli, root, "--check")
        assert r.exit_code == rc, (rc, r.stdout, r.stderr)
        assert f"--check: {rc} (" in r.stdout
        body = json.loads(run(cli, root, "--json").stdout)
        assert body["exit_code"] == rc and body["ok"] is (rc == 0)
        assert run(cli, root).exit_code == 0  # without --check: 0 whatever was found
    # the warnings that made 4 are only the ones that keep the binding from being checked
    body = json.loads(run(cli, cases[4], "--json").stdout)
    assert body["status"] == "unverified"
    assert {f["code"] for s in body["servers"] for f in s["findings"]
            if f["severity"] != "info"} == {"gpu-node-hidden"}
    # a finding that is wrong outranks one that says doctor could not look
    mixed = host(tmp_path / "mixed", [*g5_server()[:2], FakeProc(
        pid=110, ppid=101, argv=["VLLM::Worker_TP0"], env={**KEYED, "OMP_NUM_THREADS": "512"},
        cpus="0-191", nvidia_minors=[0])], nodes=G5_NODES, gpus=G5_GPUS)
    assert run(cli, mixed, "--check").exit_code == 1


def test_g5_48xlarge_passes_with_ignore_gpu_node_hidden(tmp_path, cli):
    root = host(tmp_path, g5_server(), nodes=G5_NODES, gpus=G5_GPUS)
    assert run(cli, root, "--check").exit_code == 4
    r = run(cli, root, "--check", "--ignore", "gpu-node-hidden")
    assert r.exit_code == 0, r.stdout
    assert "ignored: gpu-node-hidden" in r.stdout
    body = json.loads(run(cli, root, "--json", "--ignore", "gpu-node-hidden").stdout)
    assert body["ignored"] == ["gpu-node-hidden"] and body["status"] == "ok"
    assert "gpu-node-hidden" not in json.dumps(body["servers"])
    # --ignore is repeatable, and ignoring something else leaves it unverified
    r = run(cli, root, "--check", "--ignore", "numa-balancing", "--ignore", "no-api-key")
    assert r.exit_code == 4
    # a misbinding on the same host is not hidden by ignoring the hidden node
    bad = g5_server()
    bad[0].argv = [*bad[0].argv, "--api-key", "sk-x"]
    root2 = host(tmp_path / "b", bad, nodes=G5_NODES, gpus=G5_GPUS)
    assert run(cli, root2, "--check", "--ignore", "gpu-node-hidden").exit_code == 1


@pytest.mark.parametrize("args,needle", [
    (["--ignore", "no-such-code"], "not a finding code"),
    (["--pid", "99999"], "no such process"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, cli, args, needle):
    root = host(tmp_path, tp1("0-7", [("bind:0", {0: 5})]))
    r = run(cli, root, *args)
    assert r.exit_code == 2 and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_pid_of_a_process_that_is_not_vllm(tmp_path, cli):
    root = host(tmp_path, [FakeProc(pid=1, argv=["/sbin/init", "splash"]),
                           *tp1("0-7", [("bind:0", {0: 5})])])
    r = run(cli, root, "--pid", "1")
    assert r.exit_code == 2
    assert "--pid 1: init is not a vLLM process" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    # this machine's own pid 1, read from the real /proc
    r = cli("doctor", "--pid", "1", "--sysfs-root", str(tmp_path))
    assert r.exit_code == 2 and "is not a vLLM process" in r.stderr, r.stdout


@pytest.mark.parametrize("make,needle", [
    (lambda t: t / "missing", "not a directory"),
    (lambda t: (t / "empty").mkdir() or t / "empty", "no sys/ tree under it"),
    (lambda t: (t / "file").write_text("x") or t / "file", "not a directory"),
])
def test_sysfs_root_without_a_sys_tree(tmp_path, cli, make, needle):
    procs = make_proc(tmp_path / "p", tp1("0-7", [("bind:0", {0: 5})]), [b for b, _ in GPUS])
    r = cli("doctor", "--proc-root", str(procs), "--sysfs-root", str(make(tmp_path)))
    assert r.exit_code == 2 and needle in r.stderr, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


# -- the JSON and its schema ------------------------------------------------------------------

def _scenarios(tmp: Path) -> dict[str, Path]:
    gpus_none = make_host(tmp / "cpu", {0: "0-7"}, [])
    make_proc(gpus_none, [FakeProc(pid=7, argv=SERVE, env={**KEYED,
                                                           "VLLM_CPU_KVCACHE_SPACE": "4"})])
    return {
        "misbound": host(tmp / "a", tp1("8-15", [("interleave:0-1", {0: 5, 1: 5})])),
        "good": host(tmp / "b", tp1("0-7", [("bind:0", {0: 5})])),
        "empty": host(tmp / "c", [FakeProc(pid=1, argv=["/sbin/init"])]),
        "tp4-across": host(tmp / "d", _tp4("0-15")),
        "g5": host(tmp / "e", g5_server(), nodes=G5_NODES, gpus=G5_GPUS),
        "titled-root": host(tmp / "f", [FakeProc(pid=9, argv=["VLLM::APIServer_0"],
                                                 env={"CUDA_VISIBLE_DEVICES": "0"})]),
        "cpu": gpus_none,
    }


def test_json_validates_against_the_shipped_schema(tmp_path, cli):
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    seen_codes: set[str] = set()
    for name, root in _scenarios(tmp_path).items():
        for extra in ([], ["--ignore", "gpu-node-hidden"]):
            r = run(cli, root, "--json", *extra)
            body = json.loads(r.stdout)
            errors = sorted(validator.iter_errors(body), key=str)
            assert not errors, (name, [e.message for e in errors[:3]])
            assert body["schema"] == SCHEMA == "advisor.doctor/1"
            seen_codes |= {f["code"] for s in body["servers"] for f in s["findings"]}
    assert {"cpus-off-node", "gpu-node-hidden", "cpu-only", "argv-replaced",
            "spans-nodes"} <= seen_codes
    # the validator is strict: a key the schema does not describe fails
    body = json.loads(run(cli, _scenarios(tmp_path / "x")["good"], "--json").stdout)
    body["servers"][0]["surprise"] = 1
    assert not validator.is_valid(body)
    body["servers"][0].pop("surprise")
    body["servers"][0]["findings"] = [{"severity": "warning", "code": "made-up", "text": "",
                                       "pids": [], "evidence": [], "fixes": [], "why": ""}]
    assert not validator.is_valid(body)


def test_schema_ships_in_the_package_and_every_key_is_documented():
    from importlib.resources import files

    assert files("advisor.host").joinpath("doctor.schema.json").is_file()
    schema = json_schema()
    doc = DOCS.read_text()
    keys: set[str] = set(schema["properties"])  # type: ignore[arg-type]
    for d in schema["$defs"].values():  # type: ignore[union-attr]
        keys |= set(d.get("properties", {}))
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/own-server.md does not name: {missing}"
    for code, meaning in EXIT_CODES.items():
        assert re.search(rf"\| `?{code}`? \|", doc), f"exit code {code} ({meaning}) undocumented"
    undocumented = sorted(c for c in CODES if f"`{c}`" not in doc)
    assert not undocumented, f"finding codes not in docs/own-server.md: {undocumented}"


def test_report_exit_code_and_ignoring(tmp_path):
    root = host(tmp_path, g5_server(), nodes=G5_NODES, gpus=G5_GPUS)
    report = diagnose(proc_root=root, sysfs_root=root)
    assert report.exit_code == 4 and not report.ok
    quiet = report.ignoring(["gpu-node-hidden"])
    assert quiet.exit_code == 0 and quiet.ok and quiet.ignored == ["gpu-node-hidden"]
    assert report.exit_code == 4  # the original is unchanged
    assert NODES  # the two-node layout the other tests share stays importable
