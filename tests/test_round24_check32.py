"""check32 (issue 26, round 24, third cycle): classes left by batches 118-123, each with a trigger and a quiet
fixture. Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# -- SYS007 arm: a Triton that keys its kernel cache without the GPU architecture (before triton-lang/triton#1593,
# first released in 2.1.0; data/jit_caches.json cache_key_without_arch) whose cache serves several architectures --

HOME_ON_NFS = {"path": "/home/u/.triton/cache", "from": "home", "fstype": "nfs4", "mount_point": "/home",
               "manager": None, "writable": True, "writable_at": "/home/u/.triton/cache"}
LOCAL = dict(HOME_ON_NFS, fstype="ext4", mount_point="/")


def _gpus(*ccs):
    return {"devices": [{"index": i, "name": f"GPU {i}", "cuda_capability": list(cc)} for i, cc in enumerate(ccs)]}


def _arch(snap):
    return [f for f in findings_of(snap, "SYS007") if "without the GPU architecture" in f.title]


def test_old_triton_with_its_cache_on_a_shared_home_is_a_note_naming_the_release():
    [f] = _arch(make_snapshot(host={"triton_cache": HOME_ON_NFS}, packages={"triton": "2.0.0.dev20230217"},
                              gpus=_gpus((8, 0))))
    assert f.severity == "info"
    assert "triton 2.0.0.dev20230217" in f.title and "nfs4 at /home" in f.title and "sm_80" in f.title
    assert "device kernel image is invalid" in f.detail and "triton>=2.1" in f.fix


def test_old_triton_on_a_host_with_two_gpu_architectures_is_a_warning_even_on_local_disk():
    [f] = _arch(make_snapshot(host={"triton_cache": LOCAL}, packages={"triton": "2.1.0.dev20230301"},
                              gpus=_gpus((7, 0), (8, 0), (8, 0))))
    assert f.severity == "warning" and "sm_70, sm_80" in f.title and f.evidence["shared_fs"] is False


def test_triton_that_keys_by_architecture_is_quiet_on_a_shared_home():
    for version in ("2.1.0", "2.1.0.dev20230601", "3.1.0"):
        snap = make_snapshot(host={"triton_cache": HOME_ON_NFS}, packages={"triton": version}, gpus=_gpus((8, 0)))
        assert _arch(snap) == [], version


def test_old_triton_with_one_architecture_on_local_disk_is_quiet():
    snap = make_snapshot(host={"triton_cache": LOCAL}, packages={"triton": "2.0.0"}, gpus=_gpus((8, 0), (8, 0)))
    assert _arch(snap) == []


def test_cache_key_release_boundary_from_the_data_file():
    from ddpdoctor.facts.env import triton_cache_key_without_arch as lacks

    assert lacks({"triton": "2.0.0.post1"}) == "triton 2.0.0.post1"
    assert lacks({"pytorch-triton": "2.0.0+b8b470bc59"}) == "pytorch-triton 2.0.0+b8b470bc59"
    assert lacks({"pytorch-triton": "2.1.0+e6216047b8"}) is None
    assert lacks({"triton": "1.1.1"}) is None  # not read: nothing claimed
    assert lacks({"triton": "not-a-version"}) is None


# -- PKG012 arm: a compiled extension whose DT_NEEDED names a torch library torch's folder does not hold
# (mmcv-full's ops linked to a split-CUDA torch's libtorch_cuda_cu.so, under torch 2.0: SparseBEV#83) --

def test_absent_torch_libraries_are_the_needed_torch_names_the_folder_lacks():
    from ddpdoctor.gather.native import absent_torch_libraries

    needed = ["libc10.so", "libtorch_cuda_cu.so", "libtorch_cuda_cpp.so", "libcudart.so.11.0", "libc.so.6"]
    present = {"libc10.so", "libtorch_cuda.so", "libtorch_cpu.so", "libtorch.so"}
    assert absent_torch_libraries(needed, present) == ["libtorch_cuda_cu.so", "libtorch_cuda_cpp.so"]
    assert absent_torch_libraries(["libc10.so", "libtorch_cuda.so", "libm.so.6"], present) == []


def _exts(*rows):
    return make_snapshot(packages={"torch": "2.0.0", "torch_extensions": list(rows)})


def test_extension_needing_a_library_torch_does_not_ship_is_named_by_that_library():
    stale = {"package": "mmcv", "file": "mmcv/_ext.cpython-38-x86_64-linux-gnu.so", "missing": ["_ZN3c104impl3fooEv"],
             "missing_count": 40, "undefined_count": 300, "absent_libraries": ["libtorch_cuda_cu.so"]}
    [f] = findings_of(_exts(stale), "PKG012")
    assert f.severity == "error" and "needs libtorch_cuda_cu.so" in f.title and "torch 2.0.0" in f.title
    assert "cannot open shared object file" in f.detail and "undefined symbol" not in f.title


def test_extension_whose_torch_libraries_are_all_there_keeps_the_symbol_finding():
    only_symbols = {"package": "apex", "file": "amp_C.so", "missing": ["_ZN3c104impl3fooEv"], "missing_count": 1,
                    "undefined_count": 9}
    [f] = findings_of(_exts(only_symbols), "PKG012")
    assert "symbol" in f.title and "cannot open" not in f.detail
    assert findings_of(_exts(), "PKG012") == []


def test_gathered_from_a_real_elf_whose_needed_torch_library_is_absent(tmp_path):
    """fixtures/elf/site's okext resolves every symbol; a copy whose DT_NEEDED string libgcc_s.so.1 is rewritten in
    place to libtorch_x.so (same length) needs a torch library the fixture torch/lib does not hold."""
    import os
    import shutil

    from ddpdoctor.gather.native import torch_extensions

    site_src = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "site")
    site = tmp_path / "site"
    shutil.copytree(site_src, site)
    assert [e["package"] for e in torch_extensions(str(site))] == ["staleext"]  # the copy reads as the fixture does
    so = site / "okext" / "_C.so"
    data = so.read_bytes()
    assert data.count(b"libgcc_s.so.1\0") == 1
    so.write_bytes(data.replace(b"libgcc_s.so.1\0", b"libtorch_x.so\0"))
    got = {e["package"]: e for e in torch_extensions(str(site))}
    assert got["okext"]["absent_libraries"] == ["libtorch_x.so"] and got["okext"]["missing"] == []
    assert "absent_libraries" not in got["staleext"]  # it needs only libc10.so, which is there


# -- NET003 arm: hand-set ranks whose rank 0 publishes its store on this host's routable address (no local world
# size: facts.net.span_guessed) may span hosts; NCCL's default pick (src/misc/socket.cc) of a virtual cni0 ahead of
# eth0 is then named, worded as a guess (openpai#4638) --

def _nic(name, addr, mask="255.255.255.0"):
    return {"name": name, "up": True, "mtu": 1500, "speed_mbps": 0,
            "addresses": [{"family": "ipv4", "address": addr, "netmask": mask}]}


HAND_SET = {"RANK": "0", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "MASTER_PORT": "29500"}
NICS = [_nic("lo", "127.0.0.1", "255.0.0.0"), _nic("cni0", "10.244.1.1"), _nic("docker0", "172.17.0.1", "255.255.0.0"),
        _nic("eth0", "10.0.0.4")]


def _default_pick(master, record_resolution=True):
    network = {"interfaces": NICS, "master_addr": {"host": master, "addresses": [master]} if record_resolution else {}}
    return findings_of(make_snapshot(env=dict(HAND_SET, MASTER_ADDR=master), network=network), "NET003")


def test_rank_zero_publishing_its_own_address_names_the_virtual_default_pick_as_a_guess():
    for recorded in (True, False):  # an address literal is its own resolution when none was recorded
        [f] = _default_pick("10.0.0.4", recorded)
        assert f.severity == "warning" and "cni0 is virtual" in f.title and "may span hosts" in f.title
        assert f.fix.startswith("export NCCL_SOCKET_IFNAME==eth0") and f.evidence["guess"] is True


def test_rank_zero_on_loopback_is_quiet():
    assert _default_pick("127.0.0.1") == []


def test_master_here_reads_an_address_literal_without_a_resolution_record():
    from ddpdoctor.facts.net import master_here

    snap = make_snapshot(env=dict(HAND_SET, MASTER_ADDR="10.0.0.4"), network={"interfaces": NICS, "master_addr": {}})
    assert "this host's address 10.0.0.4" in master_here(snap)
    other = make_snapshot(env=dict(HAND_SET, MASTER_ADDR="10.0.0.9"), network={"interfaces": NICS, "master_addr": {}})
    assert master_here(other) is None


# -- GPU002 arm: an inference server whose MoE all-to-all maps every local peer GPU's memory (SGLang
# --moe-a2a-backend deepep; DeepEP Buffer::sync cudaIpcOpenMemHandle; data/serving.json peer_memory) on a host where
# some GPU pair has no P2P: it fails at init (DeepEP#584); NCCL's own host-memory fallback does not apply --

def _served(words, ok_pairs):
    from factory import fixture_snapshot

    from ddpdoctor.facts.launch import parse_command

    cmd = parse_command(words.split())

    def edit(s):
        for p in s["gpus"]["pairs"]:
            status = "OK" if (p["a"], p["b"]) in ok_pairs else "NOT_SUPPORTED"
            p["p2p"] = {"nvlink": "NOT_SUPPORTED", "read": status, "write": status}
        s["launch"] = {"commands": [dict(cmd, depth=0)], "depth_read": 0}
    return fixture_snapshot("rtx4090-4x-no-p2p", edit=edit)


DEEPEP = "python3 -m sglang.launch_server --model-path m --tp-size 4 --ep 4 --moe-a2a-backend deepep"
SWITCH_PAIRS = {(0, 1), (2, 3)}


def test_deepep_on_gpus_with_p2p_only_inside_switch_pairs_is_an_error_naming_the_pairs():
    [f] = findings_of(_served(DEEPEP, SWITCH_PAIRS), "GPU002")
    assert f.severity == "error" and "--moe-a2a-backend deepep" in f.title and "4 of 6 pairs have no P2P" in f.title
    assert "cudaIpcOpenMemHandle" in f.detail and "CUDA_VISIBLE_DEVICES=0,1" in f.fix
    assert f.evidence["pairs_with_p2p"] == [[0, 1], [2, 3]]


def test_deepep_with_p2p_everywhere_or_nccl_all_to_all_is_not_an_error():
    everywhere = {(a, b) for a in range(4) for b in range(a + 1, 4)}
    assert findings_of(_served(DEEPEP, everywhere), "GPU002") == []
    plain = findings_of(_served(DEEPEP.replace("deepep", "none"), SWITCH_PAIRS), "GPU002")
    assert all(f.severity != "error" for f in plain)  # NCCL copies through host memory: at most the note


# -- ENV026: a per-worker CUDA_VISIBLE_DEVICES rotated to put the worker's GPU first (dask-cuda's
# cuda_visible_devices; data/visible_devices.json rotated_per_worker): cuda:<rank> is another rank's GPU --

def _rotated(rank, cvd, world="4", local=None):
    env = {"RANK": str(rank), "WORLD_SIZE": world, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "12355",
           "CUDA_VISIBLE_DEVICES": cvd}
    if local is not None:
        env["LOCAL_RANK"] = str(local)
    return findings_of(make_snapshot(env=env), "ENV026")


def test_rank_two_with_its_gpu_rotated_first_is_warned_that_cuda_rank_is_rank_zeros_gpu():
    [f] = _rotated(2, "2,3,0,1")
    assert f.severity == "warning" and "cuda:2 gets GPU 0" in f.title and "RANK=2" in f.title
    assert f.fix.startswith("torch.cuda.set_device(0)") and f.evidence["guess"] is True
    [g] = _rotated(5, "3,4,5,6,7,0,1,2", world="16", local=3)  # LOCAL_RANK decides, not RANK
    assert "cuda:3 gets GPU 6" in g.title


def test_one_order_for_every_rank_or_rank_zero_is_quiet():
    assert _rotated(2, "0,1,2,3") == []  # the launcher convention: one order, select by rank
    assert _rotated(0, "0,1,2,3") == []
    assert _rotated(2, "3,0,1,2") == []  # rotated, but not by this rank: not the per-worker pattern
    assert _rotated(2, "2") == []  # one GPU per rank (Slurm --gpu-bind style): cuda:0 is all there is
    assert _rotated(2, "2,3,0,1", world="16") == []  # RANK is global past the list: local rank unknown
