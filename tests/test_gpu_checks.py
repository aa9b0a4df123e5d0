"""Each GPU check: a snapshot that triggers it and one that does not, built from the fixtures."""
import copy
import json
import os

import pytest

from ddpdoctor.model.registry import REGISTRY
from ddpdoctor.pipeline.runner import load_all
from ddpdoctor.pipeline.snapshot import Snapshot
from factory import findings_of, make_snapshot
from factory import fixture_snapshot as fixture

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GiB = 1024 ** 3


def torchrun(n, **extra):
    env = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "0", "WORLD_SIZE": str(n), "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    env.update(extra)
    return env


def one(snap, check_id):
    found = findings_of(snap, check_id)
    assert len(found) == 1, [f.title for f in found]
    return found[0]


def none(snap, check_id):
    found = findings_of(snap, check_id)
    assert not found, [f.title for f in found]


def dev(i, **changes):
    def edit(s):
        for path, value in changes.items():
            cur = s["gpus"]["devices"][i]
            keys = path.split("__")
            for k in keys[:-1]:
                cur = cur[k]
            cur[keys[-1]] = value
    return edit


def pair(a, b, **p2p):
    def edit(s):
        for p in s["gpus"]["pairs"]:
            if (p["a"], p["b"]) == (a, b):
                p["p2p"].update(p2p)
    return edit


def test_every_gpu_check_is_tested_here():
    load_all(plugins=False)
    ids = {s.id for s in REGISTRY.values() if s.id.startswith("GPU")}
    text = open(__file__, encoding="utf-8").read()
    assert ids and all(f'"{i}"' in text for i in ids)


# GPU001 no-nvidia-driver
def test_gpu001_cpu_only_is_one_info():
    f = one(fixture("cpu-only"), "GPU001")
    assert f.severity == "info" and f.subjects == ()


def test_gpu001_warns_when_gpus_were_expected():
    f = one(fixture("cpu-only", env={"CUDA_VISIBLE_DEVICES": "0,1"}), "GPU001")
    assert f.severity == "warning" and f.subjects == ("CUDA_VISIBLE_DEVICES",)
    def unloaded(s):
        s["gpus"].update(reason="driver_not_loaded", unavailable="the NVIDIA driver is installed but not loaded")
    assert one(fixture("cpu-only", edit=unloaded), "GPU001").severity == "warning"
    def mismatch(s):
        s["gpus"].update(reason="version_mismatch", unavailable="versions differ")
    assert one(fixture("cpu-only", edit=mismatch), "GPU001").severity == "error"


def test_gpu001_quiet_when_nvml_works():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU001")


# GPU002 no-gpu-p2p
def test_gpu002_rtx40_on_old_driver_is_an_error():
    def old(s):
        s["gpus"]["driver_version"] = "535.104.05"
        for p in s["gpus"]["pairs"]:
            p["p2p"].update(read="OK", write="OK")
    f = one(fixture("rtx4090-4x-no-p2p", edit=old, env=torchrun(4)), "GPU002")
    assert f.severity == "error" and "NCCL_P2P_DISABLE" in f.subjects
    # graded by the job (check21): no launch says how many ranks run here -> a warning; one rank here -> nothing
    assert one(fixture("rtx4090-4x-no-p2p", edit=old), "GPU002").severity == "warning"
    none(fixture("rtx4090-4x-no-p2p", edit=old, env=torchrun(1)), "GPU002")
    none(fixture("rtx4090-4x-no-p2p", edit=old, env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}), "GPU002")


def test_gpu002_quiet_with_p2p():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU002")
    none(fixture("rtx4090-4x-no-p2p", env={"CUDA_VISIBLE_DEVICES": "2"}), "GPU002")


# GPU003 pcie-acs-redirect, GPU004 iommu-translation
def test_gpu003_gpu004_quiet_when_acs_off_and_passthrough():
    def fixed(s):
        for b in s["pci"]["bridges"].values():
            if b["acs"].get("ctl"):
                b["acs"]["ctl"].update(ReqRedir=False, CmpltRedir=False)
        for g in s["pci"]["gpus"].values():
            g["iommu_group_type"] = "identity"
    none(fixture("pcie-switch-acs-2x-l40s", edit=fixed), "GPU003")
    none(fixture("pcie-switch-acs-2x-l40s", edit=fixed), "GPU004")


def test_gpu003_gpu004_respect_the_p2p_workaround():
    snap = fixture("pcie-switch-acs-2x-l40s", env={"NCCL_P2P_DISABLE": "1"})
    none(snap, "GPU003")
    none(snap, "GPU004")
    none(snap, "GPU013")  # here the flag is the right workaround, not a stale one


def test_gpu003_names_the_bridges():
    f = one(fixture("pcie-switch-acs-2x-l40s"), "GPU003")
    assert "0000:18:00.0" in f.fix and "0000:18:01.0" in f.fix and "0000:16:02.0" not in f.fix


def test_gpu004_from_the_command_line_when_groups_are_unknown():
    def no_groups(s):
        for g in s["pci"]["gpus"].values():
            g["iommu_group_type"] = None
    assert one(fixture("pcie-switch-acs-2x-l40s", edit=no_groups), "GPU004").severity == "warning"


# GPU005 nvlink-p2p-disabled
def test_gpu005_nvlink_without_nvlink_p2p():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=pair(0, 1, nvlink="NOT_SUPPORTED")), "GPU005")
    assert f.subjects == ("gpu:0", "gpu:1")
    none(fixture("dgx-a100-8x-nvswitch"), "GPU005")
    none(fixture("rtx4090-4x-no-p2p"), "GPU005")


# GPU006 nvlink-links-down
def test_gpu006_quiet_on_healthy_sxm_and_on_pcie_cards_without_bridges():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU006")
    none(fixture("a100-mig"), "GPU006")  # A100 PCIe: 12 links, all inactive without a bridge


def test_gpu006_links_missing_from_enumeration():
    def short(s):
        s["gpus"]["devices"][1]["nvlinks"] = s["gpus"]["devices"][1]["nvlinks"][:16]
    f = one(fixture("hgx-h100-8x", edit=short), "GPU006")
    assert "16 of 18" in f.title and f.subjects == ("gpu:1",)


def test_gpu006_no_link_up_on_any_gpu_is_one_finding_about_the_node():
    # tatsu-lab/stanford_alpaca#32: a provider's 8x A100 routed every pair through the host bridge
    def all_down(s):
        for d in s["gpus"]["devices"]:
            d["nvlinks"] = [dict(l, active=False) for l in d["nvlinks"]]
    f = one(fixture("dgx-a100-8x-nvswitch", edit=all_down), "GPU006")
    assert "no NVLink is active on 8 GPUs" in f.title and len(f.subjects) == 8 and "passthrough" in f.fix

    def one_down(s):  # a single GPU with every link down stays a per-GPU hardware finding
        s["gpus"]["devices"][2]["nvlinks"] = [dict(l, active=False) for l in s["gpus"]["devices"][2]["nvlinks"]]
    f = one(fixture("dgx-a100-8x-nvswitch", edit=one_down), "GPU006")
    assert "0 of 12" in f.title and f.subjects == ("gpu:2",)


# GPU007 pcie-width-downtrained
def test_gpu007_width_not_generation():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=dev(2, pcie__width_current=8)), "GPU007")
    assert "x8 instead of x16" in f.title and f.subjects == ("gpu:2",)
    none(fixture("rtx4090-4x-no-p2p"), "GPU007")  # gen 1 of 4 at idle is normal


def _loaded(i, gen, idle=False, sm=2400):
    def edit(s):
        d = s["gpus"]["devices"][i]
        d["pcie"]["gen_current"] = gen
        d["clocks"] = dict(d.get("clocks") or {}, sm_mhz=sm, sm_max_mhz=3120)
        d["throttle_reasons"] = {"mask": 1, "names": ["GpuIdle"]} if idle else {"mask": 0, "names": []}
    return edit


def test_gpu007_generation_low_while_busy():
    f = one(fixture("rtx4090-4x-no-p2p", edit=_loaded(2, 2)), "GPU007")
    assert "Gen2 instead of Gen4" in f.title and f.subjects == ("gpu:2",) and f.severity == "warning"


def test_gpu007_generation_low_quiet_when_idle_or_clocks_low_or_full_gen():
    none(fixture("rtx4090-4x-no-p2p", edit=_loaded(2, 2, idle=True)), "GPU007")  # GpuIdle reason: idle power saving
    none(fixture("rtx4090-4x-no-p2p", edit=_loaded(2, 1, sm=210)), "GPU007")      # clocks down: not under load
    none(fixture("rtx4090-4x-no-p2p", edit=_loaded(2, 4)), "GPU007")              # busy at its full generation


def test_gpu007_falls_back_to_sysfs():
    def sysfs(s):
        s["gpus"]["devices"][1]["pcie"].update(width_current=None, width_max=None)
        s["pci"]["gpus"]["0000:1a:00.0"]["link"].update(current_width=4, max_width=16)
    f = one(fixture("pcie-switch-acs-2x-l40s", edit=sysfs), "GPU007")
    assert f.evidence["source"] == "sysfs"


# GPU008 mig-enabled
def test_gpu008_several_ranks_on_one_mig_gpu_is_an_error():
    assert one(fixture("a100-mig", env=torchrun(2)), "GPU008").severity == "error"
    uuids = "{0},{1}"
    def both(s):
        s["env"]["vars"]["CUDA_VISIBLE_DEVICES"] = uuids.format(*[m["uuid"] for m in s["gpus"]["devices"][0]["mig_devices"]])
    assert one(fixture("a100-mig", edit=both), "GPU008").severity == "error"


def test_gpu008_quiet_without_mig():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU008")


def test_gpu008_several_mig_uuids_in_one_cuda_visible_devices():
    # NVIDIA/k8s-device-plugin#446: four MIG instances (one per GPU) handed to one container
    base = json.load(open(os.path.join(ROOT, "fixtures", "snapshots", "a100-mig.json")))["sections"]["gpus"]["devices"][0]

    def four(s):
        devs = []
        for i, b in enumerate(("3B", "5E")):
            d = copy.deepcopy(base)
            d["index"], d["pci_bus_id"], d["uuid"] = i, f"00000000:{b}:00.0", f"GPU-0000000{i}-0000-4000-8000-000000000000"
            d["mig_devices"] = [dict(d["mig_devices"][0], uuid=f"MIG-1111111{i}-2222-4333-8444-555555555555")]
            devs.append(d)
        s["gpus"]["devices"], s["gpus"]["pairs"] = devs, []
    cvd = "MIG-11111110-2222-4333-8444-555555555555,MIG-11111111-2222-4333-8444-555555555555"
    f = one(fixture("a100-mig", env=torchrun(2, CUDA_VISIBLE_DEVICES=cvd), edit=four), "GPU008")
    assert f.severity == "error" and "lists 2 MIG devices" in f.title and "CUDA_VISIBLE_DEVICES" in f.subjects


# GPU009 gpu-memory-errors
def test_gpu009_lifetime_errors_only_are_info():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=dev(4, ecc_errors__aggregate_uncorrected=3)), "GPU009")
    assert f.severity == "info"
    assert one(fixture("dgx-a100-8x-nvswitch", edit=dev(4, retired_pages_pending=True)), "GPU009").severity == "warning"

def test_gpu009_lifetime_errors_on_a_gpu_that_cannot_remap_rows_are_a_warning():
    # jcjohnson/neural-style#312: a K40c whose uncorrectable errors come back after every reboot;
    # before Ampere the driver can only retire pages (remapped_rows: Not Supported)
    f = one(fixture("dgx-a100-8x-nvswitch", edit=dev(4, ecc_errors__aggregate_uncorrected=3, remapped_rows=None)),
            "GPU009")
    assert f.severity == "warning" and "cannot remap rows" in f.title


def test_gpu009_quiet_on_healthy_and_on_geforce_without_ecc():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU009")
    none(fixture("rtx4090-4x-no-p2p"), "GPU009")


def test_gpu009_only_visible_gpus():
    none(fixture("p4d-nvlink-down-remap-pending", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}), "GPU009")


# GPU010 gpu-memory-in-use
def foreign(ours=False, in_proc=True):
    def edit(s):
        d = s["gpus"]["devices"][1]
        d["processes"] = [{"pid": 31337, "name": "python", "used_bytes": 30 * GiB, "ours": ours, "in_our_proc": in_proc}]
        d["memory"]["used_bytes"] = 30 * GiB + 4 * 1024 ** 2
    return edit


def test_gpu010_other_process_holds_memory():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=foreign()), "GPU010")
    assert f.subjects == ("gpu:1",) and "31337" in f.detail


def test_gpu010_unlisted_memory():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=dev(3, memory__used_bytes=12 * GiB)), "GPU010")
    assert "does not list" in f.detail


def test_gpu010_quiet_for_our_own_process():
    none(fixture("dgx-a100-8x-nvswitch", edit=foreign(ours=True)), "GPU010")
    none(fixture("dgx-a100-8x-nvswitch"), "GPU010")


# GPU011 persistence-mode-off
def test_gpu011():
    assert one(fixture("rtx4090-4x-no-p2p"), "GPU011").severity == "info"
    none(fixture("dgx-a100-8x-nvswitch"), "GPU011")


# GPU012 compute-mode-restricted
def test_gpu012_prohibited_and_exclusive_conflict():
    assert one(fixture("dgx-a100-8x-nvswitch", edit=dev(0, compute_mode="PROHIBITED")), "GPU012").severity == "error"
    def excl(s):
        dev(1, compute_mode="EXCLUSIVE_PROCESS")(s)
        foreign()(s)
    assert one(fixture("dgx-a100-8x-nvswitch", edit=excl), "GPU012").subjects == ("gpu:1",)


def test_gpu012_exclusive_thread_is_an_error_even_for_one_process():
    # tensorflow/tensorflow#526: one thread per context; torch's autograd and NCCL threads need more
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(1), edit=dev(0, compute_mode="EXCLUSIVE_THREAD")), "GPU012")
    assert f.severity == "error" and "EXCLUSIVE_THREAD" in f.title and "gpu:0" in f.subjects


def test_gpu012_several_ranks_on_exclusive_gpus_must_set_their_device_first():
    # one rank per GPU can work, but only if no rank touches cuda:0 before set_device (issue 26, batch 1):
    # a warning saying so, not an error
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(8), edit=dev(1, compute_mode="EXCLUSIVE_PROCESS")), "GPU012")
    assert f.severity == "warning" and "must select its own GPU" in f.title and "gpu:1" in f.subjects


def test_gpu012_quiet_when_exclusive_is_respected():
    # one process per machine, or nothing says how many local ranks there are
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(1), edit=dev(1, compute_mode="EXCLUSIVE_PROCESS")), "GPU012")
    none(fixture("dgx-a100-8x-nvswitch", edit=dev(1, compute_mode="EXCLUSIVE_PROCESS")), "GPU012")


# GPU013 nccl-disable-flag-vs-hardware
def test_gpu013_p2p_disabled_on_nvlink():
    f = one(fixture("hgx-h100-8x", env={"NCCL_P2P_DISABLE": "1"}), "GPU013")
    assert f.severity == "warning" and f.subjects[0] == "NCCL_P2P_DISABLE" and "28 over NVLink" in f.title


def test_gpu013_quiet_where_the_flag_is_right_or_off():
    none(fixture("rtx4090-4x-no-p2p", env={"NCCL_P2P_DISABLE": "1"}), "GPU013")
    none(fixture("hgx-h100-8x", env={"NCCL_P2P_DISABLE": "0"}), "GPU013")
    none(fixture("hgx-h100-8x"), "GPU013")


def test_gpu013_shm_and_ib_flags():
    f = one(fixture("rtx4090-4x-no-p2p", env={"NCCL_SHM_DISABLE": "1"}), "GPU013")
    assert f.subjects[0] == "NCCL_SHM_DISABLE"
    multi = torchrun(8, WORLD_SIZE="16", GROUP_WORLD_SIZE="2", NCCL_IB_DISABLE="1")
    assert one(fixture("dgx-a100-8x-nvswitch", env=multi), "GPU013").subjects == ("NCCL_IB_DISABLE",)
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_IB_DISABLE="1")), "GPU013")  # one node


def _no_rdma(s):
    s["pci"]["rdma_devices"] = []


def test_gpu013_nccl_net_ib_without_an_rdma_device():
    # NVIDIA/nccl#958: NCCL_NET=IB for RoCE, but the OS exposes no RDMA device
    f = one(fixture("hgx-h100-8x", env=torchrun(2, NCCL_NET="IB"), edit=_no_rdma), "GPU013")
    assert f.severity == "error" and f.subjects == ("NCCL_NET",) and "Failed to initialize any NET plugin" in f.detail
    none(fixture("hgx-h100-8x", env=torchrun(2, NCCL_NET="IB")), "GPU013")  # eight mlx5 devices
    none(fixture("hgx-h100-8x", env=torchrun(2, NCCL_NET="Socket"), edit=_no_rdma), "GPU013")


# GPU014 nccl-shm-too-small
def test_gpu014_warning_between_256mib_and_1gib():
    def half(s):
        s["host"]["shm"]["size_bytes"] = 512 * 1024 ** 2
    assert one(fixture("docker-shm-64mb-hgx-a100-4x", edit=half), "GPU014").severity == "warning"


def test_gpu014_quiet_with_big_shm_or_one_rank():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU014")
    none(fixture("docker-shm-64mb-hgx-a100-4x", env=torchrun(1)), "GPU014")
    none(fixture("docker-shm-64mb-hgx-a100-4x", env={"CUDA_VISIBLE_DEVICES": "0"}), "GPU014")


# GPU015 mixed-gpus-device-order
def test_gpu015_quiet_with_pci_bus_id_or_one_model():
    none(fixture("mixed-rtx3090-rtx4090", env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}), "GPU015")
    none(fixture("mixed-rtx3090-rtx4090", env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}), "GPU015")
    none(fixture("dgx-a100-8x-nvswitch"), "GPU015")
    none(fixture("dgx-a100-8x-nvswitch", env={"CUDA_VISIBLE_DEVICES": "3,1"}), "GPU015")


def test_gpu015_an_index_lands_on_another_card_even_when_one_model_is_visible():
    # nvidia-smi's GPU 0 is the 3090; CUDA's index 0 (fastest first) is the 4090
    f = one(fixture("mixed-rtx3090-rtx4090", env={"CUDA_VISIBLE_DEVICES": "0"}), "GPU015")
    assert f.evidence["index_selects"] == {"0": 1} and "CUDA_VISIBLE_DEVICES" in f.subjects
    snap = fixture("mixed-rtx3090-rtx4090")
    uuid = snap.get("gpus")["devices"][0]["uuid"]
    none(fixture("mixed-rtx3090-rtx4090", env={"CUDA_VISIBLE_DEVICES": uuid}), "GPU015")  # a UUID is unambiguous


def _three_cards(s):
    # Theano/Theano#6023: a GTX 1080, a TITAN X (Pascal) and a GTX TITAN X; two share compute capability 6.1
    s["gpus"]["devices"] = s["gpus"]["devices"][:3]
    for d, (name, cap) in zip(s["gpus"]["devices"], [("GeForce GTX 1080", [6, 1]), ("TITAN X (Pascal)", [6, 1]),
                                                       ("GeForce GTX TITAN X", [5, 2])]):
        d["name"], d["cuda_capability"] = name, cap


def test_gpu015_an_index_on_mixed_models_is_a_marked_guess_when_the_order_is_unknown():
    # CUDA's FASTEST_FIRST puts its fastest guess at 0 and leaves the rest unspecified: the heuristic here
    # guesses no move, so the finding says the index *may* name another card
    f = one(fixture("rtx4090-4x-no-p2p", env={"CUDA_VISIBLE_DEVICES": "1"}, edit=_three_cards), "GPU015")
    assert "a guess" in f.title and f.evidence["guess"] is True and f.env_fix == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    none(fixture("rtx4090-4x-no-p2p", env={"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                 edit=_three_cards), "GPU015")
    snap = fixture("rtx4090-4x-no-p2p", edit=_three_cards)
    uuid = snap.get("gpus")["devices"][1]["uuid"]
    none(fixture("rtx4090-4x-no-p2p", env={"CUDA_VISIBLE_DEVICES": uuid}, edit=_three_cards), "GPU015")
    none(fixture("rtx4090-4x-no-p2p", env={"CUDA_VISIBLE_DEVICES": "1"}), "GPU015")  # one model: the order is known


# GPU020 nccl-level-below-topology
def test_gpu020_p2p_level_below_nvlink_and_pcie_paths():
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_P2P_LEVEL="LOC")), "GPU020")
    assert f.env_fix == {"NCCL_P2P_LEVEL": None} and len(f.evidence["lost_pairs"]) == 28
    one(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_P2P_LEVEL="0")), "GPU020")  # legacy 0 = LOC
    # the L40S pair behind one PCIe switch: PIX works, LOC loses it
    one(fixture("pcie-switch-acs-2x-l40s", env=torchrun(2, NCCL_P2P_LEVEL="LOC")), "GPU020")


def test_gpu020_quiet_at_or_above_the_path_or_without_p2p():
    for level in ("NVL", "PIX", "SYS", "5"):
        none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_P2P_LEVEL=level)), "GPU020")
    none(fixture("rtx4090-4x-no-p2p", env=torchrun(4, NCCL_P2P_LEVEL="LOC")), "GPU020")
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_NET_GDR_LEVEL="LOC")), "GPU020")  # one node


def test_gpu020_nvls_off_on_hopper_behind_nvswitch():
    one(fixture("hgx-h100-8x", env=torchrun(8, NCCL_NVLS_ENABLE="0")), "GPU020")
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, NCCL_NVLS_ENABLE="0")), "GPU020")  # Ampere: no NVLS


# GPU016 local-ranks-vs-gpus
def test_gpu016_more_ranks_than_gpus():
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, CUDA_VISIBLE_DEVICES="0,1,2,3")), "GPU016")
    assert f.severity == "error" and "CUDA_VISIBLE_DEVICES" in f.subjects


def test_gpu016_fewer_ranks_is_info():
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(4)), "GPU016")
    assert f.severity == "info" and f.subjects[:4] == ("gpu:4", "gpu:5", "gpu:6", "gpu:7")


def test_gpu016_old_launch_on_loopback_counts_every_rank_as_local():
    # `python -m torch.distributed.launch --nproc_per_node=4` (torch 1.x) sets RANK/WORLD_SIZE and a
    # loopback MASTER_ADDR but no LOCAL_WORLD_SIZE: no other host can join, so all 4 ranks are here
    old = {"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
           "CUDA_VISIBLE_DEVICES": "1,2"}
    f = one(fixture("dgx-a100-8x-nvswitch", env=old), "GPU016")
    assert f.severity == "error" and f.evidence["local_ranks"] == 4
    none(fixture("dgx-a100-8x-nvswitch", env=dict(old, MASTER_ADDR="10.0.0.1")), "GPU016")  # may span hosts


def test_gpu016_several_ranks_on_a_machine_with_one_gpu():
    def one_gpu(doc):
        doc["gpus"]["devices"] = doc["gpus"]["devices"][:1]
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(2), edit=one_gpu), "GPU016")
    assert f.severity == "error" and "only 1 visible GPU" in f.title
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(1), edit=one_gpu), "GPU016")


def test_gpu016_quiet_when_matched_or_bound_per_rank():
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8)), "GPU016")
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8, CUDA_VISIBLE_DEVICES="3")), "GPU016")
    none(fixture("dgx-a100-8x-nvswitch"), "GPU016")


# GPU017 cross-socket-pairs
def test_gpu017_sys_pairs_without_nvlink():
    def split(s):
        for p in s["gpus"]["pairs"]:
            if p["a"] // 2 != p["b"] // 2:
                p["topology"] = "NVML_TOPOLOGY_SYSTEM"
    snap = fixture("rtx4090-4x-no-p2p", edit=split)
    f = one(snap, "GPU017")
    assert f.severity == "info" and f.evidence["pairs"] == [[0, 2], [0, 3], [1, 2], [1, 3]]
    assert one(snap, "GPU002").evidence["pairs"] == [[0, 1, "GPU_NOT_SUPPORTED"], [2, 3, "GPU_NOT_SUPPORTED"]]


def test_gpu017_quiet_when_nvlink_joins_the_sockets():
    none(fixture("hgx-h100-8x"), "GPU017")


# GPU018 clocks-throttled
def test_gpu018():
    edit = dev(2, throttle_reasons={"mask": 0x40, "names": ["HwThermalSlowdown"]}, temperature_c=89)
    assert one(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU018").subjects == ("gpu:2",)
    none(fixture("dgx-a100-8x-nvswitch"), "GPU018")


# GPU019 visible-devices-not-found
def test_gpu019_missing_index():
    f = one(fixture("dgx-a100-8x-nvswitch", env={"CUDA_VISIBLE_DEVICES": "0,1,9"}), "GPU019")
    assert f.subjects == ("CUDA_VISIBLE_DEVICES", "gpu:0", "gpu:1") and f.severity == "error"


@pytest.mark.parametrize("cvd", ["0,1", "0,0", "", "GPU-"])
def test_gpu019_quiet_on_valid_or_syntax_only(cvd):
    snap = fixture("dgx-a100-8x-nvswitch", env={"CUDA_VISIBLE_DEVICES": cvd})
    if cvd == "GPU-":  # a prefix of every UUID: ambiguous, which *is* a resolution problem
        assert one(snap, "GPU019")
    else:
        none(snap, "GPU019")


def test_findings_name_gpus_as_the_processes_see_them():
    f = one(fixture("p4d-nvlink-down-remap-pending", env={"CUDA_VISIBLE_DEVICES": "5,3"}), "GPU006")
    assert f.title.startswith("cuda:1 = gpu:3 ") and f.subjects == ("gpu:3",)


from hypothesis import given, settings, strategies as st  # noqa: E402

ENV_NAMES = st.sampled_from(["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
                             "NCCL_IB_DISABLE", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "GROUP_WORLD_SIZE"])
ENV_VALUES = st.one_of(st.text(max_size=40), st.sampled_from(["0", "1", "-1", "", "²", "0,0", "GPU-", "MIG-x", "7,3,1",
                                                              "PCI_BUS_ID", "fastest_first", "99999999999999999999"]))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["dgx-a100-8x-nvswitch", "a100-mig", "mixed-rtx3090-rtx4090", "pcie-switch-acs-2x-l40s",
                        "cpu-only"]), st.dictionaries(ENV_NAMES, ENV_VALUES, max_size=6))
def test_random_env_never_crashes_a_gpu_check(name, env):
    load_all(plugins=False)
    snap = fixture(name, env=env)
    found = findings_of(snap)
    assert not [f for f in found if f.id == "DOC001"], [f.title for f in found if f.id == "DOC001"]


# GPU021 gpu-lost (issue 26: a lost GPU is its own error, never a second model)
def lose(i):
    def edit(s):
        d = s["gpus"]["devices"][i]
        keep = {"index": d["index"]}
        fields = [k for k in d if k not in ("index", "errors")]
        d.clear()
        d.update(keep, **{k: None for k in fields}, lost=True, errors={k: "GPU is lost" for k in fields})
    return edit


def test_gpu021_names_the_lost_gpu_by_elimination_on_the_pci_bus():
    snap = fixture("dgx-a100-8x-nvswitch", edit=lose(3))
    f = one(snap, "GPU021")
    bdf = f.evidence["pci_bus_id"]
    assert f.severity == "error" and "gpu:3" in f.subjects and bdf and bdf in f.title
    assert "fallen off the bus" in f.title
    none(snap, "GPU015")  # not "mixed models (A100, None)"


def test_gpu021_takes_the_address_from_an_xid_79():
    def edit(s):
        lose(0)(s)
        s["xid"] = {"source": "/dev/kmsg", "events": [{"code": 79, "bdf": "0000:07:00.0", "text": "GPU has fallen off "
                                                       "the bus.", "age_s": 60.0}]}
    f = one(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU021")
    assert f.evidence["pci_from"] == "Xid 79 in the kernel log"
    none(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU022")  # the same fault, reported once


def test_gpu021_quiet_on_healthy_gpus():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU021")
    none(fixture("mixed-rtx3090-rtx4090"), "GPU021")


# GPU022 gpu-xid-errors
def xid(*events):
    def edit(s):
        s["xid"] = {"source": "/dev/kmsg", "records_read": 900, "truncated": False,
                    "events": [dict(code=c, bdf=b, text=t, age_s=a) for c, b, t, a in events]}
    return edit


def test_gpu022_a_double_bit_ecc_error_since_boot():
    bus = "0000:" + fixture("dgx-a100-8x-nvswitch").sections["gpus"]["devices"][2]["pci_bus_id"].split(":", 1)[1].lower()
    snap = fixture("dgx-a100-8x-nvswitch", edit=xid((48, bus, "An uncorrectable double bit error", 7200.0)))
    f = one(snap, "GPU022")
    assert f.severity == "error" and "gpu:2" in f.subjects and "Xid 48" in f.title and "2.0 h ago" in f.title


def test_gpu022_quiet_on_application_faults_and_an_empty_log():
    none(fixture("dgx-a100-8x-nvswitch", edit=xid((13, "0000:07:00.0", "Graphics SM Warp Exception", 30.0),
                                                  (31, "0000:07:00.0", "MMU Fault", 30.0))), "GPU022")
    none(fixture("dgx-a100-8x-nvswitch", edit=xid()), "GPU022")


# GPU023 torch-cuda-vs-driver
def build(cuda, driver_cuda="12.2", driver="535.161.08", version=None):
    def edit(s):
        s["packages"]["versions"]["torch"] = version or ("2.3.1+cu" + str(cuda).replace(".", "") if cuda else "2.3.1+cpu")
        s["packages"]["torch_build"] = {"cuda": cuda, "hip": None, "git_version": "0" * 40}
        s["gpus"]["cuda_driver"], s["gpus"]["driver_version"] = driver_cuda, driver
        s["gpus"]["cuda_driver_version"] = int(driver_cuda.split(".")[0]) * 1000 + int(driver_cuda.split(".")[1]) * 10
    return edit


def test_gpu023_a_470_driver_under_a_cu121_build_is_an_error():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=build("12.1", "11.4", "470.239.06")), "GPU023")
    assert f.severity == "error" and "CUDA 12.x driver" in f.title and "525.60.13" in f.detail


def test_gpu023_a_cpu_build_on_a_gpu_machine():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=build(None)), "GPU023")
    assert f.severity == "warning" and "CPU build" in f.title


def test_gpu023_minor_version_compatibility_is_a_note_and_a_match_is_quiet():
    assert one(fixture("dgx-a100-8x-nvswitch", edit=build("12.4", "12.2")), "GPU023").severity == "info"
    none(fixture("dgx-a100-8x-nvswitch", edit=build("12.1", "12.2")), "GPU023")
    none(fixture("dgx-a100-8x-nvswitch"), "GPU023")  # no torch_build recorded: nothing to compare


def archs(sass, ptx):
    def edit(s):
        s["packages"]["cuda_archs"] = [{"package": "torch", "file": "torch/lib/libtorch_cuda.so", "sass": sass,
                                        "ptx": ptx}]
    return edit


def test_gpu023_driver_below_the_minor_version_floor_is_an_error():
    """A 450.51 driver reports CUDA 11.0, but minor-version compatibility starts at 450.80.02 (the compat docs)."""
    f = one(fixture("dgx-a100-8x-nvswitch", edit=build("11.8", "11.0", "450.51.06")), "GPU023")
    assert f.severity == "error" and "450.80.02" in f.title
    assert one(fixture("dgx-a100-8x-nvswitch", edit=build("11.8", "11.0", "450.80.02")), "GPU023").severity == "info"


def test_gpu023_gpu_served_only_by_ptx_needs_the_builds_driver():
    """torch 1.13 cu117 (cubins to sm_86, PTX compute_86) on A100s edited to H100s (sm_90) under a 470 driver: the
    H100 runs torch only through PTX JIT, which minor-version compatibility does not cover."""
    def h100(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = "NVIDIA H100 80GB HBM3", [9, 0]
    torch113 = archs([37, 50, 60, 70, 75, 80, 86], [86])
    f = one(fixture("dgx-a100-8x-nvswitch", keep=2, edit=both(build("11.7", "11.4", "470.82.01", "1.13.1+cu117"),
                                                              torch113, h100)), "GPU023")
    assert f.severity == "error" and "PTX" in f.title and "sm_90" in f.title and "gpu:1" in f.subjects
    assert "unsupported toolchain" in f.detail
    # the same build on the A100s it carries cubins for: minor-version compatibility runs it (a note)
    f = one(fixture("dgx-a100-8x-nvswitch", keep=2, edit=both(build("11.7", "11.4", "470.82.01", "1.13.1+cu117"),
                                                              torch113)), "GPU023")
    assert f.severity == "info"
    # a driver of the build's CUDA: nothing to say
    none(fixture("dgx-a100-8x-nvswitch", keep=2, edit=both(build("11.7", "11.7", "515.65.01", "1.13.1+cu117"),
                                                           torch113, h100)), "GPU023")


# GPU024 rank-cpus-far-from-gpu, GPU029 exclusive-gpu-shared-by-ranks, ENV012 ranks-share-cpus
def siblings(*ranks):
    def edit(s):
        s["siblings"] = {"job": {"TORCHELASTIC_RUN_ID": "abc"}, "scanned": 40,
                         "ranks": [dict(pid=5000 + r, rank=r, local_rank=r, cuda_visible_devices=cvd, cpus=cpus)
                                   for r, cvd, cpus in ranks]}
    return edit


def affinity(cpus):
    def edit(s):
        s["host"]["affinity"] = cpus
        s["host"]["affinity_count"] = len(cpus)
    return edit


def both(*edits):
    def edit(s):
        for e in edits:
            e(s)
    return edit


def test_gpu024_ranks_bound_to_the_other_socket():
    # DGX A100: gpu:0-1 are near CPUs 48-63 (NUMA node 3), gpu:4-5 near 112-127 (node 7)
    snap = fixture("dgx-a100-8x-nvswitch", env=torchrun(8), edit=both(
        affinity(list(range(48, 64))), siblings((4, None, "48-63"), (5, None, "48-63"), (1, None, "48-63"))))
    f = one(snap, "GPU024")
    assert "rank:4" in f.subjects and "rank:5" in f.subjects and "rank:1" not in f.subjects
    assert {r["rank"] for r in f.evidence["ranks"]} == {4, 5}


def test_gpu024_quiet_when_unbound_or_local():
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8)), "GPU024")  # the whole machine
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(8), edit=both(affinity(list(range(48, 64))),
                                                                     siblings((1, None, "176-191")),
                                                                     siblings((1, None, "176-191"), (4, None, "112-127")))),
         "GPU024")


def test_gpu029_two_ranks_on_one_exclusive_gpu():
    snap = fixture("dgx-a100-8x-nvswitch", env=torchrun(2, CUDA_VISIBLE_DEVICES="0"),
                   edit=both(dev(0, compute_mode="EXCLUSIVE_PROCESS"), siblings((1, "0", "0-127"))))
    f = one(snap, "GPU029")
    assert f.severity == "error" and "gpu:0" in f.subjects


def test_gpu029_quiet_when_each_rank_has_its_gpu_or_the_mode_allows_sharing():
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(2, CUDA_VISIBLE_DEVICES="0"),
                 edit=both(dev(0, compute_mode="EXCLUSIVE_PROCESS"), siblings((1, "1", "0-127")))), "GPU029")
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(2, CUDA_VISIBLE_DEVICES="0"),
                 edit=siblings((1, "0", "0-127"))), "GPU029")


def test_env012_every_rank_on_the_same_two_cores():
    snap = fixture("dgx-a100-8x-nvswitch", env=torchrun(4), edit=both(
        affinity([0, 1]), siblings((1, None, "0-1"), (2, None, "0-1"), (3, None, "0-1"))))
    f = one(snap, "ENV012")
    assert "4 local ranks share CPUs 0-1" in f.title


def test_env012_quiet_with_own_cores():
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(2), edit=both(affinity(list(range(0, 8))),
                                                                     siblings((1, None, "8-15")))), "ENV012")


# GPU025 gpus-missing-from-nvml
def test_gpu025_a_gpu_bound_to_vfio_is_named():
    def edit(s):
        s["pci"]["gpus"]["0000:f0:00.0"] = {"vendor": "0x10de", "device": "0x20b2", "class": "0x030200",
                                            "numa_node": 1, "driver": "vfio-pci", "upstream": []}
    f = one(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU025")
    assert "0000:f0:00.0 (vfio-pci)" in f.title


def test_gpu025_quiet_when_the_bus_and_nvml_agree():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU025")


# GPU026 nvswitch-fabric-not-ready
def test_gpu026_fabric_not_started_on_hopper():
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["fabric"] = {"state": "NOT_STARTED", "status": "Success"}
    f = one(fixture("hgx-h100-8x", edit=edit), "GPU026")
    assert f.severity == "error" and "nvidia-fabricmanager" in f.fix


def test_gpu026_a100_with_nvswitches_and_cuinit_802():
    def edit(s):
        s["pci"]["nvswitches"] = ["0000:c4:00.0", "0000:c5:00.0"]
        s["cuda"] = {"init_result": 802, "init_error": "CUDA_ERROR_SYSTEM_NOT_READY"}
    one(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU026")
    none(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU028")  # one finding per fault


def test_gpu026_quiet_when_registered():
    none(fixture("hgx-h100-8x"), "GPU026")


# GPU027 gpu-power-capped
def test_gpu027_one_gpu_capped():
    f = one(fixture("dgx-a100-8x-nvswitch", edit=dev(3, power__enforced_limit_w=250.0)), "GPU027")
    assert "capped at 250 W of its 400 W default" in f.title and "paces every rank" in f.title


def test_gpu027_quiet_at_the_default():
    none(fixture("dgx-a100-8x-nvswitch"), "GPU027")


# GPU028 cuda-init-fails
def test_gpu028_a_stub_libcuda():
    def edit(s):
        s["cuda"] = {"init_result": 34, "init_error": "CUDA_ERROR_STUB_LIBRARY",
                     "library": "/usr/local/cuda/lib64/stubs/libcuda.so.1"}
    f = one(fixture("dgx-a100-8x-nvswitch", edit=edit), "GPU028")
    assert "cuInit = 34" in f.title and "stub" in f.detail and "LD_LIBRARY_PATH" in f.fix


def test_gpu028_quiet_when_cuda_starts():
    none(fixture("dgx-a100-8x-nvswitch", edit=lambda s: s.update(cuda={"init_result": 0, "device_count": 8})), "GPU028")


# GPU030 gpu-direct-rdma-unavailable (more in tests/test_rdma_and_vms.py)
def _no_gdr(s):
    s["pci"]["gdr"] = {"nv_mem": False, "nv_mem_nc": False, "nvidia_peermem": False, "open_kernel_module": None}


def _peermem(s):
    s["pci"]["gdr"] = {"nv_mem": False, "nv_mem_nc": False, "nvidia_peermem": True, "open_kernel_module": False}


def test_gpu030_no_peer_memory_module_between_nodes():
    multi = torchrun(8, WORLD_SIZE="16", GROUP_WORLD_SIZE="2")
    f = one(fixture("hgx-h100-8x", env=multi, edit=_no_gdr), "GPU030")
    assert f.severity == "warning" and "nvidia-peermem" in f.fix
    none(fixture("hgx-h100-8x", env=multi, edit=_peermem), "GPU030")
    none(fixture("hgx-h100-8x", env=torchrun(8), edit=_no_gdr), "GPU030")  # one node


# GPU031 p2p-in-virtual-machine (more in tests/test_rdma_and_vms.py)
def _in_vm(s):
    s["host"]["virtualization"] = "kvm"


def test_gpu031_pcie_p2p_inside_a_virtual_machine():
    f = one(fixture("pcie-switch-acs-2x-l40s", edit=_in_vm), "GPU031")
    assert "virtual machine (kvm)" in f.title
    none(fixture("pcie-switch-acs-2x-l40s"), "GPU031")
    none(fixture("hgx-h100-8x", edit=_in_vm), "GPU031")  # NVLink pairs do not depend on the hypervisor


# GPU008: MIG without instances, and a MIG mode change waiting for a reset (batch 15)
def _mig(current, pending, devices):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["mig"] = {"current": current, "pending": pending}
            d["mig_devices"] = devices
    return edit


def test_gpu008_mig_on_without_instances_and_mode_pending():
    # NVIDIA/k8s-device-plugin#225: instances gone after a reboot; NVIDIA/gpu-operator#603: change pending a reset
    f = findings_of(fixture("a100-mig", edit=_mig(True, True, [])), "GPU008")[0]
    assert "no MIG instance exists" in f.title and "-cgi" in f.fix
    f = findings_of(fixture("a100-mig", edit=_mig(False, True, None)), "GPU008")[0]
    assert "pending" in f.title and "nvidia-smi -i 0 -r" in f.fix
    none(fixture("a100-mig", edit=_mig(False, False, None)), "GPU008")


# GPU001: a CUDA torch in a container with no GPU access (batch 15: zzzyuqing/DreamMat#14)
def test_gpu001_cuda_torch_in_a_container_without_gpus():
    no_driver = {"unavailable": "no NVIDIA driver found (NVML library not loaded)", "reason": "library_not_found",
                 "hints": {"dev_nvidia0": False, "proc_driver_nvidia": False}}
    snap = make_snapshot(gpus=no_driver, host={"container": "docker"},
                         packages=None)
    doc = snap.to_dict()
    doc["sections"]["packages"]["torch_build"] = {"cuda": "12.1", "hip": None}
    f = one(Snapshot.from_dict(doc), "GPU001")
    assert f.severity == "warning" and "CUDA 12.1 build" in f.title + f.detail
    doc["sections"]["host"]["container"] = None  # a CUDA torch on a CPU machine outside a container: a note
    assert one(Snapshot.from_dict(doc), "GPU001").severity == "info"


# GPU032: a GPU newer (or, for PyTorch's own wheels, older) than the architectures of torch's CUDA build (batch 17)
from ddpdoctor.checks.gpu.driver import newest_arch  # noqa: E402
def _arch_machine(name, capability, torch, cuda, keep=2, platform="Linux-6.8.0-x86_64-with-glibc2.39"):
    with open(os.path.join(ROOT, "fixtures", "snapshots", "rtx4090-4x-no-p2p.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    s = doc["sections"]
    s["gpus"]["devices"] = s["gpus"]["devices"][:keep]
    s["gpus"]["pairs"] = [p for p in s["gpus"].get("pairs") or [] if p["a"] < keep and p["b"] < keep]
    s["gpus"]["count"] = keep
    for d in s["gpus"]["devices"]:
        d["name"], d["cuda_capability"] = name, list(capability)
    s["packages"]["versions"]["torch"] = torch
    s["packages"]["torch_build"] = {"cuda": cuda, "hip": None}
    s["host"]["platform"] = platform
    return Snapshot.from_dict(copy.deepcopy(doc))


def test_newest_arch_follows_the_toolkit_table():
    assert [newest_arch(v) for v in [(9, 2), (10, 2), (11, 0), (11, 3), (11, 8), (12, 4), (12, 8), (13, 0)]] == \
        [72, 75, 80, 86, 90, 90, 120, 120]
    assert newest_arch((6, 5)) is None  # before the table's first row: not judged


def test_gpu032_a_gpu_of_a_newer_major_than_the_build_knows():
    # niuchuangnn/SPICE#26: an RTX 3090 under a CUDA 10.2 build; Hellod035/LeggedLab#26: an RTX 5090 under CUDA 12.4
    [f] = findings_of(_arch_machine("NVIDIA GeForce RTX 3090", (8, 6), "1.10.1", "10.2"), "GPU032")
    assert f.severity == "error" and "sm_86" in f.title and "up to sm_75" in f.detail and "/cu110" in f.fix
    [f] = findings_of(_arch_machine("NVIDIA GeForce RTX 5090", (12, 0), "2.5.1+cu124", "12.4"), "GPU032")
    assert f.severity == "error" and "sm_120" in f.title and "/cu128" in f.fix


def test_gpu032_quiet_where_a_kernel_of_the_gpus_major_exists_or_nothing_is_known():
    assert not findings_of(_arch_machine("NVIDIA GeForce RTX 3090", (8, 6), "1.7.0", "11.0"), "GPU032")  # sm_80 runs on 8.6
    assert not findings_of(_arch_machine("NVIDIA GeForce RTX 5090", (12, 0), "2.8.0+cu128", "12.8"), "GPU032")
    assert not findings_of(_arch_machine("NVIDIA H100 80GB HBM3", (9, 0), "2.1.0+cu118", "11.8"), "GPU032")
    assert not findings_of(_arch_machine("NVIDIA GeForce RTX 3090", (8, 6), "2.1.0+rocm", None), "GPU032")
    assert not findings_of(_arch_machine("Tesla V100-SXM2-16GB", (7, 0), "1.0.0", "9.0"), "GPU032")  # before the table


def test_gpu032_an_old_gpu_under_wheels_that_dropped_it_is_a_guess():
    [f] = findings_of(_arch_machine("Tesla V100-SXM2-16GB", (7, 0), "2.8.0+cu129", "12.9"), "GPU032")
    assert f.severity == "warning" and "sm_70" in f.title and "guess" in f.detail.lower()
    assert not findings_of(_arch_machine("Tesla V100-SXM2-16GB", (7, 0), "2.8.0+cu126", "12.6"), "GPU032")
    # aarch64 wheels of CUDA 12.6 start at sm_80: an sm_75 GPU there is reported, on x86_64 not
    assert findings_of(_arch_machine("Tesla T4", (7, 5), "2.8.0+cu126", "12.6", platform="Linux-6.8-aarch64"), "GPU032")
    assert not findings_of(_arch_machine("Tesla T4", (7, 5), "2.8.0+cu126", "12.6"), "GPU032")


# GPU033 resizable-bar-uneven (batch 21: aikitoria/open-gpu-kernel-modules#22)
def _bar1(*mib):
    def edit(s):
        for d, m in zip(s["gpus"]["devices"], mib):
            d["bar1"] = {"total_bytes": m * 2 ** 20}
    return edit


def test_gpu033_resizable_bar_on_some_gpus_of_one_model():
    f = one(fixture("rtx4090-4x-no-p2p", edit=_bar1(32768, 256, 256, 256)), "GPU033")
    assert f.severity == "warning" and "GPU 1 256 MiB" in f.title and "gpu:1" in f.subjects and "gpu:0" not in f.subjects
    assert "Resizable BAR" in f.fix


def test_gpu033_quiet_when_bar1_is_even_or_not_recorded():
    none(fixture("rtx4090-4x-no-p2p", edit=_bar1(32768, 32768, 32768, 32768)), "GPU033")
    none(fixture("rtx4090-4x-no-p2p", edit=_bar1(256, 256, 256, 256)), "GPU033")
    none(fixture("rtx4090-4x-no-p2p"), "GPU033")  # snapshots from before BAR1 was gathered


# GPU034 ranks-split-across-containers (batch 22: NVIDIA/nccl#324, #360)
def _iface(name, addr):
    return {"name": name, "up": True, "mtu": 1500, "speed_mbps": 1000,
            "addresses": [{"family": "ipv4", "address": addr}]}


def _containers(master="172.17.0.2", ifaces=None, env_extra=None, container="docker"):
    import json as _json
    import os as _os

    root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
    with open(_os.path.join(root, "fixtures", "snapshots", "dgx-a100-8x-nvswitch.json"), encoding="utf-8") as fh:
        doc = _json.load(fh)
    s = doc["sections"]
    s["gpus"]["devices"] = s["gpus"]["devices"][:1]
    s["gpus"]["pairs"] = []
    s["gpus"]["count"] = 1
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": master, "MASTER_PORT": "29500",
           **(env_extra or {})}
    s["env"]["vars"].update(env)
    from ddpdoctor.gather.launcher import launcher_from_env

    s["launcher"] = launcher_from_env(s["env"]["vars"])
    s["host"]["container"] = container
    s["network"]["interfaces"] = ifaces or [_iface("lo", "127.0.0.1"), _iface("eth0", "172.17.0.3")]
    s["network"]["master_addr"] = {"host": master, "addresses": [master]}
    return Snapshot.from_dict(doc)


def test_gpu034_the_master_is_another_container_on_this_bridge():
    # NVIDIA/nccl#324: docker run --gpus device=N per rank on an NVLink machine
    found = findings_of(_containers(), "GPU034")
    assert found and found[0].severity == "warning" and "active NVLink" in found[0].detail


def test_gpu034_quiet_on_host_network_another_host_or_one_container():
    host_net = [_iface("lo", "127.0.0.1"), _iface("docker0", "172.17.0.1"), _iface("eth0", "172.31.5.10")]
    assert not findings_of(_containers(master="172.31.7.20", ifaces=host_net), "GPU034")  # --network=host on EC2
    assert not findings_of(_containers(master="10.30.112.212"), "GPU034")  # the master is another host
    none(_containers(master="172.17.0.3"), "GPU034")  # this container is the master's
    assert not findings_of(_containers(env_extra={"LOCAL_WORLD_SIZE": "2"}), "GPU034")  # all ranks here
    assert not findings_of(_containers(container="kubernetes"), "GPU034")  # pod subnets span nodes


def test_gpu034_node_one_whose_master_is_this_containers_own_address():
    # NVIDIA/nccl#1529: two host-network containers of one machine as node 0 and node 1 of a torchrun job
    host_net = [_iface("lo", "127.0.0.1"), _iface("bond0", "10.3.30.18")]
    env = {"TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "1", "RANK": "1"}
    found = findings_of(_containers(master="10.3.30.18", ifaces=host_net, env_extra=env), "GPU034")
    assert found and found[0].severity == "warning" and "node 0 is another container" in found[0].title


def test_gpu034_quiet_for_node_zero_or_outside_a_container():
    host_net = [_iface("lo", "127.0.0.1"), _iface("bond0", "10.3.30.18")]
    node0 = {"TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "0", "LOCAL_WORLD_SIZE": "1", "RANK": "0"}
    none(_containers(master="10.3.30.18", ifaces=host_net, env_extra=node0), "GPU034")  # this is node 0 itself
    node1 = dict(node0, GROUP_RANK="1", RANK="1")
    none(_containers(master="10.3.30.18", ifaces=host_net, env_extra=node1, container=""), "GPU034")  # no container


def test_gpu004_on_amd_covers_pairs_across_the_host_bridge():
    # NVIDIA/nccl src/graph/paths.cc ncclTopoCheckP2p: on AMD CPUs NCCL's default P2P level is PATH_SYS (all
    # versions with <= 2 GPUs on the node), so pairs under different root ports use P2P, and the IOMMU translates it
    # (pytorch/pytorch#13045: Threadripper, AMD-Vi IO_PAGE_FAULT)
    def across_root_ports(vendor):
        def edit(s):
            for p in s["gpus"]["pairs"]:
                p["topology"] = "NVML_TOPOLOGY_HOSTBRIDGE"
            s["host"]["cpu_vendor"] = vendor
        return edit
    assert one(fixture("pcie-switch-acs-2x-l40s", edit=across_root_ports("AuthenticAMD")), "GPU004").severity == "warning"
    none(fixture("pcie-switch-acs-2x-l40s", edit=across_root_ports("GenuineIntel")), "GPU004")  # PXB there
    none(fixture("pcie-switch-acs-2x-l40s", edit=across_root_ports(None)), "GPU004")  # vendor unknown: PXB


# ---------------------------------------------------------------- GPU016: srun task bound to one GPU, SLURM_LOCALID past it
# Lightning's SLURMEnvironment.local_rank() is int(os.environ["SLURM_LOCALID"])
# (Lightning-AI/pytorch-lightning src/lightning/fabric/plugins/environments/slurm.py@ffd8176e89bf); with
# --gpus-per-task=1 each task sees its GPU as cuda:0 (Lightning-AI/pytorch-lightning#16828, ACEsuit/mace#435).
PER_TASK = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_LOCALID": "5",
            "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "8", "SLURM_NODEID": "0", "SLURM_JOB_NUM_NODES": "1",
            "SLURM_GPUS_PER_TASK": "1", "CUDA_VISIBLE_DEVICES": "0"}


def _bound(found):
    return [f for f in found if "SLURM_LOCALID=" in f.title]


def test_gpu016_slurm_localid_past_the_one_bound_gpu():
    found = _bound(findings_of(fixture("dgx-a100-8x-nvswitch", env=PER_TASK), "GPU016"))
    assert len(found) == 1 and found[0].severity == "warning"
    assert "cuda:5 does not exist" in found[0].title and "SLURM_LOCALID" in found[0].subjects
    # LOCAL_RANK copied from SLURM_LOCALID is the same mistake
    env = {**PER_TASK, "LOCAL_RANK": "5"}
    assert _bound(findings_of(fixture("dgx-a100-8x-nvswitch", env=env), "GPU016"))


@pytest.mark.parametrize("change", [
    {"SLURM_LOCALID": "0", "SLURM_PROCID": "0"},   # task 0: cuda:0 is its GPU
    {"LOCAL_RANK": "0"},                           # a wrapper maps every task to its cuda:0
    {"SLURM_STEP_ID": None, "SLURM_PROCID": None, "SLURM_LOCALID": None},  # not an srun task
    {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},   # the task sees the node's GPUs
])
def test_gpu016_slurm_localid_quiet(change):
    env = {k: v for k, v in {**PER_TASK, **change}.items() if v is not None}
    assert _bound(findings_of(fixture("dgx-a100-8x-nvswitch", env=env), "GPU016")) == []


def _only_gpu(s, mode="EXCLUSIVE_PROCESS"):
    """The machine has one GPU (iffiX/machin#25: world size 2 on one GPU in exclusive mode)."""
    g = s["gpus"]
    g["devices"], g["pairs"], g["count"] = g["devices"][:1], [], 1
    g["devices"][0]["compute_mode"] = mode
    kept = g["devices"][0]["pci_bus_id"].lower()[-12:]
    if isinstance((s.get("pci") or {}).get("gpus"), dict):
        s["pci"]["gpus"] = {b: f for b, f in s["pci"]["gpus"].items() if b.lower()[-12:] == kept}


def test_gpu012_two_ranks_on_the_machines_only_gpu_in_exclusive_mode():
    f = one(fixture("dgx-a100-8x-nvswitch", env=torchrun(2), edit=_only_gpu), "GPU012")
    assert f.severity == "error" and "2 local ranks share 1 GPUs" in f.title
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(1), edit=_only_gpu), "GPU012")  # one rank: fine
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(2), edit=lambda s: _only_gpu(s, "DEFAULT")), "GPU012")
    # one GPU visible of eight (per-rank binding by CUDA_VISIBLE_DEVICES): GPU016's to judge, not a shared GPU
    none(fixture("dgx-a100-8x-nvswitch", env=torchrun(2, CUDA_VISIBLE_DEVICES="3"),
                 edit=dev(3, compute_mode="EXCLUSIVE_PROCESS")), "GPU012")


def _no_gpu_in_task(s):
    """NVML answers inside the task but lists no GPU (a device cgroup without one: NVIDIA/deepops#1102)."""
    s["gpus"]["devices"], s["gpus"]["pairs"], s["gpus"]["count"] = [], [], 0


def test_gpu016_slurm_task_given_no_gpu_although_the_job_asked_for_them():
    def asked(**extra):
        def edit(s):
            _no_gpu_in_task(s)
            s["env"]["vars"].update(extra)
            s["env"]["vars"].pop("SLURM_STEP_GPUS", None)
            s["env"]["vars"].pop("SLURM_GPUS_ON_NODE", None)
        return edit
    f = one(fixture("slurm-step-4-tasks-4-gpus", edit=asked(SLURM_GPUS_PER_TASK="1")), "GPU016")
    assert f.severity == "error" and "sees no GPU" in f.title and "SLURM_GPUS_PER_TASK" in f.subjects
    none(fixture("slurm-step-4-tasks-4-gpus", edit=asked()), "GPU016")  # a CPU-only step: no GPU asked for
    none(fixture("slurm-step-4-tasks-4-gpus", edit=asked(SLURM_GPUS_ON_NODE="0")), "GPU016")

    def no_driver(s):
        asked(SLURM_GPUS_PER_TASK="1")(s)
        s["gpus"]["driver_version"] = None
    none(fixture("slurm-step-4-tasks-4-gpus", edit=no_driver), "GPU016")  # GPU001's to say


def test_gpu001_nvidia_gpus_on_the_pci_bus_but_no_nvml():
    # NVIDIA/nvidia-docker#1679: a container started without GPU access sees the GPUs in sysfs, not in NVML
    def no_nvml(s):
        s["gpus"] = {"unavailable": "no NVIDIA driver found (NVML library not loaded)", "reason": "library_not_found",
                     "hints": {"dev_nvidia0": False, "proc_driver_nvidia": False}}
        s["host"]["container"] = "docker"
    f = one(fixture("dgx-a100-8x-nvswitch", edit=no_nvml), "GPU001")
    assert f.severity == "warning" and "8 NVIDIA GPU(s) on the PCI bus" in f.title
    def cpu_box(s):
        no_nvml(s)
        s["pci"]["gpus"] = {}
    assert one(fixture("dgx-a100-8x-nvswitch", edit=cpu_box), "GPU001").severity == "info"  # nothing on the bus


def test_gpu031_vm_without_any_p2p_and_no_topology_for_nccl():
    # NVIDIA/nccl#175 (1080 Ti in QEMU: no P2P, NCCL very slow); NCCL reads NCCL_TOPO_FILE or
    # /var/run/nvidia-topologyd/virtualTopology.xml (src/graph/topo.cc)
    f = one(fixture("rtx4090-4x-no-p2p", env=torchrun(4), edit=_in_vm), "GPU031")
    assert f.severity == "warning" and "no P2P between any pair" in f.title and "NCCL_TOPO_FILE" in f.fix
    none(fixture("rtx4090-4x-no-p2p", env=torchrun(4)), "GPU031")  # bare metal: GPU002's note only
    none(fixture("rtx4090-4x-no-p2p", env=torchrun(4, NCCL_TOPO_FILE="/opt/g5.xml"), edit=_in_vm), "GPU031")

    def with_topologyd(s):
        _in_vm(s)
        s["pci"]["nccl_virtual_topology"] = True
    none(fixture("rtx4090-4x-no-p2p", env=torchrun(4), edit=with_topologyd), "GPU031")


def test_pci_gatherer_records_the_virtual_topology_nccl_loads(tmp_path):
    from ddpdoctor.gather.pci import gather_pci
    from ddpdoctor.gather import Sources

    os.makedirs(tmp_path / "sys/bus/pci/devices")
    assert gather_pci(Sources(environ={}, root=str(tmp_path)))["nccl_virtual_topology"] is False
    os.makedirs(tmp_path / "var/run/nvidia-topologyd")
    (tmp_path / "var/run/nvidia-topologyd/virtualTopology.xml").write_text("<system/>")
    assert gather_pci(Sources(environ={}, root=str(tmp_path)))["nccl_virtual_topology"] is True


# GPU035 rocm-iommu-not-passthrough and GPU001 on a ROCm build (batch 55: ROCm/rccl#1129, 2x MI100 under DDP)
def _rocm(cmdline=(), state="enabled", env=None, **host):
    def edit(s):
        s["packages"]["torch_build"] = {"cuda": None, "hip": "6.0"}
        s["pci"]["iommu"] = {"cmdline": list(cmdline), "state": state, "units": ["ivhd0"]}
        s["host"].update(host)
    return fixture("cpu-only", env=env if env is not None else torchrun(2), edit=edit)


def test_gpu035_rocm_ranks_without_iommu_pt_warn():
    f = one(_rocm(), "GPU035")
    assert f.severity == "warning" and "iommu=pt" in f.title and f.subjects == ("kernel:iommu",)


def test_gpu035_quiet_with_iommu_pt_one_rank_hyperv_or_cuda_builds():
    none(_rocm(cmdline=["iommu=pt"], state="passthrough"), "GPU035")
    none(_rocm(env={}), "GPU035")                                   # one process: RCCL's warning, no P2P between ranks
    none(_rocm(virtualization="microsoft"), "GPU035")               # RCCL skips Hyper-V guests
    none(fixture("cpu-only", env=torchrun(2)), "GPU035")            # not a ROCm build


def test_gpu001_on_a_rocm_build_is_a_note_not_missing_nvidia_gpus():
    f = one(_rocm(), "GPU001")
    assert f.severity == "info" and "ROCm" in f.title
    # an AMD GPU on the bus is not an NVIDIA GPU on the bus: a CUDA build there still gets the usual GPU001
    def amd_on_bus(s):
        s["pci"]["gpus"] = {"0000:2f:00.0": {"vendor": "0x1002", "class": "0x038000", "upstream": []}}
    assert one(fixture("cpu-only", edit=amd_on_bus), "GPU001").severity == "info"


# ------------------------------------------------ GPU036: an AMD GPU's ISA vs the targets of PyTorch's ROCm wheels
# ROCm/ROCm#1977: an RX 7900 XTX (gfx1100) under a ROCm 5.4 build; targets per pytorch/builder manywheel/build_docker.sh


def _kfd(tmp_path, nodes):
    for i, gfxv in enumerate(nodes):
        d = tmp_path / f"sys/class/kfd/kfd/topology/nodes/{i}"
        d.mkdir(parents=True)
        (d / "properties").write_text(f"cpu_cores_count 0\nsimd_count 192\ngfx_target_version {gfxv}\ndevice_id 29772\n")


def test_pci_gatherer_reads_amd_targets_from_the_kfd_topology(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.pci import amd_gpus, gfx_name

    assert [gfx_name(v) for v in (90010, 90402, 110000, 100300, 90008)] == ["gfx90a", "gfx942", "gfx1100", "gfx1030",
                                                                            "gfx908"]
    _kfd(tmp_path, [0, 110000, 90010])  # node 0: the CPU (gfx_target_version 0)
    got = amd_gpus(Sources(environ={}, root=str(tmp_path)))
    assert [(g["node"], g["gfx"], g["device_id"]) for g in got] == [(1, "gfx1100", 29772), (2, "gfx90a", 29772)]
    assert amd_gpus(Sources(environ={}, root=str(tmp_path / "none"))) == []


def _rocm_snap(hip, torch, targets):
    snap = make_snapshot(packages={"torch": torch}, pci={"amd_gpus": [
        {"node": i + 1, "gfx_target_version": 0, "gfx": t, "device_id": None} for i, t in enumerate(targets)]})
    snap.sections["packages"]["torch_build"] = {"cuda": None, "hip": hip}
    return snap


def test_gpu036_amd_gpu_newer_than_the_rocm_build_warns():
    found = findings_of(_rocm_snap("5.4.22803", "2.0.0+rocm5.4.2", ["gfx1100"]), "GPU036")
    assert [f.severity for f in found] == ["warning"] and "gfx1100" in found[0].title
    assert findings_of(_rocm_snap("5.7.31921", "2.2.0+rocm5.7", ["gfx942"]), "GPU036")  # MI300 before ROCm 6.0


def test_gpu036_quiet_cases():
    assert not findings_of(_rocm_snap("5.7.31921", "2.2.0+rocm5.7", ["gfx1100"]), "GPU036")  # listed from 5.5
    assert not findings_of(_rocm_snap("5.4.22803", "2.0.0+rocm5.4.2", ["gfx90a"]), "GPU036")   # listed from 4.3
    # gfx1101 is known since round 21 (rocm_wheel_target_torch: from torch 2.6); gfx1103 is still not dated: no verdict
    assert not findings_of(_rocm_snap("5.4.22803", "2.0.0+rocm5.4.2", ["gfx1103"]), "GPU036")  # unknown: no verdict
    assert not findings_of(_rocm_snap(None, "2.0.0+cu118", ["gfx1100"]), "GPU036")             # not a ROCm build
    assert not findings_of(_rocm_snap("5.4.22803", "2.0.0+rocm5.4.2", []), "GPU036")           # no AMD GPU listed


# GPU037 fp16-without-fast-fp16: a recorded 4x A100 machine, its GPUs edited to Pascal P40s (6.1) / P100s (6.0)
def _as_model(name, cc):
    def edit(s):
        for d in s["gpus"]["devices"]:
            d["name"], d["cuda_capability"] = name, list(cc)
    return edit


def test_gpu037_fp16_on_p40s_warns_and_p100s_are_quiet():
    asked = {"ACCELERATE_MIXED_PRECISION": "fp16"}
    f = one(fixture("dgx-a100-8x-nvswitch", env=asked, keep=4, edit=_as_model("Tesla P40", (6, 1))), "GPU037")
    assert f.severity == "warning" and "Tesla P40 (6.1)" in f.title and "gpu:0" in f.subjects
    none(fixture("dgx-a100-8x-nvswitch", env=asked, keep=4, edit=_as_model("Tesla P100-PCIE-16GB", (6, 0))), "GPU037")
    none(fixture("dgx-a100-8x-nvswitch", env=asked, keep=4), "GPU037")  # A100: tensor cores
    none(fixture("dgx-a100-8x-nvswitch", keep=4, edit=_as_model("Tesla P40", (6, 1))), "GPU037")  # nothing asked


# GPU038 rocm-gpu-unreachable: the recorded CPU sandbox (NVML absent, no /dev/kfd) under a ROCm build of torch; more
# cases in tests/test_round20_check21.py
def test_gpu038_recorded_sandbox_under_a_rocm_build():
    f = one(fixture("recorded-cpu-sandbox", packages__torch_build={"hip": "6.2.41133", "cuda": None}), "GPU038")
    assert "/dev/kfd" in f.title and f.evidence["missing"] == ["/dev/kfd", "/dev/dri/renderD*"]
    none(fixture("recorded-cpu-sandbox"), "GPU038")  # its own torch build is not ROCm


# GPU039 slurm-per-task-gpu-binding: an srun step that binds each task to its GPU (SLURM_GPUS_PER_TASK) on a node of
# 8 tasks, this task seeing one GPU; --gres-flags=allow-task-sharing lets the tasks reach the node's GPUs (srun.1).
# More in tests/test_round25_check35.py.
SRUN8 = {"SLURM_JOB_ID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "SLURM_NTASKS_PER_NODE": "8",
         "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "CUDA_VISIBLE_DEVICES": "0"}


def test_gpu039_per_task_binding_on_a_node_of_tasks_warns():
    f = one(fixture("dgx-a100-8x-nvswitch", env=dict(SRUN8, SLURM_GPUS_PER_TASK="1")), "GPU039")
    assert f.severity == "warning" and "allow-task-sharing" in f.fix


def test_gpu039_quiet_with_task_sharing_or_no_binding():
    none(fixture("dgx-a100-8x-nvswitch", env=dict(SRUN8, SLURM_GPUS_PER_TASK="1",
                                                  SLURM_GRES_FLAGS="allow-task-sharing")), "GPU039")
    none(fixture("dgx-a100-8x-nvswitch", env=SRUN8), "GPU039")


# GPU040 triton-libcuda-not-in-ld-cache: triton 2.1 finds libcuda only through ldconfig's cache (data/
# triton_libraries.json libcuda_lookup); the cuda section's ld_cache_libcuda says whether the cache lists it.
def _ld_cache(listed, triton="2.1.0"):
    def edit(s):
        s["cuda"] = {"init_result": 0, "device_count": 8, "library": "/usr/local/nvidia/lib64/libcuda.so.1",
                     "unversioned_link": True, "ld_cache_libcuda": listed}
        s["packages"]["versions"]["triton"] = triton
    return fixture("dgx-a100-8x-nvswitch", edit=edit)


def test_gpu040_triton_2_1_with_libcuda_outside_the_loader_cache_warns():
    assert one(_ld_cache(False), "GPU040").severity == "warning"


def test_gpu040_quiet_when_the_cache_lists_libcuda_or_triton_looks_elsewhere():
    none(_ld_cache(True), "GPU040")
    none(_ld_cache(False, triton="2.3.1"), "GPU040")
