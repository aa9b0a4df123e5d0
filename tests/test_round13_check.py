"""Round 13 (issue 26): classes the stop-38 note left, each with a trigger and quiet cases."""
from __future__ import annotations

from factory import findings_of, fixture_snapshot


def _facts(tmp_path, text):
    from ddpdoctor.lint.scriptfacts import script_facts

    p = tmp_path / "train.py"
    p.write_text(text)
    return script_facts([str(p)])


# ------------------------------------------------ GPU019: CUDA_VISIBLE_DEVICES set after CUDA initialised
# KaiyangZhou/deep-person-reid#267 (batch 62): main() set os.environ['CUDA_VISIBLE_DEVICES'] = args.gpu_devices after
# torch.cuda.is_available(); cuInit had read the variable, so the job ran on all 4 GPUs.
LATE = ('import os, torch\n'
        'def main(dev):\n'
        '    use_gpu = torch.cuda.is_available()\n'
        '    os.environ["CUDA_VISIBLE_DEVICES"] = dev\n'
        'if __name__ == "__main__":\n'
        '    main("0")\n')


def test_visible_devices_set_after_cuda_init_read_from_script(tmp_path):
    facts = _facts(tmp_path, LATE)
    assert facts["env_sets"] == []
    late = facts["late_env_sets"]
    assert [(e["line"], e["value"], e["text"], e["cuda_init"]["line"]) for e in late] == [(4, None, "dev", 3)]
    assert late[0]["cuda_init"]["call"] == "torch.cuda.is_available()"
    # a literal set after a module-level .cuda() is late too, and leaves env_sets
    facts = _facts(tmp_path, 'import os, torch\nm = torch.nn.Linear(1, 1).cuda()\ndef f():\n'
                             '    os.environ["CUDA_VISIBLE_DEVICES"] = "1"\n')
    assert [e["value"] for e in facts["late_env_sets"]] == ["1"] and facts["env_sets"] == []


def test_visible_devices_set_before_cuda_init_is_not_late(tmp_path):
    # set first, CUDA after: the ordinary, working order
    facts = _facts(tmp_path, 'import os, torch\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\nok = torch.cuda.is_available()\n')
    assert facts["late_env_sets"] == [] and [e["value"] for e in facts["env_sets"]] == ["0"]
    # a CUDA call in another function is not known to have run first
    facts = _facts(tmp_path, 'import os, torch\ndef g():\n    return torch.cuda.device_count()\ndef f():\n'
                             '    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n')
    assert facts["late_env_sets"] == []
    # a module-level CUDA call below the function's definition line is not "above" it
    facts = _facts(tmp_path, 'import os, torch\ndef f():\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
                             'n = torch.cuda.device_count()\n')
    assert facts["late_env_sets"] == []


def _late(sets, env=None, keep=4):
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
            "facts": {"env_sets": [], "late_env_sets": sets, "loader_workers": None, "gpu_indices": []}}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, env=env, edit=lambda s: s.update(lint=lint)),
                       "GPU019")


LATE_FACT = {"name": "CUDA_VISIBLE_DEVICES", "value": None, "text": "args.gpu_devices", "path": "main.py", "line": 40,
             "how": "assign", "cuda_init": {"line": 31, "call": "torch.cuda.is_available()"}}


def test_visible_devices_set_after_cuda_init_warns():
    found = _late([LATE_FACT])
    assert [f.severity for f in found] == ["warning"]
    assert "main.py:40 sets CUDA_VISIBLE_DEVICES after torch.cuda.is_available() at line 31" in found[0].title
    assert "4 GPU(s)" in found[0].detail


def test_visible_devices_set_after_cuda_init_quiet_cases():
    assert not _late([])                                               # no late set
    assert not _late([dict(LATE_FACT, cuda_init=None)])                # malformed: no init call recorded
    assert not _late([dict(LATE_FACT, name="OMP_NUM_THREADS")])        # another variable


# ------------------------------------------------ GPU016: the job size a script's argparse default names
# OpenNMT/OpenNMT-py#1647 (batch 63): world_size 2 for one GPU rank deadlocked at init. The default is the literal read.
def test_world_args_read_from_argparse_defaults(tmp_path):
    facts = _facts(tmp_path, 'import argparse\np = argparse.ArgumentParser()\n'
                             'p.add_argument("--world_size", type=int, default=8)\n'
                             'p.add_argument("--nprocs", default=1)\np.add_argument("--batch", default=64)\n'
                             'p.add_argument("-n", "--world-size", default=-1)\n')
    assert [(a["flag"], a["default"], a["line"]) for a in facts["world_args"]] == [("--world_size", 8, 3)]
    assert facts["reads_world_env"] is False
    facts = _facts(tmp_path, 'import os\nw = int(os.environ["WORLD_SIZE"])\n')
    assert facts["world_args"] == [] and facts["reads_world_env"] is True


def _gpu016(world_args, reads=False, env=None, keep=2):
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
            "facts": {"env_sets": [], "loader_workers": None, "gpu_indices": [], "reads_world_env": reads,
                      "world_args": [{"flag": "--world_size", "default": d, "path": "train.py", "line": 5}
                                     for d in world_args]}}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, env=env, edit=lambda s: s.update(lint=lint)),
                       "GPU016")


TORCHRUN4 = {"TORCHELASTIC_RUN_ID": "a", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_world_size_default_past_the_gpus_or_the_launch():
    found = _gpu016([8])
    assert [f.severity for f in found] == ["warning"] and "--world_size defaults to 8" in found[0].title
    assert "shows 2 GPU(s)" in found[0].title
    found = _gpu016([8], env=TORCHRUN4, keep=4)
    assert [f.severity for f in found] == ["warning"] and "WORLD_SIZE=4" in found[0].title


def test_world_size_default_quiet_cases():
    assert not _gpu016([])                                    # no such option
    assert not _gpu016([2])                                   # fits the 2 GPUs
    assert not _gpu016([4], env=TORCHRUN4, keep=4)            # the launch's size
    assert not _gpu016([8], reads=True, env=TORCHRUN4, keep=4)  # the script reads WORLD_SIZE


# ------------------------------------------------ check --config: GPU ids and counts in the job's YAML/JSON config
# LEFT of stop 38 (mmskeleton#80, EfficientDet#216 class): accelerate's gpu_ids/num_processes (config_args.py
# ClusterConfig), Lightning's devices/gpus (an int or "2" a count, a list or "1,3" ids).
def test_config_facts_read_gpu_ids_counts_and_processes(tmp_path):
    from ddpdoctor.lint.configfacts import config_facts

    acc = tmp_path / "default_config.yaml"
    acc.write_text("distributed_type: MULTI_GPU\ngpu_ids: 1,3\nnum_machines: 2\nnum_processes: 8\n")
    light = tmp_path / "train.yaml"
    light.write_text("trainer:\n  devices: 4\n  accelerator: gpu\nmodel:\n  device: cuda:2\n  lr: 3\n"
                     "data:\n  num_workers: 8\n  gpus: [0, 5]\n")
    js = tmp_path / "cfg.json"
    js.write_text('{"n_gpu": 2, "world_size": 1, "gpu_ids": "all", "devices": "auto"}')
    facts = config_facts([str(acc), str(light), str(js)])
    got = sorted((e["path"].rsplit("/", 1)[-1], e["index"]) for e in facts["gpu_indices"])
    assert got == [("cfg.json", 1), ("default_config.yaml", 1), ("default_config.yaml", 3), ("train.yaml", 0),
                   ("train.yaml", 2), ("train.yaml", 3), ("train.yaml", 5)]
    # accelerate's num_processes counts every machine's processes: 8 over 2 machines is 4 here
    assert [(a["flag"], a["default"], a["source"]) for a in facts["world_args"]] == [("num_processes", 4, "config")]
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [\n")
    assert config_facts([str(bad)])["errors"] and config_facts([str(bad)])["gpu_indices"] == []


def _with_config(tmp_path, text, keep, env=None):
    from ddpdoctor.pipeline.check import add_config_facts
    from ddpdoctor.pipeline.judge import judge

    p = tmp_path / "accelerate.yaml"
    p.write_text(text)
    snap = fixture_snapshot("rtx4090-4x-no-p2p", keep=keep, env=env)
    add_config_facts(snap, [str(p)])
    return [f for f in judge(snap, "check", {"GPU016", "GPU019"}, None).findings if f.severity != "info"]


def test_config_gpu_ids_and_processes_past_this_machine(tmp_path):
    found = _with_config(tmp_path, "gpu_ids: 2,3\nnum_processes: 4\nnum_machines: 1\n", keep=2)
    assert sorted(f.id for f in found) == ["GPU016", "GPU019"]
    assert any("names GPU 3 (gpu_ids: '2,3')" in f.title for f in found)
    assert any("num_processes is 4" in f.title for f in found)


def test_config_quiet_cases(tmp_path):
    assert not _with_config(tmp_path, "gpu_ids: 0,1\nnum_processes: 2\n", keep=2)   # fits
    assert not _with_config(tmp_path, "gpu_ids: all\nnum_processes: 1\n", keep=1)   # "all", one process
    # under a launcher the config's own count is what launched: not judged against WORLD_SIZE
    assert not _with_config(tmp_path, "num_processes: 16\nnum_machines: 2\n", keep=4, env=TORCHRUN4)


# ------------------------------------------------ PKG010: NCCL 2.3.5-2.4.5 LL cleanup hang (batch 64, NVIDIA/nccl#238)
# NVIDIA/nccl v2.4.2-1 src/collectives/device/primitives.h cleans LL buffers every NCCL_LL_CLEAN_FREQ steps;
# v2.4.6-1 (f40ce73e) "Fix LL cleanup hang during long running DL jobs." Workaround: NCCL_LL_THRESHOLD=0.
def _ll_job(nccl, **extra_env):
    from factory import make_snapshot

    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "8", "WORLD_SIZE": "16", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
           "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", **extra_env}
    return findings_of(make_snapshot(env=env, packages={"torch": "1.1.0", "nvidia-nccl-cu11": nccl}), "PKG010")


def test_nccl_ll_cleanup_hang_reported_for_2_3_5_to_2_4_5():
    found = _ll_job("2.4.2")
    assert [f.evidence["defect"] for f in found] == ["nccl-2.3-2.4.2-ll-cleanup-hang"]
    assert found[0].env_fix == {"NCCL_LL_THRESHOLD": "0"} and "2.4.6" in found[0].detail
    assert [f.evidence["defect"] for f in _ll_job("2.3.7")] == ["nccl-2.3-2.4.2-ll-cleanup-hang"]


def test_nccl_ll_cleanup_hang_quiet_cases():
    assert _ll_job("2.4.8") == []                              # fixed in 2.4.6
    assert _ll_job("2.2.13") == []                             # before the step-count cleaning (v2.3.5-5)
    assert _ll_job("2.4.2", NCCL_LL_THRESHOLD="0") == []       # the workaround is set


# ------------------------------------------------ wave 2: GPU003 says when the ACS state is unknown (no root)
# NVIDIA/nccl#631 (batch 65), RGBX_Semantic_Segmentation#43 (batch 64): P2P hangs cured by NCCL_P2P_DISABLE=1; the NCCL
# developer: "usually tied to ACS being enabled". Without root the bridges' ACS registers cannot be read.
def _acs_unread(s):
    for b in s["pci"]["bridges"].values():
        b["acs"] = {"readable": False, "reason": "extended config space not readable (run as root to read ACS)"}


def test_gpu003_acs_unknown_when_bridges_unreadable():
    found = findings_of(fixture_snapshot("pcie-switch-acs-2x-l40s", edit=_acs_unread), "GPU003")
    assert [f.severity for f in found] == ["info"]
    assert "unknown" in found[0].title and "0000:18:00.0" in found[0].detail and "root" in found[0].detail
    assert found[0].evidence["pairs"] == [[0, 1]]


def test_gpu003_acs_unknown_quiet():
    # read and off: no finding; read and on: the error, not the info; the workaround set: nothing
    def off(s):
        for b in s["pci"]["bridges"].values():
            if b["acs"].get("ctl"):
                b["acs"]["ctl"].update(ReqRedir=False, CmpltRedir=False)
    assert findings_of(fixture_snapshot("pcie-switch-acs-2x-l40s", edit=off), "GPU003") == []
    assert [f.severity for f in findings_of(fixture_snapshot("pcie-switch-acs-2x-l40s"), "GPU003")] == ["error"]
    assert findings_of(fixture_snapshot("pcie-switch-acs-2x-l40s", edit=_acs_unread,
                                        env={"NCCL_P2P_DISABLE": "1"}), "GPU003") == []
    # one GPU: no pair
    assert findings_of(fixture_snapshot("pcie-switch-acs-2x-l40s", edit=_acs_unread, keep=1), "GPU003") == []


# ------------------------------------------------ wave 2: SYS008 the process pinned to few of the host's CPUs
# cresset-template/cresset#96 (batch 65): torch.compile crawled in a container whose process had a narrow affinity.
def _pinned(tmp_path, mine, total, script=None, env=None):
    def edit(s):
        s["host"].update(affinity=list(range(mine)), affinity_count=mine, cpu_count=total, usable_cpus=mine)
        if script is not None:
            s["lint"] = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0,
                         "facts": _facts(tmp_path, script)}
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", keep=1, env=env, edit=edit), "SYS008")


LOADER = "import torch\nfrom torch.utils.data import DataLoader\ndl = DataLoader(ds, num_workers=8)\n"
COMPILE = "import torch\nmodel = torch.compile(model)\n"


def test_sys008_pinned_process_triggers(tmp_path):
    f, = _pinned(tmp_path, 1, 32)  # cresset#96's shape: 1 CPU of 32, nothing else known
    assert f.severity == "warning" and "1 of the host's 32 CPUs" in f.title and "taskset" in f.fix
    f, = _pinned(tmp_path, 4, 32, LOADER)  # 1 x (1 + 8) = 9 > 4
    assert "8 DataLoader workers" in f.title and f.evidence["needed"] == 9
    f, = _pinned(tmp_path, 8, 32, COMPILE)  # inductor: min(32, 8) = 8 compile workers, not 32
    assert "8 worker(s) instead of 32" in f.title


def test_sys008_quiet(tmp_path):
    assert _pinned(tmp_path, 32, 32, LOADER + COMPILE) == []  # the whole host
    assert _pinned(tmp_path, 1, 1, LOADER + COMPILE) == []  # a one-CPU machine is small, not pinned
    assert _pinned(tmp_path, 16, 32, LOADER) == []  # 9 busy processes fit 16 CPUs
    assert _pinned(tmp_path, 4, 32) == []  # nothing known that needs more than 4
    assert _pinned(tmp_path, 32, 64, COMPILE) == []  # inductor's pool is capped at 32 anyway
    assert _pinned(tmp_path, 8, 32, COMPILE, env={"TORCHINDUCTOR_COMPILE_THREADS": "8"}) == []


# ------------------------------------------------ wave 2 (after batch 66's first read): SYS009 logind RemoveIPC
# mlcommons/storage#528 (batch 66): systemd-logind RemoveIPC=yes reaped /dev/shm/torch_* mid-epoch.
def test_logind_remove_ipc_read_from_files(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.host import logind_facts

    etc = tmp_path / "etc" / "systemd"
    assert logind_facts(Sources(root=str(tmp_path))) is None  # no systemd-logind configuration at all
    etc.mkdir(parents=True)
    (etc / "logind.conf").write_text("[Login]\n#RemoveIPC=yes\n")
    assert logind_facts(Sources(root=str(tmp_path))) == {"remove_ipc": None, "from": None}  # unset: not judged
    (etc / "logind.conf").write_text("[Login]\nRemoveIPC=yes\n[Other]\nRemoveIPC=no\n")
    assert logind_facts(Sources(root=str(tmp_path))) == {"remove_ipc": True, "from": "/etc/systemd/logind.conf"}
    # a drop-in overrides the main file; /etc hides the same name in /usr/lib
    lib = tmp_path / "usr" / "lib" / "systemd" / "logind.conf.d"
    lib.mkdir(parents=True)
    (lib / "50-x.conf").write_text("[Login]\nRemoveIPC=no\n")
    assert logind_facts(Sources(root=str(tmp_path)))["remove_ipc"] is False
    (etc / "logind.conf.d").mkdir()
    (etc / "logind.conf.d" / "50-x.conf").write_text("[Login]\nRemoveIPC=on\n")
    assert logind_facts(Sources(root=str(tmp_path))) == {"remove_ipc": True,
                                                          "from": "/etc/systemd/logind.conf.d/50-x.conf"}


def _logind(value, uid=1000):
    return findings_of(fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: s["host"].update(
        logind={"remove_ipc": value, "from": "/etc/systemd/logind.conf"}, uid=uid)), "SYS009")


def test_sys009_remove_ipc_for_a_regular_user():
    f, = _logind(True)
    assert f.severity == "warning" and "RemoveIPC=yes" in f.title and "RemoveIPC=no" in f.fix


def test_sys009_quiet():
    assert _logind(False) == [] and _logind(None) == []  # off, or not set in any file
    assert _logind(True, uid=0) == [] and _logind(True, uid=998) == []  # root and system users are exempt
    assert findings_of(fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: s["host"].pop("logind", None)),
                       "SYS009") == []  # an older snapshot without the fact


def test_sys008_per_rank_binding_is_judged_alone(tmp_path):
    # 8 torchrun ranks, each bound to 16 of 128 CPUs: 1 x (1 + 8 workers) = 9 fit 16 - quiet; 4 of 128 each: 9 > 4
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "OMP_NUM_THREADS": "1"}
    assert _pinned(tmp_path, 16, 128, LOADER, env=env) == []
    f, = _pinned(tmp_path, 4, 128, LOADER, env=env)
    assert f.evidence["local_ranks"] == 1 and f.evidence["needed"] == 9
    f, = _pinned(tmp_path, 16, 32, LOADER, env=env)  # 8 ranks cannot each own 16 of 32 CPUs: they share them
    assert f.evidence["local_ranks"] == 8 and f.evidence["needed"] == 72
