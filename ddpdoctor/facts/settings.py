"""The settings catalogue (ddpdoctor/data/settings.json, mined by tools/mine_settings.py): for every
environment variable that NCCL, torch (c10d, elastic, ProcessGroupNCCL, the CUDA caching allocator,
the dataloader), the CUDA runtime, transformers, accelerate, tokenizers and DeepSpeed read, how its
reader parses it, its default, its deprecated spellings, what it costs when left on and which other
settings it fights with; and every key of PYTORCH_CUDA_ALLOC_CONF.

Pure: checks ask questions ("is this a known setting?", "how does NCCL read 'true'?", "what does
TORCH_DISTRIBUTED_DEBUG=DETAIL cost at 64 ranks?"); the answers come from the entries and from the
readers' grammars below, each written after the code that parses the value (named in its docstring).
"""
from __future__ import annotations

import difflib
import functools
import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from ddpdoctor.facts import catalogue
from ddpdoctor.facts.units import whole_number

# The prefixes each family owns: a set name under one of them that the catalogue does not know is
# judged (a typo when it is close to a known name). Names other programs read under these prefixes
# (network plugins: NCCL_OFI_*, SHARP...) are left alone.
FAMILY_PREFIXES = {
    "nccl": ("NCCL_",), "torch": ("TORCH_", "PYTORCH_", "TORCHELASTIC_", "PET_", "GLOO_"), "cuda": ("CUDA_",),
    "tokenizers": ("TOKENIZERS_",), "accelerate": ("ACCELERATE_",), "transformers": ("TRANSFORMERS_",),
    "deepspeed": ("DS_", "DEEPSPEED_"),
}
PLUGIN_PREFIXES = ("NCCL_OFI_", "NCCL_SHARP_", "NCCL_GPUDIRECTTCPX_", "NCCL_FASTRAK_", "NCCL_TESTS_", "NCCL_GIN_",
                   "NCCL_RAS_", "NCCL_IBEXT_", "NCCL_TCPX_", "NCCL_BUFFSIZE_", "NCCL_PROTO_", "NCCL_TUNER_",
                   "TORCH_CUDA_ARCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_", "TORCH_LOGS_",
                   "CUDA_HOME", "CUDA_PATH", "CUDA_VERSION", "CUDA_MODULE_", "ACCELERATE_DEEPSPEED_",
                   "ACCELERATE_FSDP_", "ACCELERATE_MEGATRON_", "ACCELERATE_DYNAMO_", "ACCELERATE_TORCH_")
ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
# Namespaces a process launcher writes into each rank's environment: nobody types these, so a name there
# that the catalogue does not hold is another variable of the launcher, never a misspelling of one the
# catalogue holds (accelerate reads a few of them). Open MPI's ORTE sets OMPI_COMM_WORLD_RANK, _LOCAL_RANK,
# _NODE_RANK, OMPI_FILE_LOCATION and OMPI_MCA_* for every proc (open-mpi/ompi
# orte/mca/odls/base/odls_base_default_fns.c@b217c8ce, odls_base_default_setup_fork); PMIx servers give
# their clients PMIX_NAMESPACE, PMIX_RANK and PMIX_SERVER_URI* (openpmix/openpmix src/server/pmix_server.c);
# MPICH's Hydra PMI_RANK/PMI_SIZE/PMI_FD and MPI_LOCALRANKID/MPI_LOCALNRANKS, MVAPICH MV2_COMM_WORLD_*,
# Intel MPI I_MPI_*, Slurm SLURM_* and SRUN_* (the names gather/launcher.py reads a rank from).
LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "MPI_LOCAL", "MV2_", "I_MPI_", "HYDRA_", "SLURM_", "SRUN_")
# The NVIDIA Container Toolkit's variables (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_CUDA),
# set in every CUDA base image (nvidia/cuda Dockerfiles: ENV NVIDIA_VISIBLE_DEVICES all) and read by the container
# runtime, not by torch: NVIDIA_VISIBLE_DEVICES is not a misspelt CUDA_VISIBLE_DEVICES.
CONTAINER_PREFIXES = ("NVIDIA_",)
# NCCL's, ProcessGroupNCCL's and c10d's variables, and the thread count every rank's OpenMP reads: the
# "nccl" checks (NCCL001-003) judge their names, values and deprecations; the "settings" checks the rest.
DISTRIBUTED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_FR_", "GLOO_", "TORCH_GLOO_")
DISTRIBUTED_NAMES = ("TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL", "OMP_NUM_THREADS")


def distributed(name: str) -> bool:
    return name.startswith(DISTRIBUTED_PREFIXES) or name in DISTRIBUTED_NAMES


def entries() -> Tuple[dict, ...]:
    return catalogue.entries("settings")


@functools.lru_cache(maxsize=None)
def _index() -> Tuple[Dict[str, dict], Dict[str, dict], Dict[str, dict]]:
    names: Dict[str, dict] = {}
    aliases: Dict[str, dict] = {}
    alloc: Dict[str, dict] = {}
    for e in entries():
        if e.get("kind") == "alloc_conf":
            alloc[e["name"]] = e
            continue
        if e.get("kind") == "call":  # a debugging switch a script calls (call_entries), not a variable
            continue
        names[e["name"]] = e
        for a in e.get("aliases") or ():
            aliases[a] = e
    return names, aliases, alloc


def lookup(name: str) -> Optional[dict]:
    """The entry of `name`, or of the name it is a deprecated spelling of."""
    names, aliases, _ = _index()
    return names.get(name) or aliases.get(name)


def replaced_by(name: str) -> Optional[dict]:
    """The entry whose deprecated alias `name` is (torch reads both and warns), else None."""
    return _index()[1].get(name)


def alloc_conf_keys() -> Dict[str, dict]:
    return _index()[2]


@functools.lru_cache(maxsize=None)
def call_entries() -> Dict[str, dict]:
    """{qualified call name: entry} of the settings a training script switches on with a call rather than a variable
    (kind "call": torch.autograd.set_detect_anomaly(True), and its aliases such as the detect_anomaly() context)."""
    out: Dict[str, dict] = {}
    for e in entries():
        if e.get("kind") == "call":
            for name in [e["name"], *(e.get("aliases") or ())]:
                out[name] = e
    return out


def family_of(name: str) -> Optional[str]:
    e = lookup(name)
    if e is not None:
        return e["family"]
    return next((fam for fam, prefixes in FAMILY_PREFIXES.items() if name.startswith(prefixes)), None)


def governed(name: str) -> bool:
    """A name under a prefix one of the catalogued readers owns (not a plugin's)."""
    return family_of(name) is not None and not name.startswith(PLUGIN_PREFIXES)


@functools.lru_cache(maxsize=4096)
def near_miss(name: str) -> Optional[str]:
    """The known name `name` is probably a misspelling of, or None. Close means difflib ratio >= 0.85
    against the known names of the same family prefix, and not just a longer name of which a known
    one is the start (NCCL_IB_HCA_X is a plugin's, not a typo of NCCL_IB_HCA). A name cut short at an underscore
    is one too when exactly one known name of its family continues it (CUDA_VISIBLE for CUDA_VISIBLE_DEVICES:
    open-mmlab/mmagic#1580, documentation that printed the cut name); a start several names share is not judged."""
    if lookup(name) is not None:
        return None
    fam = family_of(name)
    pool = sorted(n for n, e in _index()[0].items() if e["family"] == fam) if fam else sorted(_index()[0])
    longer = [n for n in pool if n.startswith(name + "_")] if fam and name.count("_") >= 1 else []
    if len(longer) == 1:
        return longer[0]
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.85)
    if not close or name.startswith(close[0] + "_"):
        return None
    return close[0]


# ----------------------------------------------------------------------------------- value grammars

@dataclass(frozen=True)
class ValueProblem:
    """How the reader takes a value it was not meant to get."""

    severity: str  # "error": the job fails; "warning": silently read as something else
    reads_as: str  # what the reader makes of it, in words
    expected: str  # what it accepts


TRUE_WORDS_C10D = ("y", "yes", "1", "t", "true")
FALSE_WORDS_C10D = ("n", "no", "0", "f", "false")
TRUE_WORDS_PY = ("y", "yes", "t", "true", "on", "1")  # accelerate.utils.environment.str_to_bool
FALSE_WORDS_PY = ("n", "no", "f", "false", "off", "0")
_STRTOLL = re.compile(r"^[ \t\n\v\f\r]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
LLONG_MAX = (1 << 63) - 1


def strtoll(text: str) -> int:
    """C's strtoll(text, NULL, 0): the longest numeric prefix (hex with 0x, octal with a leading 0,
    ASCII digits only), 0 when there is none, clamped to LLONG_MIN..LLONG_MAX on overflow (ERANGE).
    NCCL_PARAM reads every integer parameter this way (src/misc/param.cc)."""
    m = _STRTOLL.match(text)
    if not m:
        return 0
    sign, body = m.groups()
    base = 16 if body[:2].lower() == "0x" else 8 if body.startswith("0") else 10
    digits = body[2:] if base == 16 else body
    if len(digits.lstrip("0")) > 22:  # past 2**64 in any of the bases: no need to convert it
        return -LLONG_MAX - 1 if sign == "-" else LLONG_MAX
    n = int(digits, base)
    return max(-n, -LLONG_MAX - 1) if sign == "-" else min(n, LLONG_MAX)


def _choices(entry: dict) -> List[str]:
    return [str(v) for v in entry.get("values") or []]


def invalid_values(env: Mapping[str, str], keep: Callable[[str], bool]) -> Iterator[tuple]:
    """(name, entry, value, problem) for every variable set in `env`, kept by `keep`, that the
    catalogue knows and whose value its reader rejects (judge_value), by name."""
    for name in sorted(env):
        if not keep(name):
            continue
        entry = lookup(name)
        if entry is None:
            continue
        problem = judge_value(entry, env[name])
        if problem is not None:
            yield name, entry, env[name], problem


def _out_of_range(entry: dict, v: str) -> Optional[ValueProblem]:
    """An integer outside the range the catalogue records for it (`valid_range`, read from the reader's
    own documentation or the width of the field it fills: NCCL_IB_TIMEOUT is the 5-bit verbs Local Ack
    Timeout), or None. Unset ranges judge nothing."""
    rng = entry.get("valid_range")
    if not rng or v == "":
        return None
    n = strtoll(v)
    if rng[0] <= n <= rng[1]:
        return None
    return ValueProblem("warning", f"{n} is outside {rng[0]}..{rng[1]}: {entry.get('out_of_range', 'out of range')}",
                        f"an integer in {rng[0]}..{rng[1]}")


def judge_value(entry: dict, value: str) -> Optional[ValueProblem]:
    """What is wrong with `value` for this setting's reader, or None when it reads as written."""
    parser = entry.get("parser")
    raw = str(value)
    v = raw.strip()
    name = entry["name"]
    if parser == "nccl_int":
        # strtoll(str, nullptr, 0): "true" reads as 0 without any error, "1.5" as 1 (src/misc/param.cc)
        if v == "" or re.fullmatch(r"[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)", v):
            return _out_of_range(entry, v)
        return ValueProblem("warning", f"{strtoll(v)} (NCCL reads integers with strtoll)", "an integer")
    if parser == "nccl_nthreads":
        # getNthreads (src/graph/tuning.cc): > 0 must be a multiple of WARP_SIZE within [min, max], else NCCL uses
        # max (or min) and logs "Invalid NCCL_NTHREADS ..."; <= 0 means NCCL's default
        if not re.fullmatch(r"[+-]?[0-9]+", v):
            return ValueProblem("warning", f"{strtoll(v)} (NCCL reads integers with strtoll)", "an integer")
        n, lo, hi, mult = strtoll(v), entry.get("min", 0), entry.get("max", 1 << 30), entry.get("multiple_of", 1)
        documented = entry.get("documented") or []
        expected = "one of " + ", ".join(map(str, documented)) if documented else f"a multiple of {mult} in {lo}..{hi}"
        if n <= 0:
            return None
        if n % mult:
            return ValueProblem("warning", f"not a multiple of {mult}: NCCL uses {hi} instead ('Invalid {name} {n} (must "
                                f"be a multiple of {mult})', src/graph/tuning.cc)", expected)
        if n > hi or n < lo:
            return ValueProblem("warning", f"outside {lo}..{hi}: NCCL uses {hi if n > hi else lo} instead "
                                "(src/graph/tuning.cc, getNthreads)", expected)
        if documented and n not in documented:
            return ValueProblem("warning", "not one of the values NCCL documents; NCCL's range check lets it through, and "
                                "a thread count that is not a power of two can give wrong results with the SIMPLE "
                                "protocol (NVIDIA/nccl#698)", expected)
        return None
    if parser in ("nccl_enum", "nccl_bitset", "nccl_list"):
        prefixes = entry.get("prefixes") if parser == "nccl_list" else None
        lists, bad_prefix = [v], []
        if prefixes and (";" in v or ":" in v):
            # NCCL >= 2.24.3 parseList (src/graph/tuning.cc): "list;function:list;..." per collective function
            lists = []
            funcs = {f.upper() for f in prefixes.get("values") or []}
            for i, seg in enumerate(s for s in v.split(";") if s.strip()):
                fn, sep, elems = seg.partition(":")
                if not sep:
                    lists.append(fn)
                    if i:
                        bad_prefix.append(f"'{seg}' (only the first entry may lack a function)")
                    continue
                if fn.strip().upper() not in funcs:
                    bad_prefix.append(f"'{fn.strip()}' (not an NCCL function)")
                lists.append(elems)
        items = [p.strip().lstrip("^").upper() for lst in lists for p in lst.split(",") if p.strip()] \
            if parser != "nccl_enum" else [v.upper()]
        known = {c.upper() for c in _choices(entry)}
        bad = [i for i in items if i not in known] + bad_prefix
        if not bad:
            return None
        return ValueProblem("warning", f"{', '.join(bad)} not understood (ignored or the default used)",
                            ("a comma list of " if parser != "nccl_enum" else "one of ") + ", ".join(_choices(entry)))
    if parser == "nccl_level":
        # ncclGetLevel: strcmp with topoPathTypeStr (case-sensitive) or an old-style number (src/graph/paths.cc)
        if v in _choices(entry) or v[:1] in tuple("0123456789"):
            return None
        hint = f" (NCCL compares case-sensitively: {v.upper()})" if v.upper() in _choices(entry) else ""
        return ValueProblem("warning", "not a level: ignored, NCCL chooses by itself" + hint,
                            "one of " + ", ".join(_choices(entry)))
    if parser == "exact":
        if v in _choices(entry):
            return None
        return ValueProblem("warning", "not understood", "one of " + ", ".join(_choices(entry)))
    if parser in ("exact_upper_raises", "py_choice"):
        if v.upper() in {c.upper() for c in _choices(entry)}:
            return None
        return ValueProblem("error", "rejected when the library starts", "one of " + ", ".join(_choices(entry)))
    if parser == "c10d_bool":
        # c10d::getCvarBool: y/yes/1/t/true or n/no/0/f/false, any case; anything else raises when the
        # process group is created (torch/csrc/distributed/c10d/Utils.hpp)
        if v.lower() in TRUE_WORDS_C10D + FALSE_WORDS_C10D:
            return None
        return ValueProblem("error", "an error when the process group is created ('Invalid value for environment "
                            f"variable: {name}')", "1/0, true/false, yes/no, y/n or t/f")
    if parser in ("c10d_int", "c10d_int_choice"):
        # c10d::getCvarInt: std::stoi, which raises unless the value starts with an integer
        if not re.match(r"\s*[+-]?\d", raw):
            return ValueProblem("error", "an error when the process group is created ('Invalid value for environment "
                                f"variable: {name}')", "an integer")
        if parser == "c10d_int_choice" and str(strtoll(v)) not in _choices(entry):
            return ValueProblem("warning", f"{strtoll(v)}, not one of the modes", "one of " + ", ".join(_choices(entry)))
        return None
    if parser == "py_int":
        try:
            int(v)
            return None
        except ValueError:
            return ValueProblem("error", "a ValueError where the library reads it (int())", "an integer")
    if parser == "py_float":
        try:
            float(v)
            return None
        except ValueError:
            return ValueProblem("error", "a ValueError where the library reads it (float())", "a number")
    if parser == "str_to_bool":
        if v.lower() in TRUE_WORDS_PY + FALSE_WORDS_PY:
            return None
        return ValueProblem("error", "a ValueError where the library reads it (str_to_bool)",
                            "1/0, true/false, yes/no, on/off")
    if parser in ("cuda_01", "c10_flag"):
        if v in ("0", "1"):
            return None
        return ValueProblem("warning", "not 0 or 1: the driver/library may read it as off", "0 or 1")
    if parser == "omp_num_threads":
        # libgomp: a comma list of positive integers (one per nesting level); otherwise "Invalid value for
        # environment variable OMP_NUM_THREADS" on stderr and the default is used (libgomp/env.c)
        if v and all(re.fullmatch(r"[1-9][0-9]*", p.strip()) for p in v.split(",")):
            return None
        return ValueProblem("warning", "ignored by libgomp ('Invalid value for environment variable "
                            "OMP_NUM_THREADS'), which then uses one thread per core", "a positive integer")
    if parser in ("cuda_int", "rust_usize"):
        if whole_number(v) is not None:
            return None
        return ValueProblem("warning", "not a non-negative integer: ignored", "a non-negative integer")
    if parser == "alloc_conf":
        problems = parse_alloc_conf(raw)[1]
        if not problems:
            return None
        return ValueProblem("error", problems[0], "key:value pairs separated by commas, e.g. "
                            "expandable_segments:True,max_split_size_mb:128")
    return None


# ----------------------------------------------------------------------------------- PYTORCH_CUDA_ALLOC_CONF

def tokenize_alloc_conf(text: str) -> List[str]:
    """c10::CachingAllocator::ConfigTokenizer (c10/core/AllocatorConfig.h): ',', ':', '[' and ']' are
    tokens of their own, whitespace is dropped, everything else accumulates into a token."""
    tokens: List[str] = []
    buf = ""
    for ch in text:
        if ch in ",:[]":
            if buf:
                tokens.append(buf)
                buf = ""
            tokens.append(ch)
        elif not ch.isspace():
            buf += ch
    if buf:
        tokens.append(buf)
    return tokens


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_alloc_value(key: str, entry: dict, value) -> Optional[str]:
    """The rule torch applies to one key's value, from c10/core/AllocatorConfig.cpp and
    c10/cuda/CUDAAllocatorConfig.cpp (the messages are torch's own)."""
    parser = entry.get("parser")
    if parser == "alloc_roundup":
        if isinstance(value, list):
            for item in value:
                interval, _, div = item.partition(":")
                if not div:
                    return f"{key}: '{item}' is not interval:divisions"
                if interval != ">" and not _is_pow2(whole_number(interval) or 0):
                    return "For roundups, the intervals have to be power of 2"
                if whole_number(div) is None or not (whole_number(div) == 0 or _is_pow2(whole_number(div))):
                    return "For roundups, the divisions has to be power of 2 or 0 to disable roundup"
            return None
        if not _is_pow2(whole_number(value) or 0):
            return "For roundups, the divisions has to be power of 2"
        return None
    if isinstance(value, list):
        return f"{key} takes one value, not a list"
    if parser == "alloc_true_false":
        # ConfigTokenizer::toBool: exactly "True" or "False"
        if value not in ("True", "False"):
            return f"Expected 'True' or 'False' for {key} but got '{value}'"
    elif parser == "alloc_mb":
        if whole_number(value) is None:
            return f"{key} needs a whole number of MB, got '{value}'"
        minimum = entry.get("min") or 0
        if whole_number(value) < minimum:
            return f"CachingAllocator option {key} too small, must be >= {minimum}"
    elif parser in ("alloc_fraction_open", "alloc_fraction_closed"):
        try:
            x = float(value)
        except ValueError:
            return f"{key} needs a number, got '{value}'"
        ok = 0.0 < x < 1.0 if parser == "alloc_fraction_open" else 0.0 <= x <= 1.0
        if not ok or math.isnan(x):
            return (f"{key} is invalid, set it in (0.0, 1.0)" if parser == "alloc_fraction_open"
                    else f"{key} must be in [0.0, 1.0]")
    elif parser == "alloc_choice":
        if value not in _choices(entry):
            return f"Unknown allocator {key}, options are {' and '.join(_choices(entry))}"
    elif parser == "alloc_pow2":
        if not _is_pow2(whole_number(value) or 0):
            return f"{key} has to be a power of 2"
    return None


def parse_alloc_conf(text: str) -> Tuple[List[Tuple[str, object]], List[str]]:
    """([(key, value or list)], [problems, in torch's words]) of a PYTORCH_CUDA_ALLOC_CONF value, with
    the grammar of torch's parser (AcceleratorAllocatorConfig::parseArgs and the CUDA config's hook):
    key ':' value, pairs separated by ',', a list value in '[' ']'. torch raises at the first CUDA
    allocation on an unknown key or a bad value, so the job fails before its first step."""
    keys = alloc_conf_keys()
    tokens = tokenize_alloc_conf(text)
    pairs: List[Tuple[str, object]] = []
    problems: List[str] = []
    i = 0
    while i < len(tokens):
        key = tokens[i]
        if key in ",:[]":
            problems.append(f"Error parsing allocator settings: unexpected '{key}'")
            break
        if i + 1 >= len(tokens) or tokens[i + 1] != ":":
            problems.append(f"Error parsing allocator settings, expected ':' after '{key}'")
            break
        if i + 2 >= len(tokens):
            problems.append(f"Error, expecting {key} value")
            break
        if tokens[i + 2] == "[":
            j = i + 3
            items, cur = [], []
            while j < len(tokens) and tokens[j] != "]":
                if tokens[j] == ",":
                    items.append("".join(cur))
                    cur = []
                else:
                    cur.append(tokens[j])
                j += 1
            if j >= len(tokens):
                problems.append("Expected closing bracket ']' in ConfigTokenizer but reached end of config")
                break
            if cur:
                items.append("".join(cur))
            value: object = items
            i = j + 1
        else:
            value = tokens[i + 2]
            i += 3
        pairs.append((key, value))
        entry = keys.get(key)
        if entry is None:
            close = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.8)
            problems.append(f"Unrecognized key '{key}' in allocator config"
                            + (f" (did you mean '{close[0]}'?)" if close else ""))
        else:
            why = _check_alloc_value(key, entry, value)
            if why:
                problems.append(why)
        if i < len(tokens):
            if tokens[i] != ",":
                problems.append(f"Error parsing allocator settings, expected ',' after {key}:{value}")
                break
            i += 1
    return pairs, problems


# ----------------------------------------------------------------------------------- cost and conflicts

def _norm(entry: dict, value: Optional[str]) -> Optional[str]:
    if value is None:
        return None
    v = str(value).strip()
    if entry.get("parser") in ("c10d_bool", "str_to_bool", "py_truthy", "rust_falsy", "nccl_enum", "nccl_bitset",
                               "nccl_list", "exact_upper_raises"):
        return v.lower() if entry.get("parser") in ("c10d_bool", "str_to_bool", "py_truthy", "rust_falsy") else v.upper()
    return v


def _matches(entry: dict, value: Optional[str], wanted) -> bool:
    if value is None:
        return None in wanted
    if "*" in wanted:
        return True
    v = _norm(entry, value)
    if entry.get("parser") in ("nccl_bitset", "nccl_list"):
        items = {p.strip().lstrip("^").upper() for p in str(value).split(",") if p.strip()}
        return any(str(w).upper() in items for w in wanted if w is not None)
    return any(v == _norm(entry, w) for w in wanted if w is not None)


def grade(spec: Mapping, world: int) -> Optional[str]:
    """The severity a cost earns at this many ranks: the highest of error_at/warning_at/info_at reached."""
    for level in ("error", "warning", "info"):
        at = spec.get(f"{level}_at")
        if at is not None and world >= at:
            return level
    return None


def presence_cost_of(entry: dict, value: str, world: int, torch_version) -> Optional[Tuple[str, str, Mapping, str]]:
    """(severity, what it costs, the cost spec, the release it changed in) of a value the cost does not name (=0) on
    a torch whose reader tests only that the variable is set (the entry's `presence_before`): it costs all the same.
    None when the entry has no such reader, the value is one the cost names, or the torch release is unknown."""
    before = entry.get("presence_before") or {}
    spec = entry.get("cost")
    if not before or not spec or value is None or _matches(entry, value, spec.get("values") or ["*"]):
        return None
    from ddpdoctor.facts.gpu_versions import release

    have, changed = release(torch_version), release(before.get("release"))
    if not have or not changed or have[:len(changed)] >= changed:
        return None
    level = grade(spec, world)
    return (level, spec["what"], spec, str(before["release"])) if level else None


def cost_of(entry: dict, value: str, world: int) -> Optional[Tuple[str, str, Mapping]]:
    """(severity, what it costs, the cost spec) of leaving this value set in a job of `world` ranks."""
    spec = entry.get("cost")
    if not spec or not _matches(entry, value, spec.get("values") or ["*"]):
        return None
    level = grade(spec, world)
    return (level, spec["what"], spec) if level else None


@dataclass(frozen=True)
class Conflict:
    name: str
    other: str
    why: str
    severity: str
    kind: str  # "conflict" (one setting defeats the other) or "cost" (together they cost, graded by world)
    spec: Mapping
    # the names as the user set them: a deprecated alias or a misspelling of `name`/`other`, else the same
    name_as: str = ""
    other_as: str = ""


def meant_env(env: Mapping[str, str], typos: bool = True) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(env as its readers take it, canonical name -> the name actually set).

    A deprecated alias counts as the name that replaced it (the reader falls back to it; the new name
    wins when both are set), and a misspelling of a known name counts as that name when the name itself
    is not set (what the user meant; `--fix-env` renames it). So a conflict is judged on what was
    meant: renaming a misspelt or deprecated variable never reveals a conflict that was not reported.
    `typos=False` leaves misspellings out: what the reader actually reads (a cost is paid only then)."""
    meant: Dict[str, str] = {}
    spelt: Dict[str, str] = {}
    rank = {}  # canonical -> 0 exact, 1 alias, 2 misspelling (lower wins)
    for name in sorted(env):
        entry = lookup(name)
        if entry is not None and entry.get("kind") != "alloc_conf":
            canon, level = entry["name"], (0 if entry["name"] == name else 1)
        else:
            close = near_miss(name) if typos and governed(name) else None
            if close is None:
                continue
            canon, level = close, 2
        if canon in rank and rank[canon] <= level:
            continue
        rank[canon], meant[canon], spelt[canon] = level, env[name], name
    return meant, spelt


def conflicts_in(env: Mapping[str, str], world: int) -> List[Conflict]:
    """Pairs of set (or, for `other: [None]`, missing) variables that fight, per the entries' `conflicts`,
    judged on the environment as meant (`meant_env`)."""
    meant, spelt = meant_env(env)
    out = []
    for name in sorted(meant):
        entry = lookup(name)
        for c in entry.get("conflicts") or ():
            other = c["with"]
            if not _matches(entry, meant[name], c.get("self") or ["*"]):
                continue
            other_entry = lookup(other) or {"name": other, "parser": "string"}
            other_value = meant.get(other, env.get(other))
            if not _matches(other_entry, other_value, c.get("other") or ["*"]):
                continue
            if c.get("different") and (other_value is None or other_value.strip() == meant[name].strip()):
                continue
            names = dict(name_as=spelt.get(name, name), other_as=spelt.get(other, other))
            if c.get("kind") == "cost":
                level = grade(c, world)
                if level:
                    out.append(Conflict(name, other, c["why"], level, "cost", c, **names))
                continue
            out.append(Conflict(name, other, c["why"], c.get("severity", "warning"), "conflict", c, **names))
    return out


# ----------------------------------------------------------------------------------- versions

def version(text) -> Tuple[int, ...]:
    """"2.1.0+cu121" -> (2, 1, 0); "2.18.3-1" -> (2, 18, 3); () when unknown."""
    out = []
    for part in re.split(r"[.\-+]", str(text or "")):
        n = whole_number(part)
        if n is None:
            break
        out.append(n)
    return tuple(out)


@dataclass(frozen=True)
class TooNew:
    """A setting the installed reader predates."""

    name: str
    reader: str  # "torch", "NCCL", "transformers" or "accelerate"
    since: str
    installed: str
    severity: str  # "error" when the reader rejects it, "warning" when it ignores it
    why: str
    fix: str = ""  # a better fix than upgrading, when there is one
    title: str = ""  # a title that says more than "NAME needs READER SINCE"


HISTORY_READERS = ("torch", "transformers", "accelerate")


def installed_versions(versions: Mapping[str, Optional[str]]) -> Dict[str, str]:
    """torch, transformers, accelerate and NCCL versions from the `packages` facts (NCCL: the pip wheel
    torch loads)."""
    out = {}
    for reader in HISTORY_READERS:
        if versions.get(reader):
            out[reader] = str(versions[reader])
    nccl = versions.get("nvidia-nccl-cu12") or versions.get("nvidia-nccl-cu13") or versions.get("nvidia-nccl-cu11")
    if nccl:
        out["nccl"] = str(nccl)
    return out


def minor_below(installed: Tuple[int, ...], since: str) -> bool:
    """installed < since, compared by minor release (the history is mined one release per minor)."""
    return bool(installed) and installed[:2] < version(since)[:2]


def too_new(env: Mapping[str, str], installed: Mapping[str, str]) -> List[TooNew]:
    """Set variables (and PYTORCH_CUDA_ALLOC_CONF keys) that the installed torch, transformers,
    accelerate or NCCL is older than.

    torch: a name renamed in a later release than the installed one (its old spelling is what this torch
    reads: `alias_since`, from the release history), allocator keys with a `since` (the older allocator
    raises "Unrecognized CachingAllocator option"), an allocator variable the installed CUDA allocator
    does not read yet (`cuda_allocator_since`: PYTORCH_ALLOC_CONF on torch 2.9). torch, transformers,
    accelerate: a name first read by a later release (`history.first`, tools/mine_settings_history.py).
    NCCL: a name whose first release among the mined tags is later than the installed NCCL (names present
    at the first mined tag are left alone: their age is not known)."""
    out: List[TooNew] = []
    torch_v, nccl_v = version(installed.get("torch")), version(installed.get("nccl"))
    for name in sorted(env):
        entry = lookup(name)
        if entry is None:
            continue
        renamed = False
        if entry["name"] == name and torch_v:
            for old, since in (entry.get("alias_since") or {}).items():
                if minor_below(torch_v, since):
                    renamed = True
                    out.append(TooNew(name, "torch", since, installed["torch"], "warning",
                                      f"torch {installed['torch']} reads {old}, not {name} (renamed in torch {since})",
                                      f"export {old}={env[name]}; unset {name}   # the name torch {installed['torch']} reads"))
        hist = entry.get("history") if entry["name"] == name else None
        reader = (hist or {}).get("reader")
        if hist and not renamed and reader in installed and minor_below(version(installed[reader]), hist["first"]):
            out.append(TooNew(name, reader, hist["first"], installed[reader], "warning",
                              f"{reader} {installed[reader]} does not read {name}: it is first read by {reader} "
                              f"{hist['first']} (release history, {hist.get('mined', '')}), so it has no effect",
                              title=f"{name} is not read by {reader} {installed[reader]} (first read by {reader} "
                                    f"{hist['first']})"))
        elif name in ALLOC_CONF_VARS and entry.get("cuda_allocator_since") and torch_v \
                and minor_below(torch_v, entry["cuda_allocator_since"]):
            since = entry["cuda_allocator_since"]
            cuda_name = "PYTORCH_CUDA_ALLOC_CONF"
            out.append(TooNew(name, "torch", since, installed["torch"], "warning",
                              f"torch {installed['torch']}'s CUDA caching allocator reads {cuda_name} only "
                              f"(c10/cuda/CUDAAllocatorConfig.h, CUDAAllocatorConfig::instance; it falls back to "
                              f"{name} from torch {since}): {name} reaches the device-generic allocator config, "
                              f"not the CUDA allocator, so its options are not applied to CUDA memory",
                              f"export {cuda_name}='{env[name]}'; unset {name}"
                              if cuda_name not in env else f"unset {name}   # {cuda_name} is what CUDA reads",
                              f"{name} is not read by the CUDA allocator of torch {installed['torch']} (it is from "
                              f"torch {since}): its options do not apply to CUDA memory"))
        if name in ALLOC_CONF_VARS and torch_v:
            for key, _ in parse_alloc_conf(env[name])[0]:
                since = (alloc_conf_keys().get(key) or {}).get("since")
                if since and torch_v < version(since):
                    out.append(TooNew(f"{name}:{key}", "torch", since, installed["torch"], "error",
                                      f"torch {installed['torch']}'s allocator has no option {key} (added in "
                                      f"torch {since}): it raises 'Unrecognized CachingAllocator option: {key}' "
                                      "at the first CUDA allocation"))
        text = entry.get("text_since") if entry["name"] == name else None
        value = str(env[name]).strip()
        if text and nccl_v and nccl_v < version(text["since"]) and value and not value[0].isdigit():
            out.append(TooNew(f"{name}={value}", "NCCL", text["since"], installed["nccl"], "warning",
                              f"NCCL {installed['nccl']} reads {name} as an integer ({text['integer_source']}): "
                              f"'{value}' is read as 0, the nearest level (LOC), so the transport is off; the names "
                              f"came in NCCL {text['since']} ({text['text_source']})"))
        first = (entry.get("versions") or {}).get("first")
        if entry["family"] == "nccl" and nccl_v and first and entry["name"] == name:
            earliest = min((version(e["versions"]["first"]) for e in entries()
                            if e["family"] == "nccl" and e.get("versions")), default=())
            if version(first) > earliest and nccl_v < version(first):
                out.append(TooNew(name, "NCCL", first.split("-")[0], installed["nccl"], "warning",
                                  f"NCCL {installed['nccl']} does not read {name} (first read by NCCL "
                                  f"{first.split('-')[0]}): it has no effect"))
    return out


@dataclass(frozen=True)
class KeyConflict:
    name: str
    keys: Tuple[str, ...]
    why: str
    torch_before: str = ""  # the conflict exists on torch releases before this one
    guess: bool = False  # the installed torch is not known: the conflict may not apply


def alloc_key_conflicts(name: str, value: str, torch_version: Optional[str]) -> List[KeyConflict]:
    """Allocator options that fight inside one PYTORCH_CUDA_ALLOC_CONF value on the installed torch."""
    entry = lookup(name)
    if entry is None:
        return []
    pairs = dict(parse_alloc_conf(value)[0])
    out = []
    tv = version(torch_version)
    for c in entry.get("key_conflicts") or ():
        if c.get("torch_before") and tv and tv >= version(c["torch_before"]):
            continue
        hit = []
        for want in c["keys"]:
            key, _, val = want.partition("=")
            names = key.split("|")
            got = [k for k in names if k in pairs and (not val or str(pairs[k]) == val)]
            if not got:
                break
            hit.append(got[0])
        else:
            out.append(KeyConflict(name, tuple(hit), c["why"], c.get("torch_before", ""),
                                   guess=bool(c.get("torch_before")) and not tv))
    return out


# ----------------------------------------------------------------------------------- catalogue test

PARSERS = {"nccl_int", "nccl_nthreads", "nccl_enum", "nccl_bitset", "nccl_list", "nccl_level", "nccl_bool", "exact",
           "exact_upper_raises", "py_choice", "c10d_bool", "c10d_int", "c10d_int_choice", "py_int", "py_float",
           "str_to_bool", "py_truthy", "py_switch", "py_str", "presence", "py_nonempty", "string", "cuda_01", "c10_flag",
           "cuda_int", "rust_usize", "rust_falsy", "alloc_conf", "cuda_visible_devices", "alloc_true_false", "alloc_mb",
           "alloc_fraction_open", "alloc_fraction_closed", "alloc_roundup", "alloc_choice", "alloc_pow2",
           "omp_num_threads"}
FAMILIES = set(FAMILY_PREFIXES)


def entry_problems(entry: dict) -> List[str]:
    """For tests/test_catalogues.py: the entry's fields are well formed, and each example `NAME=value`
    (or `PYTORCH_CUDA_ALLOC_CONF=key:value`) is read as written by the same grammar the checks use."""
    out = []
    if entry.get("family") not in FAMILIES:
        out.append(f"unknown family {entry.get('family')!r}")
    if entry.get("parser") not in PARSERS:
        out.append(f"unknown parser {entry.get('parser')!r}")
    if entry.get("kind") not in ("env", "alloc_conf", "call"):
        out.append(f"unknown kind {entry.get('kind')!r}")
    if entry.get("type") in ("enum",) and not entry.get("values"):
        out.append("an enum without values")
    for ex in entry.get("examples") or ():
        name, sep, value = str(ex).partition("=")
        if not sep:
            out.append(f"example {ex!r} is not NAME=value")
            continue
        if entry.get("kind") == "alloc_conf":
            pairs, problems = parse_alloc_conf(value)
            if problems or not pairs or pairs[0][0] != entry["name"]:
                out.append(f"example {ex!r}: {problems or 'key not parsed'}")
            continue
        if name != entry["name"] and name not in (entry.get("aliases") or ()):
            out.append(f"example {ex!r} names another variable")
        problem = judge_value(entry, value)
        if problem is not None:
            out.append(f"example {ex!r} is not read as written: {problem.reads_as}")
    for spec in [entry.get("cost")] if entry.get("cost") else []:
        if not spec.get("what") or grade(spec, 1 << 20) is None:
            out.append("cost without what/thresholds")
    for c in entry.get("conflicts") or ():
        if not c.get("with") or not c.get("why"):
            out.append(f"conflict without with/why: {c}")
    return out
