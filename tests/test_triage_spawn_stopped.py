"""mp.spawn's "Terminating process PID via signal SIGTERM" (torch/multiprocessing/spawn.py, ProcessContext.join: every
process still alive after one failed) names the processes that were NOT in the collective a peer timed out in (issue
24, the lead's held-out review, round 16: "rank 0 waiting, the laggard is not in these logs" where the log showed it).
Their ranks are not printed: the spawn index as the rank is named as a guess, and only when the indices add up.
Pure, in-process; the lines as torch 2.13's wheel prints them."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _log(stopped_pids, failed=0):
    head = "Train:  20%|##        | 20/101 [00:02<00:08,  9.74it/s]\n"
    stops = "".join(f"W1206 23:24:46.856000 29723 torch/multiprocessing/spawn.py:165] Terminating process {p} via signal "
                    "SIGTERM\n" for p in stopped_pids)
    tb = ("Traceback (most recent call last):\n"
          '  File "/job/main.py", line 22, in <module>\n'
          "    mp.spawn(train, nprocs=2)\n"
          "torch.multiprocessing.spawn.ProcessRaisedException: \n\n"
          f"-- Process {failed} terminated with the following error:\n"
          "Traceback (most recent call last):\n"
          '  File "/job/train.py", line 214, in _to_value\n'
          "    dist.all_reduce(tensor, op=dist.reduce_op.SUM)\n"
          "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
          "waiting 30000ms for recv operation to complete\n")
    return head + stops + tb


def _first(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity == "error"][0]


def test_the_process_spawn_stopped_is_named_as_the_laggard_a_guess(tmp_path):
    f = _first(tmp_path, _log([29824]))
    assert f.id == "LOG001"
    assert "mp.spawn stopped" in f.title and "rank 1" in f.title and "a guess" in f.title
    assert "rank:1" in f.subjects and "pid 29824" in f.detail


def test_two_stopped_processes_name_both_remaining_indices(tmp_path):
    f = _first(tmp_path, _log([29824, 29825]))
    assert "ranks 1, 2" in f.title or "ranks 1-2" in f.title, f.title


def test_no_stopped_process_says_the_laggard_is_not_in_the_logs(tmp_path):
    f = _first(tmp_path, _log([]))
    assert f.id == "LOG001" and "mp.spawn stopped" not in f.title and "not in these logs" in f.title
    assert "rank:1" not in f.subjects
