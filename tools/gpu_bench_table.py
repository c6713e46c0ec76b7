"""The table of tools/gpu_bench.sh, from the runs' JSON summaries, their manifests and the baselines.

    python tools/gpu_bench_table.py PREFIX OUTDIR BACKEND

PREFIX-<name>.json are `appliance run --json` outputs (offline, default, server, server-hi, server-80, single,
yolo-offline, yolo-single, yolo-accuracy, yolo-accuracy-tf32, yolo-accuracy-fp32, yolo-fp32-graphs-1card),
PREFIX-yolo-tune.json YOLO11l's tuned record, tools/gpu_baseline.py
outputs (baseline, yolo-baseline) and
tools/torch_peer.py's (peer); the runs' manifests name the tuned record, whose own figures are compared too;
OUTDIR/versions.json the GPU's software, OUTDIR/steps.txt every step's row (its budget; done, failed or over budget).
Writes OUTDIR/table.txt and OUTDIR/table.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.report.measured import energy_text, nms_text  # the runs' summary says them so

# ResNet50 Offline per GPU in NVIDIA's own closed-division TensorRT results, by GPU: (samples/s, source)
NVIDIA_OFFLINE = {
    "H200": (94620.0, "756,960 / 8, MLPerf Inference v4.1 H200-SXM-141GBx8_TRT (mlcommons/inference_results_v4.1 "
                      "closed/NVIDIA/results/H200-SXM-141GBx8_TRT/resnet50/Offline/performance/run_1/"
                      "mlperf_log_summary.txt, commit 198fc46)"),
    "H100": (87970.0, "DGX-H100 TensorRT int8, MLPerf Inference v4.0"),
}
YOLO_BEST = "v6.0, Dell, 8 x L40S"  # the best published YOLO11l system
YOLO_BEST_OFFLINE = 153.5      # YOLO11l Offline, the best published system (YOLO_BEST)
YOLO_BEST_SINGLE_MS = 7.12     # its SingleStream p90


def nvidia_reference(gpu_name: str) -> tuple[str, float, str]:
    """NVIDIA's per-GPU ResNet50 Offline for the GPU named (an H200's, an H100's; another GPU: the H100's, said)."""
    for key, (rate, source) in NVIDIA_OFFLINE.items():
        if key in gpu_name.upper():
            return key, rate, source
    rate, source = NVIDIA_OFFLINE["H100"]
    return "H100", rate, f"{source}; no NVIDIA figure for {gpu_name or 'this device'}"


def gpu_name(m: dict[str, Any]) -> str:
    """The GPU a run's first card ran on, as NVML names it ("-" on the CPU rehearsal)."""
    gpu = (m.get("cards") or [{}])[0].get("gpu") or {}
    return str(gpu.get("name") or gpu.get("model") or "-")


def load(prefix: str, name: str) -> dict[str, Any] | None:
    path = Path(f"{prefix}-{name}.json")
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:  # the step failed (its one line is in bench.log)
        return None
    return data[0] if isinstance(data, list) and data else data if isinstance(data, dict) else None


def manifest(run: dict[str, Any] | None) -> dict[str, Any]:
    return json.loads((Path(run["path"]) / "manifest.json").read_text()) if run else {}


def energy_row(what: str, m: dict[str, Any]) -> tuple[str, str, str]:
    """Joules per sample per card (NVML) and the host's (RAPL), as the run's summary says them; else why not."""
    energy = m.get("energy") or {}
    text = energy_text(energy, each_card=True)
    why = (energy.get("gpu") or {}).get("note") or energy.get("note") or "not measured"
    return (what, text or "-", "" if text else why)


Rows = list[tuple[str, str, str]]  # (what, value, verdict / note)


def versions_rows(versions: dict[str, Any], backend: str) -> Rows:
    nv = versions.get("nvidia", {})
    gpus = nv.get("gpus") or [{}]
    return [("GPU", f"{gpus[0].get('name', 'none')} ({len(nv.get('gpus') or [])} visible)", f"backend {backend}"),
            ("driver / CUDA", f"{nv.get('driver', nv.get('nvml', '-'))} / {nv.get('cuda_driver', '-')}",
             f"runtime {versions.get('cuda_runtime', '-')}, cuDNN {versions.get('cudnn', '-')}"),
            ("onnxruntime", versions.get("onnxruntime", "-"),
             f"built for CUDA {versions.get('onnxruntime_cuda_build')}, TensorRT {versions.get('tensorrt')}")]


def resnet_rows(prefix: str) -> Rows:
    rows: Rows = []
    off = load(prefix, "offline")
    if not off:
        return [("ResNet50 Offline", "-", "no run")]
    mo = manifest(off)
    cards = mo.get("cards", [])
    n_gpus = len({(c.get("gpu") or {}).get("pci") for c in cards}) or 1
    offline = off["perf"]["metric"]
    rows.append(("ResNet50 Offline", f"{offline:.1f} samples/s {'VALID' if off['perf']['valid'] else 'INVALID'}",
                 f"{mo.get('precision')}, batch {mo.get('batch_size')}, --cards {mo.get('card_map', {}).get('spec')} "
                 f"({len(cards)} cards on {n_gpus} device(s))"))
    paths = [(c.get("io_binding") or {}).get("input_path") or "" for c in cards]
    if any(paths):  # which way the samples reached the device (gpu_iobinding.py's manifest account)
        staged = sum(p.startswith("staged") for p in paths)
        rows.append(("  input path", "staged" if staged else "from the replica, no host copy",
                     f"card 0: {paths[0]}" + (f"; {staged} of {len(paths)} cards staged" if staged else "")))
    default = load(prefix, "default")
    if default and default.get("perf"):
        md = manifest(default)
        rows.append(("  the default command (no tuned record)", f"{default['perf']['metric']:.1f} samples/s",
                     f"{default['perf']['metric'] / offline:.3f} of the tuned Offline (must be >= 0.8); "
                     f"{md.get('precision')}, batch {md.get('batch_size')}"))
    rows += tuned_rows(mo, offline)
    base = load(prefix, "baseline")
    if base:
        copy, device = base["copy_samples_per_second"], base["device_samples_per_second"]
        options = " ".join(f"{k}={v}" for k, v in (base.get("provider_options") or {}).items()
                           if k in ("prefer_nhwc", "cudnn_conv_algo_search"))
        rows.append(("  / onnxruntime at its best options", f"{offline / copy:.3f}",
                     f"loop with copies {copy:.1f}/s (must be >= 0.95); device-resident {device:.1f}/s: ratio "
                     f"{offline / device:.3f}; {base['sessions']} session(s), batch {base['batch']}, "
                     f"{options or 'CPU provider'}"))
    rows += peer_rows(load(prefix, "peer"), offline)
    tried = [r for r in (load(prefix, "server"), load(prefix, "server-hi"), load(prefix, "server-80")) if r]
    server = max((r for r in tried if r["perf"]["valid"]), key=lambda r: r["perf"]["metric"], default=None)
    if server:
        rows.append(("ResNet50 Server", f"{server['perf']['metric']:.1f} QPS VALID",
                     f"Server / Offline {server['perf']['metric'] / offline:.3f} (must be >= 0.90)"))
    elif tried:
        rows.append(("ResNet50 Server", f"{tried[-1]['perf']['metric']:.1f} QPS INVALID",
                     "; ".join(tried[-1]["perf"]["reasons"])))
    single = load(prefix, "single")
    if single:
        rows.append(("ResNet50 SingleStream p90", f"{single['perf']['metric']:.3f} ms",
                     "VALID" if single["perf"]["valid"] else "INVALID"))
    name = gpu_name(mo)
    key, reference, source = nvidia_reference(name)
    rows.append((f"  per-GPU Offline / NVIDIA {key} TensorRT", f"{offline / n_gpus / reference:.3f}",
                 f"{offline / n_gpus:.0f} samples/s on {name} of {reference:.0f} ({source}) (moonshot >= 0.5)"))
    rows.append(energy_row("  ResNet50 Offline energy", mo))
    return rows


def tuned_rows(m: dict[str, Any], offline: float) -> Rows:
    """The tuned record's own figures beside the run's: Offline's (must be within 10%), its provider options."""
    tuned = (m.get("backend_choice") or {}).get("tuned") or {}
    try:
        record = json.loads(Path(tuned["file"]).read_text())
    except (OSError, KeyError, TypeError, ValueError):
        return [("  tune's figure / the run", "-", "no tuned record")]
    chosen = record["chosen"].get("Offline") or {}
    keys = ("layout", "batch_size", "precision", "backend", "provider_options")
    row = next((r for r in record["measured"] if tuple(r.get(k, "") for k in keys) ==
                (chosen.get("cards"), chosen.get("batch_size"), chosen.get("precision"), chosen.get("backend"),
                 chosen.get("provider_options", ""))), None)
    if row is None:
        return [("  tune's figure / the run", "-", "the record's Offline row not found")]
    ratio = row["samples_per_second"] / offline
    rows = [("  tune's figure / the run", f"{ratio:.3f}",
             f"tune {row['samples_per_second']:.1f} samples/s, every card of --cards {row['layout']} at once "
             f"({'within' if abs(ratio - 1) <= 0.1 else 'NOT within'} 10%)"),
            ("  provider options (tuned)", chosen.get("provider_options") or "defaults", session_options(m))]
    server = record["chosen"].get("Server") or {}
    if server:
        rows.append(("  tune's Server (ideal queue / LoadGen)",
                     " / ".join(f"{q:.1f}" if q else "-" for q in (server.get("server_qps"),
                                                                   server.get("confirmed_qps"))) + " QPS",
                     f"batch {server.get('batch_size')}, --cards {server.get('cards')}, max wait "
                     f"{server.get('max_wait_us') if server.get('max_wait_us') is not None else 'default'} us"))
    return rows


def session_options(m: dict[str, Any]) -> str:
    """What card 0's session says its CUDA provider runs with (the manifest's account of the tuned options)."""
    options = (m.get("cards") or [{}])[0].get("provider_options") or {}
    shown = [f"{k}={options[k]}" for k in ("prefer_nhwc", "cudnn_conv_algo_search", "fuse_conv_bias") if k in options]
    return f"card 0's session: {' '.join(shown)}" if shown else "no CUDA provider options (a CPU provider)"


def peer_rows(peer: dict[str, Any] | None, offline: float) -> Rows:
    """The PyTorch eager peer (tools/torch_peer.py): the appliance's Offline over its best batch."""
    if not peer:
        return [("  / PyTorch eager peer", "-", "not run")]
    if "skipped" in peer:
        return [("  / PyTorch eager peer", "-", f"skipped: {peer['skipped']}")]
    rates = peer["samples_per_second"]
    best = max(rates, key=lambda b: rates[b])
    return [("  / PyTorch eager peer", f"{offline / rates[best]:.3f}",
             f"torch {peer['torch']} {peer['dtype']} {peer['memory_format']}: "
             + ", ".join(f"batch {b} {r:.1f}/s" for b, r in rates.items()) + " (moonshot >= 1.0)")]


def precision_rows(prefix: str) -> Rows:
    """YOLO11l's tune (PREFIX-yolo-tune.json, its record): the best Offline rate at each precision timed, TF32's
    against FP32's (the accuracy run at tf32 decides whether it may be chosen)."""
    record = load(prefix, "yolo-tune")
    if not record:
        return [("YOLO11l tune, by precision", "-", "no tuned record (its step's row below)")]
    best: dict[str, float] = {}
    for r in record.get("measured", []):
        best[r["precision"]] = max(best.get(r["precision"], 0.0), r["samples_per_second"])
    text = ", ".join(f"{p} {rate:.1f}/s" for p, rate in sorted(best.items()))
    note = (f"tf32 / fp32 {best['tf32'] / best['fp32']:.2f} (TensorFloat-32 on the GPU's tensor cores)"
            if best.get("fp32") and "tf32" in best else "tf32 not timed (the CUDA provider's)")
    return [("YOLO11l tune, best Offline by precision", text, note)]


def yolo_rows(prefix: str) -> Rows:
    rows: Rows = precision_rows(prefix)
    yoff, ysingle = load(prefix, "yolo-offline"), load(prefix, "yolo-single")
    my = manifest(yoff)
    if yoff:
        rate = yoff["perf"]["metric"]
        rows.append(("YOLO11l Offline", f"{rate:.1f} samples/s {'VALID' if yoff['perf']['valid'] else 'INVALID'}",
                     f"{rate / YOLO_BEST_OFFLINE:.2f}x the best published {YOLO_BEST_OFFLINE} ({YOLO_BEST}; must "
                     f"be >= 10x); {gpu_name(my)}, {my.get('precision')}, batch {my.get('batch_size')}, "
                     f"{len(my.get('cards', []))} cards"))
        rows.append(energy_row("  YOLO11l Offline energy", my))
    else:  # failed or stopped at its budget: its step's row says which
        rows.append(("YOLO11l Offline", "-", "no run (its step's row below)"))
    if ysingle:
        p90 = ysingle["perf"]["metric"]
        rows.append(("YOLO11l SingleStream p90", f"{p90:.3f} ms {'VALID' if ysingle['perf']['valid'] else 'INVALID'}",
                     f"{gpu_name(manifest(ysingle))}; published {YOLO_BEST_SINGLE_MS} ms ({YOLO_BEST}): "
                     f"{'below' if p90 < YOLO_BEST_SINGLE_MS else 'NOT below'}"))
    else:
        rows.append(("YOLO11l SingleStream p90", "-", "no run (its step's row below)"))
    for name, what in (("yolo-accuracy", "tuned precision, fp16 outputs: yolo-99 needs >= 99%"),
                       ("yolo-accuracy-tf32", "tf32 (TensorFloat-32 on the GPU), fp16 outputs: >= 99% to be chosen"),
                       ("yolo-accuracy-fp32", "FP32 model and outputs, no CUDA graph: the data path alone, must be "
                                              "100%"),
                       ("yolo-fp32-graphs-1card", "as above under CUDA graphs on one card (the 2026-11-27 abort)")):
        run = load(prefix, name)
        label = f"YOLO11l accuracy ({name.removeprefix('yolo-accuracy').strip('-') or 'tuned'})"
        if run:
            res = manifest(run).get("result", {})
            golden = next((v for k, v in res.items() if k.startswith("golden_")), None)
            rows.append((label, f"golden {golden:.2f}%" if isinstance(golden, float) else "-",
                         f"{run.get('accuracy') or '-'}; {what}"))
        else:  # failed (tf32 on a CPU), stopped, or a GPU's only (graphs): its step's row says which
            rows.append((label, "-", f"no run (its step's row below); {what}"))
    nms = nms_text(my.get("host_postprocess"))
    if nms:
        rows.append(("  YOLO11l host NMS (in the run)", nms, "manifest host_postprocess: the done threads' CPU time"))
    ybase = load(prefix, "yolo-baseline")
    if ybase and "nms_ms_per_image" in ybase:
        rows.append(("  YOLO11l host NMS per image (own loop)", f"{ybase['nms_ms_per_image']:.3f} ms",
                     "the encoder alone on one core, outside LoadGen (tools/gpu_baseline.py)"))
    return rows


def step_row(line: str) -> tuple[str, str, str]:
    """A steps.txt line as a row: the step, its outcome, its budget."""
    name, _, rest = line.partition(" budget ")
    budget, _, outcome = rest.partition(" s  ")
    return f"step: {name.strip()}", outcome.strip(), f"budget {budget.strip()} s"


def main() -> None:
    prefix, out, backend = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    # the versions step, like any other, may have been stopped: the table is written all the same
    versions = json.loads((out / "versions.json").read_text()) if (out / "versions.json").is_file() else {}
    rows = versions_rows(versions, backend) + resnet_rows(prefix) + yolo_rows(prefix)
    native = out / "native-on-terminal.txt"
    if native.is_file():
        rows.append(("native log lines on the terminal", native.read_text().strip() or "0",
                     "must be 0: onnxruntime's / CUDA's own lines go to each run's native.log"))
    steps = out / "steps.txt"  # "NAME  budget B s  outcome": every step, each stopped at its budget
    if steps.is_file():
        step_rows = [step_row(line) for line in steps.read_text().splitlines() if line.strip()]
        total = sum(int(note.split()[1]) for _, _, note in step_rows)
        rows += [*step_rows, ("steps' budgets in all", f"{total} s", "each step stopped at its own")]
    width = max(len(w) for w, _, _ in rows)
    text = "\n".join(f"{w:{width}s}  {v:30s}  {n}" for w, v, n in rows)
    print(text)
    (out / "table.txt").write_text(text + "\n")
    (out / "table.json").write_text(json.dumps([{"what": w, "value": v, "note": n} for w, v, n in rows], indent=2)
                                    + "\n")


if __name__ == "__main__":
    main()
