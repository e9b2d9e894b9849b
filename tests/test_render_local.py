"""``render --target local`` and ``--gpu local``: a host laid out from its probe (issue 19).

The two-node fake host (8 x H100 SXM, PCI device 0x2330, nodes 0-1) must get the same layout,
env files and launcher lines as the cloud path gives an identical catalog entry; ``--print``
must print exactly what the launcher's dry run prints on the same tree; bad probes are one
line and exit 2. The catalog's ``pci_device_ids`` are given by a catalog layer here, so the
tests hold whatever the bundled gpus.yaml records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import advisor
from advisor import UserInputError
from advisor.host.local import identify_gpu, load_probe, local_instance
from advisor.host.topology import probe
from advisor.render.cloudinit import RenderRequest, render
from advisor.render.envlock import lock_text, supported
from advisor.render.local import bash_quote, launch_lines
from tests.test_render import LAUNCH, need
from tests.test_topology import EIGHT, make_sysfs

TWO_NODES = {0: "0-47", 1: "48-95"}
MEM_KB = 264_000_000
NODE_GIB = round(MEM_KB / 2**20, 2)

LAYER = {
    # the PCI ids, whatever the bundled gpus.yaml says (its data lands separately)
    "gpus.yaml": """
        gpus:
          - id: H100-SXM
            pci_device_ids: ["0x2330"]
    """,
    # the cloud path's twin of the fake host: same vCPUs, GPUs, NUMA map, sockets, SMT
    "instances/onprem.yaml": f"""
        schema_version: 1
        provider: onprem
        instances:
          - name: twin
            vcpus: 96
            memory_gib: {2 * NODE_GIB}
            gpu: {{model: H100-SXM, count: 8}}
            cpu: {{sockets: 2}}
            numa: {{nodes: 2, gpu_nodes: [0, 0, 0, 0, 1, 1, 1, 1]}}
            host: {{numa_domains_per_socket: 1, smt_siblings_exposed: false}}
            price: {{on_demand_usd_per_hour: 31.5, region: lab, as_of: 2026-11-30}}
            sources:
              default:
                source: "the fake host of tests/test_render_local.py"
                as_of: 2026-11-30
                confidence: measured
    """,
}


def add_cpus(root: Path, sockets: dict[int, str]) -> Path:
    """CPU topology without SMT: each CPU its own core, on the socket of its cpulist."""
    from advisor.host.topology import parse_cpulist

    for sock, cpus in sockets.items():
        for c in parse_cpulist(cpus):
            d = root / "sys/devices/system/cpu" / f"cpu{c}" / "topology"
            d.mkdir(parents=True)
            (d / "thread_siblings_list").write_text(f"{c}\n")
            (d / "physical_package_id").write_text(f"{sock}\n")
    return root


def set_device(root: Path, bus: str, device: str) -> None:
    (root / "sys/bus/pci/devices" / bus / "device").write_text(device + "\n")


@pytest.fixture
def layer(make_catalog) -> Path:
    return make_catalog(LAYER, name="layer")


@pytest.fixture
def cat(layer):
    return advisor.load_catalog([layer])


@pytest.fixture
def host(tmp_path) -> Path:
    """The two-node fake host: 8 x H100 SXM (0x2330), GPUs 0-3 on node 0, 4-7 on node 1."""
    return add_cpus(make_sysfs(tmp_path / "host", TWO_NODES, EIGHT, mem_kb=MEM_KB), TWO_NODES)


def bus_ids(topo) -> str:
    """nvidia-smi's form of the probe's bus ids (what ADVISOR_BUS_IDS stands in for)."""
    return ",".join("00000000:" + g.bus_id.split(":", 1)[1].upper() for g in topo.gpus)


def dry_run(sysfs: Path, env_text: str, bus: str) -> str:
    env = {"PATH": os.environ["PATH"], "ADVISOR_DRY_RUN": "1", "ADVISOR_SYSFS_ROOT": str(sysfs),
           "ADVISOR_BUS_IDS": bus}
    env.update(line.split("=", 1) for line in env_text.splitlines())
    r = subprocess.run(["bash", str(LAUNCH)], capture_output=True, text=True, env=env,
                       timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.rstrip("\n")


def envs(files: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if k.startswith("env/")}


# -- the instance the probe makes ---------------------------------------------------------------
def test_local_instance_from_the_two_node_host(host, cat):
    topo = probe(host)
    inst = local_instance(topo, cat)
    assert inst.key == "local:local" and inst.gpu.model == "H100-SXM" and inst.gpu.count == 8
    assert inst.vcpus == 96 and inst.memory_gib == pytest.approx(2 * NODE_GIB)
    assert inst.numa.nodes == 2 and inst.numa.gpu_nodes == [0, 0, 0, 0, 1, 1, 1, 1]
    assert inst.cpu.sockets == 2 and inst.host.smt_siblings_exposed is False
    assert inst.host.numa_domains_per_socket == 1
    src = inst.sources["default"]
    assert src.source.startswith("probe of this host, 20") and src.confidence == "measured"
    seen = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=host,
                                catalog=cat).instance.sources["default"].source
    assert seen.startswith(f"probe of the sysfs tree {host}, ")
    assert "0x2330" in inst.sources["gpu.model"].source
    assert identify_gpu(topo, cat)[0] == "H100-SXM"
    # the twin in the catalog says the same about the host (its price aside)
    twin = cat.instance("onprem:twin")
    for field in ("vcpus", "memory_gib", "gpu", "cpu", "numa", "host"):
        assert getattr(inst, field) == getattr(twin, field), field


def test_a_hidden_node_is_null_never_node_0(tmp_path, cat):
    root = make_sysfs(tmp_path, {0: "0-7"}, [("0000:00:1e.0", -1)])
    inst = local_instance(probe(root), cat)
    assert inst.numa.gpu_nodes == [None] and inst.vcpus == 8 and inst.cpu.sockets is None


# -- the same binding as the cloud path ---------------------------------------------------------
@pytest.mark.parametrize("model,ctx,tp,version", [
    ("qwen3-8b", 8192, None, "0.11.0"),   # the ranking's choice
    ("qwen3-8b", 8192, 4, "0.11.0"),      # two TP-4 replicas, one per node
    ("qwen3-8b", 8192, 1, "0.11.0"),      # eight, four per node
    ("qwen3-8b", 8192, 8, "0.11.0"),      # one replica over both nodes: interleaved
    ("qwen3-8b", 8192, 8, "0.21.0"),      # the same with vLLM's --numa-bind
    ("qwen3-32b", 32768, None, "0.11.0"),
    ("qwen3-235b-a22b-fp8", 8192, 8, "0.11.0"),  # TP 8 only with --enable-expert-parallel
])
def test_local_gives_the_binding_of_the_identical_catalog_entry(host, cat, model, ctx, tp,
                                                                version):
    ref = "file:/etc/advisor/api-key"
    local = advisor.render_files(model, ctx, target="local", sysfs_root=host, tp=tp,
                                 vllm_version=version, catalog=cat)
    if (version, "3.10") in supported():
        cloud = advisor.render_files(model, ctx, instance="onprem:twin", tp=tp,
                                     vllm_version=version, api_key_ref=ref, catalog=cat)
    else:
        # no frozen environment ships for this release: its cloud-init is refused (issue 27),
        # the rest of the files are the same rules, rendered without the user-data
        with pytest.raises(UserInputError, match="no frozen environment"):
            advisor.render_files(model, ctx, instance="onprem:twin", tp=tp,
                                 vllm_version=version, api_key_ref=ref, catalog=cat)
        lower = advisor.render_files(model, ctx, instance="onprem:twin", tp=tp, api_key_ref=ref,
                                     catalog=cat)
        req = RenderRequest(model=json.loads(lower.files["plan.json"])["model"],
                            max_model_len=ctx, vllm_version=version, api_key_ref=ref,
                            start_timeout_s=json.loads(lower.files["plan.json"])[
                                "start_timeout_s"])
        cloud = lower.model_copy(update={"files": render(lower.instance, lower.plan, req,
                                                         user_data=False)})
    assert local.plan == cloud.plan
    assert envs(local.files) == envs(cloud.files)  # the key ref is the local default
    for name in ("vllm@.service", "vllm-launch.sh", "vllm-health.sh"):
        assert local.files[name] == cloud.files[name]
    assert "user-data" not in local.files and "install.sh" in local.files
    topo = probe(host)
    bus = bus_ids(topo)
    lines = [c.command for c in local.commands]
    assert len(lines) == len(envs(cloud.files)) == cloud.plan.replicas
    for i in range(cloud.plan.replicas):
        launcher = dry_run(host, cloud.files[f"env/vllm-{i}.env"], bus)
        assert launcher == lines[i], i


def test_tp4_on_the_two_node_host_binds_one_replica_per_node(host, cat):
    r = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=host, tp=4,
                             catalog=cat)
    assert [c.nodes for c in r.commands] == [[0], [1]]
    assert [c.omp_threads for c in r.commands] == [48, 48]
    assert r.commands[1].command == (
        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4\\,5\\,6\\,7 OMP_NUM_THREADS=48 "
        "VLLM_API_KEY=<from file:/etc/advisor/api-key> numactl --cpunodebind=1 --membind=1 "
        "/opt/advisor/venv/bin/vllm serve Qwen/Qwen3-8B --host 127.0.0.1 --port 8001 "
        "--tensor-parallel-size 4 --max-model-len 8192 --gpu-memory-utilization 0.9")
    plan = json.loads(r.files["plan.json"])
    assert plan["instance"] == "local:local" and plan["api_key_ref"] == "file:/etc/advisor/api-key"


# -- --print and the launcher, on the same trees ------------------------------------------------
def _trees(tmp: Path) -> dict[str, tuple[Path, int | None]]:
    """name -> (sysfs tree, --tp)"""
    one = make_sysfs(tmp / "one", {0: "0-7"}, [("0000:00:1e.0", 0)])
    hidden = make_sysfs(tmp / "hidden", {0: "0-7"}, [("0000:00:1e.0", -1)])
    # four GPUs, one of them hidden: its replica runs unbound, the others bound
    part = make_sysfs(tmp / "part", {0: "0-15", 1: "16-31"},
                      [("0000:18:00.0", 0), ("0000:2a:00.0", -1), ("0000:9a:00.0", 1),
                       ("0000:ab:00.0", 1)])
    two = add_cpus(make_sysfs(tmp / "two", TWO_NODES, EIGHT), TWO_NODES)
    return {"tp4": (two, 4), "tp1": (two, 1), "tp8": (two, 8), "hidden": (hidden, None),
            "one-gpu": (one, None), "part-hidden": (part, 1)}


@pytest.mark.parametrize("case", ["tp4", "tp1", "tp8", "hidden", "one-gpu", "part-hidden"])
@pytest.mark.parametrize("version", ["0.11.0", "0.21.0"])
def test_print_equals_the_launchers_dry_run(tmp_path, cli, layer, case, version):
    root, tp = _trees(tmp_path)[case]
    args = ["render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--sysfs-root",
            str(root), "--catalog", str(layer), "--vllm-version", version, "--print",
            "--hf-token-ref", "file:/etc/advisor/hf-token", "--allow-small-host"]
    r = cli(*args, *(["--tp", str(tp)] if tp else []))
    assert r.exit_code == 0, r.output
    printed = r.stdout.splitlines()
    res = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=root, tp=tp,
                               vllm_version=version, hf_token_ref="file:/etc/advisor/hf-token",
                               allow_small_host=True, catalog=advisor.load_catalog([layer]))
    bus = bus_ids(probe(root))
    launcher = [dry_run(root, res.files[f"env/vllm-{i}.env"], bus)
                for i in range(res.plan.replicas)]
    assert printed == launcher
    assert not list(tmp_path.glob("**/install.sh"))  # --print writes nothing
    if case in ("hidden", "part-hidden"):
        assert "(hidden by the host); running unbound" in r.stderr
        assert any("OMP_NUM_THREADS=unset" in x and "numactl" not in x for x in printed)
    if case == "tp8":
        assert ("--numa-bind" in printed[0]) == (version == "0.21.0")


def test_print_json(host, cli, layer):
    r = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--sysfs-root",
            str(host), "--catalog", str(layer), "--tp", "4", "--print", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)
    assert v["instance"] == "local:local" and v["gpu"] == "H100-SXM" and v["replicas"] == 2
    assert [c["binding"] for c in v["commands"]] == ["numactl node 0", "numactl node 1"]
    assert [c["port"] for c in v["commands"]] == [8000, 8001]


def test_bash_quote_is_printf_q():
    words = ["", "plain", "0,1,2,3", "a b", "#x", "x#", "~x", "a=~b", "a:~b", "x~", "$HOME",
             "a'b\"c", "(x)", "[x]", "{x}", "a;b|c&d", "<x>", "*?", "^`!", "\\", "a=b:c/d.e-f_g@h"]
    r = subprocess.run(["bash", "-c", 'for w in "$@"; do printf "%q\\n" "$w"; done', "_", *words],
                       capture_output=True, text=True, check=True)
    assert r.stdout.splitlines() == [bash_quote(w) for w in words]


# -- the saved probe ----------------------------------------------------------------------------
def test_a_saved_probe_gives_what_the_live_one_gives(host, cli, layer, tmp_path):
    saved = cli("topology", "--sysfs-root", str(host), "--json")
    assert saved.exit_code == 0
    f = tmp_path / "topo.json"
    f.write_text(saved.stdout)
    assert json.loads(saved.stdout)["kind"] == "advisor-topology"
    live = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local",
               "--sysfs-root", str(host), "--catalog", str(layer), "--print")
    kept = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local",
               "--probe", str(f), "--catalog", str(layer), "--print")
    assert kept.exit_code == 0, kept.output
    assert kept.stdout == live.stdout and len(kept.stdout.splitlines()) == 8
    # a file from before the probe named its kind: accepted
    old = json.loads(saved.stdout)
    del old["kind"]
    f.write_text(json.dumps(old))
    assert load_probe(f) == load_probe(tmp_path / "topo.json")
    assert load_probe(f).gpus == probe(host).gpus


def test_render_local_writes_the_files(host, cli, layer, tmp_path):
    out = tmp_path / "out"
    r = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--sysfs-root",
            str(host), "--catalog", str(layer), "--tp", "4", "--out", str(out))
    assert r.exit_code == 0, r.output
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert names == ["env/vllm-0.env", "env/vllm-1.env", "install.sh",
                     "locks/requirements-cp310.txt", "locks/requirements-cp311.txt", "plan.json",
                     "vllm-health.sh", "vllm-launch.sh", "vllm-report.sh", "vllm@.service"]
    # the frozen environments, byte for byte the cloud's (install.sh takes the host's Python's)
    assert (out / "locks/requirements-cp311.txt").read_text() == lock_text("0.11.0", "3.11")
    assert os.access(out / "install.sh", os.X_OK)
    assert "2 replica(s) of TP 4" in r.stdout and "sudo" in r.stdout
    assert "ADVISOR_API_KEY_REF=file:/etc/advisor/api-key" in (out / "env/vllm-0.env").read_text()
    assert "$" not in (out / "plan.json").read_text()  # no price shown anywhere
    for p in out.rglob("*"):
        assert not p.is_file() or "usd" not in p.read_text()


# -- install.sh ---------------------------------------------------------------------------------
def _install(host: Path, cat, **kw) -> str:
    return advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=host, tp=4,
                                catalog=cat, **kw).files["install.sh"]


def test_install_sh_passes_shellcheck(host, cat, tmp_path):
    exe = need("shellcheck")
    for i, kw in enumerate([{}, {"hf_token_ref": "file:/etc/advisor/hf-token"},
                            {"api_key_ref": "aws-ssm:/advisor/vllm-api-key"}]):
        f = tmp_path / f"install-{i}.sh"
        f.write_text(_install(host, cat, **kw))
        r = subprocess.run([exe, str(f)], capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stdout


def test_install_sh_writes_and_prints_no_key(host, cat):
    text = _install(host, cat)
    assert "key_ref=file:/etc/advisor/api-key" in text
    assert "VLLM_API_KEY" not in text and "cat " not in text  # the key is never read here
    assert "vllm==0.11.0" in text or "vllm==$vllm_version" in text


def test_install_sh_refuses_without_root(host, cat, tmp_path):
    import tempfile

    from advisor.render.cloudinit import write

    files = advisor.render_files("qwen3-8b", 8192, target="local", sysfs_root=host,
                                 catalog=cat).files
    cmd: list[str] = ["bash"]
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        if runuser is None or subprocess.run(["id", "nobody"], capture_output=True).returncode:
            pytest.skip("no runuser or no user 'nobody' to run it unprivileged")
        cmd = [runuser, "-u", "nobody", "--", "bash"]
    # a folder the unprivileged user can read (pytest's tmp_path is root's alone)
    top = Path(tempfile.mkdtemp(prefix="advisor-install-"))
    try:
        top.chmod(0o755)
        folder = top / "files"
        write(files, folder)
        folder.chmod(0o755)
        r = subprocess.run([*cmd, str(folder / "install.sh")], capture_output=True, text=True,
                           timeout=30, check=False)
    finally:
        shutil.rmtree(top)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"install.sh: run it as root (sudo {folder / 'install.sh'}): it creates a user and "
        "system units"]


# -- --gpu local -------------------------------------------------------------------------------
def test_fit_perf_and_recommend_take_the_local_gpu(host, cli, layer, tmp_path):
    fit = cli("fit", "-m", "qwen3-8b", "--gpu", "local", "--sysfs-root", str(host), "--ctx",
              "8192", "--catalog", str(layer), "--json")
    assert fit.exit_code == 0, fit.output
    assert json.loads(fit.stdout)["gpu"] == "H100-SXM" and "--gpu local is H100-SXM" in fit.stderr
    saved = tmp_path / "topo.json"
    saved.write_text(cli("topology", "--sysfs-root", str(host), "--json").stdout)
    perf = cli("perf", "-m", "qwen3-8b", "--gpu", "local", "--probe", str(saved),
               "--input-len", "1000", "--output-len", "100", "--catalog", str(layer), "--json")
    assert perf.exit_code == 0, perf.output
    rec = cli("recommend", "-m", "qwen3-8b", "--ctx", "8192", "--gpu", "local", "--probe",
              str(saved), "--catalog", str(layer), "--top", "50", "--json")
    assert rec.exit_code == 0, rec.output
    picks = json.loads(rec.stdout)
    assert picks and {p["gpu"] for p in picks} == {"H100-SXM"}
    assert advisor.api.local_gpu(probe=saved, catalog=advisor.load_catalog([layer]))[0] \
        == "H100-SXM"


# -- bad input ---------------------------------------------------------------------------------
def _bad_probes(tmp: Path, host: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, what stderr says)"""
    good = probe(host).model_dump()
    files: dict[str, tuple[object, str]] = {
        "package-json": ({"name": "left-pad", "version": "1.3.0", "main": "index.js"},
                         "not advisor's topology JSON"),
        "array": ([good], "a JSON array, not an object"),
        "kind": ({**good, "kind": "advisor-doctor"}, "its kind is 'advisor-doctor'"),
        "node-id": ({**good, "nodes": [{**good["nodes"][0], "id": -1}]}, "node id -1"),
        "cpu": ({**good, "nodes": [{**good["nodes"][0], "cpus": [10**9]}]}, "cpus"),
        "bus-id": ({**good, "gpus": [{**good["gpus"][0], "bus_id": "0000:18:00.0;id"}]},
                   "is not a PCI address"),
        "index": ({**good, "gpus": good["gpus"][1:]}, "GPU 0 has index 1"),
        "gpu-node": ({**good, "gpus": [{**good["gpus"][0], "numa_node": 10**6}]},
                     "numa_node"),
        "no-gpu": ({**good, "gpus": []}, "shows no GPU"),
        "unknown-id": ({**good, "gpus": [{**g, "device_id": "0x9999"} for g in good["gpus"]]},
                       "PCI device 0x9999 of vendor nvidia is in no catalog GPU"),
        "mixed": ({**good, "gpus": [{**g, "device_id": "0x26b9" if g["index"] else "0x2330"}
                                    for g in good["gpus"]]}, "of 2 models"),
        "no-device": ({**good, "gpus": [{**g, "device_id": None} for g in good["gpus"]]},
                      "read no PCI device id"),
        "nodes-str": ({"nodes": "x", "gpus": [], "nics": []}, "nodes: Input should be"),
    }
    out: dict[str, tuple[Path, str]] = {}
    for name, (data, needle) in files.items():
        p = tmp / f"{name}.json"
        p.write_text(json.dumps(data))
        out[name] = (p, needle)
    big = tmp / "big.json"
    big.write_text('{"kind": "advisor-topology", "warnings": ["' + "x" * (5 * 2**20) + '"]}')
    out["5-mib"] = (big, "more than the 4,194,304 accepted")
    deep = tmp / "deep.json"
    deep.write_text('{"nodes":' + "[" * 40 + "]" * 40 + ',"gpus":[],"nics":[]}')
    out["deep"] = (deep, "nested deeper than 16")
    return out


BAD = ["package-json", "array", "kind", "node-id", "cpu", "bus-id", "index", "gpu-node",
       "no-gpu", "unknown-id", "mixed", "no-device", "nodes-str", "5-mib", "deep"]


@pytest.mark.parametrize("name", BAD)
def test_a_probe_that_is_not_advisors_is_one_line_exit_2(host, cli, layer, tmp_path, name):
    (tmp_path / "bad").mkdir()
    f, needle = _bad_probes(tmp_path / "bad", host)[name]
    out = tmp_path / "out"
    for args in (["render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--out",
                  str(out)], ["fit", "-m", "qwen3-8b", "--ctx", "8192", "--gpu", "local"]):
        r = cli(*args, "--probe", str(f), "--catalog", str(layer))
        assert r.exit_code == 2, (name, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert needle in r.stderr, (name, r.stderr)
        assert not out.exists()
    if name in ("unknown-id", "mixed", "no-device"):
        assert "--gpu MODEL" in r.stderr
        ok = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--probe",
                 str(f), "--catalog", str(layer), "--gpu", "H100-SXM", "--print")
        assert ok.exit_code == 0, ok.output


def test_an_ambiguous_id_asks_for_the_model(host, cli, make_catalog):
    both = make_catalog({"gpus.yaml": """
        gpus:
          - id: H100-SXM
            pci_device_ids: ["0x2330"]
          - id: H200
            pci_device_ids: ["0x2330"]
    """})
    r = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--sysfs-root",
            str(host), "--catalog", str(both), "--print")
    assert r.exit_code == 2 and "H100-SXM, H200 in the catalog: ambiguous" in r.stderr
    assert "--gpu MODEL" in r.stderr
    fam = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--target", "local", "--sysfs-root",
              str(host), "--catalog", str(both), "--print", "--gpu", "H100")
    assert fam.exit_code == 2 and "--gpu H100 matches" in fam.stderr


@pytest.mark.parametrize("args,needle", [
    (["--probe", "{F}", "--out", "{OUT}"], "--probe is for --target local"),
    (["--target", "local", "--instance", "onprem:twin", "--print"], "--instance names"),
    (["--print"], "--print is for --target local"),
    (["--target", "local", "--print", "--out", "{OUT}"], "--print writes nothing"),
    (["--target", "local"], "--out is needed"),
    (["--target", "local", "--probe", "{F}", "--sysfs-root", "/", "--print"],
     "--probe or --sysfs-root, not both"),
    (["--target", "local", "--probe", "/nonexistent/topo.json", "--print"], "no such file"),
    (["--target", "local", "--sysfs-root", "/nonexistent/x", "--print"], "is not a directory"),
    (["--target", "nowhere", "--out", "{OUT}"], "is not cloud-init, k8s or local"),
])
def test_render_local_flags(host, cli, layer, tmp_path, args, needle):
    f = tmp_path / "topo.json"
    f.write_text(cli("topology", "--sysfs-root", str(host), "--json").stdout)
    out = tmp_path / "out"
    argv = [a.replace("{F}", str(f)).replace("{OUT}", str(out)) for a in args]
    r = cli("render", "-m", "qwen3-8b", "--ctx", "8192", "--catalog", str(layer), *argv)
    assert r.exit_code == 2 and needle in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_probe_goes_with_gpu_local(cli, tmp_path):
    r = cli("fit", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--ctx", "8192", "--probe",
            str(tmp_path / "x.json"))
    assert r.exit_code == 2 and "--probe goes with --gpu local" in r.stderr
    r = cli("recommend", "-m", "qwen3-8b", "--ctx", "8192", "--sysfs-root", "/")
    assert r.exit_code == 2 and "--sysfs-root goes with --gpu local" in r.stderr


def test_sdk_errors_are_user_input_errors(host, cat):
    with pytest.raises(UserInputError, match="not advisor's topology JSON"):
        load_probe({"name": "x"})
    with pytest.raises(UserInputError, match="shows no GPU"):
        local_instance(probe(host).model_copy(update={"gpus": []}), cat)
    with pytest.raises(UserInputError, match="for --target local"):
        advisor.render_files("qwen3-8b", 8192, sysfs_root=host, catalog=cat)
    assert launch_lines({}, probe(host)) == []


def test_a_gated_model_on_this_host_asks_for_a_token_file(host, cat):
    # the server is this host: the hint is a file the vllm service user can read, not a
    # cloud's secret store (it named aws-ssm/gcp-secret/azure-kv before)
    with pytest.raises(advisor.UserInputError, match="the server needs a Hugging Face token") as e:
        advisor.render_files("llama-3-8b", 8192, target="local", sysfs_root=host, catalog=cat)
    hint = e.value.hint or ""
    assert "--hf-token-ref file:/etc/advisor/hf-token" in hint and "root:vllm" in hint
    assert "aws-ssm" not in hint
    with pytest.raises(advisor.UserInputError, match="the instance needs") as e:
        advisor.render_files("llama-3-8b", 8192, catalog=cat)  # cloud-init: the secret store
    assert "cloud's secret store" in (e.value.hint or "")
