"""CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER resolved to the NVML devices each rank really uses."""
import json
import os

from ddpdoctor.facts.cuda_map import label, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def gpus(name):
    with open(os.path.join(ROOT, "fixtures", "snapshots", f"{name}.json"), encoding="utf-8") as fh:
        return json.load(fh)["sections"]["gpus"]


DGX = gpus("dgx-a100-8x-nvswitch")


def nv(cmap):
    return [v.nvml for v in cmap.visible]


def test_unset_means_every_gpu_in_bus_order():
    cmap = resolve({}, DGX)
    assert nv(cmap) == list(range(8)) and cmap.order == "FASTEST_FIRST" and cmap.order_certain


def test_indices_are_renumbered_from_zero():
    cmap = resolve({"CUDA_VISIBLE_DEVICES": "4,6"}, DGX)
    assert nv(cmap) == [4, 6] and [v.cuda for v in cmap.visible] == [0, 1]
    assert label(cmap, DGX, 6).startswith("cuda:1 = gpu:6 (NVIDIA A100-SXM4-80GB, 00000000:B7:00.0)")
    assert label(cmap, DGX, 0).startswith("gpu:0 (not visible to CUDA here)")


def test_uuid_and_unique_prefix():
    u5 = DGX["devices"][5]["uuid"]
    assert nv(resolve({"CUDA_VISIBLE_DEVICES": f"{u5},{DGX['devices'][1]['uuid'][:12]}"}, DGX)) == [5, 1]


def test_cuda_stops_at_the_first_entry_it_cannot_resolve():
    cmap = resolve({"CUDA_VISIBLE_DEVICES": "0,1,8,2"}, DGX)
    assert nv(cmap) == [0, 1] and cmap.problem_kind == "missing" and cmap.ignored == ["2"]
    assert "index 8 does not exist" in cmap.problems[0]
    cmap = resolve({"CUDA_VISIBLE_DEVICES": "GPU-00000000-dead"}, DGX)
    assert nv(cmap) == [] and cmap.problem_kind == "missing"


def test_syntax_problems_are_left_to_the_env_checks():
    assert resolve({"CUDA_VISIBLE_DEVICES": "0,0"}, DGX).problem_kind == "syntax"
    assert resolve({"CUDA_VISIBLE_DEVICES": "0,,1"}, DGX).problem_kind == "syntax"
    assert resolve({"CUDA_VISIBLE_DEVICES": "gpu0"}, DGX).problem_kind == "syntax"


def test_empty_and_minus_one_hide_everything():
    for value in ("", "-1", "NoDevFiles"):
        cmap = resolve({"CUDA_VISIBLE_DEVICES": value}, DGX)
        assert nv(cmap) == [] and not cmap.problems


def test_mig_uuids_map_to_their_parent():
    mig = gpus("a100-mig")
    uuids = [m["uuid"] for m in mig["devices"][0]["mig_devices"]]
    cmap = resolve({"CUDA_VISIBLE_DEVICES": uuids[1]}, mig)
    assert [(v.nvml, v.mig_uuid) for v in cmap.visible] == [(0, uuids[1])]
    assert resolve({}, mig).visible[0].mig_uuid == uuids[0]  # unset: the process gets one MIG device
    assert resolve({"CUDA_VISIBLE_DEVICES": "MIG-ffffffff-0000-0000-0000-000000000000"}, mig).problem_kind == "missing"


def test_mixed_models_fastest_first_is_a_marked_guess_and_pci_bus_id_is_exact():
    mixed = gpus("mixed-rtx3090-rtx4090")
    guess = resolve({}, mixed)
    assert not guess.order_certain and nv(guess) == [1, 0]  # the 4090 (sm_89) before the 3090 (sm_86)
    exact = resolve({"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}, mixed)
    assert exact.order_certain and nv(exact) == [1]
