"""The `env` section: every variable that steers distributed training, with secrets redacted."""
from __future__ import annotations

import os
import re

from ddpdoctor.model.redact import redact_env_value
from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer

PREFIXES = (
    "MASTER_", "LOCAL_", "TORCHELASTIC_", "PET_", "NCCL_", "TORCH_", "GLOO_", "CUDA_", "OMP_", "MKL_",
    "RAYON_", "HF_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "ACCELERATE_", "MV2_", "KMP_", "OPENBLAS_",
    "TOKENIZERS_", "TRANSFORMERS_", "NVIDIA_", "UCX_", "FI_", "DEEPSPEED_", "DS_", "PYTORCH_", "WANDB_",
    # check33 (NET021): rdma-core's RDMAV_* (RDMAV_FORK_SAFE), which aws-ofi-nccl's EFA cheatsheet says not to use
    "RDMAV_",
)
EXACT = {"RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
         "NODE_RANK", "CROSS_RANK", "CROSS_SIZE", "LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONHASHSEED",
         "KUBERNETES_SERVICE_HOST", "CONTAINER", "container", "SINGULARITY_CONTAINER", "APPTAINER_CONTAINER",
         "TORCHINDUCTOR_COMPILE_THREADS"}
MAX_VALUE_CHARS = 4096


# The first word of the families' prefixes: a name whose first word is one letter away (NCLL_DEBUG,
# TOCH_NCCL_..., PYTORH_CUDA_ALLOC_CONF) is kept too, so a misspelt prefix is judged, not lost.
PREFIX_WORDS = ("NCCL", "TORCH", "PYTORCH", "CUDA", "GLOO", "ACCELERATE", "TOKENIZERS", "TRANSFORMERS", "DEEPSPEED",
                "TORCHELASTIC", "RAYON", "MASTER")


def _one_edit(a: str, b: str) -> bool:
    """a and b differ by one insertion, deletion, substitution or swap of neighbours."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def relevant(name: str) -> bool:
    if name in EXACT or name.startswith(PREFIXES):
        return True
    word = name.split("_", 1)[0]
    return "_" in name and len(word) >= 4 and any(_one_edit(word, w) for w in PREFIX_WORDS)


# The fields checks read, with their JSON types (the recorded-snapshot schema).
FIELDS = {
    "vars": OBJ, "vars.*": STR,
    # issue 13: every recorded field has a declared type, so a hand-edited snapshot is rejected uniformly
    "redacted": LIST, "redacted[]": STR,
    "nccl_conf": LIST, "nccl_conf[]": OBJ, "nccl_conf[].path": STR, "nccl_conf[].vars": OBJ, "nccl_conf[].vars.*": STR,
    # round 10: the XML files NCCL_TOPO_FILE / NCCL_GRAPH_FILE name, as NCCL would open them (exists), and what
    # in them ties them to a machine: the GPUs' PCI bus ids (topology) or the GPU indices (graph)
    "nccl_files": LIST, "nccl_files[]": OBJ, "nccl_files[].name": STR, "nccl_files[].path": STR,
    "nccl_files[].exists": BOOL, "nccl_files[].readable": BOOL, "nccl_files[].parsed": BOOL,
    "nccl_files[].gpu_bus_ids": LIST, "nccl_files[].gpu_bus_ids[]": STR,
    "nccl_files[].gpu_devs": LIST, "nccl_files[].gpu_devs[]": INT,
}

# The files NCCL opens by name from the environment (NVIDIA/nccl src/graph/topo.cc ncclTopoGetSystem, search.cc
# ncclTopoCompute; xml.cc ncclTopoGetXmlFromFile / ncclTopoGetXmlGraphFromFile @5067397c)
NCCL_XML_FILES = ("NCCL_TOPO_FILE", "NCCL_GRAPH_FILE")
MAX_XML_CHARS = 4 * 1024 * 1024
_TAG = re.compile(r"<(/?)(pci|gpu)\b([^>]*?)(/?)>")
# the look-behind starts a match only where the run begins: a search that restarts inside a run its first quantifier
# consumed is O(n^2) on a long line (round 21: benchmarks/bench_regex.py)
_ATTR = re.compile(r'(?<!\w)(\w+)\s*=\s*"([^"]*)"')


def nccl_xml_summary(name: str, text: str) -> dict:
    """What ties an NCCL topology or graph XML to one machine. Topology (<system>): the busid of the <pci> element
    around each <gpu> (NCCL's own dump nests them so; a <gpu> outside any <pci> names none). Graph (<graphs>): each
    <gpu dev=N> of the channels. `parsed` is False when the text holds none of the root element."""
    out: dict = {"parsed": False, "gpu_bus_ids": [], "gpu_devs": []}
    if name == "NCCL_TOPO_FILE":
        if "<system" not in text:
            return out
        stack: list = []
        for m in _TAG.finditer(text):
            closing, tag, attrs, selfclosing = m.groups()
            if tag == "pci":
                if closing:
                    if stack:
                        stack.pop()
                elif not selfclosing:
                    stack.append(dict(_ATTR.findall(attrs)).get("busid", ""))
            elif not closing and stack and stack[-1]:
                bus = stack[-1].lower()
                if bus not in out["gpu_bus_ids"]:
                    out["gpu_bus_ids"].append(bus)
        out["parsed"] = True
    else:
        if "<graphs" not in text:
            return out
        devs = {int(d) for d in re.findall(r'<gpu\b[^>]*\bdev\s*=\s*"(\d+)"', text)}
        out["gpu_devs"] = sorted(devs)
        out["parsed"] = True
    return out

NCCL_SYSTEM_CONF = "/etc/nccl.conf"
MAX_CONF_CHARS = 256 * 1024


def nccl_conf_paths(environ) -> list:
    """The files NCCL reads settings from, in its order (src/misc/param.cc, initEnvFunc): NCCL_CONF_FILE
    when set and non-empty, else $HOME/.nccl.conf; then /etc/nccl.conf."""
    user = environ.get("NCCL_CONF_FILE") or ""
    if user:
        first = user
    else:
        home = environ.get("HOME")
        first = f"{home}/.nccl.conf" if home else None
    return [p for p in (first, NCCL_SYSTEM_CONF) if p]


def parse_nccl_conf(text: str) -> dict:
    """NAME=value lines as NCCL's setEnvFile reads them: a line starting with '#' is skipped, the name
    is everything before the first '=' (spaces included: `NCCL_X = 1` sets a variable named 'NCCL_X '
    that no parameter reads), the value everything after it; lines without '=' are skipped. Names and
    values are cut at 1023 characters as NCCL cuts them."""
    out: dict = {}
    for line in text.split("\n"):
        line = line[:4095].rstrip("\r")
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        out.setdefault(name[:1023], value[:1023])  # setenv(..., 0): a later line never overrides
    return out


@gatherer("env", when=("check", "preflight"), fields=FIELDS)
def gather_env(src: Sources) -> dict:
    out: dict = {}
    redacted: list = []
    for name, value in src.environ.items():
        if not isinstance(name, str) or not relevant(name):
            continue
        value = value if isinstance(value, str) else str(value)
        if len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS] + f"...<{len(value) - MAX_VALUE_CHARS} more chars>"
        safe = redact_env_value(name, value)
        if safe != value:
            redacted.append(name)
        out[name] = safe
    result = {"vars": dict(sorted(out.items())), "redacted": sorted(redacted)}
    confs = []
    for path in nccl_conf_paths(src.environ):
        text = src.read(path, MAX_CONF_CHARS)
        if text is None:
            continue
        conf = {k: redact_env_value(k, v) for k, v in parse_nccl_conf(text).items()}
        confs.append({"path": path, "vars": conf})
    if confs:
        result["nccl_conf"] = confs
    files = []
    for name in NCCL_XML_FILES:
        path = src.environ.get(name)
        if not isinstance(path, str) or not path:
            continue
        exists = os.path.isfile(src.path(path) if os.path.isabs(path) else path)  # relative: to check's directory
        text = src.read(path, MAX_XML_CHARS) if exists else None
        one = {"name": name, "path": path, "exists": exists, "readable": text is not None}
        one.update(nccl_xml_summary(name, text) if text is not None else {"parsed": False, "gpu_bus_ids": [], "gpu_devs": []})
        files.append(one)
    if files:
        result["nccl_files"] = files
    return result
