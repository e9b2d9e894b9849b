"""The hostile-input corpus (issue 18, item 5): bad inputs through the CLI, each must end as
exit 2 with one line on stderr, no traceback, no "internal error", and nothing written where
``--out`` was given. A second list holds inputs that must be ACCEPTED, so that the checks are
not over-tight.

Cases are generated from tables: bad numbers, bad names, bad files, bad references, bad CIDRs,
bad regions, bad config fields, bad sysfs trees. ``{NAME}`` in an argument is a file or folder
made once for the module (see :func:`files`); ``{OUT}`` is a fresh path per case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from advisor.api import model_config
from advisor.cli import app

# -- inputs -------------------------------------------------------------------------------------
BAD_NUMBERS = ["nan", "inf", "-inf", "-1", "0", "1e309", "99999999999999999999999999", "abc",
               ""]
BAD_FLOATS = ["nan", "inf", "-1", "1e309", "abc"]
BAD_NAMES = ["x" * 100_000, "a\0b", "$(rm -rf /)", "`id`", "a;b", "a|b", "\u202eevil", "模型",
             "../../etc/passwd", " ", "a\nb"]
BAD_REGIONS = ["us-east-1;rm", "US EAST", "x" * 1000, "a\0b", "$(id)", "../x"]
BAD_CIDRS = ["10.0.0.0/33", "abc", "0.0.0.0/0;ls", "300.1.1.1/32", "1.2.3.4/-1", "x" * 5000,
             "::/129", "10.0.0.0/8\n"]
BAD_REFS = ["aws-ssm:bad;rm", "http://x", "file:relative", "file:/a b", "aws-ssm:" + "a" * 5000,
            "gcp-secret:$(id)", "azure-kv:", "a\0b"]
#: every provider option the clouds offer, with values that break its pattern
BAD_OPTIONS = {
    "--instance-profile": ["a b", "x" * 200, "a;b", "$(id)"],
    "--project": ["x", "UPPER-case", "a;rm -rf", "p" * 40, "-leading-dash"],
    "--network": ["Net_1", "a;b", "projects/x/global/networks/n", "n" * 70],
    "--resource-group": [";ls", "ends-with.", "r" * 95, "a b"],
    "--key-vault-resource-group": [";ls", "ends-with.", "a b"],
    "--subscription": ["zz", "0000", "00000000-0000-0000-0000-00000000000g", "a;b"],
    "--image": ["ami-x;rm", "ami-123", "$(id)", "projects/x/global/images/a b", "x" * 500],
    "--gcp-nat": ["sometimes", "AUTO", "auto;rm", "", "existing_only"],
}
#: option -> the cloud it belongs to (a provision needs the cloud for the option to matter)
OPTION_CLOUD = {"--instance-profile": "aws", "--project": "gcp", "--network": "gcp",
                "--resource-group": "azure", "--key-vault-resource-group": "azure",
                "--subscription": "azure", "--image": "aws", "--gcp-nat": "gcp"}

#: config.json fields -> bad values (set on a real model's config)
BAD_CONFIG_FIELDS: dict[str, list[object]] = {
    "num_hidden_layers": [1e9, 10**12, -1, 0, "32", True, 32.5, 1e309],
    "hidden_size": [10**9, 0, -4096, "4096", 4096.5],
    "num_attention_heads": [0, -32, 10**8, "32"],
    "num_key_value_heads": [7, 0, 10**8, "8"],
    "head_dim": ["x", -1, 10**9],
    "intermediate_size": [-1, 10**12, "big"],
    "vocab_size": [0, 2**40, "v"],
    "num_local_experts": [10**9, "8"],
    "max_position_embeddings": [10**12, -5, "long"],
    "torch_dtype": ["int3", "float128", 5, "bfloat17"],
    "sliding_window": [-5, 10**12, "w"],
    "rope_scaling": [{"factor": -1, "rope_type": "yarn"}, {"factor": "x"},
                     {"factor": 1e6}],
    "quantization_config": [{"quant_method": "gptq", "bits": 1000},
                            {"quant_method": "nonsense"}, {"quant_method": 5}],
}


def _files(root: Path) -> dict[str, str]:
    """The bad files and trees, made once: placeholder -> path."""
    f: dict[str, str] = {}

    def put(name: str, data: bytes | str) -> None:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
        f[name.upper().replace(".", "_").replace("/", "_")] = str(p)

    f["MISSING"] = str(root / "missing.json")
    (root / "adir").mkdir()
    f["DIR"] = str(root / "adir")
    f["ZERO"] = "/dev/zero"
    fifo = root / "fifo.json"
    os.mkfifo(fifo)
    f["FIFO"] = str(fifo)
    put("big.json", b"{" + b" " * (10 * 2**20) + b"}")
    put("deep.json", "[" * 100_000 + "]" * 100_000)
    put("deepobj.json", '{"a":' * 500 + "1" + "}" * 500)
    put("nonutf8.json", b"\xff\xfe{\x00\"a\x00")
    put("array.json", "[1, 2, 3]")
    put("notjson.json", "not json at all")
    put("nan.json", '{"num_hidden_layers": NaN}')
    put("empty.json", "")
    # configs: a real model's config with one field broken
    _, base = model_config("qwen3-8b")
    for field, values in BAD_CONFIG_FIELDS.items():
        for i, v in enumerate(values):
            put(f"cfg/{field}-{i}.json", json.dumps({**base, field: v}))
    # probes (advisor topology --json)
    put("probe/array.json", "[]")
    put("probe/nodes-str.json", json.dumps({"nodes": "x", "gpus": [], "nics": []}))
    put("probe/deep.json", '{"nodes":' + "[" * 200 + "]" * 200 + ',"gpus":[],"nics":[]}')
    # printouts
    put("smi/garbage.txt", "hello\nworld\n")
    put("smi/huge-cpus.txt", "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-999999999\t0\n")
    put("smi/big.txt", "x" * (2 * 2**20))
    put("numactl/garbage.txt", "no nodes here\n")
    put("numactl/huge.txt", "node 0 cpus: " + "9999999 " * 3 + "\n")
    # sysfs trees: one broken file each
    good = {"cpulist": "0-7\n", "distance": "10\n", "meminfo": "Node 0 MemTotal: 1000 kB\n"}
    broken = {"cpulist-huge": ("cpulist", "0-999999999\n"),
              "cpulist-garbage": ("cpulist", "zero-seven\n"),
              "cpulist-backwards": ("cpulist", "7-0\n"),
              "cpulist-neg": ("cpulist", "-1\n"),
              "distance-garbage": ("distance", "10 x y\n"),
              "distance-huge": ("distance", "10 " + "9" * 400 + "\n"),
              "cpulist-bigfile": ("cpulist", "0," * 100_000)}
    for tree, (name, text) in broken.items():
        d = root / "sysfs" / tree / "sys/devices/system/node/node0"
        d.mkdir(parents=True)
        for k, v in good.items():
            (d / k).write_text(text if k == name else v)
        f["SYSFS_" + tree.upper().replace("-", "_")] = str(root / "sysfs" / tree)
    d = root / "sysfs" / "cpulist-zero" / "sys/devices/system/node/node0"
    d.mkdir(parents=True)
    (d / "cpulist").symlink_to("/dev/zero")
    f["SYSFS_CPULIST_ZERO"] = str(root / "sysfs" / "cpulist-zero")
    d = root / "sysfs" / "cpulist-fifo" / "sys/devices/system/node/node0"
    d.mkdir(parents=True)
    os.mkfifo(d / "cpulist")
    f["SYSFS_CPULIST_FIFO"] = str(root / "sysfs" / "cpulist-fifo")
    pci = root / "sysfs" / "pci-huge" / "sys/bus/pci/devices/0000:18:00.0"
    pci.mkdir(parents=True)
    for k, v in {"class": "0x030200", "vendor": "0x10de", "numa_node": "0",
                 "local_cpulist": "0-99999999"}.items():
        (pci / k).write_text(v + "\n")
    f["SYSFS_PCI_HUGE"] = str(root / "sysfs" / "pci-huge")
    # catalogs
    cat = root / "cat-big" / "instances"
    cat.mkdir(parents=True)
    (cat / "x.yaml").write_bytes(b"#" * (20 * 2**20))
    f["CAT_BIG"] = str(root / "cat-big")
    cat = root / "cat-bad" / "instances"
    cat.mkdir(parents=True)
    (cat / "x.yaml").write_text("instances: [{name: 1}]\n")
    f["CAT_BAD"] = str(root / "cat-bad")
    (root / "afile").write_text("x")
    f["AFILE"] = str(root / "afile")
    # /proc trees for doctor: a vLLM process with one broken file each (issue 19)
    serve = b"/usr/bin/python3\0/opt/v/bin/vllm\0serve\0m\0"
    status = "Name:\tpython3\nPPid:\t1\nCpus_allowed_list:\t{}\nMems_allowed_list:\t0\n"
    procs = {"empty": {},
             "status-garbage": {"cmdline": serve, "status": status.format("zero-seven")},
             "status-huge": {"cmdline": serve, "status": status.format("0-99999999")},
             "cmdline-big": {"cmdline": b"vllm\0serve\0" + b"x" * (5 * 2**20)},
             "status-bigfile": {"cmdline": serve, "status": "x" * (5 * 2**20)}}
    for tree, files_ in procs.items():
        base = root / "proc" / tree / "proc"
        base.mkdir(parents=True)
        for name, data in files_.items():
            (base / "4242").mkdir(exist_ok=True)
            target = base / "4242" / name
            target.write_bytes(data if isinstance(data, bytes) else data.encode())
        f["PROC_" + tree.upper().replace("-", "_")] = str(root / "proc" / tree)
    return f


def _cases() -> list[tuple[str, list[str]]]:
    """(id, argv) of every bad input."""
    cases: list[tuple[str, list[str]]] = []

    def add(tag: str, *argv: str) -> None:
        cases.append((f"{len(cases):03d}-{tag}", list(argv)))

    fit = ["fit", "-m", "qwen3-8b", "--gpu", "H100-SXM"]
    perf = ["perf", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--input-len", "1000",
            "--output-len", "100"]
    rec = ["recommend", "-m", "qwen3-8b", "--ctx", "8192"]
    render = ["render", "-m", "qwen3-8b", "--ctx", "8192", "--allow-small-host"]
    prov = ["provision", "-m", "qwen3-8b", "--ctx", "8192", "--dry-run"]
    # bad numbers
    for v in BAD_NUMBERS:
        add("fit-ctx", *fit, "--ctx", v)
        add("perf-input-len", *perf[:5], "--input-len", v, "--output-len", "100")
        add("rec-ctx", "recommend", "-m", "qwen3-8b", "--ctx", v)
    for v in BAD_FLOATS:
        add("fit-gpu-mem", *fit, "--ctx", "8192", "--gpu-memory-gib", v)
        add("fit-util", *fit, "--ctx", "8192", "--gpu-memory-utilization", v)
        add("perf-concurrency", *perf, "--concurrency", v)
        add("rec-rps", *rec, "--rps", v)
        add("rec-tpot", *rec, "--max-tpot-ms", v)
        add("rec-usd", *rec, "--max-usd-per-hour", v)
        add("plan-rps", "plan", "-m", "qwen3-8b", "--ctx", "8192", "--rps", v)
        add("render-util", *render, "--out", "{OUT}", "--gpu-memory-utilization", v)
    for v in ["0", "-1", "70000", "abc"]:
        add("render-port", *render, "--out", "{OUT}", "--port", v)
        add("prov-port", *prov, "--provider", "aws", "--port", v)
    for v in ["0", "-3"]:
        add("rec-top", *rec, "--top", v)
        add("fit-tp", *fit, "--ctx", "8192", "--tp", v)
    # bad names: models, GPUs, instances, catalog entries
    for v in BAD_NAMES:
        add("fit-model", "fit", "-m", v, "--gpu", "H100-SXM", "--ctx", "8192")
        add("fit-gpu", "fit", "-m", "qwen3-8b", "--gpu", v, "--ctx", "8192")
        add("catalog-show", "catalog", "show", v)
        add("models-show", "models", "show", v)
        add("render-instance", *render, "--out", "{OUT}", "--instance", v)
        add("ticket-instance", "ticket", "--instance", v)
        add("prov-name", *prov, "--provider", "aws", "--name", v)
    for v in ["a;b", "$(id)", "x" * 300]:
        add("render-host", *render, "--out", "{OUT}", "--host", v)
        add("render-vllm-version", *render, "--out", "{OUT}", "--vllm-version", v)
    # bad files as model config
    for key in ["MISSING", "DIR", "ZERO", "FIFO", "BIG_JSON", "DEEP_JSON", "DEEPOBJ_JSON",
                "NONUTF8_JSON", "ARRAY_JSON", "NOTJSON_JSON", "NAN_JSON", "EMPTY_JSON"]:
        add(f"fit-file-{key}", "fit", "-m", "{" + key + "}", "--gpu", "H100-SXM", "--ctx", "8192")
        add(f"rec-file-{key}", "recommend", "-m", "{" + key + "}", "--ctx", "8192")
        add(f"ticket-probe-{key}", "ticket", "--instance", "aws:p5.48xlarge",
            "--probe", "{" + key + "}")
        add(f"topo-smi-{key}", "topology", "--sysfs-root", "{DIR}",
            "--nvidia-smi-topo", "{" + key + "}")
    for key in ["ZERO", "FIFO", "BIG_JSON", "DEEP_JSON"]:
        add(f"render-file-{key}", "render", "-m", "{" + key + "}", "--ctx", "8192",
            "--out", "{OUT}")
        add(f"perf-file-{key}", "perf", "-m", "{" + key + "}", "--gpu", "H100-SXM",
            "--input-len", "10", "--output-len", "10")
        add(f"topo-numactl-{key}", "topology", "--sysfs-root", "{DIR}",
            "--numactl", "{" + key + "}")
    # bad config fields
    for field, values in BAD_CONFIG_FIELDS.items():
        for i in range(len(values)):
            key = "{CFG_" + f"{field}-{i}".upper().replace("-", "-") + "_JSON}"
            add(f"cfg-{field}-{i}", "fit", "-m", key, "--gpu", "H100-SXM", "--ctx", "4096")
    for key in ["PROBE_ARRAY_JSON", "PROBE_NODES-STR_JSON", "PROBE_DEEP_JSON"]:
        add(f"probe-{key}", "ticket", "--instance", "aws:p5.48xlarge", "--probe", "{" + key + "}")
    # render --target local and --gpu local read the same probes (issue 19)
    for key in ["MISSING", "DIR", "ZERO", "FIFO", "BIG_JSON", "DEEP_JSON", "NONUTF8_JSON",
                "ARRAY_JSON", "NOTJSON_JSON", "NAN_JSON", "EMPTY_JSON", "PROBE_ARRAY_JSON",
                "PROBE_NODES-STR_JSON", "PROBE_DEEP_JSON"]:
        add(f"render-local-probe-{key}", *render, "--target", "local", "--out", "{OUT}",
            "--probe", "{" + key + "}")
        add(f"fit-local-probe-{key}", "fit", "-m", "qwen3-8b", "--gpu", "local", "--ctx", "8192",
            "--probe", "{" + key + "}")
    for tree in ["CPULIST_HUGE", "CPULIST_GARBAGE", "CPULIST_FIFO", "PCI_HUGE"]:
        add(f"render-local-sysfs-{tree}", *render, "--target", "local", "--out", "{OUT}",
            "--sysfs-root", "{SYSFS_" + tree + "}")
    for key in ["SMI_GARBAGE_TXT", "SMI_HUGE-CPUS_TXT", "SMI_BIG_TXT"]:
        add(f"smi-{key}", "topology", "--sysfs-root", "{DIR}", "--nvidia-smi-topo",
            "{" + key + "}")
    for key in ["NUMACTL_GARBAGE_TXT", "NUMACTL_HUGE_TXT"]:
        add(f"numactl-{key}", "topology", "--sysfs-root", "{DIR}", "--numactl", "{" + key + "}")
    # bad sysfs trees
    for tree in ["CPULIST_HUGE", "CPULIST_GARBAGE", "CPULIST_BACKWARDS", "CPULIST_NEG",
                 "DISTANCE_GARBAGE", "DISTANCE_HUGE", "CPULIST_BIGFILE", "CPULIST_ZERO",
                 "CPULIST_FIFO", "PCI_HUGE"]:
        add(f"sysfs-{tree}", "topology", "--sysfs-root", "{SYSFS_" + tree + "}")
        add(f"sysfs-json-{tree}", "topology", "--json", "--sysfs-root", "{SYSFS_" + tree + "}")
    for v in ["{MISSING}", "{AFILE}", "{ZERO}"]:
        add("sysfs-root", "topology", "--sysfs-root", v)
    # doctor: bad PIDs, bad proc trees, bad sysfs trees (issue 19)
    for v in ["0", "-1", "abc", "1e3", "99999999999", "4194303", ""]:
        add("doctor-pid", "doctor", "--pid", v)
    for v in ["{MISSING}", "{AFILE}", "{ZERO}", "{DIR}", "{PROC_EMPTY}", "{PROC_STATUS_GARBAGE}",
              "{PROC_STATUS_HUGE}", "{PROC_CMDLINE_BIG}", "{PROC_STATUS_BIGFILE}"]:
        add("doctor-proc-root", "doctor", "--proc-root", v, "--sysfs-root", "{DIR}")
        add("doctor-proc-root-check", "doctor", "--check", "--json", "--proc-root", v)
    for tree in ["CPULIST_HUGE", "CPULIST_GARBAGE", "CPULIST_FIFO", "PCI_HUGE"]:
        add(f"doctor-sysfs-{tree}", "doctor", "--sysfs-root", "{SYSFS_" + tree + "}")
    # catalogs
    for v in ["{CAT_BIG}", "{CAT_BAD}", "{AFILE}", "{MISSING}"]:
        add("catalog-validate", "catalog", "validate", v)
        add("fit-catalog", *fit, "--ctx", "8192", "--catalog", v)
    # bad references, CIDRs, regions, provider options
    for v in BAD_REFS:
        add("prov-api-key-ref", *prov, "--provider", "aws", "--api-key-ref", v)
        add("render-api-key-ref", *render, "--out", "{OUT}", "--api-key-ref", v)
    add("prov-ref-other-cloud", *prov, "--instance", "aws:g6e.2xlarge", "--api-key-ref",
        "gcp-secret:advisor-key")
    add("prov-token-other-cloud", *prov, "--instance", "aws:g6e.2xlarge", "--hf-token-ref",
        "azure-kv:vault/tok")
    add("render-ref-other-cloud", *render, "--out", "{OUT}", "--instance", "aws:g6e.2xlarge",
        "--api-key-ref", "gcp-secret:advisor-key")
    for v in BAD_CIDRS:
        add("prov-allow-cidr", *prov, "--provider", "aws", "--allow-cidr", v)
        add("prov-ssh-cidr", *prov, "--provider", "aws", "--ssh-cidr", v)
    for v in BAD_REGIONS:
        add("prov-region", *prov, "--provider", "aws", "--region", v)
        add("ticket-region", "ticket", "--instance", "aws:p5.48xlarge", "--region", v)
        add("refresh-region", "catalog", "refresh", "--provider", "aws", "--dry-run",
            "--region", v)
    for flag, values in BAD_OPTIONS.items():
        for v in values:
            add(f"prov-{flag}", *prov, "--provider", OPTION_CLOUD[flag], flag, v)
    for v in ["nope", "AWS", "aws;rm"]:
        add("prov-provider", *prov, "--provider", v)
        add("refresh-provider", "catalog", "refresh", "--provider", v, "--dry-run")
    # an unwritable / unusable --out
    for v in ["/proc/advisor-out", "{AFILE}/sub", "{AFILE}", "/dev/null/x", "x" * 5000]:
        add("render-out", *render, "--out", v)
    add("render-out-nonempty", *render, "--out", str(Path(__file__).parent))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _files(tmp_path_factory.mktemp("hostile"))


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, files: dict[str, str]):
    monkeypatch.delenv("ADVISOR_CATALOG_DIR", raising=False)
    monkeypatch.delenv("ADVISOR_DEBUG", raising=False)
    # ADVISOR_HOME: the test's own (tests/conftest.py), its catalog cache already warm
    for var in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS",
                "AZURE_CLIENT_ID", "AZURE_SUBSCRIPTION_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    runner = CliRunner()
    out = tmp_path / "out" / "files"

    def go(argv: list[str]):
        args = [a.replace("{OUT}", str(out)).format(**files) if "{" in a and "}" in a
                and len(a) < 200 else a for a in argv]
        return runner.invoke(app, args), out

    return go


def _check(result, out: Path, argv: list[str]) -> None:
    err = result.stderr
    shown = " ".join(a[:60] for a in argv)
    assert "Traceback" not in err and "Traceback" not in result.stdout, shown
    assert "internal error" not in err, f"{shown}: {err}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{shown}: {result.exception!r}")
    assert result.exit_code == 2, f"{shown}: exit {result.exit_code}: {err}{result.stdout[:300]}"
    if argv[:2] == ["catalog", "validate"]:  # a report: every problem on stdout, exit 2
        assert len(err.strip().splitlines()) <= 1 and "problem(s)" in result.stdout, shown
    else:
        assert len(err.strip().splitlines()) == 1, f"{shown}: {err}"
    if "{OUT}" in argv:
        assert not out.exists(), f"{shown}: wrote {out}"
        left = list(out.parent.glob(".advisor-*")) if out.parent.exists() else []
        assert not left, f"{shown}: left {left}"


@pytest.mark.parametrize(("argv"), [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_exit_2_one_line(run, argv):
    result, out = run(argv)
    _check(result, out, argv)


def test_the_corpus_is_large():
    assert len(CASES) >= 200


# -- inputs that must be accepted ----------------------------------------------------------------
def _good_config(root: Path, name: str, **fields: object) -> str:
    _, base = model_config("qwen3-8b")
    p = root / f"{name}.json"
    p.write_text(json.dumps({**base, **fields}))
    return str(p)


ACCEPTED: list[tuple[str, list[str]]] = [
    ("fit", ["fit", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--ctx", "8192"]),
    ("fit-big-ctx", ["fit", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--ctx", "40960"]),
    ("fit-util", ["fit", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--ctx", "8192",
                  "--gpu-memory-utilization", "0.95"]),
    ("perf", ["perf", "-m", "qwen3-8b", "--gpu", "H100-SXM", "--input-len", "1000",
              "--output-len", "100", "--concurrency", "8"]),
    ("recommend", ["recommend", "-m", "qwen3-8b", "--ctx", "8192", "--rps", "2.5"]),
    ("recommend-region", ["recommend", "-m", "qwen3-8b", "--ctx", "8192",
                          "--region", "us-east-1"]),
    ("plan", ["plan", "-m", "qwen3-8b", "--ctx", "8192", "--rps", "1"]),
    ("catalog-show", ["catalog", "show", "aws:p5.48xlarge"]),
    ("models-show", ["models", "show", "qwen3-8b"]),
    ("ticket", ["ticket", "--instance", "aws:p5.48xlarge"]),
    ("doctor", ["doctor"]),
    # --pid 1 (not vLLM) is refused since issue 32: doctor --json without --pid instead
    ("doctor-json", ["doctor", "--json"]),
    ("prov-aws", ["provision", "-m", "qwen3-8b", "--ctx", "8192", "--dry-run",
                  "--provider", "aws", "--image", "ami-0123456789abcdef0",
                  "--instance-profile", "my-profile_1", "--allow-cidr", "10.0.0.0/8",
                  "--api-key-ref", "aws-ssm:/advisor/vllm-api-key",
                  "--name", "my-deploy-1"]),
    ("prov-aws-file-ref", ["provision", "-m", "qwen3-8b", "--ctx", "8192", "--dry-run",
                           "--provider", "aws", "--api-key-ref", "file:/etc/advisor/key"]),
    ("prov-gcp", ["provision", "-m", "qwen3-8b", "--ctx", "8192", "--dry-run",
                  "--provider", "gcp", "--project", "my-project-123",
                  "--image", "projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts",
                  "--network", "default"]),
    ("prov-azure", ["provision", "-m", "qwen3-8b", "--ctx", "8192", "--dry-run",
                    "--provider", "azure", "--resource-group", "my-rg.(x)_1",
                    "--subscription", "01234567-89ab-cdef-0123-456789abcdef",
                    "--image", "microsoft-dsvm:ubuntu-hpc:2204:latest",
                    "--api-key-ref", "azure-kv:myvault/vllm-api-key"]),
]


@pytest.mark.parametrize("argv", [a for _, a in ACCEPTED], ids=[n for n, _ in ACCEPTED])
def test_good_input_is_accepted(run, argv):
    result, _ = run(argv)
    assert result.exit_code == 0, f"{argv}: {result.stderr}"


@pytest.mark.parametrize(("name", "fields"), [
    ("fp16", {"torch_dtype": "float16"}),
    ("torch-prefix", {"torch_dtype": "torch.bfloat16"}),
    ("auto", {"torch_dtype": "auto"}),
    ("fp32", {"torch_dtype": "float32"}),
    ("float-int", {"num_hidden_layers": 36.0}),
    ("long-ctx", {"max_position_embeddings": 10_485_760}),
    ("no-dtype", {"torch_dtype": None}),
])
def test_good_config_is_accepted(run, tmp_path, name, fields):
    path = _good_config(tmp_path, name, **fields)
    result, _ = run(["fit", "-m", path, "--gpu", "H100-SXM", "--ctx", "4096"])
    assert result.exit_code == 0, result.stderr


def test_good_render_writes_the_folder(run, tmp_path):
    out = tmp_path / "new" / "deep" / "folder"
    result, _ = run(["render", "-m", "qwen3-8b", "--ctx", "8192", "--allow-small-host",
                     "--out", str(out)])
    assert result.exit_code == 0, result.stderr
    assert (out / "user-data").exists()


def test_good_topology_tree_is_accepted(run, tmp_path):
    d = tmp_path / "sys/devices/system/node/node0"
    d.mkdir(parents=True)
    (d / "cpulist").write_text("0-63,128-191\n")
    (d / "distance").write_text("10 21\n")
    result, _ = run(["topology", "--sysfs-root", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
