"""compose/kubernetes: the fleet's Indexed Jobs and collect Job rendered from the SLURM node map without kubectl,
valid against the Kubernetes API schema of a current release (kubernetes-validate's JSON schemas, strict: an
unknown field is an error), and the committed files what the renderer makes of compose/slurm/nodes.example."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

import render_kubernetes  # noqa: E402

kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (requirements-test.lock) not installed")
VERSION = "1.35.0"  # the newest Kubernetes release out when written (kubernetes-validate 1.37.0 ships 1.37 too)
EXAMPLE = ["--image", "registry.example/mlperf-appliance:1", "--gpus", "xe9680-h100x8=8", "--cpus", "32"]


def render(tmp: Path, node_map: Path) -> list[dict]:
    assert render_kubernetes.main([str(node_map), *EXAMPLE, "-o", str(tmp)]) == 0
    return [d for f in ("fleet.yaml", "collect.yaml") for d in yaml.safe_load_all((tmp / f).read_text())]


@pytest.mark.parametrize("version", [VERSION, "1.37.0"])
def test_rendered_for_n_nodes_valid_against_the_schema(tmp_path, version):
    node_map = tmp_path / "nodes.txt"
    node_map.write_text("".join(f"node{i:03d} {'big' if i < 40 else 'small'}\n" for i in range(64)))
    assert render_kubernetes.main([str(node_map), *EXAMPLE, "--gpus", "big=8", "-o", str(tmp_path / "out")]) == 0
    docs = [d for f in ("fleet.yaml", "collect.yaml")
            for d in yaml.safe_load_all((tmp_path / "out" / f).read_text())]
    for doc in docs:
        kv.validate(doc, version, strict=True)
    jobs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Job"}
    assert set(jobs) == {"appliance-fleet-big", "appliance-fleet-small", "appliance-fleet-collect"}
    big = jobs["appliance-fleet-big"]["spec"]
    assert big["completionMode"] == "Indexed" and big["completions"] == big["parallelism"] == 40
    pod = big["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [f"node{i:03d}" for i in range(40)]
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "topologyKey"] == "kubernetes.io/hostname"  # one pod per node
    resources = pod["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "32", "memory": "64Gi", "nvidia.com/gpu": 8}
    small = jobs["appliance-fleet-small"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert small["requests"] == {"cpu": "32", "memory": "64Gi"}  # no GPUs asked for the CPU-only system
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    assert config["data"]["nodes.txt"] == node_map.read_text()
    assert config["data"]["fleet-task.sh"] == (REPO / "compose" / "slurm" / "fleet-task.sh").read_text()


def test_the_schema_check_can_fail(tmp_path):
    docs = render(tmp_path / "out", REPO / "compose" / "slurm" / "nodes.example")
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "Job"))
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # a misspelt field
    with pytest.raises(kv.ValidationError):
        kv.validate(job, VERSION, strict=True)
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "Job"))
    job["spec"]["completions"] = "four"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, VERSION, strict=True)


def test_committed_manifests_are_the_renderers(tmp_path):
    render(tmp_path, REPO / "compose" / "slurm" / "nodes.example")
    for name in ("fleet.yaml", "collect.yaml"):
        assert (tmp_path / name).read_text() == (REPO / "compose" / "kubernetes" / name).read_text(), (
            f"compose/kubernetes/{name} is stale: python tools/render_kubernetes.py compose/slurm/nodes.example "
            f"{' '.join(EXAMPLE)} -o compose/kubernetes")
