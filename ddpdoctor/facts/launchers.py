"""The launcher names (ddpdoctor/data/launchers.json), one table read by both readers of a launch command:
lint.launchinfo (launch lines in READMEs and shell scripts) and facts.launch (the argv of check's parent chain).
Reads only the package's own knowledge file, once."""
from __future__ import annotations

import functools
import json
import os
import re
from typing import Optional

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "launchers.json")


@functools.lru_cache(maxsize=1)
def launchers() -> tuple:
    """The table's rows: {name, options, commands, modules, source}."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["launchers"])


def of_module(module: str) -> Optional[dict]:
    """The row whose `python -m` spelling is `module`, or None."""
    return next((row for row in launchers() if module in row["modules"]), None)


def of_command(words: list) -> tuple:
    """(row, words used) for a command line starting with a launcher program (its first word's basename, and the
    second word of a two-word command: `accelerate launch`), or (None, 0)."""
    if not words:
        return None, 0
    first = os.path.basename(str(words[0]))
    for row in launchers():
        for command in row["commands"]:
            parts = command.split()
            if first == parts[0] and [str(w) for w in words[1:len(parts)]] == parts[1:]:
                return row, len(parts)
    return None, 0


@functools.lru_cache(maxsize=1)
def line_pattern() -> str:
    """A regular expression alternative matching any launcher in a line of text (`python3 -m torch.distributed.run`,
    `accelerate launch`, `torchrun`), longest spellings first; `python_prefix` is how a `-m` spelling starts."""
    alts = []
    for row in launchers():
        alts += [r"python3?\s+-m\s+" + re.escape(m) for m in row["modules"]]
        alts += [r"\s+".join(re.escape(p) for p in c.split()) for c in row["commands"]]
    return "|".join(sorted(alts, key=len, reverse=True))


def name_of_text(raw: str) -> Optional[str]:
    """The launcher name of a spelling line_pattern() matched (`python -m torch.distributed.launch` ->
    'torch.distributed.launch', `accelerate   launch` -> 'accelerate'), or None."""
    words = raw.split()
    if len(words) >= 3 and words[0].startswith("python") and words[1] == "-m":
        row = of_module(words[2])
    else:
        row, _ = of_command(words)
    return row["name"] if row else None


@functools.lru_cache(maxsize=1)
def rank_passers() -> tuple:
    """The table's launchers that export no RANK and pass the rank to init_process_group themselves (Lightning's
    subprocess script launcher): {name, framework, sets, absent, rank, sources}."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh).get("rank_passed_explicitly", {}).get("launchers", ()))


def rank_passed_explicitly(env) -> Optional[dict]:
    """The launcher whose environment this is when it set every variable it sets (non-empty) and none it never sets
    (RANK among them): its processes get their rank from the framework, not from RANK. None otherwise."""
    for row in rank_passers():
        if all(str(env.get(v) or "").strip() for v in row["sets"]) and not any(env.get(v) is not None
                                                                              for v in row["absent"]):
            return row
    return None


@functools.lru_cache(maxsize=1)
def lightning_script_relaunch() -> dict:
    """How a Lightning Trainer's strategy starts the other ranks by re-running the script (subprocess script
    launcher): {strategies, not, classes, default_multi_device, sources} (data/launchers.json)."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("lightning_script_relaunch", {})


@functools.lru_cache(maxsize=1)
def ray_train_workers() -> dict:
    """Which Ray Train calls run a function on every worker while the script itself is the one driver process:
    {classes, keyword, runner_classes, runner_methods, runner_keyword, sources} (data/launchers.json)."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("ray_train_workers", {})


@functools.lru_cache(maxsize=1)
def trainer_launch_settings() -> dict:
    """TrainingArguments settings that show a multi-process launch ({evidence}) and those that only configure one
    when there is one ({only_when_distributed}), with their sources (data/launchers.json)."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("trainer_launch_settings", {})


@functools.lru_cache(maxsize=1)
def _exec_failures() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh)["exec_failures"]["rows"])


def exec_failure(why: str, via_env: bool = False, crlf: bool = False) -> Optional[dict]:
    """The exec_failures row for a program that cannot run (gather.launch program_state's `why`; a #! interpreter found
    through /usr/bin/env, or one ending in a carriage return), or None for an unknown `why`."""
    rows = [r for r in _exec_failures() if r["why"] == why]
    for row in rows:
        if bool(row.get("via_env")) == via_env and bool(row.get("crlf")) == crlf:
            return row
    return rows[0] if rows else None


@functools.lru_cache(maxsize=1)
def launcher_env_required() -> tuple:
    """The variables every launched process gets (torchrun's agent); a script reading one without a default runs
    only under a launcher (data/launchers.json launcher_env_required)."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh).get("launcher_env_required", {}).get("variables", ()))


@functools.lru_cache(maxsize=1)
def _needs_local_gpu_rows() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh).get("launcher_needs_local_gpu", {}).get("rows", ()))


def launch_needs_local_gpu(cmd: dict, env) -> dict:
    """The row of data/launchers.json launcher_needs_local_gpu that holds for a recorded launch command (facts.launch:
    {launcher, options, program}) under these variables: a launcher that counts the local GPUs before starting any
    rank and stops when there are none (the DeepSpeed runner without a hostfile, `torchrun --nproc-per-node gpu`);
    {} when none holds."""
    if not isinstance(cmd, dict):
        return {}
    opts = cmd.get("options") if isinstance(cmd.get("options"), dict) else {}
    for row in _needs_local_gpu_rows():
        if cmd.get("launcher") != row["launcher"]:
            continue
        if any(opts.get(k) not in (None, "") for k in row.get("unless_options", ())):
            continue
        if any(str((env or {}).get(k) or "").strip() for k in row.get("unless_env", ())):
            continue
        if row.get("option") and str(opts.get(row["option"]) or "").strip().lower() != row["option_value"]:
            continue
        return row
    return {}


@functools.lru_cache(maxsize=1)
def deepspeed_resource_filter() -> dict:
    """How DeepSpeed's runner checks -i/--include, -e/--exclude and --num_gpus against its resource pool
    (data/launchers.json deepspeed_resource_filter: runner.py parse_resource_filter / parse_inclusion_exclusion)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("deepspeed_resource_filter") or {})


def deepspeed_checks_included_slots(version: Optional[str]) -> Optional[bool]:
    """True when this DeepSpeed release stops the launch on an included slot outside the host's 0..slots-1 ("No slot
    'N' specified on host 'H'"), False when it takes included slots as device indices (from `slots_from_include_since`,
    deepspeedai/DeepSpeed#6530), None when the release is not known."""
    def release(text) -> tuple:  # '0.15.2+cu121' -> (0, 15, 2); facts.gpu.version_tuple would import in a cycle
        m = re.match(r"\s*(\d+(?:\.\d+)*)", str(text or ""))
        return tuple(int(p) for p in m.group(1).split(".")) if m else ()

    have = release(version)
    if not have:
        return None
    return have < release(deepspeed_resource_filter().get("slots_from_include_since"))


@functools.lru_cache(maxsize=1)
def launch_count_options() -> dict:
    """The count options launchers read before starting a rank (data/launchers.json launch_count_options)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("launch_count_options") or {})


def count_value_refused(row: dict, value: str) -> bool:
    """True when the launcher of `row` (a launch_count_options row) cannot read `value` for its option: what stops
    the launch before any rank starts (int(), argparse type=int, the MIN:MAX split, the keywords torchrun knows)."""
    raw = str(value)

    def integer(text: str) -> bool:
        try:
            int(text)  # what the launcher itself calls (argparse type=int, int()): ' 4', '+4' and '4_0' pass
            return True
        except ValueError:
            return False

    if row.get("accepts") == "int":
        return not integer(raw)
    if row.get("accepts") == "int_or_words":
        # a bare lower-case word may be an out-of-tree backend's name (torch's PrivateUse1: 'npu' with torch_npu), which
        # torchrun also takes; 'cuda' never is one (CUDA is built in)
        maybe_backend = raw.isidentifier() and raw.islower() and raw != "cuda"
        return not integer(raw) and raw not in row.get("words", ()) and not maybe_backend
    if row.get("accepts") == "min_max":
        parts = raw.split(":")
        return len(parts) > 2 or not all(integer(p) for p in parts)
    return False


@functools.lru_cache(maxsize=1)
def mpi_root_refusal() -> dict:
    """Open MPI's refusal to start as root and what lifts it (data/launchers.json mpi_root_refusal: orted_submit.c)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("mpi_root_refusal") or {})


def mpi_command(argv: list) -> Optional[dict]:
    """{launcher: 'mpirun', options: {allow_run_as_root?: '1'}, program: None} for a command line started
    by an MPI launcher program (mpirun, mpiexec, orterun: mpi_root_refusal's commands), else None. mpirun's many options
    are not parsed (its program is not told from an option's value): only the options that lift its root refusal are
    kept."""
    words = [str(w) for w in argv or []]
    table = mpi_root_refusal()
    if not words or os.path.basename(words[0]) not in (table.get("commands") or ()):
        return None
    options = {}
    for word in words[1:]:
        name = word.partition("=")[0]
        if name in (table.get("allow_options") or ()):
            options[name.lstrip("-").replace("-", "_")] = "1"
    return {"launcher": "mpirun", "options": options, "program": None}


def mpi_root_allowed(cmd: dict, env) -> bool:
    """True when an mpirun command (mpi_command) run as uid 0 will start anyway: an allowing option on its command
    line, or every allowing variable at its exact value in the environment it runs in."""
    table = mpi_root_refusal()
    opts = cmd.get("options") or {}
    if any(opts.get(o.lstrip("-").replace("-", "_")) for o in table.get("allow_options") or ()):
        return True
    wanted = table.get("allow_env") or {}
    return bool(wanted) and all(str(env.get(k, "")) == v for k, v in wanted.items())


@functools.lru_cache(maxsize=1)
def deepspeed_master_rule() -> dict:
    """How DeepSpeed's runner picks its master from the hostfile (data/launchers.json deepspeed_master_from_hostfile)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("deepspeed_master_from_hostfile") or {})


@functools.lru_cache(maxsize=1)
def elastic_worker_visible_devices() -> dict:
    """What torchrun's workers inherit of CUDA_VISIBLE_DEVICES (data/launchers.json elastic_worker_visible_devices)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("elastic_worker_visible_devices") or {})


@functools.lru_cache(maxsize=1)
def shell_syntax() -> dict:
    """Which shells read POSIX only and the bash-only forms that stop them (data/launchers.json shell_syntax)."""
    with open(DATA, encoding="utf-8") as fh:
        return dict(json.load(fh).get("shell_syntax") or {})


def bash_only_lines(text: str, limit: int = 5) -> list:
    """[{line, what, text}] for the lines of a shell script that use a bash-only form (shell_syntax bash_only); lines
    that are comments are skipped. At most `limit`."""
    rows = [(r, re.compile(r["pattern"])) for r in shell_syntax().get("bash_only") or ()]
    out = []
    for n, line in enumerate(str(text).splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for row, rx in rows:
            if rx.search(line):
                out.append({"line": n, "what": row["name"], "dash_says": row.get("dash_says"), "text": line.strip()[:160]})
                break
        if len(out) >= limit:
            break
    return out


@functools.lru_cache(maxsize=1)
def deepspeed_remote_loader_variables() -> tuple:
    """The dynamic loader's variables (glibc's elf/rtld.c process_envvars: LD_LIBRARY_PATH, LD_PRELOAD) that DeepSpeed's
    multi-node runner does not forward to the other hosts (data/launchers.json deepspeed_remote_loader_variables)."""
    with open(DATA, encoding="utf-8") as fh:
        return tuple(json.load(fh).get("deepspeed_remote_loader_variables", {}).get("names") or ())


@functools.lru_cache(maxsize=1)
def master_addr_ipv6() -> dict:
    """How torch's env:// and tcp:// rendezvous read an IPv6 MASTER_ADDR (data/launchers.json master_addr_ipv6)."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("master_addr_ipv6", {})


@functools.lru_cache(maxsize=1)
def deepspeed_visible_devices_include() -> dict:
    """How DeepSpeed's runner turns CUDA_VISIBLE_DEVICES into --include and parses it as integers
    (data/launchers.json deepspeed_visible_devices_include)."""
    with open(DATA, encoding="utf-8") as fh:
        return json.load(fh).get("deepspeed_visible_devices_include", {})
