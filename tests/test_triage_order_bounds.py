"""A line with no stamp of its own carries its stream's nearest stamp, a bound and not its time (issue 24, the lead's
held-out review, round 16: a Gloo send timeout printed 30 s after rank 1's last stamped line read as LATER than rank 0's
"Connection closed by peer" that followed it in the file, by 1 ms of two borrowed stamps). Within one file the order
the lines were written decides; the lost peer after a timeout is listed after the timeout's finding. Pure, in-process.
Formats: torch's "[rankN]:" prefix and c10d's W-log stamp (reducer.cpp), gloo's unbound_buffer.cc / pair.cc messages as
torch 2.13's wheel prints them."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths

_HEAD = (
    "[rank0]:[W1206 23:06:24.753210206 reducer.cpp:1529] Warning: find_unused_parameters=True was specified\n"
    "[rank1]:[W1206 23:06:24.754688114 reducer.cpp:1529] Warning: find_unused_parameters=True was specified\n"
)
_R1_TIMEOUT = (
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/job/train.py", line 40, in <module>\n'
    "[rank1]:     dist.all_gather(out, t)\n"
    "[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] "
    "Timed out waiting 30000ms for send operation to complete\n"
)
_R0_LOST = (
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/job/train.py", line 52, in <module>\n'
    "[rank0]:     dist.barrier()\n"
    "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed "
    "by peer [127.0.0.1]:19647. This is typically caused by a remote worker crashing.\n"
)


def _errors(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity == "error"]


def test_timeout_written_before_the_lost_peer_is_the_root_cause(tmp_path):
    found = _errors(tmp_path, _HEAD + _R1_TIMEOUT + _R0_LOST)
    ids = [f.id for f in found]
    assert ids and ids[0] == "LOG001", ids
    lost = [f for f in found if f.id == "LOG022"]
    assert not lost or "the timeout came first" in lost[0].title
    assert all("failed first" not in f.title for f in found)


def test_lost_peer_written_first_still_owns_the_timeouts(tmp_path):
    # quiet side: the connection closed BEFORE the other rank's timeout was written: the peer went away first
    found = _errors(tmp_path, _HEAD + _R0_LOST + _R1_TIMEOUT)
    assert found and found[0].id == "LOG022", [f.id for f in found]
