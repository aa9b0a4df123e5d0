"""check19d (issue 26, round 19 wave 5, after the held-out review): ENV001 on the environment of a launcher that
passes the rank to init_process_group itself (data/launchers.json "rank_passed_explicitly": PyTorch Lightning's
subprocess script launcher exports MASTER_ADDR, MASTER_PORT, NODE_RANK, LOCAL_RANK, WORLD_SIZE and never RANK)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from factory import findings_of, make_snapshot

# the variables Lightning's _SubprocessScriptLauncher._call_children_scripts exports (subprocess_script.py @03f57f9c)
LIGHTNING_CHILD = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517", "NODE_RANK": "0", "LOCAL_RANK": "1",
                   "WORLD_SIZE": "4"}
# a torchrun worker whose RANK is gone: torch's elastic agent always exports RANK, so this is a fault
TORCHRUN_NO_RANK = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517", "LOCAL_RANK": "1", "GROUP_RANK": "0",
                    "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "none",
                    "TORCHELASTIC_RESTART_COUNT": "0"}


def test_the_table_names_lightning_with_its_sources():
    from ddpdoctor.facts.launchers import rank_passed_explicitly, rank_passers

    [row] = [r for r in rank_passers() if r["name"] == "lightning-subprocess-script"]
    assert "RANK" in row["absent"] and "RANK" not in row["sets"]
    assert all(len(s["commit"]) == 40 and s["repo"] == "Lightning-AI/pytorch-lightning" for s in row["sources"])
    assert rank_passed_explicitly(LIGHTNING_CHILD) is row
    assert rank_passed_explicitly(dict(LIGHTNING_CHILD, RANK="1")) is None
    assert rank_passed_explicitly({k: v for k, v in LIGHTNING_CHILD.items() if k != "NODE_RANK"}) is None


def test_env001_quiet_on_lightnings_child_environment():
    """Lightning's children (and its main process, LOCAL_RANK=0): a note, no error."""
    for local_rank in ("0", "1"):
        [f] = findings_of(make_snapshot(env=dict(LIGHTNING_CHILD, LOCAL_RANK=local_rank)), "ENV001")
        assert f.severity == "info" and "launcher:lightning-subprocess-script" in f.subjects
        assert "init_process_group" in f.title


def test_env001_still_an_error_when_rank_is_really_missing():
    """A torchrun worker without RANK, and a hand-written launch without NODE_RANK (not Lightning's set): errors."""
    [f] = findings_of(make_snapshot(env=TORCHRUN_NO_RANK), "ENV001")
    assert f.severity == "error" and list(f.subjects) == ["RANK"]
    by_hand = {k: v for k, v in LIGHTNING_CHILD.items() if k != "NODE_RANK"}
    [f] = findings_of(make_snapshot(env=by_hand), "ENV001")
    assert f.severity == "error" and list(f.subjects) == ["RANK"]


# A parent that does what Lightning's _SubprocessScriptLauncher does (sets os.environ, Popen(env=env_copy) per local
# rank), with each child joining a real Gloo group with rank= passed (as _init_dist_connection does) and then
# running `ddpdoctor check --only ENV001` in the same environment.
PARENT = r'''
import json, os, subprocess, sys
mode, port = sys.argv[1], sys.argv[2]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, LOCAL_RANK="0", WORLD_SIZE="2")
if mode == "lightning":
    os.environ["NODE_RANK"] = "0"
else:
    os.environ.update(TORCHELASTIC_RUN_ID="none", GROUP_RANK="0", LOCAL_WORLD_SIZE="2")
child = ("import os, torch.distributed as dist\n"
         "dist.init_process_group('gloo', rank=int(os.environ['LOCAL_RANK']), world_size=int(os.environ['WORLD_SIZE']))\n"
         "dist.barrier(); print('JOINED', dist.get_rank(), flush=True); dist.destroy_process_group()\n")
procs = []
for local_rank in (0, 1):
    env = dict(os.environ, LOCAL_RANK=str(local_rank))
    procs.append(subprocess.Popen([sys.executable, "-c", child], env=env, stdout=subprocess.PIPE, text=True))
joined = [p.communicate(timeout=180)[0] for p in procs]
env = dict(os.environ, LOCAL_RANK="1")
res = subprocess.run([sys.executable, "-m", "ddpdoctor", "check", "--no-comm", "--json", "--only", "ENV001"],
                     env=env, capture_output=True, text=True, timeout=200)
print(json.dumps({"joined": joined, "codes": [p.returncode for p in procs],
                  "findings": json.loads(res.stdout)["findings"]}))
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize("mode", ["lightning", "torchrun-without-rank"])
def test_env001_on_a_real_launch_that_passes_the_rank(tmp_path, mode):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                                             "LOCAL_RANK", "NODE_RANK", "GROUP_RANK",
                                                             "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "SLURM_PROCID",
                                                             "OMPI_COMM_WORLD_RANK", "PMI_RANK")}
    env["PYTHONPATH"] = root
    (tmp_path / "parent.py").write_text(PARENT)
    res = subprocess.run([sys.executable, "parent.py", mode, _free_port()], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=400)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    # the state the test needs: both processes joined the group with the rank passed explicitly and no RANK
    assert out["codes"] == [0, 0] and all("JOINED" in j for j in out["joined"]), res.stderr[-2000:]
    [f] = [f for f in out["findings"] if f["id"] == "ENV001"]
    assert f["severity"] == ("info" if mode == "lightning" else "error"), f
