"""Render the fleet's Kubernetes manifests from the node map the SLURM script reads (no kubectl needed).

    python tools/render_kubernetes.py compose/slurm/nodes.example --image registry.example/mlperf-appliance:1 \\
        --results-claim fleet-results --data-claim fleet-data --submitter MyOrg -o compose/kubernetes

Writes, for the N nodes of NODE_MAP (lines NODE SYSTEM [CARDS]):

- fleet.yaml: a ConfigMap (the node map and compose/slurm's fleet-task.sh, runtime.sh, collect.sh) and, per
  system, an Indexed Job (completions = parallelism = the system's nodes): one pod per node (a required
  anti-affinity on the job's pods by host name, node affinity to the system's nodes), the node's devices and
  cores requested (--cpus, --memory, --gpus: nvidia.com/gpu), the results to a shared volume
  (PersistentVolumeClaim --results-claim, ReadWriteMany) at /shared/RESULTS/<system>/<node>/, the data
  read-only (--data-claim).
- collect.yaml: the collect Job (`submission build --fleet`, `appliance fleet` into /shared/fleet-<time>/),
  applied once the fleet's Jobs ended whatever their outcome (docs/fleet.md: `kubectl wait`).

docs/fleet.md ("The Kubernetes way") says how a site applies them; tests/test_fleet_kubernetes.py validates them
against the Kubernetes API schema (kubernetes-validate).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.report.fleet import read_node_map

SLURM = Path(__file__).resolve().parent.parent / "compose" / "slurm"
SCRIPTS = ("fleet-task.sh", "runtime.sh", "collect.sh")
LABEL = "mlperf-appliance/fleet"


def _k8s_name(text: str) -> str:
    """A DNS-1123 label from a system name (Kubernetes object names)."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40]
    return name or "system"


def _volumes(args: argparse.Namespace) -> list[dict[str, Any]]:
    return [{"name": "shared", "persistentVolumeClaim": {"claimName": args.results_claim}},
            {"name": "data", "persistentVolumeClaim": {"claimName": args.data_claim, "readOnly": True}},
            {"name": "fleet", "configMap": {"name": f"{args.name}-fleet", "defaultMode": 0o555}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}}]


MOUNTS = [{"name": "shared", "mountPath": "/shared"}, {"name": "data", "mountPath": "/data", "readOnly": True},
          {"name": "fleet", "mountPath": "/fleet"}, {"name": "shm", "mountPath": "/dev/shm"}]


def _env(args: argparse.Namespace, **more: str) -> list[dict[str, Any]]:
    env = [{"name": "RESULTS", "value": "/shared/RESULTS"}, {"name": "DATA", "value": "/data"},
           {"name": "NODE_MAP", "value": "/fleet/nodes.txt"}, {"name": "FLEET_DIR", "value": "/fleet"},
           {"name": "BENCHMARKS", "value": args.benchmarks}, {"name": "SCENARIOS", "value": args.scenarios},
           {"name": "APPLIANCE_RUN_ARGS", "value": args.run_args}]
    return env + [{"name": k, "value": v} for k, v in more.items()]


def _gpus(given: list[str], system: str) -> int:
    """--gpus N (every system) or SYSTEM=N (that one; it wins)."""
    count = 0
    for item in given:
        name, _, n = item.rpartition("=")
        if name in ("", system):
            count = int(n)
    return count


def system_job(args: argparse.Namespace, system: str, nodes: list[str]) -> dict[str, Any]:
    """One Indexed Job: a pod per node of `system`, never two on one node."""
    name = f"{args.name}-{_k8s_name(system)}"
    labels = {LABEL: args.name, "mlperf-appliance/system": _k8s_name(system)}
    resources: dict[str, dict[str, Any]] = {"requests": {"cpu": str(args.cpus), "memory": args.memory},
                                            "limits": {"cpu": str(args.cpus), "memory": args.memory}}
    gpus = _gpus(args.gpus, system)
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = gpus
        resources["limits"]["nvidia.com/gpu"] = gpus
    node_env = {"name": "FLEET_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"completionMode": "Indexed", "completions": len(nodes), "parallelism": len(nodes),
                     "backoffLimitPerIndex": 0, "maxFailedIndexes": len(nodes),
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "restartPolicy": "Never",
                         "affinity": {
                             "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                                 {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                        "values": nodes}]}]}},
                             "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                 {"labelSelector": {"matchLabels": {LABEL: args.name}},
                                  "topologyKey": "kubernetes.io/hostname"}]}},
                         "containers": [{"name": "appliance", "image": args.image,
                                         "command": ["bash", "/fleet/fleet-task.sh"],
                                         "env": [*_env(args), node_env],
                                         "resources": resources,
                                         "securityContext": {"capabilities": {"add": ["SYS_NICE"]}},
                                         "volumeMounts": MOUNTS}],
                         "volumes": _volumes(args)}}}}


def collect_job(args: argparse.Namespace) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"{args.name}-collect", "labels": {"mlperf-appliance/collect": args.name}},
            "spec": {"backoffLimit": 0, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "collect", "image": args.image, "command": ["bash", "/fleet/collect.sh"],
                                "env": _env(args, SUBMITTER=args.submitter, FLEET_THRESHOLD=str(args.threshold)),
                                "volumeMounts": MOUNTS}],
                "volumes": _volumes(args)}}}}


def render(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = read_node_map(args.node_map)
    by_system: dict[str, list[str]] = {}
    for node, system in nodes.items():
        by_system.setdefault(system, []).append(node)
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{args.name}-fleet"},
              "data": {"nodes.txt": args.node_map.read_text(),
                       **{s: (SLURM / s).read_text() for s in SCRIPTS}}}
    return [config, *(system_job(args, s, n) for s, n in by_system.items())], [collect_job(args)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("node_map", type=Path, help="lines NODE SYSTEM [CARDS] (compose/slurm/nodes.example)")
    ap.add_argument("--image", required=True, help="the appliance image, e.g. registry.example/mlperf-appliance:1")
    ap.add_argument("--results-claim", default="fleet-results", help="PVC for RESULTS (ReadWriteMany)")
    ap.add_argument("--data-claim", default="fleet-data", help="PVC holding the prepared data dir")
    ap.add_argument("--submitter", default="MyOrg")
    ap.add_argument("--name", default="appliance-fleet", help="prefix of every object's name")
    ap.add_argument("--cpus", type=int, default=16, help="cores each pod requests (and is limited to)")
    ap.add_argument("--memory", default="64Gi", help="memory each pod requests")
    ap.add_argument("--gpus", action="append", default=[], metavar="[SYSTEM=]N",
                    help="nvidia.com/gpu each pod requests (the node's GPUs): N for every system, SYSTEM=N for one")
    ap.add_argument("--benchmarks", default="resnet50")
    ap.add_argument("--scenarios", default="Offline")
    ap.add_argument("--run-args", default="", help="more `appliance run` options for every run")
    ap.add_argument("--threshold", type=float, default=0.95)
    ap.add_argument("-o", "--output", type=Path, required=True, help="folder for fleet.yaml and collect.yaml")
    args = ap.parse_args(argv)
    fleet, collect = render(args)
    args.output.mkdir(parents=True, exist_ok=True)
    for name, docs in (("fleet.yaml", fleet), ("collect.yaml", collect)):
        text = f"# Rendered by tools/render_kubernetes.py from {args.node_map.name}; docs/fleet.md\n"
        (args.output / name).write_text(text + yaml.safe_dump_all(docs, sort_keys=False))
    print(f"wrote {args.output / 'fleet.yaml'} ({len(fleet) - 1} Indexed Job(s), "
          f"{len(read_node_map(args.node_map))} node(s)) and {args.output / 'collect.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
