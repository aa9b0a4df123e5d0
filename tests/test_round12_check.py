"""Round 12 (issue 26): classes from batches 60-61. Each class: a trigger that fails on the code before and quiet
cases (pure functions on recorded facts)."""
from __future__ import annotations

from factory import findings_of, make_snapshot

# ------------------------------------------------ ENV007: the GPUs of a one-node batch job from SLURM_JOB_GPUS
# Slurm sbatch(1) OUTPUT ENVIRONMENT VARIABLES: SLURM_JOB_GPUS "The global GPU IDs of the GPUs allocated to this job
# ... Only set in batch and interactive jobs". Lightning's SLURMEnvironment takes SLURM_NTASKS (1) as the world size,
# so a Trainer with 4 devices runs one process on one GPU (mk-minchul/AdaFace#124).
ONE_TASK_4_GPUS = {"SLURM_JOB_ID": "5151", "SLURM_JOB_NAME": "train", "SLURM_NTASKS": "1", "SLURM_NNODES": "1",
                   "SLURM_JOB_NUM_NODES": "1", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
                   "SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def _takes(env, packages=None):
    packages = {"pytorch-lightning": "1.8.6"} if packages is None else packages
    return [f for f in findings_of(make_snapshot(env=env, packages=packages), "ENV007") if "will take SLURM" in f.title]


def test_lightning_one_task_with_the_job_gpus_of_one_node():
    found = _takes(ONE_TASK_4_GPUS)
    assert [f.severity for f in found] == ["warning"] and "4 GPUs (SLURM_JOB_GPUS)" in found[0].title
    assert [f.severity for f in _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="0-3"))] == ["warning"]


def test_lightning_job_gpus_quiet_cases():
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="2"))                              # one GPU, one task
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_NNODES="2", SLURM_JOB_NUM_NODES="2"))        # job-wide list
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_GPUS="gpu:a100"))                        # not a list of indices
    assert not _takes(ONE_TASK_4_GPUS, packages={})                                           # no Lightning
    assert not _takes(dict(ONE_TASK_4_GPUS, SLURM_JOB_NAME="interactive"))


# ------------------------------------------------ SET004: a presence-tested debug flag set to 0 on an older torch
# pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @001074d2 forceUncachedAllocator: getenv(...) != nullptr, so
# PYTORCH_NO_CUDA_MEMORY_CACHING=0 disables the caching allocator too (pytorch#145661); #145905 reads only "1" since 2.7.
def _set004(value, torch):
    packages = {"torch": torch} if torch else {}
    return [f for f in findings_of(make_snapshot(env={"PYTORCH_NO_CUDA_MEMORY_CACHING": value}, packages=packages),
                                   "SET004")]


def test_no_cuda_memory_caching_zero_on_torch_before_2_7():
    found = _set004("0", "2.5.1+cu124")
    assert [f.severity for f in found] == ["warning"] and "still switches it on" in found[0].title
    assert [f.severity for f in _set004("false", "2.6.0")] == ["warning"]


def test_no_cuda_memory_caching_quiet_cases():
    assert not _set004("0", "2.7.0")            # only "1" since #145905
    assert not _set004("0", "2.13.0+cpu")
    assert not _set004("0", None)               # torch release unknown: no verdict
    one = _set004("1", "2.5.1")                 # the plain cost, reported once, not twice
    assert len(one) == 1 and "still switches" not in one[0].title


# ------------------------------------------------ NET007: every RDMA port NCCL would use is down, on a multi-node job
# NVIDIA/nccl src/transport/net_ib/init.cc @5067397c skips ports that are not IBV_PORT_ACTIVE; this host then uses
# sockets while the others use IB (NVIDIA/nccl-tests#188, "socketFinalizeAccept: wrong type 4 != 3").
TWO_NODES = {"TORCHELASTIC_RUN_ID": "j", "RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
             "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def _down(env, states, **pci):
    ports = {f"mlx5_{i}:1": {"link_layer": "InfiniBand", "state": st, "gids": {}} for i, st in enumerate(states)}
    facts = dict({"rdma_devices": [f"mlx5_{i}" for i in range(len(states))], "rdma_ports": ports}, **pci)
    return [f for f in findings_of(make_snapshot(env=env, pci=facts), "NET007") if "is ACTIVE" in f.title]


def test_rdma_ports_all_down_on_a_multi_node_job():
    found = _down(TWO_NODES, ["1: DOWN", "2: INIT"])
    assert [f.severity for f in found] == ["warning"] and "mlx5_0:1 1: DOWN" in found[0].title
    # NCCL_IB_HCA selects only the down port
    assert len(_down(dict(TWO_NODES, NCCL_IB_HCA="=mlx5_1"), ["4: ACTIVE", "1: DOWN"])) == 1


def test_rdma_ports_down_quiet_cases():
    assert not _down(TWO_NODES, ["4: ACTIVE", "1: DOWN"])                         # one port NCCL can use
    assert not _down(TWO_NODES, [None])                                          # state not read
    assert not _down(dict(TWO_NODES, NCCL_IB_DISABLE="1"), ["1: DOWN"])          # sockets asked for
    assert not _down({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "j",
                      "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, ["1: DOWN"])   # one host
    assert not _down(TWO_NODES, ["1: DOWN"], net_plugins=["/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"])


# ------------------------------------------------ PKG012: DeepSpeed's pre-built ops compiled for another torch/CUDA
# deepspeedai/DeepSpeed setup.py @edaa7221 writes git_version_info_installed.py (installed_ops, torch_info); its
# op_builder/builder.py validate_torch_version / validate_torch_op_version raise "PyTorch version mismatch!" /
# "CUDA version mismatch!" before loading a pre-built op (huggingface/transformers#12715).
INSTALLED = ("version='0.9.5'\ngit_hash='abc'\ngit_branch='master'\n"
             "installed_ops={'async_io': False, 'fused_adam': True, 'cpu_adam': True}\naccelerator_name='cuda'\n"
             "torch_info={'version': '1.9', 'bf16_support': False, 'cuda_version': '11.1', 'nccl_version': '2.7', "
             "'hip_version': '0.0'}\n")


def test_parse_deepspeed_build():
    from ddpdoctor.gather.packages import parse_deepspeed_build

    assert parse_deepspeed_build(INSTALLED) == {"torch": "1.9", "cuda": "11.1", "hip": None,
                                                "installed_ops": ["cpu_adam", "fused_adam"]}
    assert parse_deepspeed_build("version='0.1'\n") == {} and parse_deepspeed_build("torch_info = {") == {}


def _pkg012(torch, cuda, built):
    snap = make_snapshot(packages={"torch": torch, "deepspeed": "0.9.5"})
    snap.sections["packages"]["torch_build"] = {"cuda": cuda, "hip": None}
    if built is not None:
        snap.sections["packages"]["deepspeed_build"] = built
    return [f for f in findings_of(snap, "PKG012")]


def test_deepspeed_ops_built_for_another_torch_or_cuda():
    built = {"torch": "1.9", "cuda": "11.1", "hip": None, "installed_ops": ["cpu_adam", "fused_adam"]}
    found = _pkg012("2.1.2+cu121", "12.1", built)
    assert [f.severity for f in found] == ["error"] and "compiled with torch 1.9" in found[0].title
    found = _pkg012("1.9.1+cu102", "10.2", built)
    assert [f.severity for f in found] == ["error"] and "CUDA 11.1" in found[0].title


def test_deepspeed_ops_quiet_cases():
    built = {"torch": "2.1", "cuda": "12.1", "hip": None, "installed_ops": ["fused_adam"]}
    assert not _pkg012("2.1.2+cu121", "12.1", built)                          # same torch and CUDA
    assert not _pkg012("2.4.0+cu124", "12.4", dict(built, installed_ops=[]))  # ops compiled just in time
    assert not _pkg012("2.4.0+cu124", "12.4", None)                           # no record
    assert not _pkg012("2.1.0", None, dict(built, torch=None))                # versions not recorded


# ------------------------------------------------ round 12 wave 2: what `check --script` reads from the script
# lint.scriptfacts reads literals from lint's own index: CUDA_VISIBLE_DEVICES set by the script (yqyao/SSD_Pytorch#4:
# train.py sets "3,2,1,0" on a 2-GPU machine) and DataLoader num_workers (each worker a process: SYS005's floor).
from factory import fixture_snapshot  # noqa: E402

TORCHRUN4 = {"TORCHELASTIC_RUN_ID": "abc", "RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
             "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def _lint(value=None, how="assign", workers=None):
    sets = [] if value is None else [{"name": "CUDA_VISIBLE_DEVICES", "value": value, "path": "train.py", "line": 2,
                                      "how": how}]
    w = None if workers is None else {"count": workers, "path": "train.py", "line": 9}
    return {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
            "facts": {"env_sets": sets, "loader_workers": w}}


def _gpu019(lint, env=None):
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=2, env=env, edit=lambda s: s.update(lint=lint)),
                       "GPU019")


def test_script_facts_read_from_lint_index(tmp_path):
    from ddpdoctor.lint.scriptfacts import script_facts

    p = tmp_path / "train.py"
    p.write_text('import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "3,2,1,0"\nfrom torch.utils.data import DataLoader\n'
                 'a = DataLoader([], num_workers=4)\nb = DataLoader([], num_workers=n)\n'
                 'os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0")\nos.environ["OTHER"] = "1"\n')
    facts = script_facts([str(p)])
    assert [(e["value"], e["line"], e["how"]) for e in facts["env_sets"]] == [("3,2,1,0", 2, "assign"),
                                                                              ("0", 6, "setdefault")]
    assert facts["loader_workers"]["count"] == 4 and facts["loader_workers"]["line"] == 4
    p.write_text("import os\nx = os.environ.get('CUDA_VISIBLE_DEVICES')\n")
    assert script_facts([str(p)]) == {"env_sets": [], "late_env_sets": [], "loader_workers": None, "gpu_indices": [],
                                      "compiles": [], "world_args": [], "reads_world_env": False,
                                      "local_rank_args": [], "parse_known_args": False,
                                      "reads_local_rank_env": False, "node_args": [], "strict_parse_args": [],
                                      "setting_sets": [], "debug_calls": [], "launcher_env_reads": [], "global_rank_devices": [],  # round 18
                                      "spawn_worlds": [], "env_rendezvous": [],  # round 19
                                      "precision": [], "attention": [], "backends": [], "extension_builds": [], "triton_libraries": [], "cuda_uses": [], "mmcv_ops": []}  # round 23 (check29)


def test_script_sets_visible_devices_this_machine_lacks():
    found = _gpu019(_lint("3,2,1,0"))
    assert [f.severity for f in found] == ["error"] and "train.py:2 sets CUDA_VISIBLE_DEVICES=3,2,1,0" in found[0].title
    # the script's assignment replaces the shell's value
    assert [f.severity for f in _gpu019(_lint("2,3"), env={"CUDA_VISIBLE_DEVICES": "0,1"})] == ["error"]


def test_script_visible_devices_quiet_cases():
    assert not _gpu019(_lint("1,0"))                                               # both exist
    assert not _gpu019(_lint("3", how="setdefault"), env={"CUDA_VISIBLE_DEVICES": "0"})  # the shell's value kept
    assert not _gpu019(_lint())                                                    # the script sets none
    assert not _gpu019({"unavailable": "no training script given"})                # no --script
    assert not findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=2), "GPU019")  # no lint section at all


def _sys005(workers, soft=400):
    snap = make_snapshot(env=TORCHRUN4, host={"uid": 1000, "rlimits": {"RLIMIT_NPROC": {"soft": soft, "hard": soft}}},
                         lint=_lint(workers=workers))
    return findings_of(snap, "SYS005")


def test_thread_limit_counts_the_scripts_loader_workers():
    # 4 ranks x (1 OpenMP thread + 16 others) = 68 fits in 400; with 48 workers x 2 per rank it is 452
    found = _sys005(48)
    assert [f.severity for f in found] == ["warning"] and "start at least 452" in found[0].title
    assert "num_workers=48" in found[0].detail


def test_thread_limit_loader_workers_quiet_cases():
    assert not _sys005(None)        # no literal num_workers: ranks only
    assert not _sys005(8)           # 4 x (17 + 16) = 132 fits
    assert not _sys005(48, soft=100000)


# ------------------------------------------------ GPU019: GPU ordinals the script names as literals (batches 62-63)
# 8 of 20 reports: DFDNet#7 (--gpu_ids default '1,3' on one 2080 Ti), SSD-Pytorch#10 (TRAIN_DEVICES = [0, 1]),
# Analytical-Lyapunov#1 ('cuda:1'), EfficientDet#216 (num_gpus on Colab). CUDA numbers visible GPUs from 0.
def _ordinals(tmp_path, text):
    from ddpdoctor.lint.scriptfacts import script_facts

    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


def test_script_gpu_ordinals_read_from_literals(tmp_path):
    facts = _ordinals(tmp_path, 'import argparse, torch\nx = torch.zeros(1).to("cuda:1")\np = argparse.ArgumentParser()\n'
                                'p.add_argument("--gpu_ids", default="1,3")\np.add_argument("--num_gpus", type=int, default=4)\n'
                                'p.add_argument("--lr", default=3)\nTRAIN_DEVICES = [0, 1]\ntorch.cuda.set_device(2)\n'
                                'm = torch.nn.DataParallel(x, device_ids=[0, 5])\ny = x.cuda(-1 + 1)\n')
    got = sorted((e["line"], e["index"]) for e in facts["gpu_indices"])
    assert got == [(2, 1), (4, 1), (4, 3), (5, 3), (7, 0), (7, 1), (8, 2), (9, 0), (9, 5)]  # --lr and .cuda(expr) not


def _gpu019_ordinals(indices, keep, env_sets=()):
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
            "facts": {"env_sets": list(env_sets), "loader_workers": None,
                      "gpu_indices": [{"index": i, "path": "train.py", "line": 3, "what": w} for i, w in indices]}}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, edit=lambda s: s.update(lint=lint)), "GPU019")


def test_script_names_gpu_ordinal_this_machine_lacks():
    found = _gpu019_ordinals([(1, "--gpu_ids default '1,3'"), (3, "--gpu_ids default '1,3'")], keep=1)
    assert [f.severity for f in found] == ["warning"] and "names GPU 3" in found[0].title and "see 1 GPU" in found[0].title
    # the script's own CUDA_VISIBLE_DEVICES decides how many it sees
    cvd = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0", "path": "train.py", "line": 1, "how": "assign"}]
    assert [f.severity for f in _gpu019_ordinals([(1, "'cuda:1'")], keep=4, env_sets=cvd)] == ["warning"]


def test_script_gpu_ordinals_quiet_cases():
    assert not _gpu019_ordinals([(0, "'cuda:0'"), (3, "device_ids=[0, 1, 2, 3]")], keep=4)   # all exist
    assert not _gpu019_ordinals([], keep=1)                                                  # none named
    setdefault = [{"name": "CUDA_VISIBLE_DEVICES", "value": "0", "path": "train.py", "line": 1, "how": "setdefault"}]
    assert not _gpu019_ordinals([(1, "'cuda:1'")], keep=2, env_sets=setdefault)              # the shell's value wins
    # a CUDA_VISIBLE_DEVICES the script sets to a GPU this machine lacks is the finding, said once
    bad = [{"name": "CUDA_VISIBLE_DEVICES", "value": "5", "path": "train.py", "line": 1, "how": "assign"}]
    found = _gpu019_ordinals([(1, "'cuda:1'")], keep=2, env_sets=bad)
    assert len(found) == 1 and "sets CUDA_VISIBLE_DEVICES=5" in found[0].title


# ------------------------------------------------ SYS007: Triton's kernel cache on a filesystem the job's hosts share
# triton-lang/triton python/triton/runtime/cache.py @10852d2e: TRITON_CACHE_DIR, else ~/.triton/cache; put() renames a
# temp dir into place, which races across hosts on NFS/Lustre (triton-lang/triton#11512, batch 63).
MOUNTINFO = ("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n40 22 0:40 / /home rw,relatime - nfs4 srv:/home rw\n"
             "41 22 0:41 / /tmp rw - tmpfs tmpfs rw\n")


def _triton_fact(tmp_path, env):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import triton_cache_fact

    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "mountinfo").write_text(MOUNTINFO)
    return triton_cache_fact(Sources(environ=env, root=str(tmp_path)))


def test_triton_cache_fact_from_mountinfo(tmp_path):
    fact = _triton_fact(tmp_path, {"HOME": "/home/u"})
    assert (fact["path"], fact["from"], fact["fstype"], fact["mount_point"]) == ("/home/u/.triton/cache", "home", "nfs4", "/home")
    fact = _triton_fact(tmp_path / "b", {"HOME": "/home/u", "TRITON_CACHE_DIR": "/tmp/tc"})
    assert (fact["from"], fact["fstype"]) == ("TRITON_CACHE_DIR", "tmpfs")


TWO_NODES = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
             "GROUP_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def _sys007(tc, env=TWO_NODES, compiles=None):
    sections = {}
    if compiles is not None:
        sections["lint"] = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
                            "facts": {"env_sets": [], "loader_workers": None, "gpu_indices": [], "compiles": compiles}}
    return findings_of(make_snapshot(env=env, host={"triton_cache": tc}, **sections), "SYS007")


NFS_HOME = {"path": "/home/u/.triton/cache", "from": "home", "fstype": "nfs4", "mount_point": "/home", "manager": None}


def test_triton_cache_on_nfs_across_hosts():
    assert [f.severity for f in _sys007(NFS_HOME, compiles=[{"path": "train.py", "line": 9}])] == ["warning"]
    assert [f.severity for f in _sys007(dict(NFS_HOME, **{"from": "TRITON_CACHE_DIR", "fstype": "lustre"}))] == ["warning"]
    assert [f.severity for f in _sys007(NFS_HOME)] == ["info"]          # the default, compile unknown: a note


def test_triton_cache_quiet_cases():
    assert not _sys007(dict(NFS_HOME, fstype="ext4"))                                       # node-local disk
    assert not _sys007(dict(NFS_HOME, fstype=None))                                         # mount unknown
    one_host = dict(TWO_NODES, WORLD_SIZE="4")
    assert not _sys007(NFS_HOME, env=one_host, compiles=[{"path": "train.py", "line": 9}])  # one host
    assert not _sys007(dict(NFS_HOME, manager="mypkg:RedisCache"))                          # a custom cache manager
