"""Models the deployed vLLM cannot load are refused before anything is rendered or launched.

locks/vllm-0.11.0-architectures.json is written from the installed release by
tools/vllm_architectures.py (tests/test_lock_install.py checks it there); these tests read the
shipped file: the rule (native / Transformers backend / removed / unknown), where it is applied
(render, provision: refused; fit, recommend: said), and that every catalog alias loads.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import advisor
from advisor.core import archs
from advisor.core.model import MAX_ARCHITECTURES, spec_from_config
from advisor.errors import UserInputError

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "benchmarks" / "perf" / "configs"
TABLE = json.loads((REPO / "locks" / "vllm-0.11.0-architectures.json").read_text())


def cached(tmp_path: Path, repo: str, cfg_file: Path) -> dict[str, str]:
    """A Hugging Face cache holding only ``repo``'s config.json (the env that points at it)."""
    snap = tmp_path / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(cfg_file.read_text())
    return {"HF_HUB_CACHE": str(tmp_path / "hub")}


def test_the_shipped_file_is_the_pinned_release_and_holds_its_sets():
    assert TABLE["vllm"] == "0.11.0" and TABLE["transformers"] == "4.57.6"
    native, backend = set(TABLE["native"]), set(TABLE["transformers_backend"])
    assert not native & backend
    assert {"LlamaForCausalLM", "Qwen3MoeForCausalLM", "GptOssForCausalLM",
            "DeepseekV3ForCausalLM", "Llama4ForConditionalGeneration"} <= native
    assert not {"MiniMaxM2ForCausalLM", "KimiK25ForConditionalGeneration"} & (native | backend)


@pytest.mark.parametrize("names,kind,needle", [
    (("LlamaForCausalLM",), "native", None),
    # vLLM takes the first name it implements, in any position
    (("NoSuchForCausalLM", "Qwen2ForCausalLM"), "native", None),
    (("MiniMaxM2ForCausalLM",), "refused", "cannot load MiniMaxM2ForCausalLM"),
    (("Phi3SmallForCausalLM",), "refused", "until v0.9.2"),
    (("BitNetForCausalLM",), "transformers", "Transformers backend (transformers 4.57.6)"),
    # the Transformers fallback is tried for the first architecture only
    (("NoSuchForCausalLM", "BitNetForCausalLM"), "refused", "cannot load"),
    ((), "unknown", None),
])
def test_support_follows_vllms_registry_order(names, kind, needle):
    got, why = archs.support(names, "0.11.0")
    assert got == kind
    assert (why is None) == (needle is None)
    if needle:
        assert needle in why


def test_a_release_without_a_file_has_no_rule():
    assert archs.support(("MiniMaxM2ForCausalLM",), "0.99.0") == ("unknown", None)
    assert archs.support(("MiniMaxM2ForCausalLM",), "../0.11.0") == ("unknown", None)


#: phi-4's catalog config is the architecture subset a public loader test quotes (index.yaml),
#: without "architectures"; transformers maps its model_type phi3 to Phi3ForCausalLM
#: (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES), the class microsoft/phi-4 names
NO_ARCHITECTURES = {"phi-4": "Phi3ForCausalLM"}


def test_every_catalog_alias_loads_natively_in_the_pinned_release():
    cat = advisor.load_catalog()
    for alias in cat.models:
        names = advisor.model_spec(alias).architectures or (NO_ARCHITECTURES[alias],)
        assert archs.support(names, "0.11.0")[0] == "native", alias
    assert advisor.model_spec("phi-4").architectures == ()


def test_architectures_are_the_checkpoints_top_level_ones_and_bounded():
    # Kimi-K2.5's text_config says DeepseekV3ForCausalLM, which vLLM 0.11.0 has; the
    # checkpoint's class is KimiK25ForConditionalGeneration, which it has not
    kimi = advisor.model_spec(str(CONFIGS / "moonshotai--Kimi-K2.5.json"))
    assert kimi.architectures == ("KimiK25ForConditionalGeneration",)
    assert archs.support(kimi.architectures, "0.11.0")[0] == "refused"
    cfg = json.loads((REPO / "catalogs" / "models" / "Qwen--Qwen3-8B.json").read_text())
    many = spec_from_config({**cfg, "architectures": [f"A{i}" for i in range(50)] + [3]})
    assert len(many.architectures) == MAX_ARCHITECTURES
    assert spec_from_config({**cfg, "architectures": "Qwen3ForCausalLM"}).architectures == (
        "Qwen3ForCausalLM",)
    assert spec_from_config({**cfg, "architectures": {"x": 1}}).architectures == ()


def test_render_refuses_and_writes_nothing(cli, tmp_path):
    env = cached(tmp_path, "MiniMaxAI/MiniMax-M2.5", CONFIGS / "MiniMaxAI--MiniMax-M2.5.json")
    out = tmp_path / "out"
    r = cli("render", "--model", "MiniMaxAI/MiniMax-M2.5", "--ctx", "8192", "--instance",
            "aws:p5en.48xlarge", "--out", str(out), env=env)
    assert r.exit_code == 2, r.output
    (line,) = r.stderr.strip().splitlines()
    assert "cannot load MiniMaxM2ForCausalLM" in line and "stop at start-up" in line
    assert "hint: advisor deploys vLLM 0.11.0" in line and "Traceback" not in r.output
    assert not out.exists()
    # the same model through a release advisor has no architecture file for is not refused
    # for its architecture (it is refused for having no lock, a different line)
    r = cli("render", "--model", "MiniMaxAI/MiniMax-M2.5", "--ctx", "8192", "--instance",
            "aws:p5en.48xlarge", "--out", str(out), "--vllm-version", "0.12.0", env=env)
    assert r.exit_code == 2 and "no vLLM 0.12.0 lock" in r.stderr and not out.exists()


def test_provision_refuses_before_any_call(tmp_path, monkeypatch):
    env = cached(tmp_path, "moonshotai/Kimi-K2.5", CONFIGS / "moonshotai--Kimi-K2.5.json")
    monkeypatch.setenv("HF_HUB_CACHE", env["HF_HUB_CACHE"])
    asked = []
    with pytest.raises(UserInputError, match="cannot load KimiK25ForConditionalGeneration"):
        advisor.provision("moonshotai/Kimi-K2.5", 8192, dry_run=True,
                          api_key_ref="aws-ssm:/advisor/vllm-api-key",
                          confirm=lambda s: asked.append(s) or True)
    assert asked == []


def test_fit_and_recommend_size_it_and_say_so(tmp_path, monkeypatch):
    env = cached(tmp_path, "MiniMaxAI/MiniMax-M2.5", CONFIGS / "MiniMaxAI--MiniMax-M2.5.json")
    monkeypatch.setenv("HF_HUB_CACHE", env["HF_HUB_CACHE"])
    f, _, _ = advisor.fit("MiniMaxAI/MiniMax-M2.5", "H200", tp=8, max_model_len=8192)
    assert f.fits
    assert any("cannot load MiniMaxM2ForCausalLM" in n and "render and provision refuse" in n
               for n in f.notes)
    recs = advisor.recommend("MiniMaxAI/MiniMax-M2.5", 8192, top=5)
    assert recs and all(r.risks[0].startswith("not deployable by advisor: vLLM 0.11.0 cannot "
                                              "load MiniMaxM2ForCausalLM") for r in recs)
    # a release advisor has no architecture file for says nothing of it
    f, _, _ = advisor.fit("MiniMaxAI/MiniMax-M2.5", "H200", tp=8, max_model_len=8192,
                          vllm_version="0.15.1")
    assert not any("cannot load" in n for n in f.notes)


def test_a_transformers_backend_model_is_sized_deployed_and_warned(tmp_path):
    cfg = json.loads((REPO / "catalogs" / "models" / "Qwen--Qwen3-8B.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "architectures": ["BitNetForCausalLM"]}))
    f, _, _ = advisor.fit(str(path), "H100-SXM", max_model_len=8192)
    assert f.fits and any("through its Transformers backend" in n for n in f.notes)
    rec = advisor.recommend(str(path), 8192, top=1)[0]
    assert any("through its Transformers backend" in r for r in rec.risks)
    assert not any("not deployable" in r for r in rec.risks)


def test_a_loadable_model_gets_no_such_line():
    f, _, _ = advisor.fit("gpt-oss-20b", "H100-SXM", max_model_len=8192)
    assert not any("load" in n and "vLLM" in n for n in f.notes)
    rec = advisor.recommend("gpt-oss-20b", 8192, top=1)[0]
    assert not any("not deployable" in r for r in rec.risks)


def test_plan_says_it_under_the_table(cli, tmp_path, monkeypatch):
    """plan prices fleets provision would refuse: the line is said once, for --rps and for
    --rps-range; a loadable model gets none."""
    env = cached(tmp_path, "MiniMaxAI/MiniMax-M2.5", CONFIGS / "MiniMaxAI--MiniMax-M2.5.json")
    for load in (["--rps", "1"], ["--rps-range", "1:4", "--points", "2"]):
        r = cli("plan", "--model", "MiniMaxAI/MiniMax-M2.5", "--ctx", "8192", *load, env=env)
        assert r.exit_code == 0, r.output
        assert r.stdout.count("! not deployable by advisor: vLLM 0.11.0 cannot load "
                              "MiniMaxM2ForCausalLM") == 1
    r = cli("plan", "--model", "llama-3-8b", "--ctx", "8192", "--rps", "1")
    assert r.exit_code == 0 and "not deployable" not in r.stdout
    # the SDK's fleets carry it as their first risk
    monkeypatch.setenv("HF_HUB_CACHE", env["HF_HUB_CACHE"])
    opts = advisor.fleet("MiniMaxAI/MiniMax-M2.5", 8192, rps=1)
    assert opts and all(o.risks[0].startswith("not deployable by advisor: vLLM") for o in opts)


def test_a_config_of_a_model_type_vllm_cannot_read_is_refused_whatever_its_architecture(
        cli, tmp_path):
    """Kimi-K2-Instruct names DeepseekV3ForCausalLM, which vLLM 0.11.0 implements, but its
    config is model_type kimi_k2 with custom code (auto_map): neither vLLM's config classes nor
    transformers 4.57.6 know it, and without --trust-remote-code (advisor never passes it) the
    server stops with "Failed to load the model config" (tests/test_lock_install.py reads it)."""
    assert "kimi_k2" not in TABLE["model_types"]
    assert {"deepseek_v3", "deepseek_v32", "gpt_oss", "llama", "qwen3_moe"} <= set(
        TABLE["model_types"])
    cfg = dict(json.loads((REPO / "catalogs/models/deepseek-ai--DeepSeek-R1.json").read_text()),
               model_type="kimi_k2", auto_map={"AutoConfig": "configuration_deepseek.X"})
    src = tmp_path / "kimi.json"
    src.write_text(json.dumps(cfg))
    spec = advisor.model_spec(str(src))
    assert (spec.architectures, spec.config_model_type) == (("DeepseekV3ForCausalLM",), "kimi_k2")
    kind, why = archs.support(spec.architectures, "0.11.0", spec.config_model_type)
    assert kind == "refused" and "cannot read a kimi_k2 config" in why
    env = cached(tmp_path, "moonshotai/Kimi-K2-Instruct", src)
    out = tmp_path / "out"
    r = cli("render", "--model", "moonshotai/Kimi-K2-Instruct", "--ctx", "8192", "--out",
            str(out), env=env)
    assert r.exit_code == 2 and "Failed to load the model config" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()
    # every alias's own model type is readable (phi-4's quoted config names no architecture)
    for alias in advisor.load_catalog().models:
        assert advisor.model_spec(alias).config_model_type in TABLE["model_types"], alias
    # a multimodal config's own type, not its text model's
    kimi25 = advisor.model_spec(str(CONFIGS / "moonshotai--Kimi-K2.5.json"))
    assert kimi25.config_model_type == json.loads(
        (CONFIGS / "moonshotai--Kimi-K2.5.json").read_text())["model_type"]
