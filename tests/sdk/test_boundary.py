"""The SDK boundary: typed keywords, unknown ones refused, every bad value a UserInputError
(exit 2 and one line in the CLI), never an internal error."""

from __future__ import annotations

import math

import pytest

import advisor
from advisor.errors import UserInputError


@pytest.mark.parametrize("call", [
    lambda: advisor.fit("llama-3-8b", "H100-SXM", max_model_length=2048),
    lambda: advisor.estimate("llama-3-8b", "H100-SXM", input_len=10, output_len=10, tpp=2),
    lambda: advisor.recommend("llama-3-8b", 8192, provider="aws"),
    lambda: advisor.fleet("llama-3-8b", 8192, rps=1, max_instance=3),
    lambda: advisor.model_spec("llama-3-8b", quantisation="fp8"),
    lambda: advisor.render_files("llama-3-8b", 8192, instanse="aws:g6e.xlarge"),
    lambda: advisor.provision("llama-3-8b", 8192, dryrun=True),
])
def test_a_misspelt_keyword_is_refused(call):
    with pytest.raises(TypeError, match="unexpected keyword"):
        call()


def test_options_after_the_model_are_keyword_only():
    with pytest.raises(TypeError):
        advisor.recommend("llama-3-8b", 8192, None, None)  # type: ignore[misc]


@pytest.mark.parametrize("call, needle", [
    (lambda: advisor.recommend("llama-3-8b", 8192, max_tpot_ms=math.nan), "--max-tpot-ms"),
    (lambda: advisor.recommend("llama-3-8b", 8192, max_usd_per_hour=math.inf),
     "--max-usd-per-hour"),
    (lambda: advisor.recommend("llama-3-8b", 8192, objective="fastest"), "--objective"),
    (lambda: advisor.recommend("llama-3-8b", 0), "--ctx"),
    (lambda: advisor.recommend("llama-3-8b", 8192, max_nodes=65), "--max-nodes"),
    (lambda: advisor.fleet("llama-3-8b", 8192, rps=math.nan), "rps"),
    (lambda: advisor.fleet("llama-3-8b", 8192, rps=-1), "rps"),
    (lambda: advisor.fit("llama-3-8b", "H100-SXM", gpu_memory_gib_override=math.inf),
     "gpu-memory-gib"),
    (lambda: advisor.fit("llama-3-8b", "H100-SXM", kv_cache_dtype="int3"), "--kv-cache-dtype"),
    (lambda: advisor.fit("llama-3-8b", "H100-SXM", gpu_memory_utilization=math.nan),
     "--gpu-memory-utilization"),
    (lambda: advisor.estimate("llama-3-8b", "H100-SXM", input_len=0, output_len=5),
     "--input-len"),
    (lambda: advisor.estimate("llama-3-8b", "H100-SXM", input_len=8000, output_len=193,
                              max_model_len=8192), "exceed --ctx 8192"),
    (lambda: advisor.estimate("llama-3.1-70b", "H100-SXM", input_len=100, output_len=10,
                              tp=16), "TP 16 spans instances"),
    (lambda: advisor.render_files("llama-3-8b", 8192, port=80), "--port"),
    (lambda: advisor.render_files("llama-3-8b", 8192, port=70000), "--port"),
    (lambda: advisor.render_files("qwen3-8b", 8192, api_key_ref="aws-ssm:/x;reboot"),
     "api key ref"),
    (lambda: advisor.render_files("llama-3-8b", 8192), "gated"),
    (lambda: advisor.render_files("llama-3-8b", 8192, hf_token_ref="$(reboot)"),
     "is not a reference"),
    (lambda: advisor.provision("llama-3-8b", 8192, dry_run=True), "gated"),
    (lambda: advisor.model_spec("x" * 100_000), "not a model reference"),
])
def test_bad_values_are_user_input_errors(call, needle):
    with pytest.raises(UserInputError) as exc:
        call()
    assert needle in exc.value.message
    assert exc.value.hint
    assert exc.value.exit_code == 2


def test_return_types_are_the_documented_models():
    recs = advisor.recommend("llama-3-8b", 8192, top=2)
    assert [type(r).__name__ for r in recs] == ["Recommendation"] * 2
    recs, rejected = advisor.recommend("llama-3-8b", 8192, with_rejected=True)
    assert all(type(r).__name__ == "Rejection" for r in rejected)
    opts = advisor.fleet("llama-3-8b", 8192, rps=2)
    assert type(opts[0]).__name__ == "FleetOption"
    fit, spec, source = advisor.fit("llama-3-8b", "H100-SXM", max_model_len=8192)
    assert (type(fit).__name__, type(spec).__name__, type(source)) == ("MemoryFit", "ModelSpec",
                                                                       str)


# -- the CLI: the values the issue listed, each exit 2 with one line ------------------------
@pytest.mark.parametrize("args, needle", [
    (["render", "--model", "llama-3-8b", "--ctx", "8192", "--port", "80"], "--port"),
    (["perf", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "100",
      "--output-len", "10", "--kv-cache-dtype", "bogus"], "--kv-cache-dtype"),
    (["plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "nan"], "rps"),
    (["plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "inf"], "rps"),
    (["perf", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "100",
      "--output-len", "10", "--gpu-memory-gib", "inf"], "gpu-memory-gib"),
    (["perf", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "100000",
      "--output-len", "128", "--ctx", "8192"], "exceed --ctx 8192"),
    (["perf", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--input-len", "100",
      "--output-len", "10", "--tp", "16"], "--tp 8 --pp 2"),
    (["perf", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--input-len", "100",
      "--output-len", "10", "--pp", "0"], "--pp"),
    (["recommend", "--model", "llama-3-8b", "--ctx", "8192", "--max-tpot-ms", "nan"],
     "--max-tpot-ms"),
    (["recommend", "--model", "llama-3-8b", "--ctx", "8192", "--max-ttft-ms", "-inf"],
     "--max-ttft-ms"),
    (["recommend", "--model", "llama-3-8b", "--ctx", "8192", "--objective", "speed"],
     "--objective"),
    (["recommend", "--model", "llama-3-8b", "--ctx", "8192", "--max-nodes", "100"],
     "--max-nodes"),
    (["fit", "--model", "llama-3-8b", "--gpu", "H100-SXM", "--ctx", "8192",
      "--dtype", "int3"], "--dtype"),
    (["provision", "--model", "llama-3-8b", "--ctx", "8192", "--provider", "azure",
      "--api-key-ref", "aws-ssm:/advisor/key", "--dry-run"], "secret store"),
    (["provision", "--model", "llama-3-8b", "--ctx", "8192", "--project", "Bad Project!",
      "--dry-run"], "--project"),
    (["status", "--subscription", "not-a-uuid"], "--subscription"),
])
def test_cli_bad_values_exit_2_in_one_line(cli, tmp_path, args, needle):
    if args[0] == "render":
        args = [*args, "--out", str(tmp_path / "out")]
    r = cli(*args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_perf_is_reported_at_the_concurrency_the_kv_cache_holds():
    """Issue 15: perf no longer reports throughput for sequences the KV cache cannot hold; since
    issue 28's item 19 at their average size (prompt + half the output, as vLLM allocates KV
    blocks step by step), with a note where they would not fit at full length."""
    fit, _, _ = advisor.fit("llama-3-8b", "L4", max_model_len=8192)
    held = fit.kv_cache_tokens // (4096 + 2048)
    full = fit.kv_cache_tokens // (4096 + 4096)
    assert 1 <= full < held < 1000
    est, _ = advisor.estimate("llama-3-8b", "L4", input_len=4096, output_len=4096,
                              concurrency=1000)
    assert est.concurrency == held
    queue = [n for n in est.notes if "wait in vLLM's queue" in n]
    assert len(queue) == 1 and f"the KV cache holds {held} sequences of 6144 tokens" in queue[0]
    inside, _ = advisor.estimate("llama-3-8b", "L4", input_len=4096, output_len=4096,
                                 concurrency=held)
    assert inside.output_tokens_per_s == est.output_tokens_per_s
    assert not any("wait in vLLM's queue" in n for n in inside.notes)
    assert any(f"only {full} at full length" in n for n in inside.notes)
    safe, _ = advisor.estimate("llama-3-8b", "L4", input_len=4096, output_len=4096,
                               concurrency=full)
    assert not any("KV cache holds" in n for n in safe.notes)


def test_a_tp_group_stays_inside_the_largest_instance_and_perf_takes_pipeline_stages(cli):
    """The all-reduce tables are one node's links: TP 16 of H100s (8 an instance at most)
    is refused, TP 16 of A100-40GBs (GCP's 16-GPU a2-megagpu-16g) is not, and the CLI's --pp
    reaches the estimate (the hint's TP 8 x PP 2 is a real layout)."""
    a100, _ = advisor.estimate("llama-3.1-70b", "A100-40GB-SXM", input_len=100, output_len=10,
                               tp=16)
    assert a100.tpot_ms > 0
    staged, _ = advisor.estimate("llama-3.1-70b", "H100-SXM", input_len=100, output_len=10,
                                 tp=8, pp=2)
    flat, _ = advisor.estimate("llama-3.1-70b", "H100-SXM", input_len=100, output_len=10, tp=8)
    assert staged.tpot_ms >= flat.tpot_ms  # one token passes both stages
    r = cli("perf", "--model", "llama-3.1-70b", "--gpu", "H100-SXM", "--input-len", "100",
            "--output-len", "10", "--tp", "8", "--pp", "2", "--json")
    assert r.exit_code == 0, r.stderr
    import json

    assert json.loads(r.stdout)["tpot_ms"] == pytest.approx(staged.tpot_ms)


@pytest.mark.parametrize(("args", "hint"), [
    (["recommend", "--model", "llama-3-8b", "--ctx", "8192", "--provider", "oracle"],
     "known: aws, azure, gcp"),
    (["render", "--model", "qwen3-8b", "--ctx", "8192", "--instance", "aws:g5.12xlarge",
      "--tp", "3"], "give one of 1, 2, 4"),
    (["render", "--model", "qwen3-8b", "--ctx", "8192", "--target", "nope"],
     "cloud-init (the default"),
])
def test_refusals_without_a_close_match_still_say_what_to_give(cli, tmp_path, args, hint):
    r = cli(*args, "--out", str(tmp_path / "out")) if args[0] == "render" else cli(*args)
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert " — hint: " in line and hint in line.split(" — hint: ", 1)[1], line
    assert not (tmp_path / "out").exists()
