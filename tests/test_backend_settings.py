"""Each backend's settings are its own type, made by its own record (issue 45): `BackendSpec` holds what every card
is made from and one `settings` value; the record's `settings` makes it from what the plan decided (`Planned`), and
a card module given another backend's settings refuses it in one line before it loads anything."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from harness.core.errors import ApplianceError
from harness.hw.gpu import GpuRef
from harness.run.cards import make_card
from harness.run.cards.backends import RECORDS, Planned
from harness.run.cards.cpu_card import IO_BINDING_ENV
from harness.run.cards.gpu_iobinding import IoBindingCard, IoBindingSettings
from harness.run.cards.onnxruntime_card import GpuSettings
from harness.run.cards.openvino_process import OpenvinoSettings
from harness.run.cards.simulated_card import Profile, load_profile
from harness.run.cards.spec import BackendSpec

GPUS = (GpuRef(0, "0000:01:00.0", "H100"), GpuRef(1, "0000:02:00.0", "H100"))
PROFILE = load_profile("cloud-ai-100", "resnet50")
PLANNED = Planned(cards=2, batch=8, scenario="Server", benchmark="resnet50", requests=3, gpus=GPUS,
                  provider_options="prefer_nhwc=1", profile=PROFILE)


def _spec(backend: str, settings: object) -> BackendSpec[object]:
    return BackendSpec(RECORDS[backend], Path("m.onnx"), "x", ("y",), (((4,), "float32"),), settings)


def test_the_spec_is_the_common_part_and_one_settings_value():
    assert [f.name for f in fields(BackendSpec)] == ["backend", "model_path", "input_name", "outputs", "output_specs",
                                                     "settings", "output_casts", "precision", "inference_precision",
                                                     "sessions"]  # tune's cache of sessions (kept_sessions)


def test_each_record_makes_its_own_settings_from_the_plan(monkeypatch):
    made = {name: record.settings_for(PLANNED) for name, record in RECORDS.items()}
    gpu = IoBindingSettings(8, (1, 2, 4, 8), "resnet50", GpuSettings(GPUS, "prefer_nhwc=1"))
    assert made == {"onnxruntime": None, "onnxruntime-cuda": gpu, "onnxruntime-tensorrt": gpu,
                    "onnxruntime-parallel": None, "onnxruntime-openvino": None,
                    "openvino": OpenvinoSettings(requests=3, processes=True), "null": None, "simulated": PROFILE}
    assert isinstance(made["simulated"], Profile)
    one = Planned(cards=1, batch=4, scenario="Offline", benchmark="resnet50")
    assert RECORDS["openvino"].settings_for(one) == OpenvinoSettings(requests=1, processes=False)
    # the CPU backend's IO-binding rehearsal: the IO-binding card's settings, on no GPU
    monkeypatch.setenv(IO_BINDING_ENV, "1")
    assert RECORDS["onnxruntime"].settings_for(one) == IoBindingSettings(4, (1, 4), "resnet50", None)
    with pytest.raises(ApplianceError, match="needs --cards simulate:PROFILE:N"):
        RECORDS["simulated"].settings_for(one)  # no profile planned


@pytest.mark.parametrize(("backend", "settings", "wants"), [
    ("simulated", OpenvinoSettings(), "Profile"),
    ("openvino", PROFILE, "OpenvinoSettings"),
    ("onnxruntime-cuda", None, "IoBindingSettings"),
    ("onnxruntime-cuda", OpenvinoSettings(), "IoBindingSettings"),
])
def test_a_card_module_refuses_another_backends_settings_in_one_line(backend, settings, wants):
    with pytest.raises(ApplianceError) as info:
        make_card(_spec(backend, settings), 0, (0,))
    line = str(info.value)
    assert line.startswith(f"{backend}'s cards take {wants} settings, not {type(settings).__name__}:"), line
    assert "\n" not in line


def test_the_io_binding_card_refuses_the_plain_cards_none_before_loading():
    with pytest.raises(ApplianceError, match="take IoBindingSettings settings, not NoneType"):
        IoBindingCard(_spec("onnxruntime", None), 0, (0,))  # m.onnx does not exist: refused before it is read
