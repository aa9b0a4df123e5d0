"""check19 (issue 26, round 19): the classes batches 93-94 lacked, each with a trigger and a quiet fixture.
Pure: ELF fixtures are read as bytes, snapshots are built by the factory; no process is started."""
from __future__ import annotations

import os
import shutil

import pytest

from factory import findings_of, make_snapshot

CXX = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "cxx")
NEEDS_3_4_30 = os.path.join(CXX, "site", "torch", "lib", "libtorch_python.so")  # needs GLIBCXX_3.4.30 (README)
C_ONLY = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "cxx", "old", "libstdc++.so.6")

CONDA_COPY = {"path": "/opt/conda/lib/libstdc++.so.6", "from": "RUNPATH", "glibcxx": "3.4.29", "cxxabi": "1.3.13",
              "needs_glibcxx": "3.4.22", "needs_cxxabi": "1.3.11", "needed_by": "libtorch_cpu.so"}


def test_extension_cxx_needs_reads_site_packages_and_the_jit_build_directory(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import extension_cxx_needs

    site = tmp_path / "site"
    (site / "youtokentome").mkdir(parents=True)
    shutil.copy(NEEDS_3_4_30, site / "_youtokentome_cython.cpython-38-x86_64-linux-gnu.so")
    shutil.copy(C_ONLY, site / "youtokentome" / "plain.so")  # needs no libstdc++ versions: not listed
    jit = tmp_path / "home/u/.cache/torch_extensions/py38_cu121/gymtorch"
    jit.mkdir(parents=True)
    shutil.copy(NEEDS_3_4_30, jit / "gymtorch.so")
    out = extension_cxx_needs(Sources(root=str(tmp_path), environ={"HOME": "/home/u"}), str(site))
    by_package = {e["package"]: e for e in out}
    assert set(by_package) == {"_youtokentome_cython", "gymtorch"}
    assert by_package["gymtorch"]["glibcxx"] == "3.4.30"
    assert by_package["gymtorch"]["file"] == "/home/u/.cache/torch_extensions/py38_cu121/gymtorch/gymtorch.so"
    assert by_package["_youtokentome_cython"]["file"] == "_youtokentome_cython.cpython-38-x86_64-linux-gnu.so"
    # TORCH_EXTENSIONS_DIR replaces the cache directory (torch/utils/cpp_extension.py _get_build_directory)
    out = extension_cxx_needs(Sources(root=str(tmp_path), environ={"HOME": "/home/u", "TORCH_EXTENSIONS_DIR": "/x"}),
                              str(site))
    assert [e["package"] for e in out] == ["_youtokentome_cython"]


def _pkg(**extra):
    return make_snapshot(packages=dict({"torch": "2.4.1", "libstdcxx": dict(CONDA_COPY)}, **extra))


def test_pkg026_an_extension_needing_a_newer_glibcxx_than_the_loaded_copy():
    """FFTAI/Wiki-GRx-Gym#6's class: gymtorch.so built by GCC 13 needs GLIBCXX_3.4.32, the conda copy has 3.4.29."""
    snap = _pkg(extension_cxx_needs=[{"package": "gymtorch", "glibcxx": "3.4.32", "cxxabi": "1.3.14",
                                      "file": "/root/.cache/torch_extensions/py38_cu121/gymtorch/gymtorch.so"}])
    [f] = findings_of(snap, "PKG026")
    assert f.severity == "error" and "GLIBCXX_3.4.32" in f.title and "pkg:gymtorch" in f.subjects


def test_pkg026_quiet_when_the_loaded_copy_defines_what_extensions_need():
    ok = [{"package": "apex", "file": "apex_C.so", "glibcxx": "3.4.29", "cxxabi": "1.3.13"}]
    assert findings_of(_pkg(extension_cxx_needs=ok), "PKG026") == []
    assert findings_of(_pkg(extension_cxx_needs=[]), "PKG026") == []
    # the loaded copy's versions not read: no verdict
    unknown = dict(CONDA_COPY, glibcxx=None, cxxabi=None)
    snap = make_snapshot(packages={"torch": "2.4.1", "libstdcxx": unknown, "extension_cxx_needs": [
        {"package": "x", "file": "x.so", "glibcxx": "3.4.32", "cxxabi": None}]})
    assert findings_of(snap, "PKG026") == []


def test_pkg026_jit_build_by_a_newer_host_gcc_than_the_loaded_copy():
    gcc13 = {"cmd": "c++", "kind": "gcc", "version": "13.3.0", "from": "PATH"}
    lint = {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": {"extension_builds": [
        {"path": "train.py", "line": 9, "what": "torch.utils.cpp_extension.load('gymtorch')"}]}}
    snap = make_snapshot(packages={"torch": "2.4.1", "libstdcxx": dict(CONDA_COPY), "host_compiler": gcc13}, lint=lint)
    [f] = findings_of(snap, "PKG026")
    assert f.severity == "warning" and "GLIBCXX_3.4.32" in f.title and f.evidence["gcc_libstdcxx"]["gcc"] == "13.2.0"
    gcc11 = dict(gcc13, version="11.4.0")  # GLIBCXX_3.4.29: the copy defines it
    assert findings_of(make_snapshot(packages={"torch": "2.4.1", "libstdcxx": dict(CONDA_COPY), "host_compiler": gcc11},
                                     lint=lint), "PKG026") == []
    # nothing compiles at run time: the newer compiler alone says nothing
    assert findings_of(make_snapshot(packages={"torch": "2.4.1", "libstdcxx": dict(CONDA_COPY), "host_compiler": gcc13}),
                       "PKG026") == []


def test_gcc_libstdcxx_table_has_a_source_per_row_and_answers_releases_between_rows():
    from ddpdoctor.facts import libstdcxx

    for e in libstdcxx.entries():
        assert e["source"]["repo"] == "gcc-mirror/gcc" and e["source"]["path"].endswith("abi.xml")
        assert libstdcxx.rel(e["glibcxx"]) >= (3, 4, 19)
    assert libstdcxx.of_gcc("12.3.0")["glibcxx"] == "3.4.30"  # not listed: the preceding release's labels
    assert libstdcxx.of_gcc("9.3.0")["glibcxx"] == "3.4.28"
    assert libstdcxx.of_gcc("4.4.7") is None and libstdcxx.of_gcc("x") is None


def _lint(rows):
    return {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": {"spawn_worlds": rows}}


def _spawn(size, how="literal"):
    return {"kind": "spawn", "size": size, "how": how, "path": "train.py", "line": 9, "what": "mp.spawn(run, nprocs=2)"}


def _init(size):
    return {"kind": "init", "size": size, "how": "literal", "path": "train.py", "line": 6,
            "what": "dist.init_process_group('gloo', world_size=1)"}


def test_spawn_worlds_read_from_the_script(tmp_path):
    from ddpdoctor.lint.scriptfacts import script_facts

    script = tmp_path / "train.py"
    script.write_text("import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\n\n"
                      "def run(rank, size):\n    dist.init_process_group('gloo', rank=rank, world_size=1)\n\n"
                      "if __name__ == '__main__':\n    n = torch.cuda.device_count()\n    mp.spawn(run, args=(2,), nprocs=n)\n")
    rows = script_facts([str(script)])["spawn_worlds"]
    assert {(r["kind"], r["size"], r["how"]) for r in rows} == {("spawn", None, "device_count via n"), ("init", 1, "literal")}


def test_env004_spawned_processes_against_a_literal_world_size():
    """pytorch/pytorch#62381's class: mp.spawn(nprocs=2) with init_process_group(world_size=1)."""
    [f] = findings_of(make_snapshot(lint=_lint([_spawn(2), _init(1)])), "ENV004")
    assert f.severity == "error" and "world_size=1" in f.title and "line:6" in f.subjects
    # nprocs=torch.cuda.device_count(): the GPUs this process sees (the factory's host has none unless given)
    gpus = {"count": 4, "devices": [{"index": i, "name": "A100", "uuid": f"GPU-{i}"} for i in range(4)]}
    [f] = findings_of(make_snapshot(gpus=gpus, lint=_lint([_spawn(None, "device_count"), _init(2)])), "ENV004")
    assert f.evidence["started"] == 4


def test_env004_quiet_when_the_spawned_count_matches_or_is_unknown():
    assert findings_of(make_snapshot(lint=_lint([_spawn(2), _init(2)])), "ENV004") == []
    assert findings_of(make_snapshot(lint=_lint([_spawn(None, "device_count"), _init(2)])), "ENV004") == []  # no GPU facts
    assert findings_of(make_snapshot(lint=_lint([_init(1)])), "ENV004") == []  # started by a launcher, not spawn


def _rdzv(passes=(), sets=(), spawn=False):
    facts = {"env_rendezvous": [{"path": "train.py", "line": 9, "passes": list(passes), "script_sets": list(sets)}]}
    if spawn:
        facts["spawn_worlds"] = [_spawn(2)]
    return {"scripts": ["train.py"], "files": [], "findings": [], "rules_run": 0, "facts": facts}


def test_env_rendezvous_read_from_the_script(tmp_path):
    from ddpdoctor.lint.scriptfacts import script_facts

    script = tmp_path / "train.py"
    script.write_text("import os\nimport torch.distributed as dist\nos.environ['MASTER_PORT'] = '29500'\n"
                      "dist.init_process_group(backend='nccl', init_method='env://', world_size=2)\n"
                      "dist.init_process_group('gloo', init_method='tcp://10.0.0.1:23456', rank=0, world_size=2)\n"
                      "dist.init_process_group('nccl')\n")
    rows = script_facts([str(script)])["env_rendezvous"]
    assert [(r["line"], r["passes"], r["script_sets"]) for r in rows] == [(4, ["world_size"], ["MASTER_PORT"]),
                                                                          (6, [], ["MASTER_PORT"])]


def test_env001_env_rendezvous_in_a_script_started_without_a_launcher():
    """NVIDIA/apex#99's class: init_process_group(init_method='env://', world_size=2) run as `python train.py`."""
    [f] = findings_of(make_snapshot(lint=_rdzv(passes=["world_size"])), "ENV001")
    assert f.severity == "warning" and "launcher" in f.title
    assert {"MASTER_ADDR", "MASTER_PORT", "RANK"} <= set(f.subjects) and "WORLD_SIZE" not in f.subjects


def test_env001_quiet_when_the_env_rendezvous_has_what_it_reads():
    torchrun = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
                "TORCHELASTIC_RUN_ID": "x", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0"}
    assert findings_of(make_snapshot(env=torchrun, lint=_rdzv()), "ENV001") == []
    everything = ["MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"]
    assert findings_of(make_snapshot(lint=_rdzv(sets=everything)), "ENV001") == []  # the script sets them itself
    assert findings_of(make_snapshot(lint=_rdzv(spawn=True)), "ENV001") == []  # mp.spawn: its workers, its env


def _gpus(n):
    return {"count": n, "devices": [{"index": i, "name": "RTX 4090", "uuid": f"GPU-{i}"} for i in range(n)]}


def _launch(argv):
    from ddpdoctor.facts.launch import parse_command, parse_program

    cmd = dict(parse_command(argv) or parse_program(argv), depth=0)
    return {"commands": [cmd], "depth_read": 0}


def test_program_gpu_options_read_from_a_command_line():
    from ddpdoctor.facts.launch import parse_command, parse_program, script_gpu_options

    assert parse_program(["python", "train.py", "-data", "d", "-gpuid", "1"])["script_gpus"] == {"-gpuid": "1"}
    assert parse_program(["python", "-m", "torch.utils.collect_env"])["program"] is None  # check30: a module, no script
    assert parse_program(["bash", "run.sh"]) is None
    cmd = parse_command(["torchrun", "--nproc-per-node", "2", "train.py", "--gpu_ids", "0,1,2", "--bf16", "True"])
    assert cmd["script_gpus"] == {"--gpu_ids": "0,1,2"} and cmd["script_options"] == {"bf16": "True"}
    assert script_gpu_options(["--device", "cpu", "--gpus", "auto", "--output_dir", "gpu1"]) == {}
    assert script_gpu_options(["--device_ids", "0", "3", "--lr", "1"]) == {"--device_ids": "0 3"}


def test_gpu019_a_gpu_ordinal_option_beyond_the_visible_gpus():
    """OpenNMT/OpenNMT-py#609's class: -gpuid 1 where CUDA_VISIBLE_DEVICES leaves one GPU."""
    snap = make_snapshot(env={"CUDA_VISIBLE_DEVICES": "1"}, gpus=_gpus(2),
                         launch=_launch(["python", "train.py", "-gpuid", "1"]))
    [f] = findings_of(snap, "GPU019")
    assert f.severity == "warning" and "-gpuid 1" in f.title and "arg:gpuid" in f.subjects
    # a count: --num_gpus 4 asks for ordinals 0..3 on a 2-GPU machine
    [f] = findings_of(make_snapshot(gpus=_gpus(2), launch=_launch(["python", "main.py", "--num_gpus", "4"])), "GPU019")
    assert f.evidence["asked"][0]["ordinal"] == 3


def test_gpu019_quiet_when_the_options_name_visible_gpus():
    ok = make_snapshot(env={"CUDA_VISIBLE_DEVICES": "1"}, gpus=_gpus(2),
                       launch=_launch(["python", "train.py", "-gpuid", "0"]))
    assert findings_of(ok, "GPU019") == []
    both = make_snapshot(gpus=_gpus(2), launch=_launch(["torchrun", "--nproc-per-node", "2", "train.py",
                                                        "--gpu_ids", "0,1", "--device", "cpu"]))
    assert findings_of(both, "GPU019") == []


def test_check_given_a_training_command_records_it_as_the_nearest_launch(tmp_path, monkeypatch):
    from ddpdoctor.pipeline.check import add_given_command
    from ddpdoctor.pipeline.snapshot import Snapshot

    (tmp_path / "train.py").write_text("import torch\n")
    monkeypatch.chdir(tmp_path)
    snap = Snapshot.from_dict(make_snapshot().to_dict())
    snap.sections["launch"] = {"commands": [{"launcher": "srun", "options": {"ntasks": "2"}, "depth": 2}], "depth_read": 2}
    add_given_command(snap, ["python", "train.py", "-gpuid", "1"])
    first = snap.sections["launch"]["commands"][0]
    assert first["launcher"] == "python" and first["depth"] == 0 and first["script_gpus"] == {"-gpuid": "1"}
    assert first["program_path"] == str(tmp_path / "train.py")
    assert snap.sections["launch"]["commands"][1]["launcher"] == "srun"
    add_given_command(snap, ["bash", "run.sh"])  # a shell script that is not here: recorded as missing (ENV022)
    assert len(snap.sections["launch"]["commands"]) == 3
    assert snap.sections["launch"]["commands"][0]["program_exists"] is False


FATBIN = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "cuda", "mish_cuda.so")


def test_cuda_archs_read_from_the_nv_fatbin_section(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.elf import read_object
    from ddpdoctor.gather.native import scan_extension_modules

    assert read_object(FATBIN).cuda_archs() == {"sass": [52], "ptx": [52]}
    assert read_object(NEEDS_3_4_30).cuda_archs() is None  # no CUDA code
    site = tmp_path / "site"
    (site / "mish_cuda").mkdir(parents=True)
    shutil.copy(FATBIN, site / "mish_cuda" / "_C.so")
    (site / "torch" / "lib").mkdir(parents=True)
    shutil.copy(os.path.join(CXX, "site", "torch", "lib", "libc10.so"), site / "torch" / "lib" / "libc10.so")
    shutil.copy(FATBIN, site / "torch" / "lib" / "libtorch_cuda.so")  # a source build's libtorch_cuda.so
    scan = scan_extension_modules(Sources(root=str(tmp_path), environ={}), str(site))
    assert [(m["package"], m["file"], m["sass"]) for m in scan["cuda"]] == [
        ("torch", "torch/lib/libtorch_cuda.so", [52]), ("mish_cuda", "mish_cuda/_C.so", [52])]


def _titan_x_and(module, cc=(5, 2), name="GTX TITAN X"):
    gpus = {"count": 1, "devices": [{"index": 0, "name": name, "uuid": "GPU-0", "cuda_capability": list(cc)}]}
    return make_snapshot(gpus=gpus, packages={"torch": "1.7.0", "torch_build": {"cuda": "10.2", "hip": None},
                                              "cuda_archs": [module]})


def test_gpu032_an_extension_without_code_for_the_gpu():
    """thomasbrandon/mish-cuda#10's class: the extension built for sm_70/75 only, run on a TITAN X (sm_52)."""
    [f] = findings_of(_titan_x_and({"package": "mish_cuda", "file": "mish_cuda/_C.so", "sass": [70, 75], "ptx": []}),
                      "GPU032")
    assert f.severity == "warning" and "sm_52" in f.title and "pkg:mish_cuda" in f.subjects
    assert 'TORCH_CUDA_ARCH_LIST="5.2"' in f.fix
    # torch's own libtorch_cuda.so (a source build for the P4/P40's sm_61) on a V100: an error
    [f] = findings_of(_titan_x_and({"package": "torch", "file": "torch/lib/libtorch_cuda.so", "sass": [61], "ptx": []},
                                   cc=(7, 0), name="Tesla V100"), "GPU032")
    assert f.severity == "error" and "sm_70" in f.title


def test_gpu032_quiet_when_a_cubin_or_ptx_runs_on_the_gpu():
    # a cubin of the same major and an older minor runs (sm_50 code on sm_52); PTX runs on anything at or above it
    assert findings_of(_titan_x_and({"package": "m", "file": "m.so", "sass": [50], "ptx": []}), "GPU032") == []
    assert findings_of(_titan_x_and({"package": "m", "file": "m.so", "sass": [70], "ptx": [35]}), "GPU032") == []
    assert findings_of(_titan_x_and({"package": "torch", "file": "t.so", "sass": [52, 60, 70], "ptx": [70]}),
                       "GPU032") == []


def test_pkg021_llvm_libomp_beside_intel_libiomp5():
    """LLVM's libomp and Intel's libiomp5 are one runtime: torch's libomp with the environment's libiomp5 aborts."""
    runtimes = [{"path": "/env/lib/python3.10/site-packages/torch/.dylibs/libomp.dylib", "kind": "llvm", "owner": "torch"},
                {"path": "/env/lib/libiomp5.dylib", "kind": "intel", "owner": "env"}]
    [f] = findings_of(make_snapshot(packages={"torch": "2.0.1", "openmp_runtimes": runtimes}), "PKG021")
    assert f.severity == "warning" and "libiomp5 and libomp" in f.title


def test_pkg021_quiet_with_one_runtime_or_gnu_beside_it():
    one = [{"path": "/env/site-packages/torch/lib/libgomp-a34b3233.so.1", "kind": "gnu", "owner": "torch"},
           {"path": "/env/lib/libomp.so", "kind": "llvm", "owner": "env"}]  # libgomp is another runtime, not a copy
    assert findings_of(make_snapshot(packages={"torch": "2.0.1", "openmp_runtimes": one}), "PKG021") == []


def test_save_dir_facts_measure_free_space_and_the_largest_checkpoint(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import save_dir_facts

    out = tmp_path / "out"
    (out / "checkpoint-500").mkdir(parents=True)
    (out / "checkpoint-500" / "model.safetensors").write_bytes(b"\0" * 3000)
    (out / "checkpoint-1000").mkdir()
    (out / "checkpoint-1000" / "model.safetensors").write_bytes(b"\0" * 5000)
    (out / "notes.txt").write_bytes(b"\0" * 9000)  # not a checkpoint
    [fact] = save_dir_facts(Sources(), {"--output_dir": "out"}, str(tmp_path))
    assert fact["exists"] and fact["largest_checkpoint"] == "checkpoint-1000" and fact["largest_checkpoint_bytes"] == 5000
    assert fact["free_bytes"] > 0
    [later] = save_dir_facts(Sources(), {"--save_dir": "runs/new"}, str(tmp_path))  # not created yet: its parent
    assert not later["exists"] and later["checked"] == str(tmp_path) and "largest_checkpoint" not in later


def _saving(free, largest=None, total=500 * 2 ** 30):
    from ddpdoctor.facts.launch import parse_program

    cmd = dict(parse_program(["python", "train.py", "--output_dir", "out"]), depth=0)
    fact = {"option": "--output_dir", "path": "/work/out", "checked": "/work/out", "exists": True,
            "free_bytes": free, "total_bytes": total}
    if largest:
        fact.update(largest_checkpoint="checkpoint-500", largest_checkpoint_bytes=largest)
    cmd["save_dirs"] = [fact]
    return make_snapshot(launch={"commands": [cmd], "depth_read": 0})


def test_sys011_no_room_for_the_next_checkpoint():
    [f] = findings_of(_saving(3 * 2 ** 30, largest=13 * 2 ** 30), "SYS011")
    assert f.severity == "error" and "checkpoint-500" in f.title and "path:/work/out" in f.subjects
    [f] = findings_of(_saving(2 ** 20), "SYS011")  # 1 MiB of 500 GiB, nothing to size against: full
    assert f.severity == "warning"


def test_sys011_quiet_with_room():
    assert findings_of(_saving(40 * 2 ** 30, largest=13 * 2 ** 30), "SYS011") == []
    assert findings_of(_saving(20 * 2 ** 30), "SYS011") == []
    assert findings_of(make_snapshot(), "SYS011") == []


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_check_given_the_training_command_after_a_double_dash(tmp_path):
    """`ddpdoctor check -- python train.py ...`: the program's script is read (its env:// rendezvous, ENV001) and its
    save directory measured (SYS011's fact in the recorded launch section)."""
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    (tmp_path / "train.py").write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                                             "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                                                             "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")}
    env["PYTHONPATH"] = root
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json", "--only", "ENV001",
                          "--", "python", "train.py", "--output_dir", "out"],
                         capture_output=True, env=env, cwd=str(tmp_path), timeout=220)
    report = json.loads(res.stdout)
    found = [f for f in report["findings"] if f["id"] == "ENV001"]
    assert len(found) == 1, res.stdout[-2000:]
    assert "env://" in found[0]["title"] and any(s.startswith("path:") and s.endswith("train.py")
                                                 for s in found[0]["subjects"])
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--snapshot", "x.json", "--", "python", "t.py"],
                         capture_output=True, env=env, cwd=str(tmp_path), timeout=220)
    assert res.returncode == 2 and b"--snapshot" in res.stderr


def test_gpu032_a_cuda_9_build_on_an_ampere_gpu():
    """YueLiao/PPDM#46's class: torch 0.4.1 for CUDA 9.0 on an RTX 3070 ('invalid device function'); CUDA 9 builds
    end at sm_72 (select_compute_arch.cmake @189579e2)."""
    gpus = {"count": 1, "devices": [{"index": 0, "name": "GeForce RTX 3070", "uuid": "GPU-0", "cuda_capability": [8, 6]}]}
    snap = make_snapshot(gpus=gpus, packages={"torch": "0.4.1", "torch_build": {"cuda": "9.0", "hip": None}})
    [f] = findings_of(snap, "GPU032")
    assert f.severity == "error" and "sm_86" in f.title
    volta = {"count": 1, "devices": [{"index": 0, "name": "Tesla V100", "uuid": "GPU-0", "cuda_capability": [7, 0]}]}
    assert findings_of(make_snapshot(gpus=volta, packages={"torch": "0.4.1", "torch_build": {"cuda": "9.0", "hip": None}}),
                       "GPU032") == []


def test_env004_a_literal_rank_with_a_larger_world():
    """pytorch/pytorch#49846's class: init_process_group(rank=0, world_size=2) run once, in a notebook."""
    row = dict(_init(2), rank=0)
    [f] = findings_of(make_snapshot(lint=_lint([row])), "ENV004")
    assert f.severity == "error" and "rank=0" in f.title and "world_size=2" in f.title


def test_env004_quiet_with_a_rank_from_the_process_or_a_world_of_one():
    assert findings_of(make_snapshot(lint=_lint([_init(2)])), "ENV004") == []  # rank not a literal
    assert findings_of(make_snapshot(lint=_lint([dict(_init(1), rank=0)])), "ENV004") == []  # a group of one


def test_env002_the_port_of_the_scripts_tcp_init_method_in_use():
    """CoinCheung/BiSeNet#19's class: init_method='tcp://127.0.0.1:33271' while the last run still holds 33271."""
    row = dict(_init(2), url="tcp://127.0.0.1:33271")
    snap = make_snapshot(network={"listening_tcp_ports": [22, 33271]}, lint=_lint([row]))
    [f] = findings_of(snap, "ENV002")
    assert f.severity == "error" and "33271" in f.title


def test_env002_quiet_when_the_scripts_port_is_free_or_remote():
    row = dict(_init(2), url="tcp://127.0.0.1:33271")
    assert findings_of(make_snapshot(network={"listening_tcp_ports": [22]}, lint=_lint([row])), "ENV002") == []
    remote = dict(_init(2), url="tcp://10.0.0.9:33271")  # rank 0 on another host binds it, not this one
    assert findings_of(make_snapshot(network={"listening_tcp_ports": [33271]}, lint=_lint([remote])), "ENV002") == []


def test_shell_script_launch_lines_and_whether_their_program_is_found(tmp_path):
    from ddpdoctor.gather.launch import commands_in_shell_script

    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\n# srun in a comment\nPARTITION=gpu\nsrun -p $PARTITION -n 8 \\\n"
                      "   python -u train.py --gpus 8\nCUDA_VISIBLE_DEVICES=0,1 nohup torchrun --nproc_per_node 2 main.py\n"
                      "echo done\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text("#!/bin/sh\n")
    (bin_dir / "torchrun").chmod(0o755)
    found = commands_in_shell_script(str(script), {"PATH": str(bin_dir)})
    assert [(c["launcher"], c.get("found"), c["from_script"].rsplit(":", 1)[1]) for c in found] == [
        ("srun", False, "4"), ("torchrun", True, "6")]
    assert found[1]["options"]["nproc_per_node"] == "2" and found[1]["program"] == "main.py"


def test_env020_srun_not_found_where_the_script_launches_with_it():
    """zhiyuanyou/SAFECount#16's class: `sh train.sh` whose srun does not exist on the machine."""
    cmd = {"launcher": "srun", "options": {"ntasks": "8"}, "depth": 0, "from_script": "train.sh:4",
           "program_word": "srun", "found": False}
    [f] = findings_of(make_snapshot(launch={"commands": [cmd], "depth_read": 0}), "ENV020")
    assert f.severity == "error" and "srun" in f.title and "path:train.sh" in f.subjects


def test_env020_quiet_when_the_program_is_found_or_unknown():
    ok = {"launcher": "torchrun", "options": {}, "depth": 0, "program_word": "torchrun", "found": True}
    unknown = {"launcher": "torchrun", "options": {}, "depth": 1}  # from the parent chain: it is running
    assert findings_of(make_snapshot(launch={"commands": [ok, unknown], "depth_read": 1}), "ENV020") == []


def _curand_machine(env=None, deepspeed="0.14.0", installed_ops=None, missing=None):
    def edit(s):
        s["packages"]["versions"].update({"torch": "2.6.0+cu124", "deepspeed": deepspeed})
        s["packages"]["torch_build"] = {"cuda": "12.4", "hip": None}
        if installed_ops is not None:
            s["packages"]["deepspeed_build"] = {"torch": "2.6", "cuda": "12.4", "installed_ops": installed_ops}
        kit = {"home": "/usr/local/cuda", "from": "CUDA_HOME", "version": "12.4.1"}
        if missing is not None:
            kit["missing_links"] = missing
        s["packages"]["cuda_toolkit"] = kit
        s["env"]["vars"].update(env or {})
    from factory import fixture_snapshot
    return fixture_snapshot("hgx-h100-8x", keep=1, edit=edit)


def test_pkg014_toolkit_without_libcurand_so_where_deepspeed_builds_its_cpu_ops():
    """instructlab/training#593: DS_BUILD_CPU_ADAM=1 pip install deepspeed stops at '/usr/bin/ld: cannot find -lcurand'
    on a toolkit with libcurand.so.10 only."""
    missing = {"curand": "libcurand.so.10"}
    found = [f for f in findings_of(_curand_machine({"DS_BUILD_CPU_ADAM": "1"}, deepspeed=None, missing=missing), "PKG014")
             if "libcurand.so" in f.title]
    assert found and found[0].severity == "warning" and "-lcurand" in found[0].title
    assert "ln -s libcurand.so.10 libcurand.so" in found[0].fix
    # DeepSpeed installed with no pre-built ops: the CPU ops link at first use
    assert [f for f in findings_of(_curand_machine(missing=missing), "PKG014") if "libcurand.so" in f.title]


def test_pkg014_libcurand_quiet_when_linked_or_nothing_builds():
    missing = {"curand": "libcurand.so.10"}
    assert not [f for f in findings_of(_curand_machine({"DS_BUILD_CPU_ADAM": "1"}, deepspeed=None), "PKG014")
                if "libcurand" in f.title]  # libcurand.so present
    assert not [f for f in findings_of(_curand_machine(deepspeed=None, missing=missing), "PKG014")
                if "libcurand" in f.title]  # nothing builds DeepSpeed's ops
    assert not [f for f in findings_of(_curand_machine({"DS_BUILD_CPU_ADAM": "0"}, installed_ops=["cpu_adam"],
                                                       missing=missing), "PKG014") if "libcurand" in f.title]


def test_cuda_toolkit_records_link_names_missing_their_unversioned_so(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import cuda_toolkit

    lib = tmp_path / "usr/local/cuda-12.4/lib64"
    lib.mkdir(parents=True)
    for name in ("libcudart.so", "libcudart.so.12", "libcublas.so", "libcublas.so.12", "libcurand.so.10"):
        (lib / name).write_bytes(b"")
    (tmp_path / "usr/local/cuda-12.4/version.json").write_text('{"cuda": {"version": "12.4.1"}}')
    kit = cuda_toolkit(Sources(root=str(tmp_path), environ={"CUDA_HOME": "/usr/local/cuda-12.4"}))
    assert kit["version"] == "12.4.1" and kit["missing_links"] == {"curand": "libcurand.so.10"}
    (lib / "libcurand.so").write_bytes(b"")
    assert "missing_links" not in cuda_toolkit(Sources(root=str(tmp_path), environ={"CUDA_HOME": "/usr/local/cuda-12.4"}))


def _ninja_machine(ninja, deepspeed="0.14.0", installed_ops=None):
    def edit(s):
        s["packages"]["versions"].update({"torch": "2.3.1+cu121", "deepspeed": deepspeed})
        s["packages"]["torch_build"] = {"cuda": "12.1", "hip": None}
        if installed_ops is not None:
            s["packages"]["deepspeed_build"] = {"torch": "2.3", "cuda": "12.1", "installed_ops": installed_ops}
        s["packages"]["cuda_toolkit"] = {"home": "/usr/local/cuda", "from": "/usr/local/cuda", "version": "12.1.1"}
        if ninja is not None:
            s["packages"]["ninja"] = ninja
    from factory import fixture_snapshot
    return fixture_snapshot("hgx-h100-8x", keep=1, edit=edit)


def _ninja_findings(snap):
    return [f for f in findings_of(snap, "PKG014") if "ninja" in f.title]


def test_pkg014_no_ninja_on_path_where_deepspeed_ops_compile_at_first_use():
    """"Unable to JIT load the cpu_adam op due to ninja not being installed": DeepSpeed's jit_load runs torch's
    verify_ninja_availability (`ninja --version` on PATH)."""
    found = _ninja_findings(_ninja_machine({"path": None, "package": None, "package_bin": None}))
    assert found and found[0].severity == "warning" and "No ninja on PATH" in found[0].title
    assert "pip install ninja" in found[0].fix
    # the pip package is there, its environment's bin/ is not on the job's PATH (a batch job's PATH)
    found = _ninja_findings(_ninja_machine({"path": None, "package": "1.11.1.1", "package_bin": "/opt/envs/x/bin"}))
    assert found and "/opt/envs/x/bin is not on PATH" in found[0].title
    assert found[0].fix.startswith("export PATH=/opt/envs/x/bin:$PATH")


def test_pkg014_ninja_quiet_when_found_unknown_or_nothing_compiles():
    assert _ninja_findings(_ninja_machine({"path": "/usr/bin/ninja", "package": None, "package_bin": None})) == []
    assert _ninja_findings(_ninja_machine(None)) == []  # an older snapshot without the field
    assert _ninja_findings(_ninja_machine({"path": None, "package": None, "package_bin": None}, deepspeed=None)) == []
    assert _ninja_findings(_ninja_machine({"path": None, "package": None, "package_bin": None},
                                          installed_ops=["fused_adam"])) == []


def test_ninja_tool_reads_the_jobs_path(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import ninja_tool

    bin_dir = tmp_path / "opt/tools/bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "ninja"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert ninja_tool(Sources(root=str(tmp_path), environ={"PATH": "/usr/bin:/opt/tools/bin"}))["path"] == \
        "/opt/tools/bin/ninja"
    assert ninja_tool(Sources(root=str(tmp_path), environ={"PATH": "/usr/bin"}))["path"] is None
    exe.chmod(0o644)  # not executable: not what `ninja --version` runs
    assert ninja_tool(Sources(root=str(tmp_path), environ={"PATH": "/opt/tools/bin"}))["path"] is None


MKL = os.path.join(os.path.dirname(__file__), os.pardir, "fixtures", "elf", "mkl")


def _mkl_env(tmp_path, which):
    """A conda-like environment: lib/python3.10/site-packages/torch/lib/libtorch_cpu.so (RUNPATH $ORIGIN/../../../..,
    needing iJIT_NotifyEvent and libmkl_core.so.2) and lib/libmkl_core.so.2 from fixtures/elf/mkl/<which>."""
    site = tmp_path / "env/lib/python3.10/site-packages"
    (site / "torch/lib").mkdir(parents=True)
    shutil.copy(os.path.join(MKL, "libtorch_cpu.so"), site / "torch/lib/libtorch_cpu.so")
    (site / "torch/lib/libc10.so").write_bytes(b"")
    shutil.copy(os.path.join(MKL, which, "libmkl_core.so.2"), tmp_path / "env/lib/libmkl_core.so.2")
    return str(site)


def test_torch_mkl_symbols_reads_libtorch_cpu_and_its_mkl(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.native import torch_mkl_symbols

    site = _mkl_env(tmp_path, "new")
    fact = torch_mkl_symbols(Sources(environ={}), site=site)
    assert fact["undefined"] == ["iJIT_NotifyEvent"] and fact["exported"] == [] and fact["unresolved"] == []
    assert fact["mkl_libs"] == [os.path.normpath(str(tmp_path / "env/lib/libmkl_core.so.2"))]
    shutil.copy(os.path.join(MKL, "old", "libmkl_core.so.2"), tmp_path / "env/lib/libmkl_core.so.2")
    assert torch_mkl_symbols(Sources(environ={}), site=site)["exported"] == ["iJIT_NotifyEvent"]
    os.remove(tmp_path / "env/lib/libmkl_core.so.2")
    assert torch_mkl_symbols(Sources(environ={}), site=site)["unresolved"] == ["libmkl_core.so.2"]


def test_pkg027_itt_symbol_mkl_no_longer_exports(tmp_path):
    """pytorch/pytorch#123097: 'libtorch_cpu.so: undefined symbol: iJIT_NotifyEvent' with MKL 2024.1 (conda torch)."""
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.native import torch_mkl_symbols

    fact = torch_mkl_symbols(Sources(environ={}), site=_mkl_env(tmp_path, "new"))
    found = findings_of(make_snapshot(packages={"torch": "2.0.1", "torch_mkl": fact}), "PKG027")
    assert found and found[0].severity == "error" and "iJIT_NotifyEvent" in found[0].title
    assert "mkl==2024.0" in found[0].fix


def test_pkg027_quiet_when_exported_unresolved_or_absent(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.native import torch_mkl_symbols

    fact = torch_mkl_symbols(Sources(environ={}), site=_mkl_env(tmp_path, "old"))
    assert findings_of(make_snapshot(packages={"torch": "2.0.1", "torch_mkl": fact}), "PKG027") == []
    open_fact = {"lib": "/x/libtorch_cpu.so", "undefined": ["iJIT_NotifyEvent"], "mkl_libs": [],
                 "unresolved": ["libmkl_core.so.2"], "exported": []}
    assert findings_of(make_snapshot(packages={"torch": "2.0.1", "torch_mkl": open_fact}), "PKG027") == []
    assert findings_of(make_snapshot(packages={"torch": "2.0.1"}), "PKG027") == []


MEGATRON_INIT = '''import os
import torch
def initialize():
    init_method = 'tcp://'
    master_ip = os.getenv('MASTER_ADDR', 'localhost')
    master_port = os.getenv('MASTER_PORT', '6000')
    init_method += master_ip + ':' + master_port
    torch.distributed.init_process_group(backend='nccl', world_size=8, rank=0, init_method=init_method)
'''


def test_scriptfacts_keeps_an_init_method_built_from_master_port(tmp_path):
    from ddpdoctor.lint import scriptfacts

    script = tmp_path / "initialize.py"
    script.write_text(MEGATRON_INIT)
    facts = scriptfacts.script_facts([str(script)])
    rows = [r for r in facts.get("spawn_worlds", []) if r.get("kind") == "init"]
    assert rows and rows[0]["url_env"] == {"port": "MASTER_PORT", "port_default": "6000", "host": "MASTER_ADDR",
                                           "host_default": "localhost"}


TORCHRUN_RANK0 = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0",
                  "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0", "MASTER_ADDR": "localhost", "MASTER_PORT": "6000"}
BUILT_URL = {"port": "MASTER_PORT", "port_default": "6000", "host": "MASTER_ADDR", "host_default": "localhost"}


def test_env002_an_init_method_from_master_port_under_the_elastic_agent():
    """NVIDIA/Megatron-LM#125: torch.distributed.launch (torch 1.9, the elastic agent serving its store on MASTER_PORT)
    and init_method='tcp://' + MASTER_ADDR + ':' + MASTER_PORT: 'address already in use'."""
    row = dict(_init(8), url_env=dict(BUILT_URL))
    snap = make_snapshot(env=TORCHRUN_RANK0, network={"listening_tcp_ports": [22, 6000]}, lint=_lint([row]))
    [f] = findings_of(snap, "ENV002")
    assert f.severity == "error" and "tcp://localhost:6000" in f.title and "agent" in f.title
    assert "env://" in f.fix


def test_env002_init_method_from_master_port_quiet_when_free_or_another_rank():
    row = dict(_init(8), url_env=dict(BUILT_URL))
    assert findings_of(make_snapshot(env=TORCHRUN_RANK0, network={"listening_tcp_ports": [22]}, lint=_lint([row])),
                       "ENV002") == []  # the agent's store elsewhere (a c10d rendezvous): nothing holds MASTER_PORT
    other = dict(TORCHRUN_RANK0, RANK="3", LOCAL_RANK="3")
    assert findings_of(make_snapshot(env=other, network={"listening_tcp_ports": [22, 6000]}, lint=_lint([row])),
                       "ENV002") == []  # only rank 0 binds the store


def test_ninja_tool_names_the_bin_of_the_ninja_pip_package(tmp_path, monkeypatch):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.packages import ninja_tool

    site = tmp_path / "env/lib/python3.11/site-packages"
    info = site / "ninja-1.11.1.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ninja\nVersion: 1.11.1.1\n")
    (info / "RECORD").write_text("ninja/__init__.py,,\n../../../bin/ninja,,\n")
    monkeypatch.syspath_prepend(str(site))
    got = ninja_tool(Sources(root=str(tmp_path), environ={"PATH": "/usr/local/nowhere"}))
    assert got["path"] is None and got["package"] == "1.11.1.1"
    assert got["package_bin"] == os.path.normpath(str(tmp_path / "env/bin"))
