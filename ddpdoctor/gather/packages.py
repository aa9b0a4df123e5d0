"""The `packages` section: versions from installed metadata, never by importing the package."""
from __future__ import annotations

import os

from ddpdoctor.gather import LIST, OBJ, STR, Sources, gatherer

DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "accelerate", "deepspeed", "datasets", "h5py", "numpy",
                 "nvidia-ml-py", "pynvml", "nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13", "safetensors", "huggingface-hub",
                 "lightning", "pytorch-lightning", "horovod", "flash-attn", "triton", "pytorch-triton",
                 "pytorch-triton-rocm", "xformers")


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "versions": OBJ, "versions.*": STR, "torch_build": OBJ, "torch_build.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "python": STR,
    # check2 round 8 (PKG011): NCCL itself named in LD_PRELOAD
    "nccl_preloaded": LIST, "nccl_preloaded[]": OBJ, "nccl_preloaded[].path": STR, "nccl_preloaded[].real_name": STR,
    "nccl_preloaded[].version": STR,
    # check12 round 12 (PKG012): what DeepSpeed's pre-built ops were compiled against (deepspeed/git_version_info_installed.py)
    "deepspeed_build": OBJ, "deepspeed_build.torch": STR, "deepspeed_build.cuda": STR, "deepspeed_build.hip": STR,
    "deepspeed_build.installed_ops": LIST, "deepspeed_build.installed_ops[]": STR,
    # check14 round 14 (PKG013): the NCCL wheel version torch's own metadata pins (Requires-Dist), where it pins one
    "torch_pins": OBJ, "torch_pins.*": STR,
    # check17 round 17 (PKG014): the CUDA toolkit an extension built at run time compiles with (cpp_extension's CUDA_HOME)
    "cuda_toolkit": OBJ, "cuda_toolkit.home": STR, "cuda_toolkit.from": STR, "cuda_toolkit.version": STR,
    # check17 round 17 (PKG012): the torch / CUDA / Python xformers' C++/CUDA extensions were built for (xformers/cpp_lib.json)
    "xformers_build": OBJ, "xformers_build.torch": STR, "xformers_build.cuda": STR, "xformers_build.hip": STR,
    "xformers_build.python": STR,
}


@gatherer("packages", when=("check", "preflight"), fields=FIELDS,
          nullable=('versions.*', 'torch_build.*', 'deepspeed_build.torch', 'deepspeed_build.cuda', 'deepspeed_build.hip',
                    'cuda_toolkit.version', 'xformers_build.cuda', 'xformers_build.hip', 'xformers_build.python'))
def gather_packages(src: Sources) -> dict:
    from importlib import metadata

    versions: dict = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
        except Exception as exc:  # a corrupt dist-info directory
            versions[dist] = f"<unreadable: {type(exc).__name__}>"
    import sys

    out = {"versions": versions, "python": sys.version.split()[0], "nccl_preloaded": nccl_preloaded(src)}
    if versions.get("torch"):
        out["torch_build"] = torch_build()
        pins = torch_pins()
        if pins:
            out["torch_pins"] = pins
    toolkit = cuda_toolkit(src)
    if toolkit:
        out["cuda_toolkit"] = toolkit
    if versions.get("xformers"):
        xf = xformers_build()
        if xf:
            out["xformers_build"] = xf
    if versions.get("deepspeed"):
        built = deepspeed_build()
        if built:
            out["deepspeed_build"] = built
    return out


def cuda_toolkit(src: Sources) -> dict:
    """{home, from, version} of the CUDA toolkit an extension compiled at run time uses (DeepSpeed's just-in-time ops,
    torch.utils.cpp_extension.load), found as cpp_extension's _find_cuda_home finds it: CUDA_HOME, then CUDA_PATH, then
    the directory above the first `nvcc` on PATH, then /usr/local/cuda (pytorch/pytorch torch/utils/cpp_extension.py,
    read in stored copies, commit not pinned). The version is read from the toolkit's version.json (CUDA 11.1+:
    {"cuda": {"version": "11.7.1"}}) or version.txt ("CUDA Version 10.2.89"), never by running nvcc; None when
    neither is there. {} when no toolkit is found."""
    import json
    import re

    env = src.environ
    home, how = None, None
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            home, how = env[name], name
            break
    if home is None:
        for d in (env.get("PATH") or "").split(os.pathsep):
            if d and os.path.isabs(d) and os.path.isfile(src.path(os.path.join(d, "nvcc"))):
                home, how = os.path.dirname(d.rstrip("/")), "nvcc on PATH"
                break
    if home is None and os.path.isdir(src.path("/usr/local/cuda")):
        home, how = "/usr/local/cuda", "/usr/local/cuda"
    if home is None:
        return {}
    version = None
    try:
        with open(src.path(os.path.join(home, "version.json")), encoding="utf-8") as fh:
            version = str(json.load(fh)["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        try:
            with open(src.path(os.path.join(home, "version.txt")), encoding="utf-8") as fh:
                m = re.search(r"CUDA Version\s+([\d.]+)", fh.read(4096))
                version = m.group(1) if m else None
        except OSError:
            pass
    return {"home": home, "from": how, "version": version}


def xformers_build() -> dict:
    """What xformers' C++/CUDA extensions were built for: its wheel carries xformers/cpp_lib.json,
    {"version": {"cuda": 1208, "hip": null, "torch": "2.10.0+cu128", "python": "3.10.11"}, "env": {...}}, which
    xformers/_cpp_lib.py reads before loading the library and names when the load fails ("xFormers was built for:
    PyTorch 2.3.0+cu121 with CUDA 1201 (you have 2.1.0+cu121)"; facebookresearch/xformers xformers/_cpp_lib.py, read in
    a stored copy, commit not pinned). Read as JSON, never imported; {} when absent (a build without extensions)."""
    import json
    from importlib import metadata

    try:
        path = metadata.distribution("xformers").locate_file("xformers/cpp_lib.json")
        with open(path, encoding="utf-8") as fh:
            version = json.load(fh).get("version") or {}
    except Exception:  # noqa: BLE001 - no file, unreadable metadata
        return {}
    if not isinstance(version, dict) or not version.get("torch"):
        return {}
    return {k: (None if version.get(k) is None else str(version.get(k))) for k in ("torch", "cuda", "hip", "python")}


def deepspeed_build() -> dict:
    """What DeepSpeed's pre-built ops were compiled against: its setup.py writes deepspeed/git_version_info_installed.py
    with `installed_ops={...}` and `torch_info={'version': '2.1', 'cuda_version': '12.1', 'hip_version': '0.0', ...}`
    (deepspeedai/DeepSpeed setup.py @edaa7221). Read as text, never imported; {} when absent or unreadable."""
    from importlib import metadata

    try:
        path = metadata.distribution("deepspeed").locate_file("deepspeed/git_version_info_installed.py")
        text = open(path, encoding="utf-8").read()
    except Exception:  # noqa: BLE001 - a source checkout, a wheel without the file
        return {}
    return parse_deepspeed_build(text)


def parse_deepspeed_build(text: str) -> dict:
    """{'torch', 'cuda', 'hip', 'installed_ops'} from git_version_info_installed.py's literals; {} if it has none."""
    import ast

    values = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and \
                node.targets[0].id in ("installed_ops", "torch_info"):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    info, ops = values.get("torch_info"), values.get("installed_ops")
    if not isinstance(info, dict):
        return {}
    text_of = lambda v: None if v in (None, "", "0.0") else str(v)  # noqa: E731 - setup.py writes "0.0" for none
    return {"torch": text_of(info.get("version")), "cuda": text_of(info.get("cuda_version")),
            "hip": text_of(info.get("hip_version")),
            "installed_ops": sorted(k for k, on in (ops or {}).items() if on is True) if isinstance(ops, dict) else []}


def parse_pins(requires, machine: str, system: str) -> dict:
    """{nvidia-nccl-cuNN: version} from a distribution's Requires-Dist lines ("nvidia-nccl-cu12==2.19.3;
    platform_system == "Linux" and platform_machine == "x86_64""), keeping only exact pins whose platform markers
    hold on this machine (a marker naming another platform_system or platform_machine is left out). Pure."""
    import re

    out = {}
    for line in requires or ():
        m = re.match(r"\s*(nvidia-nccl-cu\d+)\s*==\s*([\w.]+)\s*(?:;(.*))?$", str(line))
        if not m:
            continue
        marker = m.group(3) or ""
        wanted = dict(re.findall(r"(platform_system|platform_machine)\s*==\s*['\"]([^'\"]+)['\"]", marker))
        if wanted.get("platform_system", system) != system or wanted.get("platform_machine", machine) != machine:
            continue
        out[m.group(1)] = m.group(2)
    return out


def torch_pins() -> dict:
    """The NCCL wheel torch's installed metadata pins (pip reads the same Requires-Dist: "torch 2.2.0 requires
    nvidia-nccl-cu12==2.19.3 ..., but you have nvidia-nccl-cu12 2.18.1"). {} when torch pins none (conda, a
    source build, a CPU wheel) or the metadata cannot be read."""
    import platform
    from importlib import metadata

    try:
        return parse_pins(metadata.requires("torch"), platform.machine(), platform.system())
    except Exception:  # noqa: BLE001 - unreadable metadata
        return {}


def torch_build() -> dict:
    """The CUDA (or HIP) version torch was built with, from the installed torch/version.py, read as text
    (`cuda: Optional[str] = '12.1'`): `check` never imports torch. {} when it cannot be read."""
    import ast
    from importlib import metadata

    try:
        path = metadata.distribution("torch").locate_file("torch/version.py")
        tree = ast.parse(open(path, encoding="utf-8").read())
    except Exception:  # noqa: BLE001 - a torch without version.py, an unreadable file
        return {}
    out = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip", "git_version") and \
                isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, str)):
            out[target.id] = value.value  # None: not built for it (a CPU build has cuda = None)
    return out


MAX_PRELOADED = 8


def nccl_preloaded(src: Sources) -> list:
    """The LD_PRELOAD entries that are NCCL itself, each with the name of the file it resolves to and the version
    that name carries (libnccl.so -> libnccl.so.2 -> libnccl.so.2.18.3), both left out when unknown. ld.so(8) takes
    LD_PRELOAD items separated by spaces or colons and maps them before the program's own libraries, so a
    preloaded libnccl.so.2 is the NCCL torch binds to (PKG011)."""
    from ddpdoctor.facts.env import nccl_version_in_name, preloaded_nccl

    out: list = []
    for item in preloaded_nccl(src.environ.get("LD_PRELOAD")):
        entry = {"path": item}
        try:
            local = src.path(item)
            if os.path.exists(local):
                entry["real_name"] = os.path.basename(os.path.realpath(local))
        except OSError:
            pass
        version = nccl_version_in_name(entry.get("real_name") or item)
        if version:
            entry["version"] = version
        out.append(entry)
        if len(out) >= MAX_PRELOADED:
            break
    return out
