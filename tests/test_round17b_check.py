"""Round 17, second wave (issue 26): builds and libraries beside torch, read as facts.

- flash-attn's prebuilt wheel names the torch major.minor, CUDA and C++ ABI it was built for
  (flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-...): read from direct_url.json or the installed version, judged by
  PKG012 against torch's release, CUDA build and ABI (TorchConfig.cmake);
- the conda environment's CUDA packages (conda-meta record names) against torch's CUDA build: PKG015.
Pure functions on recorded snapshots, fake distributions and a fake directory tree: no process is started."""
import sys

from factory import findings_of, fixture_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.packages import (conda_cuda, flash_attn_build, parse_conda_meta_name, parse_flash_attn_wheel,
                                       parse_torch_abi, torch_cxx11_abi)

WHEEL = ("https://github.com/Dao-AILab/flash-attention/releases/download/v2.5.8/"
         "flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl")


def test_flash_attn_wheel_name_parsed_and_gathered(monkeypatch):
    assert parse_flash_attn_wheel(WHEEL) == {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "0"}
    assert parse_flash_attn_wheel("2.7.4.post1+cu12torch2.6cxx11abiTRUE") == {"torch": "2.6", "cuda": "12",
                                                                               "cxx11_abi": "1"}
    assert parse_flash_attn_wheel("2.8.0.post2") == {} and parse_flash_attn_wheel(None) == {}
    from importlib import metadata

    class Dist:
        def __init__(self, text):
            self.text = text

        def read_text(self, name):
            return self.text if name == "direct_url.json" else None

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist('{"url": "%s", "archive_info": {}}' % WHEEL))
    assert flash_attn_build("2.5.8") == {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "0", "from": "direct_url.json"}
    monkeypatch.setattr(metadata, "distribution", lambda name: Dist(None))
    assert flash_attn_build("2.5.8+cu118torch2.1cxx11abiTRUE")["from"] == "version"
    assert flash_attn_build("2.5.8") == {}  # a PyPI sdist install records no build


def test_torch_cxx11_abi_read_from_torch_config_cmake(tmp_path, monkeypatch):
    assert parse_torch_abi('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")') == "0"
    assert parse_torch_abi("set(TORCH_LIBRARIES torch)") is None
    from importlib import metadata

    cmake = tmp_path / "torch" / "share" / "cmake" / "Torch"
    cmake.mkdir(parents=True)
    (cmake / "TorchConfig.cmake").write_text('set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")\n')

    class Dist:
        def locate_file(self, rel):
            return tmp_path / rel

    monkeypatch.setattr(metadata, "distribution", lambda name: Dist())
    assert torch_cxx11_abi() == "1"


def _flash_machine(torch, built, abi="0", cuda="12.1"):
    def edit(s):
        s["packages"]["versions"].update({"torch": torch, "flash-attn": "2.5.8"})
        s["packages"]["torch_build"] = {"cuda": cuda, "hip": None}
        s["packages"]["torch_cxx11_abi"] = abi
        if built is not None:
            s["packages"]["flash_attn_build"] = dict(built, **{"from": "direct_url.json"})
    return fixture_snapshot("hgx-h100-8x", edit=edit)


def test_pkg012_flash_attn_built_for_another_torch_trigger_and_quiet():
    """Dao-AILab/flash-attention#931 / huggingface/open-r1#684's class: the wheel's recorded build against torch."""
    fa = lambda snap: [f for f in findings_of(snap, "PKG012") if "flash-attn" in f.title]  # noqa: E731
    other = fa(_flash_machine("2.2.0+cu121", {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "0"}))
    assert other and other[0].severity == "error" and "torch 2.3" in other[0].title and "pkg:flash-attn" in other[0].subjects
    abi = fa(_flash_machine("2.6.0+cu124", {"torch": "2.6", "cuda": "12", "cxx11_abi": "1"}, cuda="12.4"))
    assert abi and "_GLIBCXX_USE_CXX11_ABI=1" in abi[0].title
    assert fa(_flash_machine("2.3.1+cu118", {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "0"}, cuda="11.8"))
    # the wheel built for this torch (a patch release apart), an unknown ABI, no recorded build: quiet
    assert not fa(_flash_machine("2.3.1+cu121", {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "0"}))
    assert not fa(_flash_machine("2.3.1+cu121", {"torch": "2.3", "cuda": "12.2", "cxx11_abi": "1"}, abi=None))
    assert not fa(_flash_machine("2.2.0+cu121", None))


def test_conda_cuda_packages_gathered_from_conda_meta_names(tmp_path):
    assert parse_conda_meta_name("cudatoolkit-11.0.221-h6bb024c_0.json") == {"name": "cudatoolkit", "version": "11.0.221"}
    assert parse_conda_meta_name("cuda-cudart-12.1.105-0.json") == {"name": "cuda-cudart", "version": "12.1.105"}
    assert parse_conda_meta_name("history") is None and parse_conda_meta_name("x.json") is None
    meta = tmp_path / sys.prefix.lstrip("/") / "conda-meta"
    meta.mkdir(parents=True)
    for name in ("cudatoolkit-11.0.221-h6bb024c_0.json", "numpy-1.21.2-py38_0.json", "history"):
        (meta / name).write_text("{}")
    got = conda_cuda(Sources(environ={}, root=str(tmp_path)))
    assert got == [{"name": "cudatoolkit", "version": "11.0.221", "prefix": sys.prefix}]
    assert conda_cuda(Sources(environ={}, root=str(tmp_path / "nothing"))) == []


def _conda_machine(torch_cuda, *records):
    def edit(s):
        s["packages"]["versions"]["torch"] = "1.9.0"
        s["packages"]["torch_build"] = {"cuda": torch_cuda, "hip": None}
        s["packages"]["conda_cuda"] = [{"name": n, "version": v, "prefix": "/opt/conda"} for n, v in records]
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)


def test_pkg015_conda_cuda_vs_torch_trigger_and_quiet():
    """Sara-Ahmed/SiT#12 / ContinuumIO/anaconda-issues#12251's class: the conda environment's CUDA libraries of an
    older minor (same soname) or another major than torch's build."""
    older = findings_of(_conda_machine("11.1", ("cudatoolkit", "11.0.221")), "PKG015")
    assert older and older[0].severity == "warning" and "same soname" in older[0].title
    assert findings_of(_conda_machine("11.8", ("cuda-cudart", "12.1.105")), "PKG015")
    # the same or a newer minor of torch's major, cuDNN (not a CUDA release), no conda packages: quiet
    assert not findings_of(_conda_machine("11.1", ("cudatoolkit", "11.1.74"), ("cudnn", "8.0.5")), "PKG015")
    assert not findings_of(_conda_machine("11.1", ("cudatoolkit", "11.3.1")), "PKG015")
    assert not findings_of(_conda_machine("11.1"), "PKG015")


def _no_toolkit_machine(toolkit, deepspeed="0.12.6", cuda="12.1"):
    def edit(s):
        s["packages"]["versions"].update({"torch": "2.1.2", "deepspeed": deepspeed})
        s["packages"]["torch_build"] = {"cuda": cuda, "hip": None}
        if toolkit is not None:
            s["packages"]["cuda_toolkit"] = toolkit
        else:
            s["packages"].pop("cuda_toolkit", None)
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, edit=edit)


def test_pkg014_no_toolkit_while_something_compiles_trigger_and_quiet():
    """josStorer/RWKV-Runner#188 / OpenBMB/CPM-Live#244 / sp-uhh/storm#14's class: no CUDA toolkit found ('CUDA_HOME
    environment variable is not set') while DeepSpeed's ops (none pre-built) or a script's load() compile CUDA code."""
    found = findings_of(_no_toolkit_machine({}), "PKG014")
    assert found and found[0].severity == "warning" and "No CUDA toolkit found" in found[0].title
    assert "CUDA_HOME" in found[0].detail and "pkg:cuda-toolkit" in found[0].subjects
    # nothing compiles, a CPU build of torch, a snapshot recorded before the field existed: quiet
    assert not findings_of(_no_toolkit_machine({}, deepspeed=None), "PKG014")
    assert not findings_of(_no_toolkit_machine({}, cuda=None), "PKG014")
    assert not findings_of(_no_toolkit_machine(None), "PKG014")


def test_cuda_toolkit_recorded_empty_when_none_is_found(tmp_path):
    from ddpdoctor.gather.packages import cuda_toolkit

    assert cuda_toolkit(Sources(environ={"PATH": "/nowhere"}, root=str(tmp_path))) == {}


def test_ld_library_path_cuda_libs_gathered_by_soname(tmp_path):
    import os

    from ddpdoctor.gather.packages import ld_cuda_libs

    lib = tmp_path / "usr" / "local" / "cuda-12.1" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcudnn_cnn_train.so.8.9.7").write_text("")
    os.symlink("libcudnn_cnn_train.so.8.9.7", lib / "libcudnn_cnn_train.so.8")
    (lib / "libcublas.so.12").write_text("")
    (lib / "libfoo.so.1").write_text("")
    got = ld_cuda_libs(Sources(environ={"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib:relative:/nope"}, root=str(tmp_path)))
    assert got == [{"dir": "/usr/local/cuda-12.1/lib", "name": "libcublas.so.12", "version": None},
                   {"dir": "/usr/local/cuda-12.1/lib", "name": "libcudnn_cnn_train.so.8", "version": "8.9.7"}]
    assert ld_cuda_libs(Sources(environ={}, root=str(tmp_path))) == []


def _ld_machine(libs, wheels):
    def edit(s):
        s["packages"]["versions"].update(dict({"torch": "2.2.0+cu121"}, **wheels))
        s["packages"]["torch_build"] = {"cuda": "12.1", "hip": None}
        s["packages"]["ld_cuda_libs"] = [{"dir": "/usr/local/cuda-12.1/lib", "name": n, "version": v} for n, v in libs]
    return fixture_snapshot("rtx4090-4x-no-p2p", keep=1, env={"LD_LIBRARY_PATH": "/usr/local/cuda-12.1/lib"}, edit=edit)


def test_pkg016_ld_library_path_cuda_libs_before_torchs_wheels_trigger_and_quiet():
    """andimarafioti/florence2-finetuning#2's class: a system cuDNN (or an older cuBLAS) in LD_LIBRARY_PATH is loaded
    in place of the copy torch's nvidia-* wheel provides (LD_LIBRARY_PATH comes before DT_RUNPATH)."""
    cudnn = {"nvidia-cudnn-cu12": "8.9.2.26"}
    found = findings_of(_ld_machine([("libcudnn_cnn_train.so.8", "8.9.7")], cudnn), "PKG016")
    assert found and found[0].severity == "warning" and "nvidia-cudnn-cu12 8.9.2.26" in found[0].title
    assert "env:LD_LIBRARY_PATH" in found[0].subjects
    older = findings_of(_ld_machine([("libcublasLt.so.12", "12.0.1.189")], {"nvidia-cublas-cu12": "12.1.3.1"}), "PKG016")
    assert older and older[0].severity == "warning"
    unknown = findings_of(_ld_machine([("libcudnn.so.8", None)], cudnn), "PKG016")
    assert [f.severity for f in unknown] == ["info"]
    # the same cuDNN, a newer cuBLAS, another soname (cuDNN 9 beside the 8.x wheel), no torch wheel (conda/NGC): quiet
    assert not findings_of(_ld_machine([("libcudnn_cnn_train.so.8", "8.9.2")], cudnn), "PKG016")
    assert not findings_of(_ld_machine([("libcublas.so.12", "12.4.5.8")], {"nvidia-cublas-cu12": "12.1.3.1"}), "PKG016")
    assert not findings_of(_ld_machine([("libcudnn.so.9", "9.1.0")], cudnn), "PKG016")
    assert not findings_of(_ld_machine([("libcudnn_cnn_train.so.8", "8.9.7")], {}), "PKG016")
