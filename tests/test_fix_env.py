"""`ddpdoctor check --fix-env`: only shell lines, quoted, safe without a human; evaluated in a real
shell they clear the findings they were printed for and bring nothing new."""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from ddpdoctor.pipeline.fixenv import env_fix_lines
from ddpdoctor.model import warning
from ddpdoctor.pipeline.snapshot import Snapshot
from factory import findings_of, make_snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"(export [A-Za-z_][A-Za-z0-9_]*=\S.*|unset [A-Za-z_][A-Za-z0-9_]*)")


def _f(fid, env_fix):
    return warning("t", fix="x", env_fix=env_fix).stamped(fid, "n", "f")


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_lines_are_quoted_for_posix_shells_and_round_trip_through_sh():
    weird = "a b'c\"$HOME`id`;\\x*"
    lines, ids, dropped = env_fix_lines([_f("X001", {"DDPDOCTOR_T": weird, "DDPDOCTOR_U": None})])
    assert lines == [f"export DDPDOCTOR_T={shlex.quote(weird)}", "unset DDPDOCTOR_U"] and ids == ["X001"]
    out = subprocess.run(["sh", "-c", 'eval "$0"; printf %s "$DDPDOCTOR_T"; printf "|%s" "${DDPDOCTOR_U-unset}"',
                          "\n".join(lines)], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ["PATH"], "DDPDOCTOR_U": "1"})
    assert out.stdout == weird + "|unset"


def test_never_a_secret_a_bad_name_or_a_conflict():
    findings = [_f("A001", {"HF_TOKEN": "x"}), _f("A002", {"NCCL_X": "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"}),
                _f("A003", {"BAD NAME": "1", "$(reboot)": "1"}), _f("A004", {"OMP_NUM_THREADS": "2"}),
                _f("A005", {"OMP_NUM_THREADS": "4"}), _f("A006", {"TOKENIZERS_PARALLELISM": "false"}),
                _f("A007", {"TOKENIZERS_PARALLELISM": "false"})]
    lines, ids, dropped = env_fix_lines(findings)
    assert lines == ["export TOKENIZERS_PARALLELISM=false"] and ids == ["A006", "A007"]
    assert len(dropped) == 5 and not any("hf_QwEr" in d for d in dropped)


def _apply(snap: Snapshot, lines) -> Snapshot:
    """What `eval` does to the recorded env, for snapshot replays."""
    doc = snap.to_dict()
    env = doc["sections"]["env"]["vars"]
    for line in lines:
        words = shlex.split(line)
        if words[0] == "unset":
            env.pop(words[1], None)
        else:
            name, _, value = words[1].partition("=")
            env[name] = value
    return Snapshot.from_dict(doc)


def _keys(findings):
    return {(f.id, f.subjects) for f in findings}


@pytest.mark.parametrize("env,fixed", [
    ({"NCCL_SOCKET_IFNAME": "eth9", "GLOO_SOCKET_IFNAME": "eth9"}, None),  # two up NICs: never a guess
    ({"OMP_NUM_THREADS": "16", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "4", "RANK": "0", "LOCAL_RANK": "0",
      "MASTER_ADDR": "node0", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "x"}, {"ENV006"}),
])
def test_interfaces_only_when_one_has_the_merit(env, fixed):
    snap = make_snapshot(env)
    found = findings_of(snap)
    lines, ids, _ = env_fix_lines(found)
    if fixed is None:  # eth0 and ib0 are both up: NET001 stays for a human
        assert "NET001" in {f.id for f in found} and not lines
        one = make_snapshot(env, network={"interfaces": [i for i in make_snapshot().get("network")["interfaces"]
                                                         if i["name"] != "ib0"]})
        lines, ids, _ = env_fix_lines(findings_of(one))
        assert sorted(lines) == ["export GLOO_SOCKET_IFNAME=eth0", "export NCCL_SOCKET_IFNAME==eth0"]
        snap, found = one, findings_of(one)
    else:
        assert set(ids) == fixed
    after = findings_of(_apply(snap, lines))
    assert not set(ids) & {f.id for f in after}
    assert _keys(after) <= _keys(found)


def test_stale_p2p_flag_on_a_dgx_snapshot_is_unset_and_stays_gone():
    doc = Snapshot.load(os.path.join(ROOT, "fixtures", "snapshots", "dgx-a100-8x-nvswitch.json")).to_dict()
    doc["sections"]["env"]["vars"].update({"NCCL_P2P_DISABLE": "1", "NCCL_ASYNC_ERROR_HANDLING": "1"})
    snap = Snapshot(sections=doc["sections"])
    found = findings_of(snap)
    lines, ids, _ = env_fix_lines(found)
    assert "unset NCCL_P2P_DISABLE" in lines and {"GPU013", "NCCL002"} <= set(ids)
    after = findings_of(_apply(snap, lines))
    assert not set(ids) & {f.id for f in after} and _keys(after) <= _keys(found)


def _check_json(env):
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json"], capture_output=True,
                         text=True, timeout=90, env=env)
    return {(f["id"], tuple(f["subjects"])) for f in json.loads(res.stdout)["findings"]}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_eval_in_a_real_shell_clears_what_it_printed_and_adds_nothing():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL_", "CUDA_", "OMP_", "GLOO_",
                                                                    "TOKENIZERS_"))}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG_SUBSYSTEM": "INIT", "NCCL_ASYNC_ERROR_HANDLING": "1",
                "TORCH_NCCL_BLOCKING_WAIT": "yes", "CUDA_DEVICE_ORDER": "PCI"})
    cores = len(os.sched_getaffinity(0))
    if cores >= 2:  # 2 local ranks x (cores + 1) threads: oversubscribed; the fix is cores // 2 each
        env.update({"LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": str(cores + 1)})
    before = _check_json(env)
    script = ('out=$("$0" -m ddpdoctor check --no-comm --fix-env) || exit 9\n'
              'printf "%s\\n" "$out" > "$1"\n'
              'eval "$out"\n'
              'exec "$0" -m ddpdoctor check --no-comm --json\n')
    lines_file = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fixenv-{os.getpid()}.txt")
    try:
        res = subprocess.run(["sh", "-c", script, sys.executable, lines_file], capture_output=True, text=True,
                             timeout=180, env=env)
        printed = open(lines_file).read().split("\n")
    finally:
        if os.path.exists(lines_file):
            os.unlink(lines_file)
    printed = [p for p in printed if p]
    assert printed and all(LINE.fullmatch(p) for p in printed), printed
    assert "export TOKENIZERS_PARALLELISM=false" in printed and "unset NCCL_DEBUG_SUBSYSTEM" in printed
    after = {(f["id"], tuple(f["subjects"])) for f in json.loads(res.stdout)["findings"]}
    fixed = {k for k in before if k[0] in ("TOK001", "NCCL001", "NCCL002", "NCCL003", "ENV008", "ENV006")}
    assert len(fixed) >= 5 and not fixed & after, (fixed, after)
    # nothing new: no check that was quiet speaks now (GPU001 may name the renamed variable instead)
    assert {i for i, _ in after} <= {i for i, _ in before}, after - before


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_fix_env_refuses_other_output_formats():
    res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--fix-env", "--json"],
                         capture_output=True, text=True, timeout=90)
    assert res.returncode == 2 and res.stdout == "" and len(res.stderr.strip().splitlines()) == 1
