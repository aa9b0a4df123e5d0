"""The settings catalogue and the checks that judge set variables against it (issue 26): for every family
of readers (NCCL, torch, the CUDA runtime, transformers, accelerate, tokenizers, DeepSpeed) a setting
that triggers a finding and one that does not; torch's own allocator-config grammar; costs graded by the
number of ranks; conflicts; the catalogue's size and sources."""
from __future__ import annotations

import pytest
from factory import findings_of, make_snapshot

from ddpdoctor.facts import catalogue
from ddpdoctor.facts import settings as S

TORCHRUN = {"TORCHELASTIC_RUN_ID": "j", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500"}


def at_scale(n, **env):
    return dict(TORCHRUN, WORLD_SIZE=str(n), LOCAL_WORLD_SIZE="8" if n >= 8 else str(n), **env)


def ids(env, check=None):
    return {(f.id, f.severity) for f in findings_of(make_snapshot(env=env), check)}


# ------------------------------------------------------------------ every family: trigger and quiet

FAMILY_CASES = [
    # family, trigger env, (check, severity) expected, quiet env
    ("nccl", {"NCCL_P2P_LEVEL": "nvl"}, ("NCCL003", "warning"), {"NCCL_P2P_LEVEL": "NVL"}),
    ("nccl", {"NCCL_SOCKET_IFNAMES": "eth0"}, ("NCCL001", "warning"), {"NCCL_SOCKET_IFNAME": "eth0"}),
    ("torch", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:true"}, ("SET002", "error"),
     {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("torch", {"TORCH_NCCL_BLOCKING_WAIT": "on"}, ("NCCL003", "error"), {"TORCH_NCCL_BLOCKING_WAIT": "yes"}),
    ("torch", {"PYTORCH_CUDA_ALLOC_CONFIG": "expandable_segments:True"}, ("SET001", "warning"),
     {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}),
    ("cuda", {"CUDA_LAUNCH_BLOCKING": "1"}, ("SET004", "warning"), {"CUDA_LAUNCH_BLOCKING": "0"}),
    ("cuda", {"CUDA_MODULE_LOADING": "lazy"}, ("SET002", "warning"), {"CUDA_MODULE_LOADING": "LAZY"}),
    ("transformers", {"TRANSFORMERS_VERBOSTY": "info"}, ("SET001", "warning"), {"TRANSFORMERS_VERBOSITY": "info"}),
    ("accelerate", {"ACCELERATE_MIXED_PRECISION": "float16"}, ("SET002", "error"),
     {"ACCELERATE_MIXED_PRECISION": "bf16"}),
    ("accelerate", {"ACCELERATE_USE_FSDP": "enabled"}, ("SET002", "error"), {"ACCELERATE_USE_FSDP": "true"}),
    ("tokenizers", {"RAYON_RS_NUM_CPUS": "4"}, ("SET003", "warning"), {"RAYON_NUM_THREADS": "4"}),
    ("tokenizers", {"TOKENIZERS_PARALELLISM": "false"}, ("SET001", "warning"), {"TOKENIZERS_PARALLELISM": "false"}),
    ("deepspeed", {"DEEPSPEED_TIMEOUT": "30m"}, ("SET002", "error"), {"DEEPSPEED_TIMEOUT": "30"}),
]


@pytest.mark.parametrize("family,bad,expected,good", FAMILY_CASES, ids=[f"{c[0]}-{c[2][0]}" for c in FAMILY_CASES])
def test_every_family_has_a_trigger_and_a_quiet_fixture(family, bad, expected, good):
    assert S.family_of(next(iter(bad))) in (family, None) or S.family_of(next(iter(good))) == family
    assert S.family_of(next(iter(good))) == family
    got = ids(bad)
    assert expected in got, got
    assert not {i for i, _ in ids(good)} & {"SET001", "SET002", "SET003", "SET004", "SET005", "NCCL001", "NCCL003"}


def test_every_family_of_the_issue_is_covered_here_and_in_the_catalogue():
    families = {c[0] for c in FAMILY_CASES}
    assert families == {"nccl", "torch", "cuda", "transformers", "accelerate", "tokenizers", "deepspeed"}
    assert set(catalogue.size_by_source("settings")) >= {"NVIDIA/nccl", "pytorch/pytorch", "docs.nvidia.com/cuda",
                                                         "huggingface/transformers", "huggingface/accelerate",
                                                         "huggingface/tokenizers", "deepspeedai/DeepSpeed"}
    fams = {e["family"] for e in S.entries()}
    assert fams == families


# ------------------------------------------------------------------ the catalogue's knowledge

def test_nccl_parameters_come_from_every_release_with_their_defaults():
    e = S.lookup("NCCL_SHADOW_MEMPOOL_MAX_SIZE")  # NCCL_PARAM(..., 1LL << 30) in a recent NCCL
    assert e["default"] == str(1 << 30) and e["source"]["repo"] == "NVIDIA/nccl" and len(e["source"]["commit"]) == 40
    old = S.lookup("NCCL_MAX_NRINGS")
    assert old["versions"]["first"].startswith("2.10")
    assert len([e for e in S.entries() if e["family"] == "nccl"]) >= 200


def test_nccl_2_31_names_from_the_dev_branch_are_known():
    """NCCL 2.31 (unreleased; NVIDIA/nccl's dev branch, makefiles/version.mk 2.31.0a7) reads three names no release
    reads: mined with tools/mine_settings.py --nccl-ref dev --add-nccl-to, each with its branch commit."""
    for name, default in (("NCCL_SYM_KERNEL_ID", None), ("NCCL_GIN_PROXY_POLL_BATCH", "32"),
                          ("NCCL_GDRCOPY_USE_INTERNAL_DMABUF", "0")):
        e = S.lookup(name)
        assert e is not None and e["unreleased"]["ref"] == "dev" and e["versions"]["first"].startswith("2.31.0")
        assert e.get("default") == default and len(e["source"]["commit"]) == 40
    # on NCCL 2.31 the new name is no typo of NCCL_SYM_KERNEL; on 2.30 it is read by nothing (trigger / quiet)
    env = {"NCCL_SYM_KERNEL_ID": "3"}
    assert findings_of(make_snapshot(env=env, packages={"nvidia-nccl-cu12": "2.31.0"}), "SET001") == []
    assert findings_of(make_snapshot(env=env, packages={"nvidia-nccl-cu12": "2.31.0"}), "SET006") == []
    [f] = findings_of(make_snapshot(env=env, packages={"nvidia-nccl-cu12": "2.30.7"}), "SET006")
    assert "2.31.0" in f.title


def test_torch_aliases_are_deprecated_spellings_of_one_entry():
    assert S.lookup("NCCL_ASYNC_ERROR_HANDLING")["name"] == "TORCH_NCCL_ASYNC_ERROR_HANDLING"
    assert S.replaced_by("TORCH_NCCL_TRACE_BUFFER_SIZE")["name"] == "TORCH_FR_BUFFER_SIZE"
    assert S.replaced_by("TORCH_NCCL_BLOCKING_WAIT") is None


@pytest.mark.parametrize("value,problem", [
    ("expandable_segments:True", None),
    ("expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6", None),
    ("backend:cudaMallocAsync", None),
    ("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", None),
    ("roundup_power2_divisions:4", None),
    (" expandable_segments : True ", None),  # whitespace is dropped by the tokenizer
    ("expandable_segments:true", "Expected 'True' or 'False' for expandable_segments but got 'true'"),
    ("max_split_size_mb:10", "CachingAllocator option max_split_size_mb too small, must be >= 20"),
    ("garbage_collection_threshold:1", "garbage_collection_threshold is invalid, set it in (0.0, 1.0)"),
    ("roundup_power2_divisions:[300:1]", "For roundups, the intervals have to be power of 2"),
    ("roundup_power2_divisions:3", "For roundups, the divisions has to be power of 2"),
    ("backend:cudaMalloc", "Unknown allocator backend, options are native and cudaMallocAsync"),
    ("expandable_segment:True", "Unrecognized key 'expandable_segment' in allocator config (did you mean "
                                "'expandable_segments'?)"),
    ("max_split_size_mb=128", "Error parsing allocator settings, expected ':' after 'max_split_size_mb=128'"),
    ("roundup_power2_divisions:[256:1", "Expected closing bracket ']' in ConfigTokenizer but reached end of config"),
])
def test_the_allocator_config_grammar_is_torchs(value, problem):
    got = S.parse_alloc_conf(value)[1]
    assert (got[0] if got else None) == problem


def test_nccl_reads_words_as_numbers_with_strtoll():
    e = S.lookup("NCCL_P2P_DISABLE")
    assert S.strtoll("true") == 0 and S.strtoll("0x10") == 16 and S.strtoll("010") == 8 and S.strtoll("1.5") == 1
    assert S.judge_value(e, "true").reads_as.startswith("0") and S.judge_value(e, "1") is None


def test_c10d_switches_accept_yes_and_raise_on_other_words():
    e = S.lookup("TORCH_NCCL_BLOCKING_WAIT")
    assert all(S.judge_value(e, v) is None for v in ("1", "yes", "TRUE", "t", "n", "False"))
    assert S.judge_value(e, "on").severity == "error"


def test_the_catalogue_verifies_what_it_quotes_from_the_installed_torch():
    import importlib.util
    import os

    lib = os.path.join(os.path.dirname(importlib.util.find_spec("torch").origin), "lib")
    checked = 0
    for e in S.entries():
        v = e.get("verify")
        if v and v["path"].startswith("torch/lib/"):
            data = open(os.path.join(lib, v["path"].split()[0].split("/")[-1]), "rb").read()
            assert all(t.encode() in data for t in v["strings"]), e["id"]
            checked += 1
    assert checked >= 4


# ------------------------------------------------------------------ graded by world size

def test_torch_distributed_debug_detail_is_graded_by_the_number_of_ranks():
    assert ("SET004", "info") in ids(at_scale(2, TORCH_DISTRIBUTED_DEBUG="DETAIL"), "SET004")
    assert ("SET004", "warning") in ids(at_scale(64, TORCH_DISTRIBUTED_DEBUG="DETAIL"), "SET004")
    assert ids({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, "SET004") == set()  # one process: nothing to say
    assert ids(at_scale(64, TORCH_DISTRIBUTED_DEBUG="INFO"), "SET004") == set()


def test_nccl_debug_info_with_every_subsystem_at_scale():
    assert ("SET004", "warning") in ids(at_scale(64, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="ALL"), "SET004")
    assert ("SET004", "warning") in ids(at_scale(64, NCCL_DEBUG="TRACE"), "SET004")
    assert ids(at_scale(64, NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET"), "SET004") == set()
    assert ids(at_scale(64, NCCL_DEBUG="WARN"), "SET004") == set()


def test_cuda_launch_blocking_is_a_warning_even_on_one_rank():
    [f] = findings_of(make_snapshot(env={"CUDA_LAUNCH_BLOCKING": "1"}), "SET004")
    assert f.severity == "warning" and f.subjects == ("CUDA_LAUNCH_BLOCKING",) and "debugging" in f.title


# ------------------------------------------------------------------ conflicts

@pytest.mark.parametrize("env,pair", [
    ({"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_BUFFER_SIZE": "0"}, ("TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_FR_BUFFER_SIZE")),
    ({"NCCL_DEBUG_SUBSYS": "INIT,NET"}, ("NCCL_DEBUG_SUBSYS", "NCCL_DEBUG")),
    ({"TORCH_NCCL_BLOCKING_WAIT": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"},
     ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING")),
    ({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PYTORCH_ALLOC_CONF": "max_split_size_mb:128"},
     ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")),
    ({"NCCL_IB_DISABLE": "1", "NCCL_NET": "IB"}, ("NCCL_IB_DISABLE", "NCCL_NET")),
])
def test_conflicting_settings(env, pair):
    [f] = findings_of(make_snapshot(env=env), "SET005")
    assert set(pair) <= set(f.subjects)


def test_no_conflict_when_the_pair_agrees():
    quiet = [{"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_BUFFER_SIZE": "2000"},
             {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"},
             {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PYTORCH_ALLOC_CONF": "expandable_segments:True"},
             {"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}]
    for env in quiet:
        assert findings_of(make_snapshot(env=env), "SET005") == [], env


def test_conflicts_are_judged_on_what_was_meant_so_renaming_reveals_nothing_new():
    # a misspelt NCCL_DEBUG_SUBSYS is still a subsystem list without NCCL_DEBUG; a deprecated
    # NCCL_ASYNC_ERROR_HANDLING still fights TORCH_NCCL_BLOCKING_WAIT (torch falls back to it):
    # `check --fix-env` renames both, and the pair must have been reported before the rename
    for before, after, pair in [
            ({"NCCL_DEBUG_SUBSYSTEM": "INIT"}, {"NCCL_DEBUG_SUBSYS": "INIT"}, "NCCL_DEBUG"),
            ({"NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_BLOCKING_WAIT": "yes"},
             {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_BLOCKING_WAIT": "1"}, "TORCH_NCCL_BLOCKING_WAIT")]:
        [old] = findings_of(make_snapshot(env=before), "SET005")
        [new] = findings_of(make_snapshot(env=after), "SET005")
        assert pair in old.title and pair in new.title
        assert set(old.subjects) & set(before) and set(new.subjects) & set(after)
    [f] = findings_of(make_snapshot(env={"NCCL_DEBUG_SUBSYSTEM": "INIT"}), "SET005")
    assert "NCCL_DEBUG_SUBSYSTEM (meant as NCCL_DEBUG_SUBSYS)" in f.title
    # the exact name wins over its misspelling, as the reader does
    assert findings_of(make_snapshot(env={"NCCL_DEBUG_SUBSYSTEM": "INIT", "NCCL_DEBUG_SUBSYS": "INIT",
                                          "NCCL_DEBUG": "INFO"}), "SET005") == []


# ------------------------------------------------------------------ versions

def test_an_allocator_option_newer_than_the_installed_torch_is_an_error():
    [f] = findings_of(make_snapshot(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                    packages={"torch": "2.0.1"}), "SET006")
    assert f.severity == "error" and "needs torch 2.1" in f.title and "Unrecognized CachingAllocator option" in f.detail
    assert findings_of(make_snapshot(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                     packages={"torch": "2.1.0"}), "SET006") == []


def test_a_torch_nccl_name_on_a_torch_that_reads_the_old_one():
    [f] = findings_of(make_snapshot(env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, packages={"torch": "1.13.1"}), "SET006")
    assert "reads NCCL_ASYNC_ERROR_HANDLING" in f.detail
    assert findings_of(make_snapshot(env={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, packages={"torch": "2.2.0"}),
                       "SET006") == []


def test_an_nccl_variable_newer_than_the_installed_nccl():
    first = S.lookup("NCCL_NVLS_ENABLE")["versions"]["first"]
    [f] = findings_of(make_snapshot(env={"NCCL_NVLS_ENABLE": "0"}, packages={"nvidia-nccl-cu12": "2.14.3"}), "SET006")
    assert first.split("-")[0] in f.title
    assert findings_of(make_snapshot(env={"NCCL_NVLS_ENABLE": "0"}, packages={"nvidia-nccl-cu12": "2.21.5"}), "SET006") == []
    # a name present at the first mined release: its age is unknown, so nothing is claimed
    assert findings_of(make_snapshot(env={"NCCL_DEBUG": "INFO"}, packages={"nvidia-nccl-cu12": "2.5.6"}), "SET006") == []


def test_expandable_segments_with_max_split_before_torch_2_5():
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:32"}
    [f] = findings_of(make_snapshot(env=env, packages={"torch": "2.2.0"}), "SET005")
    assert "#134338" in f.detail
    assert findings_of(make_snapshot(env=env, packages={"torch": "2.5.0"}), "SET005") == []
    assert findings_of(make_snapshot(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False,max_split_size_mb:32"},
                                     packages={"torch": "2.2.0"}), "SET005") == []


# ------------------------------------------------------------------ values a GPU cannot run

def _gpus(*caps):
    return {"backend": "nvml", "count": len(caps),
            "devices": [{"index": i, "name": name, "cuda_capability": list(cap), "pci_bus_id": f"00000000:{i + 1:02X}:00.0"}
                        for i, (name, cap) in enumerate(caps)]}


def test_mixed_precision_a_gpu_cannot_run():
    # huggingface/accelerate#1693: bf16 on a V100 (7.0) is ignored by older accelerate, emulated by newer torch
    [f] = findings_of(make_snapshot(env={"ACCELERATE_MIXED_PRECISION": "bf16"},
                                    gpus=_gpus(("Tesla V100-SXM2-32GB", (7, 0)))), "SET002")
    assert f.severity == "warning" and "needs compute capability 8.0" in f.title and "gpu:0" in f.subjects
    assert "is_bf16_supported" in f.detail
    [f] = findings_of(make_snapshot(env={"ACCELERATE_MIXED_PRECISION": "fp8"},
                                    gpus=_gpus(("NVIDIA A100-SXM4-80GB", (8, 0)), ("NVIDIA H100 80GB HBM3", (9, 0)))),
                      "SET002")
    assert "8.9" in f.title and f.subjects == ("ACCELERATE_MIXED_PRECISION", "gpu:0")


def test_mixed_precision_quiet_on_gpus_that_run_it_or_without_gpu_facts():
    for env, gpus in [({"ACCELERATE_MIXED_PRECISION": "bf16"}, _gpus(("NVIDIA A100-SXM4-80GB", (8, 0)))),
                      ({"ACCELERATE_MIXED_PRECISION": "fp16"}, _gpus(("Tesla V100-SXM2-32GB", (7, 0)))),
                      ({"ACCELERATE_MIXED_PRECISION": "fp8"}, _gpus(("NVIDIA H100 80GB HBM3", (9, 0))))]:
        assert findings_of(make_snapshot(env=env, gpus=gpus), "SET002") == [], env
    assert findings_of(make_snapshot(env={"ACCELERATE_MIXED_PRECISION": "bf16"}), "SET002") == []


# ------------------------------------------------------------------ names and values a release retired or lacks

def test_transformers_cache_is_deprecated_in_4_and_ignored_in_5():
    # haotian-liu/LLaVA#1092 (4.36.2 warns), llm-d/llm-d#255; transformers 5 reads none of the old names
    [f] = findings_of(make_snapshot(env={"TRANSFORMERS_CACHE": "/data/hf"}, packages={"transformers": "4.36.2"}),
                      "SET003")
    assert "deprecated" in f.title and "HF_HUB_CACHE" in f.title and "utils/hub.py" in f.detail
    assert f.env_fix == {"HF_HUB_CACHE": "/data/hf", "TRANSFORMERS_CACHE": None}
    [f] = findings_of(make_snapshot(env={"TRANSFORMERS_CACHE": "/data/hf"}, packages={"transformers": "5.25.0"}),
                      "SET003")
    assert "is ignored" in f.title and "5.25.0" in f.title
    [f] = findings_of(make_snapshot(env={"PYTORCH_TRANSFORMERS_CACHE": "/c", "HF_HUB_CACHE": "/h"},
                                    packages={"transformers": "4.40.0"}), "SET003")
    assert f.env_fix == {"PYTORCH_TRANSFORMERS_CACHE": None} and "HF_HUB_CACHE" in f.subjects


def test_transformers_cache_quiet_when_unset():
    assert findings_of(make_snapshot(env={"HF_HUB_CACHE": "/h", "HF_HOME": "/x"},
                                     packages={"transformers": "4.36.2"}), "SET003") == []


def test_nccl_level_names_on_an_nccl_that_reads_integers():
    # NVIDIA/nccl#332: NCCL 2.5.6 logs "NCCL_P2P_LEVEL set by environment to 0" for NVL
    [f] = findings_of(make_snapshot(env={"NCCL_P2P_LEVEL": "NVL"}, packages={"nvidia-nccl-cu12": "2.5.6"}), "SET006")
    assert "NCCL_P2P_LEVEL=NVL needs NCCL 2.6.4" in f.title and "read as 0" in f.detail
    for env, nccl in [({"NCCL_P2P_LEVEL": "NVL"}, "2.6.4"), ({"NCCL_P2P_LEVEL": "2"}, "2.5.6"),
                      ({"NCCL_NET_GDR_LEVEL": "PHB"}, "2.21.5")]:
        assert findings_of(make_snapshot(env=env, packages={"nvidia-nccl-cu12": nccl}), "SET006") == [], (env, nccl)


# ------------------------------------------------------------------ a flag an external plugin does not obey

def test_ib_disable_with_an_external_net_plugin(tmp_path):
    # NVIDIA/nccl#676: HPC-X's libnccl-net.so (IBext) on LD_LIBRARY_PATH; NCCL_IB_DISABLE=1 is ignored
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.pci import nccl_net_plugins

    lib = tmp_path / "opt/hpcx/nccl_rdma_sharp_plugin/lib"
    lib.mkdir(parents=True)
    (lib / "libnccl-net.so").write_bytes(b"")
    env = {"LD_LIBRARY_PATH": "/opt/hpcx/nccl_rdma_sharp_plugin/lib:/usr/local/cuda/lib64", "NCCL_IB_DISABLE": "1"}
    found = nccl_net_plugins(Sources(environ=env, root=str(tmp_path)))
    assert found == ["/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so"]
    assert nccl_net_plugins(Sources(environ=dict(env, NCCL_NET_PLUGIN="none"), root=str(tmp_path))) == []
    [f] = findings_of(make_snapshot(env=env, pci={"net_plugins": found}), "SET005")
    assert "does not reach the NCCL net plugin" in f.title and "NCCL_NET=Socket" in f.fix
    assert findings_of(make_snapshot(env=dict(env, NCCL_NET="Socket"), pci={"net_plugins": found}), "SET005") == []
    assert findings_of(make_snapshot(env=env, pci={"net_plugins": []}), "SET005") == []


def test_a_deprecated_spelling_still_read_costs_the_same():
    # ray-project/ray#29419: Ray Train set NCCL_BLOCKING_WAIT=1 on 16 workers (torch 1.12 reads that name)
    [f] = findings_of(make_snapshot(env=at_scale(16, NCCL_BLOCKING_WAIT="1"), packages={"torch": "1.12.1"}), "SET004")
    assert f.subjects == ("NCCL_BLOCKING_WAIT",) and f.severity == "warning"
    # a misspelling is read by nobody: no cost
    assert findings_of(make_snapshot(env=at_scale(16, NCCL_BLOCKING_WAITT="1")), "SET004") == []


def test_flight_recorder_dump_file_renamed():
    # pytorch/tutorials#3532: TORCH_NCCL_DEBUG_INFO_TEMP_FILE is deprecated; use TORCH_FR_DUMP_TEMP_FILE
    [f] = findings_of(make_snapshot(env={"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/trace_"}, packages={"torch": "2.9.0"}),
                      "NCCL002")
    assert "TORCH_FR_DUMP_TEMP_FILE" in f.title


# ------------------------------------------------------------------ the release history (tools/mine_settings_history.py)

def test_flight_recorder_rename_is_dated_by_the_release_history():
    # the rename to TORCH_FR_* is in torch 2.8's libraries, not in 2.7's (mined from every minor release)
    assert S.lookup("TORCH_FR_DUMP_TEMP_FILE")["alias_since"] == {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "2.8"}
    env = {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/tmp/trace_"}
    [f] = findings_of(make_snapshot(env=env, packages={"torch": "2.8.0"}), "NCCL002")
    assert "since torch 2.8" in f.title
    assert findings_of(make_snapshot(env=env, packages={"torch": "2.7.1"}), "NCCL002") == []
    # and the new name on a torch that still reads the old one
    [f] = findings_of(make_snapshot(env={"TORCH_FR_DUMP_TEMP_FILE": "/tmp/t"}, packages={"torch": "2.7.1"}), "SET006")
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" in f.fix


def test_pytorch_alloc_conf_reaches_the_cuda_allocator_from_torch_2_10():
    # pytorch/pytorch#183387: on 2.9.1 PYTORCH_ALLOC_CONF=expandable_segments:True does nothing for CUDA
    entry = S.lookup("PYTORCH_ALLOC_CONF")
    assert entry["cuda_allocator_since"] == "2.10" and entry["history"]["first"] == "2.9"
    env = {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    [f] = findings_of(make_snapshot(env=env, packages={"torch": "2.9.1+cu128"}), "SET006")
    assert "not read by the CUDA allocator of torch 2.9.1" in f.title
    assert f.fix == "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'; unset PYTORCH_ALLOC_CONF"
    [f] = findings_of(make_snapshot(env=env, packages={"torch": "2.8.0"}), "SET006")
    assert "not read by torch 2.8.0" in f.title
    assert findings_of(make_snapshot(env=env, packages={"torch": "2.10.0"}), "SET006") == []
    assert findings_of(make_snapshot(env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
                                     packages={"torch": "2.9.1"}), "SET006") == []


def test_a_name_newer_than_the_installed_accelerate_or_torch():
    first = S.lookup("ACCELERATE_CPU_AFFINITY")["history"]["first"]
    [f] = findings_of(make_snapshot(env={"ACCELERATE_CPU_AFFINITY": "1"}, packages={"accelerate": "0.20.3"}), "SET006")
    assert f"first read by accelerate {first}" in f.title and "pkg:accelerate" in f.subjects
    assert findings_of(make_snapshot(env={"ACCELERATE_CPU_AFFINITY": "1"}, packages={"accelerate": first + ".0"}),
                       "SET006") == []
    [f] = findings_of(make_snapshot(env={"TORCH_NCCL_NAN_CHECK": "1"}, packages={"torch": "2.3.1"}), "SET006")
    assert "not read by torch 2.3.1" in f.title
    assert findings_of(make_snapshot(env={"TORCH_NCCL_NAN_CHECK": "1"}, packages={"torch": "2.4.0"}), "SET006") == []
    # names outside the reader's own prefixes carry no history: LOCAL_WORLD_SIZE was read by torch long before
    assert "history" not in (S.lookup("LOCAL_WORLD_SIZE") or {})


def test_a_name_a_later_release_stopped_reading():
    entry = S.lookup("ACCELERATE_USE_XPU")
    assert entry["retired"]["removed_in"] == "1.6" and entry["source"]["commit"] == "v1.5.2"
    [f] = findings_of(make_snapshot(env={"ACCELERATE_USE_XPU": "true"}, packages={"accelerate": "1.16.0"}), "SET003")
    assert f.severity == "warning" and "no longer reads it (removed in 1.6)" in f.title
    assert findings_of(make_snapshot(env={"ACCELERATE_USE_XPU": "true"}, packages={"accelerate": "1.5.2"}),
                       "SET003") == []
    # huggingface_hub still reads TRANSFORMERS_OFFLINE on transformers' behalf: never retired
    assert not (S.lookup("TRANSFORMERS_OFFLINE") or {}).get("retired")


def test_a_version_dependent_conflict_without_the_version_is_a_marked_guess():
    # pytorch/pytorch#119452 gives no torch version: the conflict (torch < 2.5) is reported as a guess
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:32"}
    [f] = findings_of(make_snapshot(env=env, packages={"torch": None}), "SET005")
    assert "a guess" in f.title and f.evidence["guess"] is True and "nothing to fix" in f.detail
    [f] = findings_of(make_snapshot(env=env, packages={"torch": "2.2.0"}), "SET005")
    assert f.evidence["guess"] is False


def test_the_history_miner_claims_only_what_the_releases_show(tmp_path):
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
    import mine_settings_history as H

    rel = ["2.7.1", "2.8.0", "2.9.1", "2.10.0"]
    seen = {"2.7.1": {"PYTORCH_CUDA_ALLOC_CONF", "OLD"}, "2.8.0": {"PYTORCH_CUDA_ALLOC_CONF", "OLD", "NEW"},
            "2.9.1": {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NEW"},
            "2.10.0": {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "NEW"}}
    assert H.first_seen("NEW", rel, seen) == "2.8"
    assert H.first_seen("PYTORCH_CUDA_ALLOC_CONF", rel, seen) is None  # in the oldest: its age is unknown
    assert H.first_seen("OLD", rel, seen) is None  # not in the newest
    alloc = {"2.7.1": ["PYTORCH_CUDA_ALLOC_CONF"], "2.8.0": ["PYTORCH_CUDA_ALLOC_CONF"],
             "2.9.1": ["PYTORCH_CUDA_ALLOC_CONF"], "2.10.0": ["PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"]}
    assert H.cuda_allocator_since("PYTORCH_ALLOC_CONF", rel, seen, alloc) == "2.10"
    # a release whose header reads nothing (the read was in the .cpp) while the name exists: no claim
    assert H.cuda_allocator_since("PYTORCH_ALLOC_CONF", rel, seen, dict(alloc, **{"2.9.1": []})) is None
    header = tmp_path / "2.9.1/torch/include/c10/cuda"
    header.mkdir(parents=True)
    (header / "CUDAAllocatorConfig.h").write_text('auto env = c10::utils::get_env("PYTORCH_CUDA_ALLOC_CONF");\n'
                                                   '#ifdef USE_ROCM\n env = c10::utils::get_env("PYTORCH_HIP_ALLOC_CONF");'
                                                   '\n#endif\n')
    assert H.cuda_allocator_reads(str(tmp_path / "2.9.1")) == ["PYTORCH_CUDA_ALLOC_CONF"]
    assert H.own("LOCAL_WORLD_SIZE", "accelerate") is False and H.own("PYTORCH_HIP_ALLOC_CONF", "torch") is False


def test_nccl_thread_counts_with_nccls_own_range_and_documented_values():
    # getNthreads (src/graph/tuning.cc) resets what is not a multiple of 32 or outside 64..512; the docs accept
    # 64/128/256/512, and 480 gave wrong results with NCCL_PROTO=SIMPLE (NVIDIA/nccl#698)
    for value, words in (("480", "not one of the values NCCL documents"), ("100", "not a multiple of 32"),
                         ("1024", "outside 64..512")):
        [f] = findings_of(make_snapshot(env={"NCCL_NTHREADS": value}), "NCCL003")
        assert words in f.title, (value, f.title)
    for value in ("256", "64", "-2"):
        assert findings_of(make_snapshot(env={"NCCL_NTHREADS": value}), "NCCL003") == [], value
    assert findings_of(make_snapshot(env={"NCCL_LL128_NTHREADS": "640"}), "NCCL003") == []
    [f] = findings_of(make_snapshot(env={"NCCL_LL128_NTHREADS": "96"}), "NCCL003")
    assert "outside 160..640" in f.title


def test_a_heartbeat_timeout_with_monitoring_off_does_nothing():
    # sgl-project/sglang#3783: the heartbeat timeout is the monitoring thread's (ProcessGroupNCCL.hpp)
    env = {"TORCH_NCCL_ENABLE_MONITORING": "0", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "10000"}
    [f] = findings_of(make_snapshot(env=env), "SET005")
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in f.subjects and "init_process_group(timeout" in f.detail
    assert findings_of(make_snapshot(env=dict(env, TORCH_NCCL_ENABLE_MONITORING="1")), "SET005") == []
    assert findings_of(make_snapshot(env={"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "10000"}), "SET005") == []


HOSTILE_VALUES = ("9" * 5000, "-" + "9" * 5000, "0x" + "f" * 5000, "0" + "7" * 5000, "²", "٣", "1²", "089",
                  "9" * 25 + ":" + "9" * 25, "roundup_power2_divisions:[" + "9" * 5000 + ":4]", "", " ", "\x00")


def test_no_value_crashes_the_judge_of_any_catalogue_entry():
    """Every setting's value is judged without an exception, whatever the user exported: digits past
    Python's int() limit (4,300), Unicode digits that str.isdigit() accepts and int() refuses, octal
    and hex past 64 bits (found by the fuzz test of the environment under load: NCCL_ASYNC_ERROR_HANDLING
    set to 5,000 nines crashed NCCL003)."""
    for entry in S.entries():
        for raw in HOSTILE_VALUES:
            S.judge_value(entry, raw)  # raises on a crash; a ValueProblem or None are both answers


def test_strtoll_reads_as_c_does():
    """C's strtoll(s, NULL, 0) as NCCL_PARAM uses it: base from the prefix, ASCII digits only,
    clamped on overflow (ERANGE), the longest valid prefix."""
    s = S.strtoll
    assert [s("12abc"), s("0x1F"), s("010"), s("089"), s(" -7"), s("+3"), s("true"), s("٣")] == \
        [12, 31, 8, 0, -7, 3, 0, 0]
    assert s("9" * 5000) == (1 << 63) - 1 and s("-" + "9" * 5000) == -(1 << 63)
    assert s("0x" + "f" * 17) == (1 << 63) - 1 and s("9223372036854775807") == (1 << 63) - 1
    assert S.whole_number("²") is None and S.whole_number("18446744073709551616") is None
    assert S.whole_number("18446744073709551615") == (1 << 64) - 1 and S.whole_number("007") == 7


def test_ib_timeout_and_retry_count_outside_the_verbs_fields():
    # NVIDIA/nccl docs/userguide/source/env.rst@5067397c: NCCL_IB_TIMEOUT "Values can be 0-31 ... 0 or >= 32 will
    # result in an infinite timeout value" (the 5-bit Local Ack Timeout); NCCL_IB_RETRY_CNT "Valid values are 0-7"
    for name, value, words in (("NCCL_IB_TIMEOUT", "32", "outside 0..31: an infinite IB ack timeout"),
                               ("NCCL_IB_TIMEOUT", "50", "outside 0..31"), ("NCCL_IB_TIMEOUT", "-1", "outside 0..31"),
                               ("NCCL_IB_RETRY_CNT", "8", "outside 0..7")):
        [f] = findings_of(make_snapshot(env={name: value}), "NCCL003")
        assert words in f.title and f.severity == "warning", (name, value, f.title)
    for name, value in (("NCCL_IB_TIMEOUT", "22"), ("NCCL_IB_TIMEOUT", "31"), ("NCCL_IB_TIMEOUT", "0"),
                        ("NCCL_IB_RETRY_CNT", "7"), ("NCCL_IB_RETRY_CNT", "0")):
        assert findings_of(make_snapshot(env={name: value}), "NCCL003") == [], (name, value)


def test_nccl_algo_per_function_lists_are_understood():
    # NVIDIA/nccl v2.24.3-1 src/graph/tuning.cc parseList: "list;function:list;..." (vllm-project/vllm#58179's
    # NCCL_ALGO=allreduce:tree is valid; a function NCCL does not have, or a second entry without one, is not)
    from ddpdoctor.facts import settings as st

    algo, proto = st.lookup("NCCL_ALGO"), st.lookup("NCCL_PROTO")
    assert st.judge_value(algo, "allreduce:tree") is None
    assert st.judge_value(algo, "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring") is None
    assert st.judge_value(proto, "^LL128;allreduce:LL128") is None
    assert "not an NCCL function" in st.judge_value(algo, "allreduse:tree").reads_as
    assert "only the first entry" in st.judge_value(algo, "ring;tree").reads_as
    assert "BOGUS" in st.judge_value(algo, "allreduce:bogus").reads_as
    assert "BOGUS" in st.judge_value(algo, "ring,bogus").reads_as  # the plain list as before


def test_launcher_written_variables_are_not_misspellings():
    """mpirun (Open MPI's ORTE) sets OMPI_COMM_WORLD_NODE_RANK for every rank and PMIx servers set PMIX_RANK:
    neither is a typo of the OMPI_COMM_WORLD_RANK / PMI_RANK accelerate reads (mmdetection#8940's mpirun
    launch drew a false SET001 warning). A misspelt prefix is still caught."""
    mpirun = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
              "OMPI_COMM_WORLD_LOCAL_SIZE": "8", "OMPI_COMM_WORLD_NODE_RANK": "0", "PMIX_RANK": "2",
              "PMIX_NAMESPACE": "prterun-node1-1234@1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert not {i for i, _ in ids(mpirun)} & {"SET001"}
    assert ("SET001", "warning") in ids(dict(mpirun, ACCELERATE_MIXED_PRECISON="bf16"))
    assert ("SET001", "warning") in ids({"TORCH_DISTRIBUTED_DEBUGG": "INFO"}) or \
        ("SET001", "warning") in ids({"PYTORCH_CUDA_ALLOC_CONFIG": "expandable_segments:True"})
