"""The `launch` section: the launcher command lines of this process's parent chain (torchrun, srun,
accelerate launch, deepspeed), parsed into the launcher's own options (ddpdoctor.facts.launch).

Under a launcher, `check` can read its own launch: /proc/<ppid>/cmdline up the chain (at most MAX_DEPTH
ancestors, stopping at pid 1). Only the launcher's options that checks judge are kept, and of the training
script's arguments only its precision options (facts.launch.SCRIPT_PRECISION; the rest may carry secrets), and only command lines a launcher wrote are recorded.
"""
from __future__ import annotations

import os
from typing import Optional

from ddpdoctor.facts.launch import parse_command
from ddpdoctor.gather import INT, LIST, OBJ, STR, Sources, gatherer

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


def _program_path(src: Sources, pid: str, program: Optional[str]) -> Optional[str]:
    """The training script's absolute path (a .py program, resolved against the launcher's working directory,
    /proc/<pid>/cwd), when the file exists: `check` reads what that script asks of the machine (lint.scriptfacts)."""
    if not program or not program.endswith(".py"):
        return None
    try:
        path = program if os.path.isabs(program) else os.path.join(os.readlink(src.path(f"/proc/{pid}/cwd")), program)
    except OSError:
        return None
    return path if os.path.isfile(src.path(path)) else None


def launch_commands(src: Sources) -> dict:
    """{commands: [{launcher, options, program, depth}], depth_read}: the launchers above this process, nearest first."""
    out: list = []
    pid = _ppid(src, "self")
    depth = 0
    while pid and pid not in ("0", "1") and depth < MAX_DEPTH:
        depth += 1
        cmd = parse_command(_cmdline(src, pid))
        if cmd:
            cmd["depth"] = depth
            if cmd.get("program") is None:
                cmd.pop("program")
            found = _program_path(src, pid, cmd.get("program"))
            if found:
                cmd["program_path"] = found
            out.append(cmd)
        pid = _ppid(src, pid)
    return {"commands": out, "depth_read": depth}


FIELDS = {
    "commands": LIST, "commands[]": OBJ, "commands[].launcher": STR, "commands[].options": OBJ,
    "commands[].options.*": STR, "commands[].program": STR, "commands[].program_path": STR, "commands[].script_options": OBJ,
    "commands[].script_options.*": STR, "commands[].depth": INT, "depth_read": INT,
}


@gatherer("launch", when=("check",), fields=FIELDS, required=("commands[].launcher", "commands[].options"))
def gather_launch(src: Sources) -> dict:
    return launch_commands(src)
