"""Settings of the whole stack, judged against the settings catalogue (facts.settings): misspelt names,
values their reader rejects or misreads (PYTORCH_CUDA_ALLOC_CONF with torch's own grammar), deprecated
names, debugging settings left on (graded by the number of ranks), and settings that fight each other.

NCCL's, ProcessGroupNCCL's and c10d's variables keep their own checks for names, values and
deprecations (checks/nccl.py, NCCL001-003); the cost and conflict checks here cover every family.
"""
from __future__ import annotations

from ddpdoctor.facts import ranks
from ddpdoctor.facts import settings as catalog
from ddpdoctor.facts.env import env_of, script_asks
from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check

FAMILY = "settings"
WHO = {"nccl": "NCCL", "torch": "torch", "cuda": "the CUDA runtime", "transformers": "transformers",
       "accelerate": "accelerate", "tokenizers": "tokenizers", "deepspeed": "DeepSpeed"}
MAKE = {"error": error, "warning": warning, "info": info}


def _nccl_owned(name: str) -> bool:
    """Names another check validates: NCCL003 the distributed families', ENV010 the launcher's rank variables."""
    return catalog.distributed(name) or name in ranks.RANK_ENV_NAMES


def _world(snap) -> int:
    return int(ranks.world_size(snap).value or 1)


@check("SET001", "misspelt-setting", family=FAMILY, needs=("env",))
def misspelt_setting(snap):
    """A variable that no library reads, one letter or two away from one that torch, CUDA,
    transformers, accelerate, tokenizers or DeepSpeed reads.

    What it checks
        Every set variable under the prefixes these libraries own (TORCH_, PYTORCH_, PET_, CUDA_,
        TRANSFORMERS_, ACCELERATE_, TOKENIZERS_, DS_...) and names whose prefix is itself misspelt
        (NCLL_DEBUG), against the settings catalogue mined from their sources; a name the catalogue
        does not hold that is close to one it holds (difflib ratio >= 0.85), or that is the start of
        exactly one name it holds cut at an underscore (CUDA_VISIBLE, open-mmlab/mmagic#1580), is
        reported with the name it was probably meant to be. NCCL_* and TORCH_NCCL_* names are NCCL001's. Names in a process
        launcher's namespace (OMPI_*, PMIX_*, PMI_*, MV2_*, SLURM_*...) are the launcher's own, written
        by mpirun or srun, not typed: OMPI_COMM_WORLD_NODE_RANK is Open MPI's, not a misspelt
        OMPI_COMM_WORLD_RANK. Nor are the NVIDIA Container Toolkit's NVIDIA_* variables, which every
        CUDA base image sets (NVIDIA_VISIBLE_DEVICES is not a misspelt CUDA_VISIBLE_DEVICES).

    Why it matters
        Every one of these libraries ignores a variable it does not read: `PYTORCH_CUDA_ALLOC_CONFIG`
        leaves the allocator at its defaults, `ACCELERATE_MIXED_PRECISON=bf16` trains in fp32, and
        nothing says so.

    Example
        export PYTORCH_CUDA_ALLOC_CONFIG=expandable_segments:True

    Fix
        export PYTORCH_CUDA_ALLOC_CONF="$PYTORCH_CUDA_ALLOC_CONFIG"; unset PYTORCH_CUDA_ALLOC_CONFIG
    """
    env = env_of(snap)
    for name in sorted(env):
        if name.startswith(("NCCL_", "TORCH_NCCL_")) or catalog.lookup(name) is not None:
            continue
        if name.startswith(catalog.PLUGIN_PREFIXES) or name.startswith(catalog.LAUNCHER_PREFIXES):
            continue  # a plugin's own variable, or one the process launcher wrote (mpirun, PMIx, srun)
        if name.startswith(catalog.CONTAINER_PREFIXES):
            continue  # the NVIDIA Container Toolkit's (NVIDIA_VISIBLE_DEVICES), set by CUDA images
        close = catalog.near_miss(name)
        if not close:
            continue
        entry = catalog.lookup(close)
        yield warning(f"{name} is not a variable any library reads (did you mean {close}?)",
                      detail=f"{close} is read by {WHO.get(entry['family'], entry['family'])} "
                             f"({entry['source']['path']}); {name} is ignored, so this setting has no effect.",
                      fix=f"export {close}=\"${name}\"; unset {name}", subjects=[name],
                      env_fix={name: None} if close in env else {close: env[name], name: None},
                      evidence={"name": name, "did_you_mean": close, "family": entry["family"]})


@check("SET002", "invalid-setting-value", family=FAMILY, needs=("env",), reads=("gpus", "launch", "lint"))
def invalid_setting_value(snap):
    """A setting whose value its reader rejects, or silently reads as something else.

    What it checks
        Every set variable the settings catalogue knows (other than NCCL's and c10d's, which are
        NCCL003's), with the grammar of the code that reads it: PYTORCH_CUDA_ALLOC_CONF (and
        PYTORCH_ALLOC_CONF) parsed like torch's ConfigTokenizer and AcceleratorAllocatorConfig (keys,
        `True`/`False` spelt so, sizes in MB with their minimum, fractions in range, powers of two,
        the backend names); accelerate's str_to_bool and PrecisionType; int() and float() reads in
        Python libraries; CUDA's 0/1 switches. And values the visible GPUs cannot run: mixed
        precision bf16 below compute capability 8.0, fp8 below 8.9 - set in the environment, asked
        by the launch command (accelerate launch --mixed_precision, the script's --bf16), or by the
        training script's literals (`check --script`, or the script of check's own launch
        command: TrainingArguments bf16/tf32=True, Accelerator mixed_precision, Lightning
        precision=, autocast dtype=torch.bfloat16, float8 dtypes; tf32 below 8.0), or by the job's
        config files (`check --config`: `bf16: true`, `tf32: true`, DeepSpeed's bf16.enabled,
        `mixed_precision: bf16`), or by the model's own config.json when the launch command names a
        local model directory (`--model_name_or_path ./ckpt`: `torch_dtype`/`dtype` "bfloat16"; a
        warning marked as a guess, since the script decides whether the weights load in it).

    Why it matters
        A bad PYTORCH_CUDA_ALLOC_CONF raises at the first CUDA allocation ("Expected 'True' or
        'False' ... but got 'true'"), so every rank dies before the first step; accelerate raises on
        ACCELERATE_MIXED_PRECISION=float16; others fall back to their defaults without a word.

    Example
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true

    Fix
        export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    """
    env = env_of(snap)
    for name, entry, raw, problem in catalog.invalid_values(env, keep=lambda n: not _nccl_owned(n)):
        detail = f"{name} takes {problem.expected}; {WHO.get(entry['family'], entry['family'])} reads it " \
                 f"({entry['source']['path']})."
        evidence = {name: raw, "expected": problem.expected, "parser": entry.get("parser")}
        fix = f"export {name}=<{problem.expected}>"
        if entry.get("parser") == "alloc_conf":
            pairs, problems = catalog.parse_alloc_conf(raw)
            evidence["problems"] = problems
            fixed = _fixed_alloc_conf(pairs)
            detail = ("torch parses it at the first CUDA allocation and raises, so every rank fails before its "
                      "first step: " + "; ".join(problems) + ".")
            if fixed is not None:
                fix = f"export {name}='{fixed}'"
        MAKEv = MAKE[problem.severity]
        yield MAKEv(f"{name}={raw!r}: {problem.reads_as}", detail=detail, fix=fix, subjects=[name], evidence=evidence)
    yield from _beyond_the_gpus(snap, env)


def _beyond_the_gpus(snap, env):
    """Settings whose value needs a newer GPU than a visible one (the entry's `needs_capability`)."""
    from ddpdoctor.facts.gpu import view  # noqa: PLC0415 - only with GPU facts

    if snap.missing_reason(("gpus",)):
        return
    devices = [d for d in view(snap).devices if isinstance(d.get("cuda_capability"), (list, tuple))
               and len(d["cuda_capability"]) == 2 and all(isinstance(x, int) for x in d["cuda_capability"])]
    for name in sorted(env):
        entry = catalog.lookup(name)
        need = ((entry or {}).get("needs_capability") or {}).get(str(env[name]).strip().lower())
        if not need or not devices:
            continue
        low = [d for d in devices if tuple(d["cuda_capability"]) < tuple(need["min"])]
        if not low:
            continue
        models = sorted({f"{d.get('name')} ({d['cuda_capability'][0]}.{d['cuda_capability'][1]})" for d in low})
        want = ".".join(map(str, need["min"]))
        yield warning(f"{name}={env[name]} on {', '.join(models)}: {env[name].strip().lower()} needs compute "
                      f"capability {want}",
                      detail=need["why"][0].upper() + need["why"][1:] + f". Source: {need['source']['repo']} "
                             f"{need['source']['path']} ({need['source'].get('symbol')}).",
                      fix=f"export {name}=fp16   # on these GPUs; or run on GPUs of compute capability {want}+",
                      subjects=[name] + [f"gpu:{d['index']}" for d in low],
                      evidence={name: env[name], "needs": want,
                                "gpus": {str(d["index"]): list(d["cuda_capability"]) for d in low}})
    yield from _launch_precision_beyond_the_gpus(devices)(snap)


# transformers TrainingArguments.__post_init__: `if self.tf32: if is_torch_tf32_available(): ... else: raise
# ValueError("--tf32 requires Ampere or a newer GPU arch, cuda>=11 and torch>=1.7")` (huggingface/transformers
# src/transformers/training_args.py; read in stored copies of several releases, commit not pinned).
TF32_NEED = {"min": [8, 0], "why": "tf32 matmuls exist on Ampere (compute capability 8.0) and newer only; transformers' "
                                   "TrainingArguments(tf32=True) raises below it",
             "source": {"repo": "huggingface/transformers", "path": "src/transformers/training_args.py",
                        "symbol": "TrainingArguments.__post_init__"}}


def _launch_precision_beyond_the_gpus(devices):
    """The precision a recorded launch command asks for (facts.launch.precision_asked: accelerate launch's
    --mixed_precision, the training script's --bf16 [True] / --mixed_precision / --precision) judged like
    ACCELERATE_MIXED_PRECISION's value against the visible GPUs (the same catalogue entry's needs_capability):
    transformers refuses bf16 below 8.0 ("Your setup doesn't support bf16/gpu", TrainingArguments.__post_init__),
    accelerate likewise ("bf16 mixed precision requires PyTorch >= 1.10 and a supported device")."""
    from ddpdoctor.facts.launch import model_config_precision, precision_asked  # noqa: PLC0415

    def judge(snap):
        entry = catalog.lookup("ACCELERATE_MIXED_PRECISION") or {}
        needs = dict(entry.get("needs_capability") or {}, tf32=TF32_NEED)
        seen = set()
        asked = [(p, w, "the launch command", True, "launch:" + w.split()[0]) for p, w in precision_asked(snap)]
        for row in script_asks(snap, "precision"):  # lint.scriptfacts: the script's own literals
            if row.get("model_config"):  # the model's config.json a --config file names (pipeline.check)
                asked.append((str(row.get("precision")), f"{row.get('path')} {row.get('what')}", "the model's config",
                              False, f"path:{row.get('path')}"))
                continue
            refused = row.get("precision") == "tf32" or "(bf16=True)" in str(row.get("what")) \
                or "mixed_precision=" in str(row.get("what"))
            config = str(row.get("path") or "").lower().endswith((".yml", ".yaml", ".json", ".toml"))
            asked.append((str(row.get("precision")), f"{row.get('path')}:{row.get('line')} {row.get('what')}",
                          "the job's config" if config else "the training script", refused,
                          f"{'path' if config else 'script'}:{row.get('path')}"))
        # the model's own config.json (a local --model_name_or_path directory; precision_calls.json model_config)
        asked += [(p, w, f"the model {engine} serves" if engine else "the model's config", False, subj)
                  for p, w, subj, engine in model_config_precision(snap)]
        for precision, where, who, refused, subject in asked:
            need = needs.get(precision)
            if not need or not devices or precision in seen:
                continue
            low = [d for d in devices if tuple(d["cuda_capability"]) < tuple(need["min"])]
            if not low:
                continue
            seen.add(precision)
            models = sorted({f"{d.get('name')} ({d['cuda_capability'][0]}.{d['cuda_capability'][1]})" for d in low})
            want = ".".join(map(str, need["min"]))
            make = error if refused else warning
            how = ("transformers refuses it before the first step (\"Your setup doesn't support bf16/gpu\", \"--tf32 "
                   "requires Ampere or a newer GPU arch\"), accelerate likewise." if refused else
                   "Whether the weights load in it depends on the transformers release and the script's dtype "
                   "argument (from 4.49 from_config uses the config's torch_dtype: huggingface/transformers#36567; "
                   "--torch_dtype auto loads it); if they do, torch.cuda.is_bf16_supported() is True only by emulation "
                   "below 8.0 (pytorch/pytorch torch/cuda/__init__.py @17e3b6a9), so it runs emulated and slow or a "
                   "kernel without bf16 fails (a guess: the script's own code decides)." if who == "the model's config"
                   else _serving_auto_dtype(who) if who.startswith("the model ") else "Whether it fails or runs emulated and slow depends on the library and the torch release (a "
                   "guess: the script's own code decides).")
            yield make(f"{who} asks for {precision} ({where}) on {', '.join(models)}: {precision} needs "
                       f"compute capability {want}",
                       detail=need["why"][0].upper() + need["why"][1:] + f". Source: {need['source']['repo']} "
                              f"{need['source']['path']} ({need['source'].get('symbol')}). " + how,
                       fix=(f"{where.replace(precision, 'fp16', 1)}   # on these GPUs; or run on GPUs of compute "
                            f"capability {want}+") if who == "the launch command" else
                           (f"load the model in float16 on these GPUs: from_pretrained(..., dtype=torch.float16) or the "
                            f"script's --torch_dtype float16 (not auto); or run on GPUs of compute capability {want}+")
                           if who == "the model's config" else
                           "--dtype half   # float16 on these GPUs, instead of --dtype auto (the config's bfloat16)"
                           if who.startswith("the model ") else
                           f"use fp16 (or fp32) instead of {precision} at {where.split()[0]} on these GPUs; or run on "
                           f"GPUs of compute capability {want}+",
                       subjects=[subject] + [f"gpu:{d['index']}" for d in low],
                       evidence={"asked": precision, "where": where, "needs": want, "from": who,
                                 "gpus": {str(d["index"]): list(d["cuda_capability"]) for d in low}})
    return judge


def _serving_auto_dtype(who: str) -> str:
    """What an inference server does with --dtype auto and a bf16 config below 8.0 (data/serving.json auto_dtype)."""
    from ddpdoctor.facts.launch import serving_table  # noqa: PLC0415

    engine = who.split()[2] if len(who.split()) > 2 else ""
    row = next((r for r in serving_table()["engines"] if r["name"] == engine), {})
    text = str(row.get("auto_dtype") or "")
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _fixed_alloc_conf(pairs):
    """The same settings spelt as torch accepts them, when only spelling was wrong (true -> True, a
    misspelt key with one close match); None when a value itself must change."""
    keys = catalog.alloc_conf_keys()
    out = []
    import difflib  # noqa: PLC0415 - only on this rare path

    for key, value in pairs:
        if key not in keys:
            close = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.8)
            if not close:
                return None
            key = close[0]
        if keys[key].get("parser") == "alloc_true_false" and isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.capitalize()
        text = f"{key}:[{','.join(value)}]" if isinstance(value, list) else f"{key}:{value}"
        if catalog.parse_alloc_conf(text)[1]:
            return None
        out.append(text)
    return ",".join(out) if out else None


@check("SET003", "deprecated-setting", family=FAMILY, needs=("env",))
def deprecated_setting(snap):
    """A setting under a name its reader keeps only as a deprecated fallback.

    What it checks
        Set variables the settings catalogue records as another name's deprecated alias (for example
        Rayon's RAYON_RS_NUM_CPUS for RAYON_NUM_THREADS) outside torch.distributed's, which NCCL002
        covers; and names a reader retired, against the installed release (TRANSFORMERS_CACHE:
        deprecated in transformers 4, ignored from 5, where HF_HUB_CACHE decides), and names under
        transformers' and accelerate's own prefixes that their release history shows a later release
        stopped reading (ACCELERATE_USE_XPU, last read by accelerate 1.5). When the installed release
        is not known, that is said, as a note.

    Why it matters
        The old name works until a release drops it; when both are set the new one wins, so a job
        script that sets the old one to change something may change nothing.

    Example
        export RAYON_RS_NUM_CPUS=4

    Fix
        export RAYON_NUM_THREADS=4; unset RAYON_RS_NUM_CPUS
    """
    env = env_of(snap)
    versions = (snap.get("packages") or {}).get("versions") or {}
    for name in sorted(env):
        entry = catalog.lookup(name)
        retired = (entry or {}).get("retired") if (entry or {}).get("name") == name else None
        found = _retired(name, env, retired, versions.get(retired["reader"]), entry) if retired else None
        if found is not None:
            yield found
    for old in sorted(env):
        entry = catalog.replaced_by(old)
        if entry is None or _nccl_owned(entry["name"]) or _nccl_owned(old):
            continue
        new = entry["name"]
        both = new in env
        yield warning(f"{old} is a deprecated name of {new}",
                      detail=f"{WHO.get(entry['family'], entry['family'])} reads {old} only when {new} is unset"
                             + (f"; {new} is set, so {old} has no effect." if both else "."),
                      fix=f"unset {old}" if both else f"export {new}={env[old]}; unset {old}",
                      env_fix={old: None} if both else {new: env[old], old: None},
                      subjects=[old, new] if both else [old], evidence={old: env[old], new: env.get(new)})


def _retired(name, env, retired, installed, entry):
    """A name its reader warns about and a later release no longer reads (the entry's `retired`: from
    the release history, or with the reader's own warning and the name to use instead)."""
    reader, gone, use = retired["reader"], retired["removed_in"], retired.get("use")
    note = retired.get("note")
    ignored = bool(installed) and catalog.version(installed)[:2] >= catalog.version(gone)[:2]
    other = f"{use} is set, so " if use and use in env else ""
    instead = f"; use {use}" if use else ""
    if ignored:
        title = f"{name} is ignored: {reader} {installed} no longer reads it (removed in {gone}){instead}"
        said = f" with a warning ({note!r}, {entry['source']['path']})" if note else \
            f" (last in {retired.get('last', '?')}, {entry['source']['path']})"
        detail = (f"{reader} before {gone} read it{said}; {reader} {installed} does not, so whatever it set is not "
                  "used" + ((f" ({other}that one is)." if other else f" and {use}'s default applies instead.")
                            if use else "."))
    elif not installed:
        title = f"{name} is not read by {reader} {gone} and later{instead} (the installed {reader} is not known)"
        detail = (f"{reader} reads it up to {retired.get('last') or 'before ' + gone} ({entry['source']['path']})"
                  + (f" and warns: {note!r}" if note else "") + f"; whether it has an effect here depends on the "
                  f"{reader} release the job runs with, which this snapshot does not hold.")
    elif note:
        title = f"{name} is deprecated: {reader} {installed} warns and drops it in {gone}{instead}"
        detail = f"{reader} warns: {note!r} ({entry['source']['path']})."
    else:
        return None  # read by the installed release and not deprecated there: nothing to say
    if use:
        fix = f"unset {name}" if use in env else f"export {use}={env[name]}; unset {name}"
        env_fix = {name: None} if use in env else {use: env[name], name: None}
    else:
        fix, env_fix = f"unset {name}   # {reader} {gone} and later ignore it", {}
    make = warning if installed else info
    return make(title, detail=detail, fix=fix, env_fix=env_fix,
                subjects=[name, use] if use and use in env else [name],
                evidence={name: env[name], use or "use": env.get(use) if use else None, reader: installed,
                          "removed_in": gone})


@check("SET004", "debug-setting-left-on", family=FAMILY, needs=("env",), reads=("launcher", "runtime", "packages", "lint"))
def debug_setting_left_on(snap):
    """A debugging or slow setting left on, graded by the number of ranks.

    What it checks
        Every set variable whose catalogue entry records a cost for the value it has, and pairs that
        cost together (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=ALL or COLL): CUDA_LAUNCH_BLOCKING=1,
        PYTORCH_NO_CUDA_MEMORY_CACHING=1, TORCH_DISTRIBUTED_DEBUG=DETAIL, NCCL_DEBUG=TRACE,
        TORCH_NCCL_BLOCKING_WAIT, TORCH_NCCL_NAN_CHECK, flight-recorder C++ stacks,
        ACCELERATE_DEBUG_MODE, CUDA_DEVICE_WAITS_ON_EXCEPTION and others. Each entry says from how
        many ranks on it is a note, a warning or an error (a per-collective check that is cheap on 2
        ranks is not on 64). With the training script read (check --script, or the script of check's
        launch command), also what the script switches on itself: a catalogued variable it assigns in
        os.environ, and a catalogued debugging call (torch.autograd.set_detect_anomaly(True), the
        detect_anomaly() context: "will slow down your program execution", torch/autograd/anomaly_mode.py).

    Why it matters
        These settings are switched on to debug one failure and stay in the job script: every kernel
        launch waits (CUDA_LAUNCH_BLOCKING), every collective is preceded by a cross-rank check
        (TORCH_DISTRIBUTED_DEBUG=DETAIL), every rank logs every call (NCCL_DEBUG=TRACE). The job
        runs, only slower, and nothing says why.

    Example
        export CUDA_LAUNCH_BLOCKING=1 TORCH_DISTRIBUTED_DEBUG=DETAIL   # in a 64-rank job script

    Fix
        unset CUDA_LAUNCH_BLOCKING TORCH_DISTRIBUTED_DEBUG   # once the failure they were set for is understood
    """
    env = env_of(snap)
    world = _world(snap)
    # what the readers read: a deprecated spelling they still fall back to costs the same (NCCL_BLOCKING_WAIT)
    read, spelt = catalog.meant_env(env, typos=False)
    for canon in sorted(read):
        entry = catalog.lookup(canon)
        name = spelt[canon]
        got = catalog.cost_of(entry, read[canon], world)
        if got is None:
            torch_version = (((snap.get("packages") or {}) if "packages" in snap else {}).get("versions") or {}).get("torch")
            presence = catalog.presence_cost_of(entry, read[canon], world, torch_version)
            if presence is not None:
                level, what, spec, changed = presence
                src = entry["presence_before"]["source"]
                yield MAKE[level](f"{name}={env[name]} still switches it on: torch {torch_version} tests only that {name} "
                                  f"is set ({world} rank{'s' if world != 1 else ''})",
                                  detail=(f"Before torch {changed} the reader tests that the variable exists, whatever its "
                                          f"value ({src['repo']} {src['path']} @{src['commit'][:12]}: {src['symbol']}; "
                                          f"{entry['presence_before']['changed_by']} reads only the value 1 since): "
                                          f"{what}. Reported from " + _thresholds(spec) + "."),
                                  fix=f"unset {name}   # setting it to 0 does not turn it off before torch {changed}",
                                  env_fix={}, subjects=[name],
                                  evidence={name: env[name], "torch": torch_version, "world_size": world,
                                            "presence_before": changed})
            continue
        level, what, spec = got
        yield MAKE[level](f"{name}={env[name]} is a debugging setting left on ({world} rank{'s' if world != 1 else ''})",
                          detail=f"{what[0].upper() + what[1:]}. Reported from "
                                 + _thresholds(spec) + ".",
                          fix=f"unset {name}   # once the failure it was set for is understood",
                          env_fix={}, subjects=[name],
                          evidence={name: env[name], "world_size": world, "source": entry["source"].get("path")})
    yield from _script_debug_settings(snap, env, world, reported=set(read))
    meant, _ = catalog.meant_env(env)
    for c in catalog.conflicts_in(env, world):
        if c.kind != "cost":
            continue
        yield MAKE[c.severity](f"{_as(c.name, c.name_as)}={meant[c.name]} with {_as(c.other, c.other_as)}="
                               f"{meant.get(c.other, env.get(c.other))} logs every collective "
                               f"({world} rank{'s' if world != 1 else ''})",
                               detail=f"{c.why}. Reported from {_thresholds(c.spec)}.",
                               fix=f"unset {c.other_as}   # or NCCL_DEBUG_SUBSYS=INIT,NET for start-up problems",
                               subjects=[c.name_as, c.other_as],
                               evidence={c.name_as: env.get(c.name_as), c.other_as: env.get(c.other_as),
                                         "world_size": world})


def _script_debug_settings(snap, env, world: int, reported: set):
    """SET004's findings for what the training script itself switches on (check --script, or the script of check's
    launch command): a catalogued variable it assigns in os.environ (lint facts' setting_sets; a setdefault yields to
    the environment) and a catalogued debugging call (debug_calls: torch.autograd.set_detect_anomaly(True)). A name
    the environment's own finding already covers is not repeated."""
    for s in script_asks(snap, "setting_sets"):
        name, value = str(s.get("name") or ""), s.get("value")
        entry = catalog.lookup(name)
        if entry is None or value is None or entry["name"] in reported or (s.get("how") == "setdefault" and name in env):
            continue
        got = catalog.cost_of(entry, str(value), world)
        if got is None:
            continue
        level, what, spec = got
        reported.add(entry["name"])
        where = f"{s.get('path')}:{s.get('line')}"
        yield MAKE[level](f"{where} sets {name}={value}: a debugging setting left on in the script "
                          f"({world} rank{'s' if world != 1 else ''})",
                          detail=f"{what[0].upper() + what[1:]}. The script sets it itself (os.environ), so no job "
                                 "script or shell shows it. Reported from " + _thresholds(spec) + ".",
                          fix=f"delete the assignment at {where} (or guard it behind a debug flag)",
                          subjects=[name, f"line:{s.get('line')}", f"path:{s.get('path')}"],
                          evidence={name: value, "path": s.get("path"), "line": s.get("line"), "world_size": world,
                                    "source": entry["source"].get("path")})
    for c in script_asks(snap, "debug_calls"):
        entry = catalog.call_entries().get(str(c.get("call") or ""))
        if entry is None or c.get("value") is None:
            continue
        got = catalog.cost_of(entry, str(c["value"]), world)
        if got is None:
            continue
        level, what, spec = got
        where = f"{c.get('path')}:{c.get('line')}"
        src = entry["source"]
        yield MAKE[level](f"{where} calls {c['call']}({c['value'] if c['call'] == entry['name'] else ''}): a debugging "
                          f"mode left on in the script ({world} rank{'s' if world != 1 else ''})",
                          detail=f"{what[0].upper() + what[1:]} ({src['repo']} {src['path']} @{src['commit'][:12]}). "
                                 "Reported from " + _thresholds(spec) + ".",
                          fix=f"delete the call at {where}, or enable it only behind a debug flag",
                          subjects=[f"line:{c.get('line')}", f"path:{c.get('path')}"],
                          evidence={"call": c["call"], "value": c["value"], "path": c.get("path"),
                                    "line": c.get("line"), "world_size": world})


def _as(name: str, set_as: str) -> str:
    """`NAME`, or `SET_AS (read as NAME)` when the user set a deprecated or misspelt spelling of it."""
    return name if set_as == name else f"{set_as} (meant as {name})"


def _thresholds(spec) -> str:
    parts = [f"{level} at {spec[f'{level}_at']} rank{'s' if spec[f'{level}_at'] != 1 else ''}"
             for level in ("info", "warning", "error") if spec.get(f"{level}_at") is not None]
    return ", ".join(parts)


@check("SET005", "conflicting-settings", family=FAMILY, needs=("env",), reads=("pci",))
def conflicting_settings(snap):
    """Two settings that fight: one defeats the other, or one is useless without the other.

    What it checks
        The conflicts the settings catalogue records, each from the reader's source: TORCH_NCCL_BLOCKING_WAIT
        with asynchronous error handling (no watchdog, so no error handling), TORCH_NCCL_DUMP_ON_TIMEOUT
        with the flight recorder off or monitoring off, NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE without
        NCCL_DEBUG, NCCL_P2P_LEVEL with P2P disabled, P2P and SHM both disabled, NCCL_IB_HCA or NCCL_NET=IB
        with IB disabled, PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF set to different values; and
        allocator options that fight inside PYTORCH_CUDA_ALLOC_CONF on the installed torch
        (expandable_segments with max_split_size_mb or garbage_collection_threshold before torch 2.5);
        and NCCL_IB_DISABLE while an external NCCL net plugin is on LD_LIBRARY_PATH, which carries
        its own IB transport that the flag does not reach.

    Why it matters
        The setting you reach for to debug or tune does nothing, or the job takes the slowest path:
        the one you set last is not the one that wins.

    Example
        export TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_BUFFER_SIZE=0

    Fix
        Keep the one you mean; the finding names which one the library actually uses.
    """
    env = env_of(snap)
    torch_version = ((snap.get("packages") or {}).get("versions") or {}).get("torch")
    for name in catalog.ALLOC_CONF_VARS:
        if name not in env:
            continue
        for k in catalog.alloc_key_conflicts(name, env[name], torch_version):
            on = (f"on torch {torch_version}" if not k.guess else
                  f"fails on torch before {k.torch_before}; the torch version is not known (a guess)")
            yield warning(f"{name}: {' with '.join(k.keys)} {on}",
                          detail=k.why[0].upper() + k.why[1:] + "." + (
                              f" This snapshot does not say which torch the job runs: on torch {k.torch_before} or "
                              "later the two options work together and there is nothing to fix." if k.guess else ""),
                          fix=f"export {name}=expandable_segments:True   # drop {', '.join(k.keys[1:])}; or torch >= 2.5",
                          subjects=[name], evidence={name: env[name], "keys": list(k.keys), "torch": torch_version,
                                                     "guess": k.guess})
    yield from _ib_disable_with_net_plugin(snap, env)
    meant, _ = catalog.meant_env(env)
    for c in catalog.conflicts_in(env, _world(snap)):
        if c.kind != "conflict":
            continue
        other_value = meant.get(c.other, env.get(c.other))
        other = (f"{_as(c.other, c.other_as)}={other_value}" if other_value is not None else f"{c.other} unset")
        yield MAKE[c.severity](f"{_as(c.name, c.name_as)}={meant[c.name]} with {other}: "
                               f"{c.why.split(':')[0].split(' (')[0]}",
                               detail=c.why[0].upper() + c.why[1:] + ".",
                               fix=(f"export {c.other}=<a value>   # or unset {c.name_as}" if other_value is None
                                    else f"unset {c.name_as}   # or {c.other_as}, whichever you did not mean"),
                               subjects=[c.name_as, c.other_as],
                               evidence={c.name_as: env.get(c.name_as), c.other_as: env.get(c.other_as)})


def _ib_disable_with_net_plugin(snap, env):
    """NCCL_IB_DISABLE is a parameter of NCCL's internal IB transport (src/transport/net_ib: NCCL_PARAM
    IbDisable); an external net plugin NCCL loads first (src/plugin/net.cc: libnccl-net.so unless
    NCCL_NET_PLUGIN=none) brings its own, e.g. HPC-X's IBext (NVIDIA/nccl#676)."""
    from ddpdoctor.facts.gpu import flag_on  # noqa: PLC0415

    plugins = ((snap.get("pci") or {}).get("net_plugins") or []) if "pci" in snap else []
    if not plugins or not flag_on(env, "NCCL_IB_DISABLE") or (env.get("NCCL_NET") or "").strip().lower() == "socket":
        return
    yield warning(f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']} does not reach the NCCL net plugin {plugins[0]}",
                  detail="NCCL_IB_DISABLE switches off NCCL's internal IB transport only (NCCL_PARAM IbDisable in "
                         "src/transport/net_ib); NCCL loads libnccl-net.so from LD_LIBRARY_PATH first (src/plugin/"
                         "net.cc) and an external plugin such as HPC-X's IBext or aws-ofi-nccl brings its own RDMA "
                         "transport, so NCCL still uses IB (NVIDIA/nccl#676).",
                  fix="export NCCL_NET=Socket   # or NCCL_NET_PLUGIN=none; or unset NCCL_IB_DISABLE if IB should be used",
                  subjects=["NCCL_IB_DISABLE", f"path:{plugins[0]}"],
                  evidence={"NCCL_IB_DISABLE": env["NCCL_IB_DISABLE"], "net_plugins": plugins,
                            "NCCL_NET": env.get("NCCL_NET"), "NCCL_NET_PLUGIN": env.get("NCCL_NET_PLUGIN")})


@check("SET006", "setting-newer-than-installed", family=FAMILY, needs=("env", "packages"))
def setting_newer_than_installed(snap):
    """A setting that the installed torch, transformers, accelerate or NCCL is too old to read.

    What it checks
        The installed torch version against the allocator options in PYTORCH_CUDA_ALLOC_CONF that
        were added later (expandable_segments in 2.1, backend in 2.0...), against TORCH_NCCL_* names
        it predates (renamed from NCCL_* in torch 2.2; the flight recorder's TORCH_FR_* in 2.8), and
        against PYTORCH_ALLOC_CONF, which the CUDA allocator reads only from torch 2.10 (2.9 reads it
        for the device-generic config only); the installed torch, transformers and accelerate against
        every name under their own prefixes first read by a later release (the release history mined
        from every minor release's wheel, tools/mine_settings_history.py); the installed NCCL (the
        nvidia-nccl wheel torch loads) against NCCL_* variables first read by a later NCCL release,
        from the releases the settings catalogue was mined from.

    Why it matters
        An allocator option the installed torch does not know makes the first CUDA allocation raise
        "Unrecognized CachingAllocator option: expandable_segments": every rank dies before its first
        step, typically when a project's script written for a newer torch sets it. A variable newer
        than its reader is silently ignored: the behaviour you set is not the one you get.

    Example
        torch 2.0.1 with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True

    Fix
        Upgrade torch (or NCCL) to a release that reads the setting, or remove it; for renamed torch
        variables set the old spelling your torch reads.
    """
    env = env_of(snap)
    installed = catalog.installed_versions(((snap.get("packages") or {}).get("versions") or {}))
    for t in catalog.too_new(env, installed):
        var = t.name.split(":")[0].split("=")[0]
        package = {"torch": "torch", "NCCL": "nvidia-nccl-cu12"}.get(t.reader, t.reader)
        fix = t.fix or (f"pip install '{package}>={t.since}'   # or remove it from {var}" if t.reader != "NCCL"
                        else f"unset {var}   # or upgrade NCCL (pip install -U nvidia-nccl-cu12)")
        yield MAKE[t.severity](t.title or f"{t.name} needs {t.reader} {t.since}; {t.installed} is installed",
                               detail=t.why + ".", fix=fix, subjects=[var, f"pkg:{package}"],
                               evidence={"setting": t.name, "since": t.since, "installed": t.installed,
                                         "reader": t.reader})
