"""The launch command: the launcher command lines above this process (torchrun, srun, accelerate, deepspeed),
parsed into their options, and what they imply for the facts checks read.

`check` run under a launcher (`srun ddpdoctor check`, `torchrun ... -m ddpdoctor check`) can read its own launch:
the command lines of its parent chain (gather.launch records them in the `launch` section). Checks that judge
torchrun's rendezvous options read them from the environment (its PET_* variables) and, through `launch_env`, from
the command line as well. Option names and defaults come from the launchers' own parsers:

- torchrun: pytorch/pytorch torch/distributed/run.py get_args_parser() @ f34fa1515024 (`--nnodes`, `--nproc-per-node`
  and its underscore spelling, `--rdzv-backend` default "static", `--rdzv-endpoint`, `--standalone` = c10d on
  localhost:0 with one node, `--node-rank`, `--master-addr`, `--master-port`; every option also read from PET_<NAME>
  by torch/distributed/argparse_util.env; torchrun sets OMP_NUM_THREADS=1 when nproc_per_node > 1 and it is unset);
- srun: SchedMD/slurm doc/man/man1/srun.1 (`-N/--nodes`, `-n/--ntasks`, `--ntasks-per-node`; srun starts the
  command once per task);
- accelerate launch: huggingface/accelerate src/accelerate/commands/launch.py launch_command_parser @ 79a842641 (`--num_processes`,
  `--num_machines`, `--machine_rank`, `--main_process_ip`, `--main_process_port`, `--config_file`, `--mixed_precision`);
- deepspeed: deepspeedai/DeepSpeed deepspeed/launcher/runner.py parse_args @ 81a47dfb (`--num_gpus`, `--num_nodes`,
  `-H/--hostfile`, `-i/--include`, `-e/--exclude`, `--master_addr`, `--master_port`).
Pure functions: no process is read here.
"""
from __future__ import annotations

import functools
import json
import os
import re
from typing import Mapping, Optional

from ddpdoctor.facts.cuda_map import devices_of, resolve
from ddpdoctor.facts.env import env_of
from ddpdoctor.facts.units import whole_number

# options that take no value, per launcher (every other option takes one: `--x v` or `--x=v`)
_FLAGS = {
    "torchrun": {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path",
                 "--use-env", "--use_env", "--virtual-local-rank", "--virtual_local_rank"},
    "srun": {"-l", "--label", "-u", "--unbuffered", "--exclusive", "-v", "--verbose", "-Q", "--quiet", "-K",
             "--kill-on-bad-exit", "--mpi=none", "-X", "--disable-status", "--overlap", "--pty", "-O",
             "--overcommit", "-Z", "--no-allocate", "-E", "--preserve-env", "--export-file"},
    "accelerate": {"--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--use_xpu", "-m",
                   "--module", "--no_python", "--debug", "--same_network", "--tpu", "--quiet", "-q", "--ipex",
                   "--enable_cpu_affinity", "--dynamo_use_fullgraph", "--dynamo_use_dynamic", "--tpu_cluster",
                   "--no_tpu_cluster", "--tpu_use_sudo", "--downcast_bf16"},
    "deepspeed": {"--no_python", "--module", "--no_local_rank", "--no_ssh_check", "--force_multi",
                  "--elastic_training", "--bind_cores_to_rank", "--save_pid", "--no_ssh", "-q", "--quiet"},
}
# the options kept (normalised: no dashes, '-' as '_'); the rest of the command line is not recorded
KEPT = {
    "torchrun": {"nnodes", "nproc_per_node", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "rdzv_conf", "standalone",
                 "node_rank", "master_addr", "master_port", "local_addr", "max_restarts"},
    "srun": {"nodes", "ntasks", "ntasks_per_node", "gpus_per_task", "gpus_per_node", "gres", "cpus_per_task"},
    "accelerate": {"num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port",
                   "config_file", "multi_gpu", "use_deepspeed", "use_fsdp", "rdzv_backend", "same_network",
                   "mixed_precision", "cpu", "tpu", "use_megatron_lm", "mpirun_hostfile", "num_cpu_threads_per_process"},
    "deepspeed": {"num_gpus", "num_nodes", "hostfile", "include", "exclude", "master_addr", "master_port", "launcher",
                  "node_rank", "no_ssh", "bind_cores_to_rank", "no_local_rank"},
}
_SHORT = {"srun": {"-N": "nodes", "-n": "ntasks", "-c": "cpus_per_task", "-G": "gpus"}, "deepspeed": {"-H": "hostfile",
          "-i": "include", "-e": "exclude"}}


def which_launcher(argv: list) -> tuple:
    """(launcher options family, index of its first option) for a command line, or (None, 0): a launcher program
    (`torchrun`, `accelerate launch`, `/path/deepspeed`, `srun`) or `python -m <launcher module>`
    (`torch.distributed.run` and `.launch` take torchrun's options), read from the launcher table both readers of a
    launch command share (facts.launchers, data/launchers.json); a launcher with no option table here (mpirun) is not
    one."""
    from ddpdoctor.facts.launchers import of_command, of_module

    if not argv:
        return None, 0
    for i in range(min(3, len(argv))):
        name = os.path.basename(str(argv[i]))
        row, used = of_command(argv[i:])
        if row is not None:
            return (row["options"], i + used) if row["options"] in _FLAGS else (None, 0)
        if name.startswith("python") and len(argv) > i + 2 and argv[i + 1] == "-m":
            row = of_module(str(argv[i + 2]))
            if row is not None and row["options"] in _FLAGS:
                return row["options"], i + 3
        if not name.startswith("python"):
            break
    return None, 0


# The training program's own options kept (its other arguments never are): the precision it is asked to train in,
# as transformers' TrainingArguments (--bf16 / --fp16 [True]), accelerate-style scripts (--mixed_precision bf16) and
# Lightning (--precision bf16-mixed) spell it. Values are kept only when they are one of these words.
SCRIPT_PRECISION = {"bf16", "fp16", "fp8", "mixed_precision", "precision"}
_PRECISION_WORDS = {"true", "false", "1", "0", "yes", "no", "bf16", "fp16", "fp8", "no", "fp32", "16", "32", "bf16-mixed",
                    "16-mixed", "bf16-true", "16-true", "32-true", "transformer-engine"}


def program_options(args: list) -> list:
    """The options of a training program's arguments, as its argparse would see them: one (name as written, key,
    words, given_with_equals) per token starting with "-", where key is the name without dashes and with "-" as "_",
    and words are the value after "=" or the words that follow up to the next option. The three readers below take
    what they need from it (a precision flag, GPU ordinals, a save directory)."""
    args = [str(a) for a in args]
    out = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith("-"):
            i += 1
            continue
        name, eq, value = tok.partition("=")
        j = i + 1
        if eq:
            words = [value]
        else:
            while j < len(args) and not args[j].startswith("-"):
                j += 1
            words = args[i + 1:j]
        out.append((name, name.lstrip("-").replace("-", "_"), words, bool(eq)))
        i = j
    return out


def script_precision(args: list) -> dict:
    """{option: value} for the precision options of a training program's arguments (SCRIPT_PRECISION), "1" for a
    bare flag (or one followed by a word that is no precision value); anything else in `args` is dropped."""
    out: dict = {}
    for name, key, words, eq in program_options(args):
        if not name.startswith("--") or key not in SCRIPT_PRECISION:
            continue
        if eq:
            value = words[0]
        else:
            value = words[0] if words and words[0] and words[0].lower() in _PRECISION_WORDS else "1"
        if value.lower() in _PRECISION_WORDS or value == "1":
            out[key] = value
    return out


# The training program's GPU options (check19): options that name GPU ordinals ('-gpuid 1', '--gpu_ids 0,1',
# '--gpu 1', '--device cuda:1', '--device_ids 0 1') or a GPU count ('--num_gpus 4', '--n_gpu 2': ordinals 0..N-1), as
# the argparse defaults lint.scriptfacts reads (`gpu_indices`: flags naming a gpu or device) are spelled on a command
# line; a plural '--gpus N' / '--devices N' with one number is a count (Lightning's Trainer(gpus=N): device_parser
# `list(range(gpus))`), a list names ordinals. Values that name no ordinal ('cpu', 'auto', '-1', 'all') are dropped.
_GPU_ORDINAL_OPTION = re.compile(r"^(gpu|gpuid|gpu_?ids?|gpu_?devices?|gpu_?no|device|device_?ids?|cuda_?devices?|"
                                 r"cuda|gpus|devices)$", re.I)
_GPU_COUNT_OPTION = re.compile(r"^(num_?gpus?|n_?gpus?|ngpus?|gpu_?count|num_?devices)$", re.I)
_PLURAL_COUNT = {"gpus", "devices"}


def _ordinals_in(values: list) -> list:
    out = []
    for raw in values:
        for part in re.split(r"[,\s\[\]()]+", str(raw)):
            part = part.strip().strip("'\"")
            m = re.fullmatch(r"(?:cuda:)?(\d+)", part, re.I)
            if m:
                out.append(int(m.group(1)))
    return out


def script_gpu_options(args: list) -> dict:
    """{option as written: value} for the GPU options of a training program's arguments (see above), the value as
    given (a list option's words joined by a space); anything else in `args` is dropped."""
    return {name: " ".join(words) for name, key, words, _ in program_options(args)
            if len(key) > 1 and (_GPU_ORDINAL_OPTION.match(key) or _GPU_COUNT_OPTION.match(key)) and _ordinals_in(words)}


# Where the training program writes its checkpoints (check19): transformers' TrainingArguments --output_dir (the
# Trainer saves "checkpoint-<step>" directories there: transformers/trainer_utils.py PREFIX_CHECKPOINT_DIR), Lightning's
# --default_root_dir, and the usual spellings of a script's own save directory.
_SAVE_DIR_OPTION = re.compile(r"^(output_dir|save_dir|checkpoint_dir|checkpoints_dir|ckpt_dir|default_root_dir|"
                              r"save_path|model_dir|out_dir)$", re.I)


def script_save_dirs(args: list) -> dict:
    """{option as written: directory} for the save-directory options of a training program's arguments."""
    return {name: words[0] for name, key, words, _ in program_options(args)
            if _SAVE_DIR_OPTION.match(key) and words and words[0]}


@functools.lru_cache(maxsize=1)
def model_config_table() -> dict:
    """data/precision_calls.json `model_config`: the model options of a training program, the config.json keys that
    record a dtype, the dtype names' precision words, the read bound, and the sources."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "precision_calls.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["model_config"]


def script_model_dirs(args: list) -> dict:
    """{option as written: value} for the model options of a training program's arguments (`--model_name_or_path
    ./ckpt`): a local directory or a Hub id, which gather.launch tells apart (a directory with a config.json)."""
    keys = set(model_config_table()["options"])
    return {name: words[0] for name, key, words, _ in program_options(args)
            if name.startswith("--") and key in keys and words and words[0]}


# the options by which a training program is handed a DeepSpeed config (transformers' TrainingArguments --deepspeed;
# DeepSpeed's own argparse group, deepspeed/__init__.py add_config_arguments: --deepspeed_config): the program then
# calls deepspeed.initialize / init_distributed
DEEPSPEED_CONFIG_OPTIONS = ("deepspeed", "deepspeed_config")


def script_deepspeed_config(args: list) -> Optional[str]:
    """The DeepSpeed config a training program's arguments hand it (`--deepspeed ds.json`), else None."""
    return next((words[0] for name, key, words, _ in program_options(args)
                 if name.startswith("--") and key in DEEPSPEED_CONFIG_OPTIONS and words and words[0].endswith(".json")),
                None)


def config_precision(config: dict) -> Optional[tuple]:
    """(precision word, key, dtype name) a model's config.json records (`torch_dtype` / `dtype`: "bfloat16"), else
    None (float32, absent, or not a name the table maps)."""
    table = model_config_table()
    for key in table["keys"]:
        value = config.get(key) if isinstance(config, dict) else None
        if isinstance(value, str):
            word = table["words"].get(value.strip().lower().replace("torch.", ""))
            if word:
                return word, key, value
    return None


def model_config_precision(snap) -> list:
    """[(precision, where, subject, engine)] the recorded commands' local model directories ask for through their own
    config.json (commands[].model_configs, gathered: its dtype key and value); `engine` names the inference server
    (vllm, sglang) that serves it with --dtype auto, None for a training program. A server given another --dtype is
    left out: that dtype, not the config's, is the one it runs."""
    out = []
    for cmd in commands(snap):
        serving = cmd.get("serving") if isinstance(cmd.get("serving"), dict) else None
        if serving and str(serving.get("dtype") or "auto").strip().lower() != "auto":
            continue  # the server's --dtype overrides the config's
        for fact in cmd.get("model_configs") or ():
            if not isinstance(fact, dict) or not fact.get("dtype"):
                continue
            word = model_config_table()["words"].get(str(fact["dtype"]).strip().lower().replace("torch.", ""))
            if word and serving:
                out.append((word, f"{fact.get('config')} {fact.get('key')}={fact['dtype']} (the model {serving['engine']} "
                                  "serves with --dtype auto)", f"path:{fact.get('config')}", serving["engine"]))
            elif word:
                out.append((word, f"{fact.get('config')} {fact.get('key')}={fact['dtype']} (the model of "
                                  f"{cmd.get('program') or 'the training program'} {fact.get('option')})",
                            f"path:{fact.get('config')}", None))
    return out


def save_dirs(snap) -> list:
    """[(command, save-dir fact)] for every directory the recorded commands' programs save checkpoints to
    (commands[].save_dirs, gathered: its free space and the largest checkpoint already in it)."""
    return [(cmd, d) for cmd in commands(snap) for d in cmd.get("save_dirs") or () if isinstance(d, dict)]


def gpu_ordinals_asked(snap) -> list:
    """[(highest ordinal asked, option as written, program)] for the recorded commands' training-program GPU options:
    an ordinal option asks for its largest number, a count N (or a plural '--gpus N') for ordinal N-1."""
    out = []
    for cmd in commands(snap):
        for option, value in (cmd.get("script_gpus") or {}).items():
            nums = _ordinals_in([value])
            key = str(option).lstrip("-").replace("-", "_")
            if not nums:
                continue
            count = _GPU_COUNT_OPTION.match(key) or (key.lower() in _PLURAL_COUNT and len(nums) == 1)
            top = max(nums) - 1 if count else max(nums)
            if top >= 0:
                out.append((top, f"{cmd.get('program') or 'the training program'} {option} {value}", cmd.get("program")))
    return out


def loader_workers_asked(snap) -> Optional[tuple]:
    """(count, option as written) for the largest DataLoader worker count the recorded training program's command line
    asks for (data/loader_workers.json options: --num_workers 32, --workers 8, --dataloader_num_workers 4), else None."""
    names = _loader_worker_options()
    best = None
    for cmd in commands(snap):
        for option, value in (cmd.get("script_options") or {}).items():
            key = str(option).lstrip("-").replace("-", "_")
            count = whole_number(str(value).strip()) if key in names else None
            if isinstance(count, int) and count > 0 and (best is None or count > best[0]):
                best = (count, f"{cmd.get('program') or 'the training program'} --{option.lstrip('-')} {value}")
    return best


def precision_asked(snap) -> list:
    """[(precision, where)] the recorded launch commands ask for: accelerate launch's --mixed_precision (exported to
    the workers as ACCELERATE_MIXED_PRECISION: accelerate/utils/launch.py prepare_simple_launcher_cmd_env) and the
    training program's --bf16 / --fp16 [True], --mixed_precision X, --precision bf16-mixed."""
    out = []
    for cmd in commands(snap):
        opts, prog = cmd.get("options") or {}, cmd.get("script_options") or {}
        if cmd.get("launcher") == "accelerate" and opts.get("mixed_precision"):
            out.append((str(opts["mixed_precision"]).lower(), f"accelerate launch --mixed_precision {opts['mixed_precision']}"))
        for key in ("bf16", "fp16", "fp8"):
            if str(prog.get(key, "")).lower() in ("1", "true", "yes"):
                out.append((key, f"{cmd.get('program') or 'the training script'} --{key}"
                                 + ("" if prog[key] == "1" else f" {prog[key]}")))
        for key in ("mixed_precision", "precision"):
            word = str(prog.get(key, "")).lower()
            for p in ("bf16", "fp8"):
                if word.startswith(p) or (p == "fp8" and word == "transformer-engine"):
                    out.append((p, f"{cmd.get('program') or 'the training script'} --{key} {prog[key]}"))
            if word in ("fp16", "16", "16-mixed", "16-true"):  # accelerate's PrecisionType, Lightning's _PRECISION_INPUT
                out.append(("fp16", f"{cmd.get('program') or 'the training script'} --{key} {prog[key]}"))
    return out


def fp16_asked(snap) -> list:
    """[(where, subject)] of every ask for fp16 (mixed) precision this job makes: ACCELERATE_MIXED_PRECISION=fp16 in
    the environment, the recorded launch (accelerate launch --mixed_precision fp16, the program's --fp16 [True],
    --precision 16-mixed), and the training script's or config's literals (lint.scriptfacts / configfacts `precision`
    rows: TrainingArguments(fp16=True), `fp16: true`, DeepSpeed's fp16.enabled)."""
    from ddpdoctor.facts.env import script_asks  # noqa: PLC0415

    out = []
    if str(env_of(snap).get("ACCELERATE_MIXED_PRECISION", "")).strip().lower() == "fp16":
        out.append(("ACCELERATE_MIXED_PRECISION=fp16", "ACCELERATE_MIXED_PRECISION"))
    for precision, where in precision_asked(snap):
        if precision == "fp16":
            out.append((where, "launch:" + where.split()[0]))
    for row in script_asks(snap, "precision"):
        if row.get("precision") == "fp16":
            path = str(row.get("path") or "")
            config = path.lower().endswith((".yml", ".yaml", ".json", ".toml"))
            out.append((f"{path}:{row.get('line')} {row.get('what')}", f"{'path' if config else 'script'}:{path}"))
    return out


@functools.lru_cache(maxsize=1)
def sudo_table() -> dict:
    """data/launchers.json `sudo`: how sudo rebuilds the environment of the command it runs (sudo's env.c)."""
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "launchers.json"),
              encoding="utf-8") as fh:
        return json.load(fh).get("sudo") or {}


def strip_sudo(argv: list):
    """(sudo facts or None, the command sudo runs) for `sudo [options] [VAR=value ...] command ...`: the facts are
    {"preserve_env": -E/--preserve-env given, "assigns": the VAR=value words sudo sets}; (None, argv) otherwise."""
    argv = [str(a) for a in argv or []]
    if not argv or os.path.basename(argv[0]) != "sudo":
        return None, argv
    table = sudo_table()
    takes = set(table.get("options_with_value") or ())
    keep = set(table.get("preserve_env_options") or ())
    facts = {"preserve_env": False, "assigns": []}
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        word = argv[i]
        if word.split("=", 1)[0] in keep:
            facts["preserve_env"] = True
        i += 2 if word in takes else 1
    if i < len(argv) and argv[i] == "--":
        i += 1
    while i < len(argv) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[i]):
        facts["assigns"].append(argv[i].split("=", 1)[0])
        i += 1
    return facts, argv[i:]


def parse_command(argv: list) -> Optional[dict]:
    """{launcher, options, program} for a launcher's command line, else None. `options` holds the launcher's own
    options that KEPT names, as strings (a flag: "1"); `program` is the first word after them (the script). Under
    `sudo ...` the command sudo runs, with `sudo` (strip_sudo's facts) added; a command that is neither a launcher
    nor python (`sudo sh build.sh`) is kept as {"launcher": its program word, "program": the shell's script}."""
    sudo, rest = strip_sudo(argv)
    if sudo is not None:
        cmd = _parse_command(rest) or parse_program(rest)
        if cmd is None and rest:  # `sudo sh build.sh`, `sudo make`: the program word stands for the launcher
            shell = os.path.basename(rest[0]) in ("sh", "bash", "dash", "zsh") and len(rest) > 1
            cmd = {"launcher": os.path.basename(rest[0]), "options": {}, "program": rest[1] if shell else rest[0]}
        return dict(cmd, sudo=sudo, program_word=rest[0]) if cmd is not None else None
    from ddpdoctor.facts.launchers import mpi_command  # noqa: PLC0415

    return _parse_command(argv) or mpi_command(argv)


def _parse_command(argv: list) -> Optional[dict]:
    argv = [str(a) for a in argv or []]
    kind, i = which_launcher(argv)
    if kind is None:
        # an inference server started as its own launcher (`vllm serve M -tp 4`, `python -m sglang.launch_server
        # --nnodes 2 ...`): recorded with its engine facts, as `check -- CMD` records it (pipeline.check)
        serving = serving_command(argv)
        if not serving:
            return container_command(argv)
        out = {"launcher": serving["engine"], "options": {}, "program": None, "serving": serving}
        if serving.get("model"):
            out["script_models"] = {serving["model_option"]: serving["model"]}
        return out
    flags, kept, short = _FLAGS[kind], KEPT[kind], _SHORT.get(kind, {})
    options: dict = {}
    program = None
    rest: list = []
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or tok == "--":
            program = argv[i + 1] if tok == "--" and i + 1 < len(argv) else tok
            rest = argv[i + (2 if tok == "--" else 1):]
            break
        name, eq, value = tok.partition("=")
        if name in short and not eq:
            key = short[name]
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
        elif eq:
            key = name.lstrip("-").replace("-", "_")
            i += 1
        elif tok in flags or kind == "srun" and name.lstrip("-").replace("-", "_") not in kept:
            key, value = name.lstrip("-").replace("-", "_"), "1"
            i += 1
        else:
            key = name.lstrip("-").replace("-", "_")
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 2
        if key in kept:
            options[key] = value
    out = {"launcher": kind, "options": options, "program": program}
    if kind == "srun":
        return out  # srun's program is the next launcher (or the script): its arguments are that command's
    return _with_program_options(out, rest)


def _loader_worker_options() -> set:
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "loader_workers.json")
    with open(path, encoding="utf-8") as fh:
        return set(json.load(fh)["options"])


def script_loader_workers(args: list) -> dict:
    """{option: count} for a training program's DataLoader worker options (data/loader_workers.json: --num_workers 32,
    --workers 8), a whole number only."""
    names = _loader_worker_options()
    out: dict = {}
    for name, key, words, _eq in program_options(args):
        if name.startswith("--") and key in names and words and whole_number(str(words[0]).strip()) is not None:
            out[key] = str(words[0]).strip()
    return out


def _with_program_options(out: dict, rest: list) -> dict:
    asked = dict(script_precision(rest), **script_loader_workers(rest))
    if asked:
        out["script_options"] = asked
    gpus = script_gpu_options(rest)
    if gpus:
        out["script_gpus"] = gpus
    dirs = script_save_dirs(rest)
    if dirs:
        out["script_dirs"] = dirs
    models = script_model_dirs(rest)
    if models:
        out["script_models"] = models
    ds = script_deepspeed_config(rest)
    if ds:
        out["script_deepspeed"] = ds
    trainer = script_trainer_args(rest)
    if trainer:
        out["script_trainer_args"] = trainer
    if os.path.basename(str(out.get("program") or "")) == "setup.py":  # check27: `python setup.py build develop`
        words = [w for w in rest if not w.startswith("-")][:8]
        if words:
            out["setup_commands"] = words
    return out


def _trainer_options() -> frozenset:
    """data/trainer_args.json options: Hugging Face TrainingArguments fields as HfArgumentParser options."""
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "trainer_args.json"),
              encoding="utf-8") as fh:
        return frozenset(json.load(fh)["options"])


TRAINER_OPTIONS = _trainer_options()


def script_trainer_args(args: list) -> list:
    """The Hugging Face TrainingArguments options (data/trainer_args.json) a training program's arguments pass, as
    `--name` in the order given; names only, no values."""
    out: list = []
    for name, key, _words, _eq in program_options(args):
        if name.startswith("--") and key in TRAINER_OPTIONS and "--" + key not in out:
            out.append("--" + key)
    return out


# the interpreter's own options that take a value (python -W x, -X y, -c/-m end the options: not a script)
_PY_VALUE_OPTIONS = {"-W", "-X", "--check-hash-based-pycs"}


def pip_local_build(argv: list) -> list:
    """["install", <target>] for `pip install [-e] <a local source tree>` (`.`, `./pkg`, `/abs/pkg`; also `python -m pip
    install .`): pip builds it with its setup.py/pyproject backend now, which runs setuptools' build_ext for its
    extensions (check27, PKG014's builders); [] for anything else (an index package may come as a wheel: not a build)."""
    argv = [str(a) for a in argv or []]
    i = 1 if argv and os.path.basename(argv[0]) in ("pip", "pip3") else 0
    if not i and len(argv) > 2 and os.path.basename(argv[0]).startswith("python") and argv[1:3] == ["-m", "pip"]:
        i = 3
    if not i or i >= len(argv) or argv[i] != "install":
        return []
    skip = False
    for word in argv[i + 1:]:
        if skip:
            skip = False
        elif word in _PIP_VALUE_OPTIONS:
            skip = True  # -r ./requirements.txt: a list of packages, not a tree to build
        elif word.startswith(".") or word.startswith("/") or word.startswith("~"):
            return ["install", word]
    return []


# pip install's options that take a value (pip/_internal/cli/cmdoptions.py): their value is not a target
_PIP_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-f", "--find-links", "-t", "--target", "--prefix",
                      "--root", "-i", "--index-url", "--extra-index-url", "--cache-dir", "--log", "--src",
                      "--config-settings", "-C", "--global-option", "--install-option", "--report"}


def parse_program(argv: list) -> Optional[dict]:
    """{launcher: "python", options: {}, program, script_options?, script_gpus?} for `python [opts] script.py args` (a
    training program started without a launcher: `ddpdoctor check -- python train.py -gpuid 1`), with `module` instead
    of `program` for `python -m package.module args`, else None."""
    argv = [str(a) for a in argv or []]
    local = pip_local_build(argv)
    if local:
        return {"launcher": "pip", "options": {}, "program": None, "setup_commands": local}
    if not argv or not os.path.basename(argv[0]).startswith("python"):
        return None
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "-m" and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            # check30: `python -m package.module args` runs a library's own entry point (recorded as `module`)
            return _with_program_options({"launcher": "python", "options": {}, "program": None,
                                          "module": argv[i + 1]}, argv[i + 2:])
        if argv[i] in ("-c", "-m", "-"):
            return None
        i += 2 if argv[i] in _PY_VALUE_OPTIONS else 1
    if i >= len(argv):
        return None
    return _with_program_options({"launcher": "python", "options": {}, "program": argv[i]}, argv[i + 1:])


def commands(snap) -> list:
    """The parsed launcher commands recorded in the snapshot's `launch` section, nearest ancestor first."""
    launch = snap.get("launch") or {}
    if not isinstance(launch, dict) or launch.get("error") or launch.get("unavailable"):
        return []
    return [c for c in launch.get("commands") or [] if isinstance(c, dict) and isinstance(c.get("options"), dict)]


def command_of(snap, launcher: str) -> Optional[dict]:
    """The nearest recorded command of `launcher`, or None."""
    return next((c for c in commands(snap) if c.get("launcher") == launcher), None)


def _int(raw) -> Optional[int]:
    try:
        return int(str(raw).strip().rsplit(":", 1)[-1])
    except (TypeError, ValueError):
        return None


def torchrun_nproc(snap) -> Optional[int]:
    """torchrun's --nproc-per-node from a recorded torchrun command (or the PET_NPROC_PER_NODE it reads when the
    command does not give it), when it is a number (not gpu/auto/cpu)."""
    cmd = command_of(snap, "torchrun")
    if not cmd:
        return None
    # an option the command line does not give is read from PET_<DEST> (torch/distributed/argparse_util.py env,
    # data/launchers.json elastic_worker_visible_devices): PET_NPROC_PER_NODE=4 with a bare `torchrun train.py`
    raw = str(cmd["options"].get("nproc_per_node") or env_of(snap).get("PET_NPROC_PER_NODE") or "").strip()
    n = whole_number(raw)
    return n if n else None


# Which port a launch binds its rendezvous store on, from the launchers' own code:
# - torchrun reads --master-port (PET_MASTER_PORT; default 29500), never MASTER_PORT: torch/distributed/run.py
#   get_args_parser() @ f34fa1515024; `--standalone` is c10d on localhost:0, "picks a free port"
#   (run.py, the --standalone help); a c10d --rdzv-endpoint of port 0 the same.
# - accelerate launch: --main_process_port 0 -> get_free_port(); unset -> 29500; on one machine a port in use makes it
#   fall back to a free port itself ("Accelerate will attempt to launch in a standalone-like mode by finding an open
#   port automatically"): huggingface/accelerate src/accelerate/utils/launch.py prepare_multi_gpu_env /
#   prepare_deepspeed_cmd_env @ e7998c9fbcdb7ee72d3de9b57e9d4fde73964b8c (older releases raise ConnectionError there).
DEFAULT_STORE_PORT = 29500


def bound_port(snap) -> Optional[dict]:
    """{port, by, free, fallback} for the nearest recorded launch command when it is torchrun or accelerate launch:
    `port` the one its store binds (None when the launcher picks a free port itself: `free`), `by` the option or
    default that says so, `fallback` True where the launcher moves to a free port itself when that one is taken
    (accelerate on one machine). None when the nearest launch is another (or none is recorded): MASTER_PORT decides."""
    cmds = commands(snap)
    if not cmds or cmds[0].get("launcher") not in ("torchrun", "accelerate"):
        return None
    cmd = cmds[0]
    opts = cmd.get("options") or {}
    if cmd["launcher"] == "torchrun":
        env = launch_env(snap)
        if opts.get("standalone"):
            return {"port": None, "by": "torchrun --standalone", "free": True, "fallback": False}
        if env.get("PET_RDZV_BACKEND", "static") != "static":
            endpoint = str(env.get("PET_RDZV_ENDPOINT") or "")
            port = _int(endpoint) if ":" in endpoint else None
            if port == 0:
                return {"port": None, "by": f"torchrun --rdzv-endpoint {endpoint}", "free": True, "fallback": False}
            return None  # the store is served at the endpoint's host: not necessarily this one
        port = _int(env.get("PET_MASTER_PORT")) if env.get("PET_MASTER_PORT") is not None else DEFAULT_STORE_PORT
        by = "torchrun --master-port" if opts.get("master_port") is not None else \
            ("PET_MASTER_PORT" if env.get("PET_MASTER_PORT") is not None else "torchrun's default")
        return {"port": port, "by": by, "free": False, "fallback": False}
    config = {}
    if opts.get("config_file"):
        if opts.get("main_process_port") is None:
            return None  # its own config file, not read here, may name the port
    else:  # the default config file accelerate reads without --config_file (gather.host accelerate_config)
        config = ((snap.get("host") or {}).get("accelerate_config") or {}).get("values") or {}
    raw = opts.get("main_process_port")
    by = "accelerate launch --main_process_port" if raw is not None else "accelerate launch's default"
    if raw is None and config.get("main_process_port") is not None:
        raw, by = config["main_process_port"], "main_process_port in the accelerate config"
    port = _int(raw) if raw is not None else DEFAULT_STORE_PORT
    if port == 0:
        return {"port": None, "by": f"{by} 0", "free": True, "fallback": False}
    machines_raw = opts.get("num_machines", config.get("num_machines"))
    machines = _int(machines_raw) if machines_raw is not None else 1
    return {"port": port, "by": by, "free": False, "fallback": (machines or 1) <= 1}


def per_node_processes(snap) -> Optional[tuple]:
    """(processes on this node, how the command says so) for the nearest recorded `accelerate launch` or `deepspeed`
    command that declares a number, else None:
    - accelerate launch in its multi-process mode (--multi_gpu, --use_deepspeed/--use_fsdp, or the config's
      distributed_type: accelerate_launch_mode) with --num_processes N (or the default config's num_processes): N
      over --num_machines (accelerate/utils/launch.py prepare_multi_gpu_env: nproc_per_node = num_processes //
      num_machines @ e7998c9fbcdb7ee72d3de9b57e9d4fde73964b8c);
    - deepspeed --num_gpus N: N ranks on every host, cuda 0..N-1 whatever the host has (deepspeed/launcher/runner.py
      main(): `updated_active_resources[hostname] = list(range(args.num_gpus))` @ 2d991ba352b7); only where
      CUDA_VISIBLE_DEVICES is unset (the runner drops it under --num_gpus: ENV016's case);
    - deepspeed with none of --num_gpus, --include, --exclude, --hostfile and one node: one rank per visible GPU
      (runner.py main() @ 2d991ba352b7: with no hostfile, resource_pool['localhost'] = the accelerator's
      device_count(), and a set CUDA_VISIBLE_DEVICES becomes --include=localhost:<it>).
    The launch a process runs under comes first: only the nearest command is read."""
    cmds = commands(snap)
    if not cmds:
        return None
    cmd = cmds[0]
    opts = cmd.get("options") or {}
    if cmd.get("launcher") == "deepspeed":
        n = _int(opts.get("num_gpus")) if opts.get("num_gpus") not in (None, "") else None
        if n and n > 0 and env_of(snap).get("CUDA_VISIBLE_DEVICES") is None and not opts.get("include") \
                and not opts.get("exclude"):
            return n, f"deepspeed --num_gpus {n}"
        machines = _int(opts.get("num_nodes")) if opts.get("num_nodes") not in (None, "") else None
        if opts.get("num_gpus") in (None, "") and not any(opts.get(k) for k in ("include", "exclude", "hostfile")) \
                and (machines is None or machines == 1):
            gpus = snap.get("gpus") or {}
            present = {d.get("index") for d in devices_of(gpus)}
            visible = len([i for i in resolve(env_of(snap), gpus).nvml_indices if i in present])
            if visible:
                return visible, (f"deepspeed with no --num_gpus/--include: one rank per visible GPU ({visible}; "
                                 "runner.py main() takes the accelerator's device count, or CUDA_VISIBLE_DEVICES as "
                                 "--include, unless a /job/hostfile lists other slots)")
        return None
    if cmd.get("launcher") != "accelerate":
        return None
    default = not opts.get("config_file")
    config = (((snap.get("host") or {}).get("accelerate_config") or {}).get("values") or None) if default else None
    if not default:
        return None  # its own config file, not read here
    mode = accelerate_launch_mode(cmd, config, default_config=True)
    if not mode or mode.get("mode") != "multi" or not mode.get("asked"):
        return None
    machines_raw = opts.get("num_machines", (config or {}).get("num_machines") if mode.get("config_used") else None)
    machines = _int(machines_raw) if machines_raw not in (None, "") else 1
    if not machines or machines < 1:
        return None
    n = mode["asked"] // machines
    said = f"accelerate launch --num_processes {mode['asked']}" + (f" --num_machines {machines}" if machines > 1 else "")
    return (n, said) if n > 0 else None


def launch_env(snap) -> Mapping[str, str]:
    """The environment as torchrun reads its options: the PET_* variables, with the options of a torchrun command in
    the launch section over them (an option given on the command line wins over its PET_ variable), `--standalone`
    as torch expands it (c10d, localhost:0, one node). The environment itself when no torchrun command is recorded."""
    env = env_of(snap)
    cmd = command_of(snap, "torchrun")
    if not cmd:
        return env
    out = dict(env)
    opts = cmd["options"]
    for key, value in opts.items():
        out["PET_" + key.upper()] = str(value)
    if opts.get("standalone"):
        out.update({"PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "localhost:0", "PET_NNODES": "1"})
    elif not out.get("PET_RDZV_BACKEND"):
        out["PET_RDZV_BACKEND"] = "static"  # the parser's default
    return out


def described(cmd: dict) -> str:
    """`torchrun --nproc-per-node 8 --nnodes 2` as recorded (its kept options only)."""
    opts = " ".join(f"--{k.replace('_', '-')}" + ("" if v == "1" and k in ("standalone", "multi_gpu") else f" {v}")
                    for k, v in cmd.get("options", {}).items())
    return f"{cmd.get('launcher')} {opts}".strip()


def _on(value) -> bool:
    return str(value if value is not None else "").strip().lower() in ("1", "true", "yes")


def accelerate_launch_mode(cmd: Optional[dict], config: Optional[dict], default_config: bool = False,
                           devices: Optional[int] = None) -> Optional[dict]:
    """How `accelerate launch` will start the job, decided as its launch.py decides (data/launchers.json's
    accelerate "launch_modes", with its source): {"asked": N or None, "mode": "multi" | "mpirun" | "simple" |
    "sagemaker" | "unknown", "config_used": bool, "why": words}. "simple" is simple_launcher: ONE process.
    `cmd`: parse_command's record of the launch; `config`: the config file accelerate reads (its --config_file, else
    the default one), parsed, or None; `default_config`: whether `config` is the default file (accelerate skips it
    under --cpu); `devices`: the GPUs the launcher sees (None: not known). None when `cmd` is not accelerate's."""
    if not cmd or cmd.get("launcher") != "accelerate":
        return None
    from ddpdoctor.facts.launchers import launchers

    row = next((r for r in launchers() if r["name"] == "accelerate"), {})
    table = row.get("launch_modes") or {}
    opts = cmd.get("options") or {}
    cpu = _on(opts.get("cpu"))
    used = config is not None and (not default_config or not cpu)
    flags = [k for k in ("multi_gpu", "use_deepspeed", "use_fsdp", "use_megatron_lm", "tpu") if _on(opts.get(k))]
    why = f"--{flags[0]}" if flags else ""
    if used and not flags:
        dtype = str(config.get("distributed_type") or "NO").upper().replace("DISTRIBUTEDTYPE.", "")
        if dtype in table.get("multi_process_types", ()) or dtype in table.get("own_launcher_types", ()):
            flags, why = [dtype], f"distributed_type: {dtype} in the config file"
        else:
            why = f"distributed_type: {dtype} in the config file"
    asked = _int(opts.get("num_processes")) if opts.get("num_processes") not in (None, "") else None
    if asked is None and used:
        asked = _int(config.get("num_processes"))
    if not used:
        if asked is None and devices is not None:
            asked = max(devices, 1)
        if not flags and asked is not None and asked > 1:
            if devices is None:
                return {"asked": asked, "mode": "unknown", "config_used": False,
                        "why": "no config file and no --multi_gpu; the GPUs the launcher sees are not known"}
            if devices > 1:
                flags, why = ["auto"], f"{devices} GPUs visible (accelerate turns --multi_gpu on)"
    hostfile = opts.get("mpirun_hostfile") or (((config or {}).get("mpirun_config") or {}).get("mpirun_hostfile")
                                               if used else None)
    if used and str(config.get("compute_environment") or "").upper() == "AMAZON_SAGEMAKER" and not (flags and not cpu):
        return {"asked": asked, "mode": "sagemaker", "config_used": True, "why": "compute_environment: AMAZON_SAGEMAKER"}
    if flags and not cpu:
        return {"asked": asked, "mode": "multi", "config_used": used, "why": why}
    if cpu:
        why = "--cpu" + (f" (it overrides {why})" if flags else "")
    elif not why:
        why = "no --multi_gpu and no config file" if not used else why
    return {"asked": asked, "mode": "mpirun" if hostfile else "simple", "config_used": used, "why": why}


@functools.lru_cache(maxsize=1)
def model_weights(snap) -> list:
    """[(bytes, files, option, path)] of the checkpoints the recorded launch commands load, as gathered beside their
    config.json (model_configs[].weights_bytes; data/precision_calls.json model_config.weights)."""
    out = []
    for cmd in commands(snap):
        for m in cmd.get("model_configs") or []:
            n = m.get("weights_bytes") if isinstance(m, dict) else None
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                out.append((n, m.get("weights_files"), m.get("option"), m.get("path")))
    return out


def serving_table() -> dict:
    """data/serving.json: the inference servers check reads a launch of (vLLM, SGLang), their options and rules."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "serving.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _option_value(args: list, names: list) -> Optional[str]:
    """The value of the last of `names` in `args` (`--opt v` or `--opt=v`), as argparse keeps the last one."""
    found = None
    for i, word in enumerate(args):
        for name in names:
            if word == name and i + 1 < len(args):
                found = args[i + 1]
            elif word.startswith(name + "="):
                found = word.split("=", 1)[1]
    return found


def serving_command(argv: list) -> Optional[dict]:
    """{engine, model, model_option, tensor_parallel, pipeline_parallel} for an inference-server launch (`vllm serve
    MODEL -tp 4`, `python -m vllm.entrypoints.openai.api_server --model M`, `python -m sglang.launch_server
    --model-path M --tp-size 2`; data/serving.json), else None. A parallel size is an int, or None when not given
    (the engine's default is 1) or not a number."""
    words = [str(w) for w in argv]
    if not words:
        return None
    base = os.path.basename(words[0])
    for row in serving_table()["engines"]:
        rest = None
        for command in row["commands"]:
            parts = command.split()
            if base == parts[0] and words[1:len(parts)] == parts[1:]:
                rest = words[len(parts):]
        if rest is None and base.startswith("python") and "-m" in words:
            i = words.index("-m")
            if i + 1 < len(words) and words[i + 1] in row["modules"]:
                rest = words[i + 2:]
        if rest is None:
            continue
        model, option = _option_value(rest, row["model_options"]), None
        if model is not None:
            option = next(n for n in row["model_options"] if n in rest or any(w.startswith(n + "=") for w in rest))
        elif row.get("model_positional_after") and rest and not rest[0].startswith("-"):
            model, option = rest[0], row["model_positional_after"]

        def size(names):
            raw = _option_value(rest, names)
            return whole_number(raw.strip()) if raw is not None else None

        return {"engine": row["name"], "model": model, "model_option": option,
                "dtype": _option_value(rest, row.get("dtype_options") or []),
                "multi_node": _multi_node(rest, row.get("multi_node") or {}),
                "nodes": _node_count(rest, row.get("multi_node") or {}),
                "tensor_parallel": size(row["tensor_parallel_options"]),
                "pipeline_parallel": size(row["pipeline_parallel_options"]),
                **({"peer_memory": pm} if (pm := _peer_memory(rest, row.get("peer_memory") or {})) else {}),
                **({"eager": any(w.split("=", 1)[0] in row["eager_options"] for w in rest)}
                   if row.get("eager_options") else {})}
    return None


def _peer_memory(args: list, rule: dict) -> Optional[str]:
    """'--moe-a2a-backend deepep' when the server's options choose a backend that maps every local peer GPU's memory
    directly (data/serving.json peer_memory: DeepEP's CUDA IPC buffers need P2P between every pair), else None."""
    for option, wanted in (rule.get("options") or {}).items():
        value = _option_value(args, [option])
        if value is not None and value.strip().lower() in wanted:
            return f"{option} {value.strip()}"
    return None


def _multi_node(args: list, rule: dict) -> bool:
    """Whether the server's own options spread it over several nodes (data/serving.json multi_node.options: an option
    with the value it must have, '*' for a count above 1)."""
    for option, want in (rule.get("options") or {}).items():
        got = _option_value(args, [option])
        if got is None:
            continue
        if want == "*" and (whole_number(got.strip()) or 0) > 1 or want != "*" and got.strip().lower() == want:
            return True
    return False


def _node_count(args: list, rule: dict) -> Optional[int]:
    """The node count the server's own options give (a multi_node option whose value is a count, '*' in
    data/serving.json: SGLang's --nnodes), else None."""
    for option, want in (rule.get("options") or {}).items():
        got = _option_value(args, [option]) if want == "*" else None
        if got is not None and whole_number(got.strip()) is not None:
            return whole_number(got.strip())
    return None


def serving_host_ip(snap) -> list:
    """[(serving fact, host_ip rule)] for the recorded inference-server launches whose engine picks the address it
    publishes to its other processes by itself (data/serving.json engines[].host_ip: vLLM's get_ip(), SGLang's
    get_local_ip_auto(): an override variable, else the default route's source address)."""
    rules = {row["name"]: row.get("host_ip") for row in serving_table()["engines"]}
    return [(srv, rules[srv.get("engine")]) for _cmd, srv in serving_of(snap) if rules.get(srv.get("engine"))]


def tunnel_interface(iface: dict) -> bool:
    """A VPN / tunnel interface (data/serving.json host_ip_tunnels): a point-to-point IPv4 netmask (/32) or a tunnel
    device's name."""
    rule = serving_table().get("host_ip_tunnels") or {}
    if str(iface.get("name", "")).startswith(tuple(rule.get("prefixes") or ())):
        return True
    return any(a.get("family") == "ipv4" and a.get("netmask") == "255.255.255.255" for a in iface.get("addresses") or [])


def serving_nodes(snap) -> Optional[tuple]:
    """(engine, nodes) for a recorded inference-server launch whose own options spread it over nodes > 1."""
    for _cmd, srv in serving_of(snap):
        if isinstance(srv.get("nodes"), int) and srv["nodes"] > 1:
            return srv.get("engine"), srv["nodes"]
    return None


def nccl_graph_capture(snap) -> Optional[str]:
    """How the recorded launch calls NCCL inside a CUDA graph capture, else None: an inference server whose engine
    captures CUDA graphs unless told to run eagerly (data/serving.json eager_options, graph_capture: vLLM without
    --enforce-eager), with a tensor-parallel size above 1 (its all-reduce is captured)."""
    for _cmd, srv in serving_of(snap):
        tp = srv.get("tensor_parallel")
        if srv.get("eager") is False and isinstance(tp, int) and tp > 1:
            return f"{srv.get('engine')} --tensor-parallel-size {tp} without --enforce-eager (CUDA graphs)"
    return None


def serving_of(snap) -> list:
    """[(command, serving fact)] for the recorded inference-server launches (commands[].serving)."""
    return [(cmd, cmd["serving"]) for cmd in commands(snap) if isinstance(cmd.get("serving"), dict)]


@functools.lru_cache(maxsize=1)
def container_table() -> dict:
    """data/containers.json: the container CLIs' run commands and the options that ask the host for NVIDIA GPUs."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "containers.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def container_command(argv: list) -> Optional[dict]:
    """{launcher: <runtime>, options: {gpus?: value, cdi_gpus?: value}, program: image, container: {runtime, command,
    gpu_request}} for `docker run [opts] IMAGE ...` (and podman/nerdctl, data/containers.json), else None. A GPU
    request is `--gpus V` / `--gpus=V`, or a CDI device `--device nvidia.com/gpu=...`; the image is the first word
    that is not an option nor the value of one the table lists (`value_options`, docker's common ones: an unlisted
    option's value may be taken for the image, which only the `program` field shows)."""
    argv = [str(a) for a in argv or []]
    if not argv:
        return None
    first = os.path.basename(argv[0])
    for row in container_table()["runtimes"]:
        for command in row["commands"]:
            parts = command.split()
            if first != parts[0] or argv[1:len(parts)] != parts[1:]:
                continue
            rest = argv[len(parts):]
            options: dict = {}
            image = None
            i = 0
            while i < len(rest):
                name, eq, value = rest[i].partition("=")
                if not rest[i].startswith("-"):
                    image = rest[i]
                    break
                if name in row["gpu_options"] or name == "--device":
                    value = value if eq else (rest[i + 1] if i + 1 < len(rest) else "")
                    i += 1 if eq else 2
                    if name == "--device":
                        if value.startswith(row["cdi_device_prefix"]):
                            options["cdi_gpus"] = value
                    else:
                        options["gpus"] = value
                    continue
                i += 1 if eq or name not in row.get("value_options", ()) else 2
            request = (f"{name_of(row, options)}") if options else None
            return {"launcher": row["name"], "options": options, "program": image,
                    "container": {"runtime": row["name"], "command": command, "gpu_request": request}}
    return None


def name_of(row: dict, options: dict) -> str:
    """`--gpus=all` / `--device nvidia.com/gpu=all` as the command wrote the request."""
    if "gpus" in options:
        return f"--gpus={options['gpus']}"
    return f"--device {options['cdi_gpus']}"


def container_gpu_request(snap) -> Optional[dict]:
    """The nearest recorded container launch that asks for GPUs: {runtime, command, gpu_request, row}, else None."""
    for cmd in commands(snap):
        box = cmd.get("container")
        if isinstance(box, dict) and box.get("gpu_request"):
            row = next((r for r in container_table()["runtimes"] if r["name"] == box.get("runtime")), None)
            return dict(box, row=row)
    return None


def deepspeed_active_hosts(hosts: list, include=None, exclude=None) -> list:
    """The hostfile's hosts that DeepSpeed's runner keeps, in hostfile order (runner.py parse_inclusion_exclusion):
    with -i/--include only the hosts it names (`h1:0,1@h2`), with -e/--exclude all but the hosts it names whole (a
    host with a slot list keeps its other slots)."""
    def named(spec) -> list:
        return [part.split(":", 1)[0].strip() for part in str(spec or "").split("@") if part.strip()]

    if include:
        wanted = set(named(include))
        return [h for h in hosts if h in wanted]
    whole = {part.strip() for part in str(exclude or "").split("@") if part.strip() and ":" not in part}
    return [h for h in hosts if h not in whole]


def deepspeed_master(snap) -> Optional[dict]:
    """{host, hostfile, resolved} for a recorded `deepspeed` command with no --master_addr that reads a hostfile: the
    first active host, which its runner reaches over ssh and takes as the master (data/launchers.json
    deepspeed_master_from_hostfile), with that host's resolution here: the command's own `master_resolved`, else
    network.master_addr when it resolved that same host (no MASTER_ADDR on the launching host); None otherwise."""
    cmd = command_of(snap, "deepspeed")
    if cmd is None or (cmd.get("options") or {}).get("master_addr"):
        return None
    opts = cmd.get("options") or {}
    hostfile = cmd.get("hostfile")
    if not isinstance(hostfile, dict):
        gathered = (snap.get("host") or {}).get("deepspeed_hostfile") if "host" in snap else None
        asked = opts.get("hostfile")
        if not isinstance(gathered, dict) or (asked and os.path.normpath(str(asked)) != gathered.get("path")):
            return None
        hostfile = gathered
    active = deepspeed_active_hosts(list(hostfile.get("hosts") or {}), opts.get("include"), opts.get("exclude"))
    if not active:
        return None
    resolved = cmd.get("master_resolved")
    if not isinstance(resolved, dict):
        net = (snap.get("network") or {}) if "network" in snap else {}
        resolved = net.get("master_addr") if (net.get("master_addr") or {}).get("host") == active[0] else None
    return {"host": active[0], "hostfile": hostfile.get("path"), "resolved": resolved}


def deepspeed_hostfile_of(snap) -> Optional[dict]:
    """The hostfile a recorded deepspeed launch reads ({path, hosts, errors}): the one its --hostfile names, read with
    the command (gather.launch.deepspeed_command_facts), else the gathered default /job/hostfile when the command
    names no other (or no deepspeed command is recorded); None when the file it reads was not read."""
    host = (snap.get("host") or {}) if "host" in snap else {}
    gathered = host.get("deepspeed_hostfile") if isinstance(host.get("deepspeed_hostfile"), dict) else None
    cmd = command_of(snap, "deepspeed")
    if cmd is None:
        return gathered
    if isinstance(cmd.get("hostfile"), dict):
        return cmd["hostfile"]
    asked = str((cmd.get("options") or {}).get("hostfile") or "").strip()
    path = str((gathered or {}).get("path") or "")
    if asked and gathered and (os.path.normpath(asked) != os.path.normpath(path) if os.path.isabs(asked)
                               else os.path.basename(asked) != os.path.basename(path)):
        return None
    return gathered
