"""The resolved plan of one run: what `appliance run` was asked, made concrete once, before anything starts.

Options (`RunOptions`) become a `RunPlan`: the tuned record applied, the benchmark record, the prepared
model and data, ONE parsed `--cards` spec placed on a topology detected ONCE, the batch size and the
results folder. The runner, compliance tests and `reproduce` read the plan instead of re-deriving parts
of it (and re-detecting the machine) in several places.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.core.errors import ApplianceError, DataError
from harness.core.fsutil import plain_name
from harness.core.outbound import ensure_writable_dir, inside_results
from harness.core.scenarios import Mode, Scenario
from harness.data import benchmarks, concrete, integrity
from harness.hw import system
from harness.hw.gpu import GpuRef
from harness.hw.topology.cards import CardSpec, check_card_count, parse_card_spec
from harness.hw.topology.model import Topology
from harness.records import store
from harness.records.benchmark_record import Benchmark
from harness.records.layout import Layout, read_model_record
from harness.records.model_record import ModelRecord, eligibility
from harness.run import buffers
from harness.run.cards import backends, provider_options
from harness.run.cards.backends import Backend
from harness.run.loadgen_settings import preflight, read_user_conf
from harness.run.options import RunOptions
from harness.run.qsl import REPLICATE
from harness.run.sut import CardSlot

if TYPE_CHECKING:  # imported where they are made (resolve, plan_cards)
    from harness.run.cards.simulated_card import Profile
    from harness.run.tuned_choice import BackendChoice


@dataclass(frozen=True)
class CardPlan:
    """The cards of a run: where each runs, which backend makes them, and how the map was made."""

    slots: tuple[CardSlot, ...]
    backend: Backend           # its record, resolved from the name once (`resolve`)
    profile: Profile | None    # simulated cards' profile
    how: str                   # one line for the log and the manifest
    node_cpus: dict[int, frozenset[int]]
    allowed: frozenset[int]
    requests: int = 1          # infer requests (batches in flight) per openvino card; 1 for every other backend
    gpus: tuple[GpuRef, ...] = ()  # GPU backends: each slot's GPU (CUDA ordinal by bus id)
    provider_options: str = ""  # onnxruntime GPU: the provider options (harness.run.cards.provider_options)

    @property
    def simulated(self) -> bool:
        return self.profile is not None

    def system_name(self) -> str:
        n = len(self.slots)
        if self.profile is not None:
            cpu = system.default_system_name(self.backend.name, n, emulated=True).rsplit("_", 1)[0]
            return f"{cpu}_{n}xSIMULATED-{system.slug(self.profile.name)}"
        if self.gpus:  # several cards per GPU: the system is named by its GPUs
            n = len({g.pci for g in self.gpus})
        return system.default_system_name(self.backend.name, n, emulated=self.backend.stands_in)


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs decided before it starts."""

    opts: RunOptions             # with the tuned record applied (precision and cards concrete)
    choice: BackendChoice        # why this backend / batch (the manifest's `backend_choice`)
    bench: Benchmark
    model: ModelRecord           # the prepared model's record (its path absolute)
    data: store.PreparedData
    topology: Topology
    cards: CardPlan
    batch: int
    folder: Path                 # <results>/<system>/<benchmark>/<scenario>

    @cached_property
    def eligibility(self) -> tuple[bool, str]:
        """Whether the model's precision meets the benchmark's accuracy rule, and why (model_record.eligibility)."""
        return eligibility(self.bench, self.model)

    @property
    def not_submittable(self) -> str:
        """Why this run's precision fails its benchmark's accuracy rule, in one line ("": it passes)."""
        return self.refusal(self.eligibility)

    def refusal(self, verdict: tuple[bool, str]) -> str:
        """A verdict (eligible, why) as the line a run prints and keeps ("": it passes)."""
        eligible, why = verdict
        if eligible:
            return ""
        return (f"{self.model.precision} is not submittable for {self.bench.name}: {why} (the closed "
                f"division's accuracy rule); run --precision fp32, or a precision whose prepare reached it")

    def judged(self, golden_pct: float | None) -> tuple[bool, str]:
        """The precision's verdict after an accuracy run: a reduced precision that prepare found eligible is judged
        again by its own score against the FP32 golden reference, at the benchmark's fraction (99% for resnet50 and
        yolo-99), as the accuracy run on the device is what counts (prepare measured on the CPU: tf32 and fp16 on an
        emulation). It can refuse what prepare allowed, never allow what prepare refused (tune never chose that, and
        the run's performance runs stay refused); FP32, the reference, keeps its verdict."""
        if self.model.precision == "fp32" or golden_pct is None or not self.eligibility[0]:
            return self.eligibility
        target = 100 * self.bench.quality_fraction
        ok = golden_pct >= target
        return ok, (f"its accuracy run: {self.bench.quality_metric} against the FP32 golden reference "
                    f"{golden_pct:.2f}% {'>=' if ok else '<'} the {target:g}% {self.bench.name} must reach "
                    f"(at prepare: {self.eligibility[1]})")

    @property
    def scenario(self) -> Scenario:
        return self.opts.requested.scenario

    @property
    def mode(self) -> Mode:
        return self.opts.requested.mode


def resolve(opts: RunOptions) -> RunPlan:
    """Check the options, apply a tuned record, open the prepared data and place the cards (detecting once)."""
    from harness.hw.topology import detect
    from harness.run import gpu_defaults, tuned_choice

    if opts.system_name is not None:
        plain_name(opts.system_name, "--system")  # a folder of --results, never a path out of it
    options_given = opts.provider_options is not None  # '' too: the provider's defaults, asked for
    opts, choice = tuned_choice.resolve(opts)
    bench = benchmarks.get(opts.benchmark)
    record = opts.record  # the CLI made --backend a record, tuned_choice.resolve made auto one
    _check_choice("--replicate", opts.replicate, REPLICATE)
    if opts.requested.user_conf is not None:
        read_user_conf(opts.requested.user_conf)  # its problems before any card starts (preflight: the rest)
    assert opts.cards is not None  # tuned_choice.resolve made it concrete
    spec = parse_card_spec(opts.cards)
    layout = Layout(opts.data_dir, bench)
    assert opts.precision is not None  # tuned_choice.resolve made it concrete
    model = read_model_record(layout, opts.precision)
    data = store.open_prepared(layout.preprocessed, bench.prepare_hint(opts.data_dir))
    if opts.requested.mode == Mode.ACCURACY and not data.manifest.get("golden"):
        raise DataError(f"prepared data in {layout.preprocessed} ({data.count} samples) has no golden reference "
                        f"(a `prepare` stopped before it made one?), so an accuracy run could not check the "
                        f"harness against it; rerun `{bench.prepare_hint(opts.data_dir)}`")
    integrity.refuse_mismatches(integrity.verify_loaded(model, data), bench.prepare_hint(opts.data_dir))
    bench = concrete.for_run(opts.benchmark, opts.card_outputs, opts.nms_params, model, data)
    topology = detect()
    cards = plan_cards(spec, record, bench.name, topology, opts.requests or 1)
    if opts.provider_options:  # refused in one line for a provider that takes none
        provider_options.build(str(cards.backend.provider), opts.provider_options)
        cards = replace(cards, provider_options=opts.provider_options)
    elif choice.tuned is None and not options_given and cards.gpus:  # the GPU rule's (gpu_defaults)
        default, why = gpu_defaults.provider_options(cards.backend.provider)
        if default:
            cards = replace(cards, provider_options=default)
            choice = replace(choice, provider_options=default, why=f"{choice.why}; {why}")
    if model.inference_precision:  # bf16, tf32: only where the backend computes it (bf16: and this CPU)
        from harness.hw import bf16_support
        backends.check_computes(cards.backend, model.precision)
        if model.precision == bf16_support.PRECISION:
            bf16_support.require(f"--precision {opts.precision}")
    default_batch = cards.profile.batch if cards.profile is not None else bench.default_batch
    batch = opts.batch_size or (1 if opts.requested.scenario == Scenario.SINGLE_STREAM else default_batch)
    if opts.batch_size is None and cards.gpus:  # the GPU rule (harness.run.gpu_defaults), not the CPU's default
        per_gpu = max(sum(g.pci == ref.pci for g in cards.gpus) for ref in cards.gpus)
        batch, rule = gpu_defaults.batch(bench, opts.requested.scenario, model, per_gpu,
                                         gpu_defaults.gpu_memory_mib(sorted({g.pci for g in cards.gpus})))
        choice = replace(choice, why=f"{choice.why}; {rule}")
    check_buffer_memory(bench, cards, model, batch)
    preflight(bench, opts.requested, data.count, len(cards.slots))
    root = ensure_writable_dir(opts.results_dir, "results folder").resolve()
    folder = inside_results(root / (opts.system_name or cards.system_name()) / bench.name / opts.requested.scenario,
                            root, "--results")
    return RunPlan(opts, choice, bench, model, data, topology, cards, batch, folder)


def buffer_bytes(bench: Benchmark, cards: CardPlan, model: ModelRecord, batch: int) -> int:
    """The memory the harness allocates for a batch size, all cards together: per card its staging buffers, the
    padded copies of a backend that makes them and the outputs it holds (`buffers.card_bytes`: the depth rule is
    there). The backend's own working memory comes on top."""
    in_dtype = (None if not cards.backend.infers and cards.profile is None
                else cards.profile.input_dtype if cards.profile is not None else model.input_dtype or "float32")
    sample_in = 0 if in_dtype is None else math.prod(bench.input_shape) * np.dtype(in_dtype).itemsize
    sample_out = sum(4 * math.prod(shape) for shape, _ in bench.output_specs)
    return len(cards.slots) * buffers.card_bytes(batch, sample_in, sample_out, cards.requests,
                                                 cards.backend.padded_copies)


def check_buffer_memory(bench: Benchmark, cards: CardPlan, model: ModelRecord, batch: int,
                        option: str = "--batch-size") -> None:
    """Refuse a batch size (and requests per card) whose buffers the memory cannot hold, in one line,
    before anything is allocated (a batch of 100000 otherwise grows until the kernel kills the process)."""
    need = buffer_bytes(bench, cards, model, batch)
    free, source = system.memory_available()
    if need > free:
        per = f", {cards.requests} requests" if cards.requests > 1 else ""
        raise ApplianceError(f"batch size {batch} ({len(cards.slots)} card(s){per}) needs about {system.gb(need)} "
                             f"of sample and output buffers, and {system.gb(free)} is free ({source}); choose a "
                             f"smaller {option}")


def _check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ApplianceError(f"unknown {what} {value!r}; choose one of: {', '.join(choices)}")


def plan_cards(spec: CardSpec | str, record: Backend, benchmark: str, topology: Topology,
               requests: int = 1) -> CardPlan:
    """Place the cards of `spec` (auto | emulate:N | simulate:PROFILE:N | map.yaml) of the backend `record` on
    `topology`, each with `requests` infer requests in flight (a backend whose record takes requests)."""
    from harness.hw.topology import load_card_map, plan

    spec = spec if isinstance(spec, CardSpec) else parse_card_spec(spec)
    profile = None
    gpus: tuple[GpuRef, ...] = ()
    backend = record.name
    record.check_libraries()  # the libraries first: a missing one says more than "no GPU visible"
    if spec.kind == "simulate":
        from harness.run.cards.simulated_card import load_profile

        assert spec.profile is not None and spec.count is not None
        if backend != backends.DEFAULT and not record.simulated:  # the option's default
            raise ApplianceError(f"--cards simulate:… makes simulated cards; it cannot be combined with "
                                 f"--backend {backend}")
        profile = load_profile(spec.profile, benchmarks.get(benchmark).name)
        record = backends.simulating()
        slots, how = _shared_slots(topology, spec.count)
    else:
        if record.simulated:
            raise ApplianceError("--backend simulated needs --cards simulate:PROFILE:N (e.g. simulate:cloud-ai-100:4)")
        if spec.kind == "cuda" and not record.gpu:
            raise ApplianceError(f"--cards {spec.text} names NVIDIA GPUs; run them with --backend onnxruntime-cuda "
                                 f"(or onnxruntime-tensorrt), not {backend}")
        if record.gpu and spec.kind == "emulate":
            raise ApplianceError(f"--backend {backend} runs on NVIDIA GPUs, not on {spec.text} CPU-emulated cards; "
                                 f"use --cards cuda:all (or cuda:0,1)")
        if spec.kind == "map":
            cmap = load_card_map(spec.text, topology)
            how = f"card map {spec.text}"
        else:
            text = "cuda:all" if record.gpu and spec.kind == "auto" else spec.text
            cmap = plan(topology, text)
            how = f"--cards {text}: L3-aligned policy (topologies/README.md)"
        slots = tuple(CardSlot(c.index, c.cpus, c.numa_node) for c in cmap.cards)
        if record.gpu:
            gpus = _gpu_refs(cmap.cards, spec.text)
            if spec.per_gpu is not None:  # several cards (sessions, streams) per GPU
                slots, gpus, how = _per_gpu(cmap.cards, spec.per_gpu, topology, gpus, how)
        check_card_count(len(slots), how)
    if requests > 1 and not record.requests:
        takes = [b.name for b in backends.RECORDS.values() if b.requests]
        raise ApplianceError(f"--requests {requests} is for --backend {' / '.join(takes)} (its infer requests per "
                             f"card); {backend} cards take no --requests: drop it or use --backend {takes[0]}")
    if gpus:
        record.check_start([g.ordinal for g in gpus])
    return CardPlan(slots, record, profile, how, dict(topology.numa_nodes), topology.allowed, requests, gpus)


def _gpu_refs(cards: tuple[Any, ...], spec: str) -> tuple[GpuRef, ...]:
    """Each card's GPU; a card map without CUDA ordinals (or with a card that is no NVIDIA GPU) is refused."""
    bad = [c.index for c in cards if c.ordinal is None or c.pci is None]
    if bad:
        raise ApplianceError(f"--cards {spec}: card {bad[0]} is no visible NVIDIA GPU; make the map with "
                             f"`appliance topology detect --cards cuda:all --format yaml -o MAP`")
    return tuple(GpuRef(c.ordinal, c.pci, f"{c.vendor} {c.model}") for c in cards)


def _per_gpu(cards: tuple[Any, ...], per_gpu: tuple[int, ...], topology: Topology, gpus: tuple[GpuRef, ...],
             how: str) -> tuple[tuple[CardSlot, ...], tuple[GpuRef, ...], str]:
    """Each GPU's planned card cut into its cards per GPU (harness.hw.gpu_plan.split_gpu_cards)."""
    from harness.hw import gpu_plan

    core_cpus = {c.first: tuple(c.cpus) for c in topology.cores}
    placed = [(c.cpus, tuple(tuple(x for x in core_cpus.get(f, (f,)) if x in c.cpus) for f in c.cores), c.numa_node)
              for c in cards]
    split = gpu_plan.split_gpu_cards(placed, per_gpu)
    slots = tuple(CardSlot(i, s.cpus, s.node) for i, s in enumerate(split))
    shared = sorted({gpus[s.gpu_card].ordinal for s in split if s.shared_cpus})
    words = f"; fewer cores than cards on cuda:{','.join(map(str, shared))}: they share them" if shared else ""
    return slots, tuple(gpus[s.gpu_card] for s in split), f"{how}; {len(split)} cards on {len(cards)} GPU(s), each " \
        f"its own session, CUDA stream and buffers, the GPU's cores split between them{words}"


def _shared_slots(topology: Topology, n: int) -> tuple[tuple[CardSlot, ...], str]:
    """Simulated cards: the L3-aligned map when there are enough cores; when cards outnumber cores,
    card i shares core block i * cores // n with its neighbours (simulated cards mostly sleep)."""
    from harness.hw.topology import plan

    cores = len({c.first for c in topology.cores if set(c.cpus) & topology.allowed})
    if n <= cores:
        cmap = plan(topology, f"emulate:{n}")
        return tuple(CardSlot(c.index, c.cpus, c.numa_node) for c in cmap.cards), \
            f"simulate: {n} cards on {cores} cores, L3-aligned policy"
    base = plan(topology, f"emulate:{cores}").cards
    slots = tuple(CardSlot(i, base[i * cores // n].cpus, base[i * cores // n].numa_node) for i in range(n))
    return slots, (f"simulate: {n} cards on {cores} cores: cards outnumber cores, so card i shares the CPUs "
                   f"of core slot i*{cores}//{n} (up to {-(-n // cores)} cards per core)")
