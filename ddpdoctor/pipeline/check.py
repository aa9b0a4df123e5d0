"""The `check` pipeline: gather this machine (or load a recorded snapshot), add the comm test and
the lint section when asked, judge, return a Report. The CLI only renders it."""
from __future__ import annotations

from typing import Optional

from ddpdoctor.model import NO_SCRIPT, Report
from ddpdoctor.pipeline.judge import judge
from ddpdoctor.pipeline.snapshot import Snapshot


def wants_comm(snapshot: Snapshot) -> bool:
    """`check` runs the live comm test where GPUs are visible or a launcher says WORLD_SIZE>1."""
    launcher = snapshot.get("launcher") or {}
    if (launcher.get("world_size") or 0) > 1:
        return True
    gpus = snapshot.get("gpus") or {}
    return bool(gpus.get("devices")) and not gpus.get("unavailable") and not gpus.get("error")


def run_check(snapshot_path: Optional[str] = None, only: Optional[set] = None, ignore: Optional[set] = None,
              comm: bool = True, scripts: Optional[list] = None, sources=None,
              configs: Optional[list] = None, command: Optional[list] = None) -> Report:
    if snapshot_path:
        snapshot = Snapshot.load(snapshot_path)
    else:
        from ddpdoctor.pipeline.snapshot import live_snapshot

        snapshot = live_snapshot(sources)
        if command:
            read_given_command(snapshot, command)
        job = _launched_rank()
        handed = "--no-comm: the connectivity test did not run" if not comm else None
        if comm and wants_comm(snapshot):
            try:
                from ddpdoctor.comm.api import comm_section_for_check
            except ModuleNotFoundError:
                comm_section_for_check = None
            if comm_section_for_check is None:
                handed = "the connectivity test is not available in this build"
            elif job is None:
                snapshot.sections["comm"] = comm_section_for_check(snapshot)
            else:  # one rank of a launched job: rank 0 reports for all (pipeline.jobreport)
                mine = [f.to_dict() for f in judge(snapshot, "check", only, ignore).findings
                        if f.family != "comm"]
                sec = comm_section_for_check(snapshot, attach=mine)
                exchange = (sec.pop("_attached", False), sec.pop("_attachments", None) or {})
                snapshot.sections["comm"] = sec
                return _job_report(judge(snapshot, "check", only, ignore), job, sec, *exchange)
        else:  # say why the comm checks were skipped, rather than "no 'comm' facts"
            snapshot.sections["comm"] = {"unavailable": "the connectivity test was not run: --no-comm" if not comm else
                                         "the connectivity test runs where GPUs are visible or a launcher says "
                                         "WORLD_SIZE>1; run `ddpdoctor comm` to test anyway"}
            handed = handed or "the connectivity test did not run, so nothing carried this rank's findings to rank 0"
        if not scripts:
            snapshot.sections["lint"] = {"unavailable": NO_SCRIPT}
            add_launch_script_facts(snapshot)
        snapshot.sections.setdefault("probe", {"unavailable": "measured by a training run: `ddpdoctor probe`, or "
                                                              "DoctorCallback inside your Trainer"})
        if job is not None:
            report = _judge_with_lint(snapshot, only, ignore, scripts, configs)
            return _own_rank_report(report, job, handed or "nothing carried this rank's findings to rank 0")
    return _judge_with_lint(snapshot, only, ignore, scripts, configs)


def _judge_with_lint(snapshot: Snapshot, only: Optional[set], ignore: Optional[set], scripts: Optional[list],
                     configs: Optional[list] = None) -> Report:
    if scripts:
        try:
            from ddpdoctor.lint.api import lint_section
        except ModuleNotFoundError:
            lint_section = None
        if lint_section is not None:
            snapshot.sections["lint"] = lint_section(scripts, only=only, ignore=ignore, preview=False)
            from ddpdoctor.model.registry import REGISTRY

            if only is not None and any(getattr(REGISTRY.get(i), "kind", "") == "rule" for i in only):
                only = only | {"LINT000"}  # the relay check that turns the lint section into findings
    if configs:
        add_config_facts(snapshot, configs)
    return judge(snapshot, "check", only, ignore)


def read_given_command(snapshot: Snapshot, argv: list, deadline_s: Optional[float] = None) -> None:
    """add_given_command as one gatherer: it parses a command the user typed and reads the files it names (a model's
    config.json and weights, the Hub cache, save folders, a shell script), so a parser that raises on an odd value
    or a read that never returns (a FIFO where a file was expected) is that command's failure, reported as the
    'given_command' facts that could not be gathered (DOC finding, a warning), never exit 3 or a hang; the checks of
    this machine still run. It works on a copy of the launch section, put back only when it finished."""
    import copy

    from ddpdoctor.pipeline.snapshot import GATHER_DEADLINE_S, bounded

    scratch = Snapshot(sections={k: copy.deepcopy(v) for k, v in snapshot.sections.items() if k == "launch"})
    _, why = bounded(lambda: add_given_command(scratch, argv),
                     GATHER_DEADLINE_S if deadline_s is None else deadline_s)
    if why is not None:
        snapshot.sections["given_command"] = {"error": f"the command after -- could not be read: {why}"}
    elif "launch" in scratch.sections:
        snapshot.sections["launch"] = scratch.sections["launch"]


def add_given_command(snapshot: Snapshot, argv: list) -> None:
    """`ddpdoctor check -- <training command>`: the command, parsed as gather.launch parses a launcher above check
    (facts.launch.parse_command; a `python train.py ...` without a launcher: parse_program), recorded as the nearest
    launch command (depth 0) with the program's path when it is a file here, so the checks that read check's own
    launch (its options, the program's GPU and precision options, the script's facts) judge it; whether its program is
    on PATH (`found`). A shell script (`-- sh train.sh`) gives the launch lines it runs (gather.launch
    commands_in_shell_script)."""
    import os

    from ddpdoctor.facts.launch import parse_command, parse_program
    from ddpdoctor.gather.launch import (SHELLS, commands_in_shell_script, program_found, program_not_runnable,
                                         runs_as_module)

    argv = [str(a) for a in argv]
    script = _shell_script_of(argv)
    if script:
        found = commands_in_shell_script(script, os.environ)  # `check -- sh train.sh` / `-- ./train.sh`: its launches
        section = snapshot.sections.get("launch")
        if not isinstance(section, dict) or section.get("error") or section.get("unavailable"):
            section = snapshot.sections["launch"] = {"commands": [], "depth_read": 0}
        section["commands"] = [dict(c, depth=0) for c in found] + list(section.get("commands") or [])
        from ddpdoctor.gather.launch import shell_run_facts

        run = shell_run_facts(argv, script, os.environ)  # `sh x.sh`: the shell reads it, not its #! line (ENV020)
        if run is not None:
            section["shell_run"] = run
        if os.path.basename(argv[0]) not in SHELLS:  # `./train.sh` run itself: the kernel must be able to run it
            cannot = program_not_runnable(argv[0], os.environ)
            if cannot:
                section["commands"].insert(0, dict(cannot, launcher=None, options={}, depth=0, found=False,
                                                   program_word=argv[0]))
        return
    cmd = parse_command(argv) or parse_program(argv)
    if not cmd and argv and os.path.basename(argv[0]) in SHELLS and len(argv) > 1 and not argv[1].startswith("-"):
        # `sh train.sh` whose script is not a regular file here: ENV022 when nothing is there (a FIFO, a device or a
        # folder exists: "not found" would be false, and the shell's own error is another one)
        cmd = {"launcher": None, "options": {}, "program": argv[1], "program_exists": os.path.exists(argv[1]),
               "cwd": os.getcwd()}
    if not cmd:  # neither a launcher nor python: still a program the shell must find (ENV020)
        cmd = {"launcher": None, "options": {}} if argv else None
    if not cmd:
        return
    cmd["depth"] = 0
    seen = program_found(argv[0], os.environ) if argv else None
    if seen is not None:
        cmd["found"], cmd["program_word"] = seen, argv[0]
        cmd.update(program_not_runnable(argv[0], os.environ))
    if cmd.get("program") is None:
        cmd.pop("program", None)
    elif str(cmd["program"]).endswith(".py") and not runs_as_module(argv, cmd["program"]):
        cmd["program_exists"], cmd["cwd"] = os.path.exists(cmd["program"]), os.getcwd()  # ENV022 (a FIFO exists)
        if os.path.isfile(cmd["program"]):
            cmd["program_path"] = os.path.abspath(cmd["program"])
    if cmd.get("script_dirs"):
        from ddpdoctor.gather import Sources
        from ddpdoctor.gather.launch import save_dir_facts

        cmd["save_dirs"] = save_dir_facts(Sources(), cmd["script_dirs"], os.getcwd())
    from ddpdoctor.facts.launch import serving_command

    serving = serving_command(argv)
    if serving:  # `vllm serve ./model -tp 4`: the engine's model and parallel sizes (ENV024)
        cmd["serving"] = serving
        if not cmd.get("launcher"):
            cmd["launcher"] = serving["engine"]
        if serving.get("model"):
            cmd["script_models"] = dict(cmd.get("script_models") or {}, **{serving["model_option"]: serving["model"]})
    if cmd.get("script_models"):
        from ddpdoctor.gather import Sources
        from ddpdoctor.gather.launch import model_config_facts

        cmd["model_configs"] = model_config_facts(Sources(), cmd["script_models"], os.getcwd())
    if cmd.get("launcher") == "deepspeed":  # its hostfile and the master its runner will take from it (NET002)
        from ddpdoctor.gather import Sources
        from ddpdoctor.gather.launch import deepspeed_command_facts

        deepspeed_command_facts(Sources(), cmd, os.getcwd())
    section = snapshot.sections.get("launch")
    if not isinstance(section, dict) or section.get("error") or section.get("unavailable"):
        section = snapshot.sections["launch"] = {"commands": [], "depth_read": 0}
    section["commands"] = [cmd] + list(section.get("commands") or [])


def _shell_script_of(argv: list) -> Optional[str]:
    """The shell script a training command runs: `sh train.sh ...` (a shell and a file), or `./train.sh` run directly
    (a path to a file whose name ends in .sh or whose #! line names a shell); None otherwise."""
    import os

    from ddpdoctor.gather.launch import SHELLS

    if not argv:
        return None
    if os.path.basename(argv[0]) in SHELLS:
        return argv[1] if len(argv) > 1 and os.path.isfile(argv[1]) else None
    if "/" not in argv[0] or not os.path.isfile(argv[0]):
        return None
    if argv[0].endswith(".sh"):
        return argv[0]
    try:
        with open(argv[0], "rb") as fh:
            first = fh.readline(256).decode("utf-8", "replace")
    except OSError:
        return None
    words = first[2:].split() if first.startswith("#!") else []
    shell = os.path.basename(words[0]) if words else ""
    if shell == "env" and len(words) > 1:
        shell = os.path.basename(words[1])
    return argv[0] if shell in SHELLS else None


def add_config_facts(snapshot: Snapshot, configs: list) -> None:
    """The job's config files' GPU ids and process counts (lint.configfacts), added to the script facts under the
    same names, so the checks that judge a script's literals judge them too."""
    from ddpdoctor.lint.configfacts import config_facts

    cfg = config_facts(configs)
    if cfg["errors"]:   # a config the user named and ddpdoctor could not read is said, never dropped in silence
        from ddpdoctor.model.inputs import InputError

        bad = cfg["errors"][0]
        raise InputError(f"cannot read --config {bad['path']}: {bad['error']}")
    section = snapshot.sections.get("lint")
    if not isinstance(section, dict):
        section = snapshot.sections["lint"] = {"unavailable": NO_SCRIPT}
    facts = section.get("facts") if isinstance(section.get("facts"), dict) else {}
    merged = dict(facts)
    for key in ("gpu_indices", "world_args", "node_args", "precision", "attention"):
        merged[key] = list(facts.get(key) or ()) + cfg[key]
    merged["configs"], merged["config_errors"] = cfg["configs"], cfg["errors"]
    merged["precision"] = list(merged["precision"]) + _model_config_rows(cfg.get("models") or [])
    section["facts"] = merged


def _model_config_rows(models: list) -> list:
    """Precision rows for the models the job's config files name (`model_name_or_path: ./ckpt`): the dtype each local
    model directory's config.json records (gather.launch.model_config_facts, relative to the working directory, as
    the trainer resolves it), bf16 only, marked model_config (the script decides whether the weights load in it)."""
    import os

    from ddpdoctor.facts.launch import model_config_table
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import model_config_facts

    words = model_config_table()["words"]
    rows = []
    for m in models[:4]:
        for fact in model_config_facts(Sources(), {m["key"]: m["value"]}, os.getcwd()):
            word = words.get(str(fact.get("dtype") or "").strip().lower().replace("torch.", ""))
            if word == "bf16":
                rows.append({"precision": word, "path": fact["config"], "line": 0, "model_config": True,
                             "what": f"{fact['key']}={fact['dtype']} (the model of {m['path']} {m['key']})"})
    return rows


def add_launch_script_facts(snapshot: Snapshot) -> None:
    """Without --script: what the training script of check's own launch command asks of the machine (its precision,
    attention kernels, torch.compile, backend, device literals: lint.scriptfacts), read from the file the launch
    section found (commands[].program_path), never run; the script is not linted (no rule findings)."""
    from ddpdoctor.facts.launch import commands

    path = next((c.get("program_path") for c in commands(snapshot) if c.get("program_path")), None)
    if not path:
        return
    try:
        from ddpdoctor.lint.scriptfacts import script_facts

        facts = script_facts([path])
    except Exception as exc:  # noqa: BLE001 - the facts are an extra; a failure costs them, not the run
        facts = {"error": f"{type(exc).__name__}: {exc}"}
    section = snapshot.sections.setdefault("lint", {"unavailable": NO_SCRIPT})
    section["facts"], section["facts_from"] = facts, f"the launch command's script {path}"


def _launched_rank():
    """(rank, world) when this `check` runs as one rank of a launched job (torchrun, srun, mpirun),
    a rank >= WORLD_SIZE included."""
    import os

    from ddpdoctor.pipeline.jobreport import launcher_rank

    return launcher_rank(os.environ)


def _own_rank_report(report: Report, job, why: str) -> Report:
    """One rank of a launched job whose findings reached no rank 0 (--no-comm, no comm test, or
    the comm test could not carry them): its report is its own, and says so. Every rank prints
    it (pipeline.jobreport.own_lines, or the whole report in JSON): a finding is never lost."""
    rank, world = job
    report.extra["job"] = {"rank": rank, "world_size": world, "reported_to_rank0": False, "why": why}
    if rank == 0:
        report.extra["text_sections"] = [f"job: rank 0 of {world}: this report holds rank 0's findings only ({why}); "
                                         "every other rank prints its own"]
    return report


def _job_report(report: Report, job, sec: dict, attached: bool, others: dict) -> Report:
    """Rank 0: every rank's own findings merged into the job's report, grouped by host; the comm
    findings are already the job's. Other ranks: what to print instead of the report."""
    from ddpdoctor.pipeline import jobreport

    rank, world = job
    own = [f for f in report.findings if f.family != "comm"]
    report.extra["job"] = {"rank": rank, "world_size": world, "reported_to_rank0": bool(attached or rank == 0)}
    if rank != 0:
        if not attached:
            report.extra["job"]["why"] = ("rank 0 did not confirm that it received them: the connectivity test "
                                          "failed first, or rank 0 is missing or broken")
        return report
    per_rank = {0: [f.to_dict() for f in own]}
    per_rank.update({int(r): v for r, v in others.items() if int(r) != 0 and isinstance(v, list)})
    hosts = {int(r): s.get("host") for r, s in (sec.get("summaries") or {}).items() if isinstance(s, dict)}
    groups = jobreport.merge(per_rank)
    report.findings = [f for f in report.findings if f.family == "comm"] + \
        jobreport.merged_findings(groups, hosts, world)
    report.extra["ranks"] = {str(r): v for r, v in sorted(per_rank.items())}
    report.extra["text_sections"] = jobreport.host_lines(groups, hosts, world)
    return report
