"""`ddpdoctor run` never changes how a rank exits (round 20, issue 27). A SIGABRT at shutdown after a rank's last step
(RUN013) and a hang there come from torch's Gloo teardown: a Gloo worker thread that frees a collective's tensors takes
the GIL (ddpdoctor/data/teardown.json); counted as often under plain torchrun as under `ddpdoctor run`
(docs/measured/run.md, round 20). A count of aborts is no test on a loaded machine (a race); what is deterministic is
the doctor's part in it: no thread of its own is alive in the rank while the interpreter shuts down, so nothing of
the doctor's can hold the GIL or a Gloo object then. Checked by the threads each rank has at its exit handlers (the fixture ends as every healthy fixture does, _ending.py),
plain torchrun against `ddpdoctor run`, same script, same environment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from test_run_faults import FIX, _env, doctor, torchrun

pytestmark = pytest.mark.slow


def _ranks(folder) -> dict:
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name)) as fh:
            rec = json.load(fh)
        out[rec["rank"]] = rec
    return out


@pytest.mark.timeout(480)
def test_the_doctor_leaves_no_thread_of_its_own_alive_at_exit(tmp_path):
    plain_dir, doc_dir = tmp_path / "plain", tmp_path / "doctor"
    plain_dir.mkdir()
    doc_dir.mkdir()
    env = _env("exit-threads-plain")
    env.update(EXIT_THREADS_DIR=str(plain_dir), OMP_NUM_THREADS="1")
    plain = subprocess.run(torchrun("exit_threads.py"), env=env, cwd=os.path.dirname(FIX), capture_output=True,
                           text=True, timeout=400, stdin=subprocess.DEVNULL)
    rc, out, rep = doctor(tmp_path, torchrun("exit_threads.py"),
                          env_extra={"EXIT_THREADS_DIR": str(doc_dir), "OMP_NUM_THREADS": "1"})
    bare, doc = _ranks(plain_dir), _ranks(doc_dir)
    # each run reached the state the comparison needs: both ranks ran every step and their last exit handler
    assert sorted(bare) == sorted(doc) == [0, 1], (plain.stdout[-2000:], plain.stderr[-2000:], out[-3000:])
    assert all(r["steps"] == 4 for r in [*bare.values(), *doc.values()])
    assert all(r["attached"] for r in doc.values()) and not any(r["attached"] for r in bare.values())
    for rank in (0, 1):
        # Python threads: the main one only, with and without the doctor
        assert doc[rank]["python"] == bare[rank]["python"] == ["MainThread"], (rank, doc[rank], bare[rank])
        # native threads (Gloo's pt_gloo_runloop and gloo_tcp_loop among them): the same set
        assert Counter(doc[rank]["native"]) == Counter(bare[rank]["native"]), (rank, doc[rank], bare[rank])
    assert plain.returncode == 0 and rc == 0, (plain.stderr[-2000:], out[-3000:])
