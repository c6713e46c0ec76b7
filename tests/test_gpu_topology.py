"""NVIDIA GPUs found by PCI bus id: CUDA ordinals, the visibility variables, `--cards cuda:…`, their cores.

The fixtures (tests/sysfs_fixtures.py) are an HGX-like 8-GPU server on two sockets and a PCIe server with
one GPU per socket; hwloc reads the same trees in test_topology_hwloc.py.
"""

from __future__ import annotations

import pytest
from helpers import appliance
from sysfs_fixtures import build, shared_trees

from harness.core.errors import ApplianceError
from harness.hw.gpu import bus_id, visible
from harness.hw.topology import detect, plan
from harness.hw.topology.formats import load_card_map, render_yaml

HGX_GPUS = ["0000:01:00.0", "0000:09:00.0", "0000:21:00.0", "0000:29:00.0",
            "0000:41:00.0", "0000:49:00.0", "0000:61:00.0", "0000:69:00.0"]


@pytest.fixture(autouse=True)
def _no_visibility(monkeypatch):
    for var in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def hgx(tmp_path_factory):
    return detect(build("hgx-h100", shared_trees(tmp_path_factory)))


@pytest.fixture
def pcie(tmp_path_factory):
    return detect(build("pcie-2gpu", shared_trees(tmp_path_factory)))


def _node_cpus(topo, node):
    return topo.numa_nodes[node]


def test_hgx_cards_are_the_gpus_in_bus_order_on_their_sockets(hgx):
    cards = plan(hgx, "cuda:all").cards
    assert [c.pci for c in cards] == HGX_GPUS
    assert [c.ordinal for c in cards] == list(range(8))
    assert [c.numa_node for c in cards] == [0] * 4 + [1] * 4
    assert all(c.model == "H100-SXM5-80GB" for c in cards)
    for c in cards:
        assert set(c.cpus) <= _node_cpus(hgx, c.numa_node)
    assert len({cpu for c in cards for cpu in c.cpus}) == sum(len(c.cpus) for c in cards)  # no core shared


def test_cuda_visible_devices_picks_the_gpus_and_the_cores_follow(hgx, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6")
    cards = plan(hgx, "auto").cards
    assert [(c.pci, c.ordinal, c.numa_node) for c in cards] == [(HGX_GPUS[5], 0, 1), (HGX_GPUS[6], 1, 1)]
    # the two cards share socket 1's cores between them, and nothing of socket 0
    assert {cpu for c in cards for cpu in c.cpus} == set(_node_cpus(hgx, 1))


def test_nvidia_visible_devices_then_cuda_visible_devices(hgx, monkeypatch):
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "2,3")  # the container was given host GPUs 2 and 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")      # of those, the second
    cards = plan(hgx, "cuda:all").cards
    assert [(c.pci, c.ordinal) for c in cards] == [(HGX_GPUS[3], 0)]


def test_cuda_visible_devices_order_sets_the_ordinals(hgx, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7,0")
    cards = plan(hgx, "cuda:all").cards
    assert [(c.ordinal, c.pci) for c in cards] == [(0, HGX_GPUS[7]), (1, HGX_GPUS[0])]


def test_pcie_server_one_gpu_per_node(pcie):
    cards = plan(pcie, "cuda:all").cards
    assert [(c.pci, c.ordinal, c.numa_node) for c in cards] == [("0000:01:00.0", 0, 0), ("0000:21:00.0", 1, 1)]
    for c in cards:
        assert set(c.cpus) == set(_node_cpus(pcie, c.numa_node))
    assert [c.pci for c in plan(pcie, "cuda:1").cards] == ["0000:21:00.0"]


def test_cuda_ordinal_round_trips_through_a_map(pcie, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    path = tmp_path / "map.yaml"
    path.write_text(render_yaml(plan(pcie, "cuda:all")))
    assert [(c.pci, c.ordinal) for c in load_card_map(path, pcie).cards] == [("0000:21:00.0", 0)]


def test_topology_detect_says_which_gpu_each_card_is(tmp_path_factory, capsys):
    root = build("pcie-2gpu", shared_trees(tmp_path_factory))
    assert appliance("topology", "detect", "--sysfs-root", root, "--cards", "cuda:all") == 0
    out = capsys.readouterr().out
    assert "gpu" in out and "cuda:0" in out and "cuda:1" in out and "H100-PCIE-80GB" in out


def _one_line_refusal(capsys, *args):
    rc = appliance(*args)
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and captured.out == "", (rc, captured)
    return err[0]


def test_cards_cuda_3_with_two_visible_gpus_is_one_line(tmp_path_factory, tmp_path, capsys):
    root = build("pcie-2gpu", shared_trees(tmp_path_factory))
    out = tmp_path / "map.yaml"
    line = _one_line_refusal(capsys, "topology", "detect", "--sysfs-root", root, "--cards", "cuda:3", "-o", out)
    assert "there is no cuda:3" in line and "2 GPU(s) are visible" in line
    assert not out.exists()


def test_no_gpu_visible_is_one_line(tmp_path_factory, monkeypatch, capsys):
    root = build("pcie-2gpu", shared_trees(tmp_path_factory))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    line = _one_line_refusal(capsys, "topology", "detect", "--sysfs-root", root, "--cards", "cuda:all")
    assert "no NVIDIA GPU is visible" in line and "CUDA_VISIBLE_DEVICES=" in line
    root = build("r282-z93-5cards", shared_trees(tmp_path_factory))
    line = _one_line_refusal(capsys, "topology", "detect", "--sysfs-root", root, "--cards", "cuda:all")
    assert "no NVIDIA GPU is visible (none on PCI)" in line


def test_uuid_without_nvml_is_refused_in_one_line(tmp_path_factory, monkeypatch, capsys):
    root = build("pcie-2gpu", shared_trees(tmp_path_factory))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")
    line = _one_line_refusal(capsys, "topology", "detect", "--sysfs-root", root, "--cards", "cuda:all")
    assert "by UUID" in line or "which no GPU here has" in line  # NVML absent here, or present without it


def test_uuid_that_does_not_exist_is_refused():
    uuids = {"GPU-aaaa1111": "0000:01:00.0", "GPU-bbbb2222": "0000:21:00.0"}
    gpus = ["0000:21:00.0", "0000:01:00.0"]
    assert visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}, uuids) == ["0000:21:00.0"]  # a unique prefix
    assert visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb2222,0"}, uuids) == ["0000:21:00.0", "0000:01:00.0"]
    with pytest.raises(ApplianceError, match="names GPU GPU-cccc3333, which no GPU here has"):
        visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-cccc3333"}, uuids)
    with pytest.raises(ApplianceError, match="needs NVML"):
        visible(gpus, {"CUDA_VISIBLE_DEVICES": "GPU-aaaa1111"}, None)


@pytest.mark.parametrize(("env", "words"), [
    ({"CUDA_VISIBLE_DEVICES": "2"}, "names GPU 2, but only 2 GPU(s)"),
    ({"CUDA_VISIBLE_DEVICES": "0,0"}, "names a GPU twice"),
    ({"CUDA_VISIBLE_DEVICES": "MIG-1234"}, "MIG instance"),
    ({"CUDA_VISIBLE_DEVICES": "gpu0"}, "neither a GPU index nor a GPU UUID"),
])
def test_bad_visibility_values(env, words):
    with pytest.raises(ApplianceError, match=words.replace("(", r"\(").replace(")", r"\)")):
        visible(["0000:01:00.0", "0000:21:00.0"], env, None)


def test_visibility_defaults():
    gpus = ["0000:21:00.0", "0000:01:00.0"]
    assert visible(gpus, {}, None) == ["0000:01:00.0", "0000:21:00.0"]  # bus id order
    assert visible(gpus, {"NVIDIA_VISIBLE_DEVICES": "all"}, None) == ["0000:01:00.0", "0000:21:00.0"]
    assert visible(gpus, {"NVIDIA_VISIBLE_DEVICES": "none"}, None) == []
    assert visible(gpus, {"CUDA_VISIBLE_DEVICES": "-1"}, None) == []
    assert bus_id("00000000:1B:00.0") == "0000:1b:00.0"


def test_gpu_cards_need_a_gpu_backend(data_dir, tmp_path, capsys):
    line = _one_line_refusal(capsys, "run", "--data-dir", data_dir, "--results", tmp_path / "r", "--cards", "cuda:0",
                             "--duration-ms", 100)
    assert "names NVIDIA GPUs" in line
    assert not (tmp_path / "r").exists()
