"""The `launch` section: the launcher command lines of this process's parent chain (torchrun, srun,
accelerate launch, deepspeed), parsed into the launcher's own options (ddpdoctor.facts.launch).

Under a launcher, `check` can read its own launch: /proc/<ppid>/cmdline up the chain (at most MAX_DEPTH
ancestors, stopping at pid 1). Only the launcher's options that checks judge are kept, and of the training
script's arguments only its precision options (facts.launch.SCRIPT_PRECISION; the rest may carry secrets), and only command lines a launcher wrote are recorded.
"""
from __future__ import annotations

import json
import os
import re
import sys
from typing import Optional

from ddpdoctor.facts.launch import parse_command, strip_sudo
from ddpdoctor.gather import BOOL, INT, LIST, OBJ, STR, Sources, gatherer

MAX_DEPTH = 8


def _ppid(src: Sources, pid: str) -> Optional[str]:
    stat = src.read(f"/proc/{pid}/stat", 4096)
    if not stat or ")" not in stat:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[1] if len(fields) > 1 else None


def _cmdline(src: Sources, pid: str) -> list:
    try:
        with open(src.path(f"/proc/{pid}/cmdline"), "rb") as fh:
            return [p.decode(errors="replace") for p in fh.read(1 << 16).split(b"\0") if p]
    except OSError:
        return []


_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MODULE_FLAGS = ("-m", "--module")  # torchrun, accelerate launch, deepspeed: the program is a module to run


def module_file(src: Sources, module: str, dirs: list) -> Optional[str]:
    """The file `python -m <module>` runs, found on the import path `dirs` as Python's runpy finds it: a module's
    <a>/<b>.py, or a package's <a>/<b>/__main__.py (cpython Lib/runpy.py _get_module_details: "a package is executed
    as <package>.__main__"); None when no directory holds it (a compiled or namespace module is not read)."""
    if not _MODULE.match(module):
        return None
    rel = module.replace(".", os.sep)
    for d in dirs:
        for cand in (os.path.join(d, rel + ".py"), os.path.join(d, rel, "__main__.py")):
            if os.path.isfile(src.path(cand)):
                return cand
    return None


def _cwd_of(src: Sources, pid: str) -> Optional[str]:
    """The working directory of process `pid` (/proc/<pid>/cwd), or None when it cannot be read (another user's
    process, or gone): where that launcher resolves the relative paths on its command line."""
    try:
        return os.readlink(src.path(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _program_path(src: Sources, pid: str, program: Optional[str], module: bool = False) -> Optional[str]:
    """The training script's absolute path (a .py program, resolved against the launcher's working directory,
    /proc/<pid>/cwd), when the file exists: `check` reads what that script asks of the machine (lint.scriptfacts).
    A module program (`torchrun -m pkg.train`, `accelerate launch -m axolotl.cli.train`) is looked for in the
    launcher's working directory, then on this interpreter's import path (sys.path: the same environment runs the
    job's ranks and `check` under its launcher)."""
    if not program:
        return None
    cwd = _cwd_of(src, pid)
    if module:
        return module_file(src, program, ([cwd] if cwd else []) + [d for d in sys.path if d and os.path.isabs(d)])
    if not program.endswith(".py") or (cwd is None and not os.path.isabs(program)):
        return None
    path = program if os.path.isabs(program) else os.path.join(cwd, program)
    return path if os.path.isfile(src.path(path)) else None


def runs_as_module(argv: list, program: Optional[str]) -> bool:
    """Whether the launcher was told to run `program` as a module (-m / --module before it)."""
    if not program or program not in argv:
        return False
    before = argv[:argv.index(program)]
    start = 3 if len(before) > 2 and os.path.basename(before[0]).startswith("python") and before[1] == "-m" else 1
    return any(a in MODULE_FLAGS for a in before[start:])


MAX_CKPT_ENTRIES, MAX_CKPT_FILES = 64, 400
_CKPT_DIR = re.compile(r"^checkpoint-\d+$")  # transformers Trainer: f"{PREFIX_CHECKPOINT_DIR}-{global_step}"
_CKPT_FILE = (".pt", ".pth", ".bin", ".safetensors", ".ckpt")


def _tree_bytes(path: str, budget: list) -> int:
    total = 0
    for d, _dirs, files in os.walk(path):
        for f in files:
            if budget[0] <= 0:
                return total
            budget[0] -= 1
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def save_dir_facts(src: Sources, dirs: dict, cwd: Optional[str]) -> list:
    """For each save directory of a training command ({option: dir}, relative to `cwd`): the free space of the file
    system it is on (os.statvfs of the directory, else of its nearest existing parent: f_bavail * f_frsize, what an
    unprivileged writer may use) and the largest checkpoint already in it (a transformers "checkpoint-<step>"
    directory, or a .pt/.pth/.bin/.safetensors/.ckpt file, here or one level down), bounded."""
    out = []
    for option, raw in list(dirs.items())[:4]:
        path = raw if os.path.isabs(raw) or not cwd else os.path.join(cwd, raw)
        if not os.path.isabs(path):
            continue
        probe = path
        while not os.path.isdir(src.path(probe)) and probe not in ("/", ""):
            probe = os.path.dirname(probe)
        try:
            st = os.statvfs(src.path(probe))
        except OSError:
            continue
        fact = {"option": option, "path": path, "checked": probe, "exists": probe == path,
                "free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize}
        best, budget = (None, 0), [MAX_CKPT_FILES]
        if probe == path:
            try:
                names = sorted(os.listdir(src.path(path)))[:MAX_CKPT_ENTRIES]
            except OSError:
                names = []
            for n in names:
                full = os.path.join(src.path(path), n)
                size = None
                if _CKPT_DIR.match(n) and os.path.isdir(full):
                    size = _tree_bytes(full, budget)
                elif n.endswith(_CKPT_FILE) and os.path.isfile(full):
                    size = os.path.getsize(full)
                if size and size > best[1]:
                    best = (n, size)
        if best[0]:
            fact["largest_checkpoint"], fact["largest_checkpoint_bytes"] = best
        out.append(fact)
    return out


def model_config_facts(src: Sources, models: dict, cwd: Optional[str]) -> list:
    """For each model option of a training command ({option: value}, relative to `cwd`) that names a local directory
    holding a config.json: the dtype that file records (facts.launch.config_precision: `torch_dtype` / `dtype`), read
    bounded (model_config max_bytes of that one file, then json). A Hub id (no such directory) is left out: nothing is
    downloaded. [{option, path, config, key, dtype}] (key and dtype absent when the config records none)."""
    from ddpdoctor.facts.launch import config_precision, model_config_table  # noqa: PLC0415

    limit = int(model_config_table()["max_bytes"])
    out = []
    for option, raw in list(models.items())[:4]:
        path = os.path.expanduser(raw) if str(raw).startswith("~") else raw
        path = path if os.path.isabs(path) or not cwd else os.path.join(cwd, path)
        config = os.path.join(path, "config.json")
        if not os.path.isabs(config) or not os.path.isfile(src.path(config)):
            cached = _hub_cached_config(src, str(raw))  # a Hub id downloaded before: its config in the local cache
            if cached is None:
                continue
            path, config = str(raw), cached
        text = src.read_regular(config, limit)
        try:
            doc = json.loads(text) if text is not None and len(text) < limit else None
        except ValueError:
            doc = None
        fact = {"option": option, "path": path, "config": config}
        found = config_precision(doc) if isinstance(doc, dict) else None
        if found:
            fact["key"], fact["dtype"] = found[1], found[2]
        heads = _attention_heads(doc)
        if heads is not None:
            fact["heads"] = heads
        weights = _weights_on_disk(src, os.path.dirname(config))
        if weights:
            fact["weights_bytes"], fact["weights_files"] = weights
        out.append(fact)
    return out


def _weights_on_disk(src: Sources, folder: str) -> Optional[tuple]:
    """(bytes, files) of the checkpoint's weight files in `folder` (data/precision_calls.json model_config.weights:
    model*.safetensors, else pytorch_model*.bin; the Hub cache's symlinks followed to their blobs); stat only, at most
    max_files names; None when there is none or the folder cannot be listed."""
    from ddpdoctor.facts.launch import model_config_table  # noqa: PLC0415

    rule = model_config_table()["weights"]
    try:
        names = sorted(os.listdir(src.path(folder)))[: int(rule["max_files"])]
    except OSError:
        return None
    for prefix, suffix in rule["prefixes"].items():
        total, files = 0, 0
        for n in names:
            if n.startswith(prefix) and n.endswith(suffix):
                try:
                    total += os.stat(src.path(os.path.join(folder, n))).st_size
                    files += 1
                except OSError:
                    continue
        if files:
            return total, files
    return None


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


def _hub_cached_config(src: Sources, repo_id: str) -> Optional[str]:
    """The config.json of Hub model `repo_id` in the local Hugging Face cache, as huggingface_hub lays it out
    (data/precision_calls.json model_config.hub_cache): <cache>/models--org--name/snapshots/<refs/main>/config.json;
    None when the id is not a Hub id, was never downloaded here, or its main ref is unreadable. A few stats and one
    small read; nothing is downloaded."""
    from ddpdoctor.facts.launch import model_config_table  # noqa: PLC0415

    if not _HUB_ID.match(repo_id) or ".." in repo_id:
        return None
    hc = model_config_table()["hub_cache"]
    env = src.environ
    cache = next((env.get(k) for k in hc["cache_env"] if env.get(k)), None)
    if not cache:
        xdg, fallback, leaf = hc["home_default"]
        home = env.get(hc["home_env"]) or os.path.join(env.get(xdg) or fallback, leaf)
        cache = os.path.join(home, "hub")
    if cache.startswith("~"):
        cache = os.path.join(env.get("HOME") or os.path.expanduser("~"), cache[2:]) if cache.startswith("~/") else cache
    folder = os.path.join(cache, hc["folder_prefix"] + hc["separator"].join(repo_id.split("/")))
    ref = src.read_regular(os.path.join(folder, "refs", hc["ref"]), 128)
    commit = (ref or "").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    config = os.path.join(folder, "snapshots", commit, "config.json")
    return config if os.path.isabs(config) and os.path.isfile(src.path(config)) else None


def _attention_heads(doc) -> Optional[int]:
    """The model's attention-head count as vLLM reads it (hf_text_config.num_attention_heads: a multimodal config's
    text part first; data/serving.json text_config_keys, heads_key), or None."""
    from ddpdoctor.facts.launch import serving_table  # noqa: PLC0415

    if not isinstance(doc, dict):
        return None
    table = serving_table()
    part = next((doc[k] for k in table["text_config_keys"] if isinstance(doc.get(k), dict)), doc)
    heads = part.get(table["heads_key"])
    return heads if isinstance(heads, int) and not isinstance(heads, bool) and heads > 0 else None


SHELLS = ("sh", "bash", "dash", "zsh")
MAX_SCRIPT_BYTES, MAX_SCRIPT_COMMANDS = 64 * 1024, 8
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PREFIXES = ("exec", "nohup", "time", "env", "sudo", "command")


def program_found(word: str, environ) -> Optional[bool]:
    """Whether the shell would find `word` as a program it can run: an absolute or relative path that is an executable
    file, else a name on PATH (shutil.which), and, for a script, whose #! interpreter exists (program_state); None for
    a word the shell expands ($PYTHON, `...`)."""
    state = program_state(word, environ)
    return None if state is None else state["why"] == "ok"


# the first bytes of a file the kernel reads for its #! line (BINPRM_BUF_SIZE, include/uapi/linux/binfmts.h: 256 since
# Linux 5.1, 128 before; fs/binfmt_script.c reads the interpreter's path from them)
SHEBANG_BYTES = 256


def program_state(word: str, environ) -> Optional[dict]:
    """How execve(2) would fare with the program word of a launch (data/launchers.json exec_failures): {"why": "ok"}, or
    "missing" (no such file / not on PATH: the shell's "not found"), "directory" (EACCES, "Is a directory"),
    "not_executable" (a file without execute permission: EACCES, "Permission denied"; on PATH too, where the shell
    remembers the first such file), "bad_interpreter" (a #! script whose interpreter does not exist: ENOENT from the
    kernel's open_exec of it, bash's "bad interpreter"; `#!/usr/bin/env NAME` with NAME not on PATH), with "path" (the
    file) and "interpreter". None for a word the shell expands ($PYTHON, `...`) or an empty one."""
    import shutil

    if not word or not word.strip() or any(c in word for c in "$`("):
        return None
    path_dirs = str(environ.get("PATH") or os.defpath)
    if "/" in word:
        path = word
        if os.path.isdir(path):
            return {"why": "directory", "path": path}
        if not os.path.isfile(path):
            return {"why": "missing", "path": path}
        if not os.access(path, os.X_OK):
            return {"why": "not_executable", "path": path}
    else:
        path = shutil.which(word, path=path_dirs)
        if path is None:
            for d in path_dirs.split(os.pathsep):
                cand = os.path.join(d or ".", word)
                if os.path.isfile(cand):
                    return {"why": "not_executable", "path": cand}
            return {"why": "missing"}
    bad = _bad_interpreter(path, path_dirs)
    return dict(bad, why="bad_interpreter", path=path) if bad else {"why": "ok", "path": path}


def _bad_interpreter(path: str, path_dirs: str) -> Optional[dict]:
    """The #! interpreter of the script at `path` when it cannot be run ({"interpreter": ..., "via_env": bool}), else
    None (no #! line, unreadable, or an interpreter that exists and is executable)."""
    import shutil

    try:
        with open(path, "rb") as fh:
            head = fh.read(SHEBANG_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip(" \t")
    if not line:
        return None
    parts = re.split(r"[ \t]+", line, maxsplit=1)  # the kernel splits on blanks only: a CRLF line keeps its "\r"
    interp = parts[0]
    if not (os.path.isfile(interp) and os.access(interp, os.X_OK)):
        return {"interpreter": interp, "via_env": False}
    if os.path.basename(interp) == "env" and len(parts) > 1:
        words = [w for w in parts[1].split() if not w.startswith("-")]
        if words and "=" not in words[0] and shutil.which(words[0], path=path_dirs) is None:
            return {"interpreter": words[0], "via_env": True}
    return None


def program_not_runnable(word: str, environ) -> dict:
    """The fields a launch command records about a program that cannot be run here (ENV020): program_why, program_file,
    interpreter, interpreter_via_env; {} when it runs or the word is a shell expansion."""
    state = program_state(word, environ)
    if not state or state["why"] in ("ok", "missing"):
        return {}
    out = {"program_why": state["why"], "program_file": state.get("path")}
    if state.get("interpreter") is not None:
        out["interpreter"], out["interpreter_via_env"] = state["interpreter"], bool(state.get("via_env"))
    return out


def commands_in_shell_script(path: str, environ) -> list:
    """The launch commands a shell script runs (`sh train.sh`): each line (backslash continuations joined) whose first
    word, after VAR=value assignments and exec/nohup/env, is a launcher (torchrun, srun, deepspeed, accelerate, python -m
    torch.distributed.run ...) or `python script.py`, parsed as check's own launch is (facts.launch.parse_command /
    parse_program), with `from_script` (file:line) and `found`: whether that program is on PATH here (None when the
    word is a shell expansion). Bounded: MAX_SCRIPT_BYTES read, MAX_SCRIPT_COMMANDS kept; [] when unreadable."""
    import shlex

    from ddpdoctor.facts.launch import parse_program, which_launcher

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_SCRIPT_BYTES)
    except OSError:
        return []
    out = []
    lines, start, pending = [], 0, ""
    for no, raw in enumerate(text.splitlines(), 1):  # backslash continuations joined, numbered by their first line
        if not pending:
            start = no
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append((start, pending + raw))
        pending = ""
    for no, raw in lines:
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        while words and (_ASSIGN.match(words[0]) or words[0] in _PREFIXES):
            words = words[1:]
        if not words:
            continue
        kind, _ = which_launcher(words)
        base = os.path.basename(words[0])
        launcher_word = base in ("torchrun", "srun", "deepspeed", "accelerate", "mpirun", "mpiexec") \
            or base.startswith("python")
        if kind is None and not launcher_word:
            continue
        cmd = parse_command(words) or parse_program(words) or {"launcher": base, "options": {}}
        cmd = dict(cmd, from_script=f"{path}:{no}", program_word=words[0])
        found = program_found(words[0], environ)
        if found is not None:
            cmd["found"] = found
            cmd.update(program_not_runnable(words[0], environ))
        if cmd.get("program") is None:
            cmd.pop("program", None)
        out.append(cmd)
        if len(out) >= MAX_SCRIPT_COMMANDS:
            break
    return out


def launch_commands(src: Sources) -> dict:
    """{commands: [{launcher, options, program, depth}], depth_read}: the launchers above this process, nearest first."""
    out: list = []
    pid = _ppid(src, "self")
    depth = 0
    while pid and pid not in ("0", "1") and depth < MAX_DEPTH:
        depth += 1
        argv = _cmdline(src, pid)
        cmd = parse_command(argv)
        if cmd and cmd.get("sudo") is not None:
            # `sudo torchrun ...` above the torchrun process itself: the sudo hop is a fact of that same launch, not a
            # launch of its own; a sudo running something that is no launcher is not recorded
            cmd.pop("program_word", None)
            if parse_command(strip_sudo(argv)[1]) is None:
                cmd = None
            elif out and out[-1].get("launcher") == cmd["launcher"]:
                out[-1]["sudo"] = cmd["sudo"]
                cmd = None
        if cmd:
            cmd["depth"] = depth
            if cmd.get("program") is None:
                cmd.pop("program")
            found = _program_path(src, pid, cmd.get("program"), runs_as_module(argv, cmd.get("program")))
            if found:
                cmd["program_path"] = found
            if cmd.get("script_dirs"):
                cmd["save_dirs"] = save_dir_facts(src, cmd["script_dirs"], _cwd_of(src, pid))
            if cmd.get("script_models"):
                cmd["model_configs"] = model_config_facts(src, cmd["script_models"], _cwd_of(src, pid))
            deepspeed_command_facts(src, cmd, _cwd_of(src, pid))
            out.append(cmd)
        pid = _ppid(src, pid)
    return {"commands": out, "depth_read": depth}


FIELDS = {
    "commands": LIST, "commands[]": OBJ, "commands[].launcher": STR, "commands[].options": OBJ,
    "commands[].options.*": STR, "commands[].program": STR, "commands[].program_path": STR, "commands[].script_options": OBJ,
    "commands[].script_options.*": STR, "commands[].depth": INT, "depth_read": INT,
    # check19: the training program's GPU options (facts.launch.script_gpu_options)
    "commands[].script_gpus": OBJ, "commands[].script_gpus.*": STR,
    "commands[].from_script": STR, "commands[].program_word": STR, "commands[].found": BOOL,
    "commands[].program_why": STR, "commands[].program_file": STR, "commands[].interpreter": STR,
    "commands[].interpreter_via_env": BOOL,
    "commands[].program_exists": BOOL, "commands[].cwd": STR,  # check's own `-- <command>` (pipeline.check)
    "commands[].script_dirs": OBJ, "commands[].script_dirs.*": STR, "commands[].save_dirs": LIST,
    "commands[].save_dirs[]": OBJ, "commands[].save_dirs[].option": STR, "commands[].save_dirs[].path": STR,
    "commands[].save_dirs[].checked": STR, "commands[].save_dirs[].exists": BOOL,
    "commands[].save_dirs[].free_bytes": INT, "commands[].save_dirs[].total_bytes": INT,
    "commands[].save_dirs[].largest_checkpoint": STR, "commands[].save_dirs[].largest_checkpoint_bytes": INT,
    # check21: the training program's model options and the dtype a local model's config.json records
    "commands[].script_models": OBJ, "commands[].script_models.*": STR, "commands[].model_configs": LIST,
    "commands[].model_configs[]": OBJ, "commands[].model_configs[].option": STR, "commands[].model_configs[].path": STR,
    "commands[].model_configs[].config": STR, "commands[].model_configs[].key": STR,
    "commands[].model_configs[].dtype": STR, "commands[].model_configs[].heads": INT,
    "commands[].model_configs[].weights_bytes": INT, "commands[].model_configs[].weights_files": INT,
    "commands[].serving": OBJ, "commands[].serving.engine": STR, "commands[].serving.model": STR,
    "commands[].serving.model_option": STR, "commands[].serving.tensor_parallel": INT,
    # check27: a `python setup.py <commands>` build (facts.launch: its setuptools commands, PKG014's builders)
    "commands[].setup_commands": LIST, "commands[].setup_commands[]": STR,
    "commands[].serving.pipeline_parallel": INT, "commands[].serving.dtype": STR, "commands[].serving.multi_node": BOOL,
    # check29: a launch run through sudo (facts.launch.strip_sudo: -E given, the VAR=value words sudo sets)
    "commands[].sudo": OBJ, "commands[].sudo.preserve_env": BOOL, "commands[].sudo.assigns": LIST,
    "commands[].sudo.assigns[]": STR,
    "commands[].script_deepspeed": STR,  # check29: the program's --deepspeed <config> (ENV001)
    # check30: vLLM's --enforce-eager (PKG010's graph capture); the program's TrainingArguments options (GPU016)
    "commands[].serving.eager": BOOL, "commands[].script_trainer_args": LIST, "commands[].script_trainer_args[]": STR,
    "commands[].module": STR,  # check30: `python -m package.module` (facts.launch.parse_program)
    # check30b: a deepspeed command's hostfile and the resolution of the master its runner takes from it (NET002)
    "commands[].hostfile": OBJ, "commands[].hostfile.path": STR, "commands[].hostfile.hosts": OBJ,
    "commands[].hostfile.hosts.*": INT, "commands[].hostfile.errors": LIST, "commands[].hostfile.errors[]": STR,
    "commands[].master_resolved": OBJ, "commands[].master_resolved.host": STR,
    "commands[].master_resolved.addresses": LIST, "commands[].master_resolved.addresses[]": STR,
    "commands[].master_resolved.error": STR,
    # check30b: `sh script.sh` (check -- sh ...): the shell that word is here, the script's #! and its bash-only lines
    "shell_run": OBJ, "shell_run.shell": STR, "shell_run.shell_is": STR, "shell_run.script": STR,
    "shell_run.shebang": STR, "shell_run.bash_only": LIST, "shell_run.bash_only[]": OBJ,
    "shell_run.bash_only[].line": INT, "shell_run.bash_only[].what": STR, "shell_run.bash_only[].dash_says": STR,
    "shell_run.bash_only[].text": STR,
}


@gatherer("launch", when=("check",), fields=FIELDS, required=("commands[].launcher", "commands[].options"))
def gather_launch(src: Sources) -> dict:
    return launch_commands(src)


def deepspeed_command_facts(src: Sources, cmd: dict, cwd: Optional[str], resolver=None) -> None:
    """A recorded `deepspeed` command's hostfile (its --hostfile, else /job/hostfile, as runner.py reads it) and, when
    it names no --master_addr, the resolution of the host its runner takes as the master: the first active host
    (data/launchers.json deepspeed_master_from_hostfile), under gather.network's 2-second deadline. Added to `cmd`
    as `hostfile` and `master_resolved`; nothing when the command is no deepspeed launch or reads no hostfile."""
    from ddpdoctor.facts.launch import deepspeed_active_hosts  # noqa: PLC0415
    from ddpdoctor.facts.launchers import deepspeed_master_rule  # noqa: PLC0415
    from ddpdoctor.gather.host import read_hostfile  # noqa: PLC0415

    if not isinstance(cmd, dict) or cmd.get("launcher") != "deepspeed":
        return
    opts = cmd.get("options") or {}
    path = str(opts.get("hostfile") or deepspeed_master_rule().get("default_hostfile") or "/job/hostfile")
    if not os.path.isabs(path) and cwd:
        path = os.path.join(cwd, path)
    hostfile = read_hostfile(src, path)
    if hostfile is None:
        return
    cmd["hostfile"] = hostfile
    active = deepspeed_active_hosts(list(hostfile.get("hosts") or {}), opts.get("include"), opts.get("exclude"))
    if opts.get("master_addr") or not active:
        return
    if resolver is None:
        from ddpdoctor.gather.names import resolve as resolver  # noqa: PLC0415
    cmd["master_resolved"] = resolver(active[0])


def shell_run_facts(argv: list, script: str, environ) -> Optional[dict]:
    """`sh script.sh ...` (a shell word, then the script): which shell that word really is here (the basename of its
    resolved path: /bin/sh -> dash on Debian and Ubuntu), the interpreter the script's own #! line names (which the
    shell ignores), and the script's bash-only lines (facts.launchers.bash_only_lines). None for a script executed
    itself (the kernel then runs its #! interpreter) or one that cannot be read."""
    import shutil  # noqa: PLC0415

    from ddpdoctor.facts.launchers import bash_only_lines  # noqa: PLC0415

    word = os.path.basename(str(argv[0])) if argv else ""
    if word not in SHELLS:
        return None
    try:
        with open(script, "rb") as fh:
            text = fh.read(64 * 1024).decode("utf-8", "replace")
    except OSError:
        return None
    found = shutil.which(str(argv[0]), path=(environ or {}).get("PATH"))
    first = text.splitlines()[0] if text else ""
    words = first[2:].split() if first.startswith("#!") else []
    shebang = os.path.basename(words[0]) if words else None
    if shebang == "env" and len(words) > 1:
        shebang = os.path.basename(words[1])
    return {"shell": word, "shell_is": os.path.basename(os.path.realpath(found)) if found else None,
            "script": script, "shebang": shebang, "bash_only": bash_only_lines(text)}
