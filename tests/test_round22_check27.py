"""check27 (issue 26, round 22): the classes batches 116-117 lacked, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts import gpu_versions

# -- PKG014 arm: the host GCC newer than the toolkit's nvcc accepts (crt/host_config.h's ceiling per CUDA release:
# data/nvcc_host_compilers.json) --


def _kit(toolkit="9.0.176", gcc="7.3.0", where="CUDA_HOME", torch="1.1.0", cuda="9.0", **extra):
    return make_snapshot(packages={"torch": torch, "torch_build": {"cuda": cuda, "hip": None},
                                   "cuda_toolkit": {"home": "/usr/local/cuda-9.0", "from": where, "version": toolkit},
                                   "host_compiler": {"cmd": "c++", "kind": "gcc", "version": gcc, "from": "PATH"},
                                   **extra})


def _too_new(snap):
    return [f for f in findings_of(snap, "PKG014") if "newer than the GCC" in f.title]


def test_nvcc_gcc_ceiling_table_reads_the_header_rows():
    assert gpu_versions.nvcc_gcc_max("9.0.176") == 6 and gpu_versions.nvcc_gcc_max("10.1") == 8
    assert gpu_versions.nvcc_gcc_max("12.1.105") == 12 and gpu_versions.nvcc_gcc_max("12.9") == 14
    assert gpu_versions.nvcc_gcc_max("11.4") is None  # 11.4.0 vs 11.4.1 differ: not judged
    assert gpu_versions.nvcc_gcc_max("8.0") is None and gpu_versions.nvcc_gcc_max("13.0") is None


def test_gcc_newer_than_nvcc_accepts_is_a_warning_naming_both():
    [f] = _too_new(_kit())
    assert f.severity == "warning"
    assert "GCC 7.3.0" in f.title and "GCC 6" in f.title and "CUDA 9.0" in f.title
    assert "gcc versions later than 6 are not supported" in f.detail and "g++-6" in f.fix
    assert f.evidence["gcc_max"] == 6
    [g] = _too_new(_kit(toolkit="12.1.105", gcc="13.2.0", where="nvcc on PATH", torch="2.3.0", cuda="12.1"))
    assert "GCC 12" in g.title and g.severity == "warning"


def test_gcc_within_the_ceiling_or_unjudged_is_quiet_and_a_default_toolkit_only_info():
    assert _too_new(_kit(gcc="6.4.0")) == []
    assert _too_new(_kit(toolkit="11.4.48", gcc="11.2.0", torch="1.12.1", cuda="11.3")) == []  # not judged
    [f] = _too_new(_kit(where="/usr/local/cuda"))  # a default toolkit nothing compiles with
    assert f.severity == "info"


# -- PKG014's builders: the job is itself a setuptools build (`python setup.py build develop`: build_ext compiles the
# package's extensions now; data/runtime_builds.json setup_commands, from setuptools' build/install/develop) --

def _setup(argv: str, **packages):
    from ddpdoctor.facts.launch import parse_program

    cmd = parse_program(argv.split())
    launch = {"commands": [dict(cmd, depth=1)] if cmd else [], "depth_read": 1}
    return make_snapshot(packages=dict({"torch": "1.13.1+cu117", "torch_build": {"cuda": "11.7", "hip": None},
                                        "cuda_toolkit": {}}, **packages), launch=launch)


def test_setup_py_build_counts_as_compiling_now():
    from ddpdoctor.facts.launch import parse_program

    assert parse_program("python setup.py build develop --no-deps".split())["setup_commands"] == ["build", "develop"]
    [f] = findings_of(_setup("python setup.py install"), "PKG014")
    assert f.severity == "warning" and "No CUDA toolkit found" in f.title
    assert "`setup.py install`" in f.title and "CUDA_HOME" in f.detail


def test_setup_py_without_a_build_command_or_a_training_script_is_quiet():
    assert findings_of(_setup("python setup.py --version"), "PKG014") == []
    assert findings_of(_setup("python setup.py sdist"), "PKG014") == []
    assert findings_of(_setup("python train.py install"), "PKG014") == []


# -- pip building a local tree (`pip install .`) is a build too; torch's CUDAExtension links -lcudart, so a toolkit
# without the unversioned libcudart.so (no -dev package) fails whoever builds, not only DeepSpeed --

def test_pip_install_of_a_local_tree_is_recorded_and_an_index_package_or_requirements_file_is_not():
    from ddpdoctor.facts.launch import parse_program

    assert parse_program("pip install -e .".split())["setup_commands"] == ["install", "."]
    assert parse_program("python -m pip install ./ext --no-build-isolation".split())["launcher"] == "pip"
    assert parse_program("pip install bmtrain".split()) is None
    assert parse_program("pip install -r ./requirements.txt".split()) is None


NO_DEV = {"home": "/opt/conda/envs/e", "from": "CUDA_HOME", "version": "12.1.105",
          "missing_links": {"cudart": "libcudart.so.12"}}


def test_cudart_without_dev_link_is_a_warning_when_a_cuda_extension_builds():
    [f] = [f for f in findings_of(_setup("pip install .", torch="2.3.0+cu121", torch_build={"cuda": "12.1", "hip": None},
                                         cuda_toolkit=NO_DEV), "PKG014") if "libcudart.so" in f.title]
    assert f.severity == "warning" and "-lcudart" in f.title and "`pip install .`" in f.title
    assert "libcudart.so.12" in f.detail and "cuda-cudart-dev" in f.fix


def test_cudart_without_dev_link_is_quiet_when_nothing_builds():
    snap = _setup("python train.py", torch="2.3.0+cu121", torch_build={"cuda": "12.1", "hip": None}, cuda_toolkit=NO_DEV)
    assert [f for f in findings_of(snap, "PKG014") if "libcudart" in f.title] == []


# -- GPU032 arm: an installed library that calls torch.compile by default (data/triton_libraries.json
# compile_by_default: nnU-Net v2's trainer, _do_i_compile) on a GPU below Triton's 7.0 floor --

def _pascal(env=None, os_name="Linux", **packages):
    snap = make_snapshot(env=env or {}, host={"os": os_name}, packages=dict({"torch": "2.3.0+cu121", "triton": "2.3.0"},
                                                                             **packages))
    g = {"driver_version": "535.171.04", "cuda_driver": "12.2", "count": 1,
         "devices": [{"index": 0, "name": "NVIDIA GeForce GTX 1080 Ti", "cuda_capability": [6, 1],
                      "pci_bus_id": "00000000:01:00.0", "memory_total_mib": 11264}]}
    snap.sections["gpus"] = g
    return snap


def test_library_compiling_by_default_on_a_gpu_below_tritons_floor_is_an_error_naming_both():
    fs = [f for f in findings_of(_pascal(nnunetv2="2.4.2"), "GPU032") if "Triton" in f.title]
    assert len(fs) == 1, fs
    f = fs[0]
    assert f.severity == "error" and "nnU-Net v2" in f.title and "sm_61" in f.title
    assert "7.0" in f.detail and "nnUNet_compile=f" in f.title


def test_library_compiling_by_default_quiet_when_turned_off_or_not_installed_or_on_windows():
    assert [f for f in findings_of(_pascal(env={"nnUNet_compile": "f"}, nnunetv2="2.4.2"), "GPU032")
            if "Triton" in f.title] == []
    assert [f for f in findings_of(_pascal(), "GPU032") if "Triton" in f.title] == []
    assert [f for f in findings_of(_pascal(os_name="Windows", nnunetv2="2.4.2"), "GPU032") if "Triton" in f.title] == []


# -- GPU032: PyTorch's CUDA 11.0-11.5 wheels' architectures (pytorch/builder manywheel/build_cuda.sh before #977:
# "3.7;5.0;6.0;7.0" + "7.5;8.0(;8.6)"): a sm_35 GPU under a cu113 wheel is below the build's oldest --

def _cu113(capability, name):
    snap = _pascal(torch="1.12.1+cu113", torch_build={"cuda": "11.3", "hip": None})
    snap.sections["gpus"]["devices"][0].update(name=name, cuda_capability=list(capability))
    return snap


def test_cu113_wheel_on_a_sm35_gpu_is_named_below_the_builds_oldest():
    fs = [f for f in findings_of(_cu113((3, 5), "NVIDIA GTX TITAN Black"), "GPU032") if "sm_35" in f.title]
    assert fs and fs[0].severity in ("warning", "error"), [f.title for f in findings_of(_cu113((3, 5), "x"), "GPU032")]
    assert gpu_versions.release("11.3") and "sm_37" in (fs[0].title + fs[0].detail)


def test_cu113_wheel_on_a_gpu_it_carries_is_quiet():
    assert [f for f in findings_of(_cu113((6, 1), "NVIDIA GeForce GTX 1080 Ti"), "GPU032") if "sm_61" in f.title] == []
