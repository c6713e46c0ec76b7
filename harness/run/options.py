"""What `appliance run` was asked (`RunOptions`), before the plan makes it concrete: its own module, so the plan
and the tuned record's choice (harness.run.tuned_choice), which the plan calls, both read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from harness.run.cards import backends
from harness.run.cards.backends import Backend
from harness.run.loadgen_settings import Requested

__all__ = ["Auto", "RunOptions"]


class Auto(Enum):
    """`--backend auto`: the backend of the tuned record's choice for the scenario, else the default's record; made
    a record by harness.run.tuned_choice, before anything else reads it."""

    AUTO = "auto"


@dataclass(frozen=True)
class RunOptions:
    benchmark: str
    requested: Requested
    data_dir: Path
    results_dir: Path
    backend: Backend | Auto = field(default_factory=backends.default)  # the CLI's --backend, made its record
    batch_size: int | None = None
    system_name: str | None = None
    output_dir: Path | None = None    # write the logs exactly here (compliance runs); default run_N
    audit_config: str | None = None   # compliance test: LoadGen reads it as ./audit.config
    test05: bool = False              # TEST05: LoadGen's alternate seeds
    cards: str | None = None          # auto | emulate:N | simulate:PROFILE:N | cuda:all | cuda:0,1 | <map.yaml>;
                                      # None: the tuned record's layout with --tuned / --backend auto, else
                                      # auto (tuned_choice.resolve)
    replicate: str = "node"           # sample buffer replicas: node | card | none
    max_wait_us: int | None = None    # Server batch deadline; None: default_max_wait_s (batch, target QPS)
    card_outputs: str = "fp32"        # fp32 | quantised: the precision the cards return their outputs in
    nms_params: str = "reference"     # detection: the record's NMS parameter set (reference | krai)
    precision: str | None = None      # which prepared model: fp32 | int8 (harness.prepare.quantize); None: the tuned
                                      # record's with --tuned / --backend auto, else fp32 (tuned_choice.resolve)
    tuned: Path | None = None         # `appliance tune` record to take backend / batch / user.conf from
    requests: int | None = None       # infer requests per openvino card; None: the tuned record's, else 1
    provider_options: str | None = None  # onnxruntime GPU: e.g. "prefer_nhwc=1"; None: the tuned record's, else ""
    keep_warm: bool = False           # a SCHED_IDLE spinner on each card CPU while LoadGen runs (harness.run.keep_warm)

    @property
    def record(self) -> Backend:
        """The backend's record, once `tuned_choice.resolve` has made `--backend auto` one (the plan's options)."""
        if isinstance(self.backend, Auto):
            raise ValueError("--backend auto read before tuned_choice.resolve made it a record")
        return self.backend
