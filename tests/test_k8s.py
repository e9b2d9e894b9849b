"""Kubernetes manifests: validated against the Kubernetes OpenAPI schemas shipped offline by the
kubernetes-validate package (strict: unknown fields fail), the LeaderWorkerSet's pod templates
as core PodTemplates, and the pinning-related fields checked one by one."""

from __future__ import annotations

import pytest
import yaml

import advisor
from advisor.core.layouts import place, place_multi
from advisor.render.cloudinit import RenderRequest
from advisor.render.k8s import files, manifests, topology_policy

kv = pytest.importorskip("kubernetes_validate")

CAT = advisor.load_catalog()
ND = CAT.instance("azure:Standard_ND96isr_H100_v5")
P5 = CAT.instance("aws:p5.48xlarge")
REQ = RenderRequest(model="meta-llama/Meta-Llama-3-8B-Instruct", max_model_len=8192,
                    vllm_version="0.11.0", api_key_ref="azure-kv:v/k")
BIG = REQ.model_copy(update={"model": "meta-llama/Llama-3.1-405B-Instruct"})
VERSION = kv.latest_version()


def validate(doc: dict) -> None:
    kv.validate(doc, VERSION, strict=True)  # raises ValidationError on any schema violation


def pods(docs: list[dict]) -> list[dict]:
    out = []
    for d in docs:
        if d["kind"] == "Deployment":
            out.append(d["spec"]["template"])
        elif d["kind"] == "LeaderWorkerSet":
            t = d["spec"]["leaderWorkerTemplate"]
            out += [t["leaderTemplate"], t["workerTemplate"]]
    return out


def assert_guaranteed_and_pinned(template: dict, instance: str, gpus: int) -> None:
    spec = template["spec"]
    for c in spec["containers"]:
        req, lim = c["resources"]["requests"], c["resources"]["limits"]
        assert req == lim, "requests must equal limits for Guaranteed QoS"
        assert req["cpu"].isdigit() and int(req["cpu"]) >= 1, "integral CPUs for the CPU Manager"
        assert req["nvidia.com/gpu"] == str(gpus) and req["memory"].endswith("Gi")
        assert "VLLM_API_KEY" not in {e["name"] for e in c["env"] if "value" in e}
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expr = term["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert expr == {"key": "node.kubernetes.io/instance-type", "operator": "In",
                    "values": [instance]}


def test_single_node_deployment_validates():
    plan = place(ND, CAT, 4, 1)
    docs = manifests(ND, plan, REQ, "llama-nd")
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Deployment", "Service", "KubeletConfiguration"]
    for d in docs[:2]:
        validate(d)
    dep = docs[0]
    assert dep["spec"]["replicas"] == 2  # two TP-4 replicas on an 8-GPU VM
    [tpl] = pods(docs)
    assert_guaranteed_and_pinned(tpl, "Standard_ND96isr_H100_v5", 4)
    c = tpl["spec"]["containers"][0]
    key = next(e for e in c["env"] if e["name"] == "VLLM_API_KEY")
    assert key["valueFrom"]["secretKeyRef"] == {"name": "advisor-vllm-api-key", "key": "api-key"}
    assert c["image"] == "docker.io/vllm/vllm-openai:v0.11.0"
    assert "--tensor-parallel-size" in c["command"] and "4" in c["command"]
    svc = docs[1]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    kubelet = docs[2]
    assert kubelet["cpuManagerPolicy"] == "static"
    assert kubelet["topologyManagerPolicy"] == "single-numa-node"  # Azure documents the map


def test_leader_worker_set_for_a_multi_node_replica():
    plan = place_multi(P5, CAT, 8, 2)
    docs = manifests(P5, plan, BIG, "big")
    lws, svc, kubelet = docs
    assert (lws["apiVersion"], lws["kind"]) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    t = lws["spec"]["leaderWorkerTemplate"]
    assert t["size"] == 2 and lws["spec"]["replicas"] == 1
    assert t["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert set(t) == {"size", "restartPolicy", "leaderTemplate", "workerTemplate"}
    for tpl in pods(docs):
        # each template is a core PodTemplateSpec: validate it as a v1 PodTemplate
        validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                  "template": tpl})
        assert_guaranteed_and_pinned(tpl, "p5.48xlarge", 8)
    leader = t["leaderTemplate"]["spec"]["containers"][0]["command"][-1]
    assert "ray start --head" in leader and "--pipeline-parallel-size 2" in leader
    assert "--distributed-executor-backend ray" in leader
    worker = t["workerTemplate"]["spec"]["containers"][0]
    assert "--address=$(LWS_LEADER_ADDRESS):6379" in worker["command"][-1]
    assert "ports" not in worker and all(e["name"] != "VLLM_API_KEY" for e in worker["env"])
    validate(svc)
    assert svc["spec"]["selector"]["advisor/role"] == "leader"  # traffic to the leader only
    assert kubelet["topologyManagerPolicy"] == "restricted"  # 8 GPUs of a 2-socket host


@pytest.mark.parametrize("tp,expected", [(4, "single-numa-node"), (8, "restricted")])
def test_topology_policy_follows_the_numa_map(tp, expected):
    policy, why = topology_policy(ND, place(ND, CAT, tp, 1))
    assert policy == expected and "catalog" in why


def test_files_split_workload_and_kubelet_settings():
    out = files(ND, place(ND, CAT, 8, 1), REQ, "one")
    docs = list(yaml.safe_load_all(out["manifests.yaml"]))
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    kub = out["kubelet-config.yaml"]
    assert "# Apply to the node pool's kubelet" in kub
    assert yaml.safe_load(kub)["kind"] == "KubeletConfiguration"
    assert "_advisor_note" not in kub


def test_cli_render_k8s(cli, tmp_path):
    out = tmp_path / "k"
    r = cli("render", "-m", "llama-3.1-405b", "--hf-token-ref", "file:/etc/advisor/hf-token",
            "--ctx", "8192", "--instance", "aws:p5.48xlarge",
            "--target", "k8s", "--out", str(out), "--json")
    assert r.exit_code == 0, r.stderr
    docs = list(yaml.safe_load_all((out / "manifests.yaml").read_text()))
    assert docs[0]["kind"] == "LeaderWorkerSet"
    bad = cli("render", "-m", "llama-3-8b", "--hf-token-ref", "file:/etc/advisor/hf-token",
              "--ctx", "8192", "--target", "helm", "--out",
              str(tmp_path / "h"))
    assert bad.exit_code == 2 and "--target" in bad.stderr and not (tmp_path / "h").exists()
    hostile = cli("render", "-m", "llama-3-8b", "--hf-token-ref", "file:/etc/advisor/hf-token",
                  "--ctx", "8192", "--target", "k8s", "--name",
                  "x; rm", "--out", str(tmp_path / "n"))
    assert hostile.exit_code == 2 and not (tmp_path / "n").exists()


def test_the_validator_does_reject_a_broken_manifest():
    """The schema check above is real: a typo'd field and a wrong type both fail."""
    dep = manifests(ND, place(ND, CAT, 4, 1), REQ, "x")[0]
    typo = {**dep, "spec": {**dep["spec"], "replica": 2}}
    with pytest.raises(kv.ValidationError):
        validate(typo)
    wrong = {**dep, "spec": {**dep["spec"], "replicas": "two"}}
    with pytest.raises(kv.ValidationError):
        validate(wrong)


def test_pods_run_unprivileged_on_a_read_only_root():
    for plan, req, inst in ((place(ND, CAT, 4, 1), REQ, ND),
                            (place_multi(P5, CAT, 8, 2), BIG, P5)):
        for t in pods(manifests(inst, plan, req, "sec")):
            kv.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"},
                         "template": t}, VERSION, strict=True)
            pod = t["spec"]["securityContext"]
            assert pod["runAsNonRoot"] is True and pod["runAsUser"] != 0
            vols = {v["name"] for v in t["spec"]["volumes"]}
            for c in t["spec"]["containers"]:
                sc = c["securityContext"]
                assert sc["allowPrivilegeEscalation"] is False
                assert sc["readOnlyRootFilesystem"] is True
                assert sc["capabilities"]["drop"] == ["ALL"]
                assert "add" not in sc["capabilities"]  # no --numa-bind in these layouts
                env = {e["name"]: e.get("value") for e in c["env"]}
                mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
                # every place the server writes is a volume, not the read-only root
                for path in (env["HOME"], env["HF_HOME"], env["XDG_CACHE_HOME"], "/tmp"):
                    assert any(path == m or path.startswith(m + "/") for m in mounts), path
                assert set(mounts.values()) <= vols
                assert "HF_TOKEN" not in env  # no token was asked for


def test_gated_model_token_comes_from_a_secret_and_numa_bind_adds_sys_nice():
    req = REQ.model_copy(update={"hf_token_ref": "file:/unused-in-k8s",
                                 "vllm_version": "0.21.0"})
    plan = place(ND, CAT, 8, 1)  # one replica over both NUMA nodes
    assert plan.replica_layout[0].alignment == "spans-nodes"
    (t,) = pods(manifests(ND, plan, req, "gated"))
    (c,) = t["spec"]["containers"]
    token = next(e for e in c["env"] if e["name"] == "HF_TOKEN")
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "advisor-hf-token", "key": "token"}}}
    assert "--numa-bind" in c["command"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_NICE"]}
    aligned = pods(manifests(ND, place(ND, CAT, 4, 1), req, "aligned"))[0]
    assert "add" not in aligned["spec"]["containers"][0]["securityContext"]["capabilities"]


def test_kubelet_config_states_the_dra_caveat():
    text = files(ND, place(ND, CAT, 4, 1), REQ, "dra")["kubelet-config.yaml"]
    assert "DRA" in text and "kubernetes/website#56232" in text
    assert text.lstrip("-\n").startswith("# Apply to the node pool's kubelet")
