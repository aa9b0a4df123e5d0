"""Issue 27, round 13: the classes the held-out review of `ddpdoctor run` left (real public scripts, injected
faults; no case read). (A) the job's stderr reaches the verdict in every mode of the doctor's own stderr;
(B) a multi-node launch whose rendezvous never filled names the nodes that joined and the ones missing;
(C) the split's backward part starts at the backward() call. Pure functions on recorded facts, and short
process tests only where a child's view of its own stderr is the fact."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ddpdoctor.commands.run import rendezvous_unfilled
from ddpdoctor.run import capture, multinode
from ddpdoctor.run.supervisor import Supervisor

# torchrun --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port 29611 --rdzv-conf timeout=5, on one node
# (torch 2.13, static rendezvous): the launcher's last line
STORE_UNFILLED = """  File "/site/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line 67, in next_rendezvous
    self._store = TCPStore(  # type: ignore[call-arg]
torch.distributed.DistStoreError: Timed out after 6 seconds waiting for clients. 1/2 clients joined.
"""
# a worker node that never reached the store: LOG008's class, not an unfilled rendezvous
CLIENT_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying "
                  "to connect to (10.0.0.1, 29500).\n")
TORCHRUN_2 = ["torchrun", "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", "0", "--master-addr", "127.0.0.1",
              "--master-port", "29611", "train.py"]


# ---------------------------------------------------------------- (A) the job's stderr, kept and copied on

def test_the_kept_stderr_is_its_head_and_tail_with_the_middle_counted(monkeypatch):
    monkeypatch.setattr(capture, "HEAD_BYTES", 8)
    monkeypatch.setattr(capture, "TAIL_BYTES", 8)
    tee = capture.StderrTee()
    tee.keep(b"HEAD1234" + b"x" * 100)
    tee.keep(b"TAIL5678")
    text = tee.text(0)
    assert text.startswith("HEAD1234") and text.endswith("TAIL5678") and "100 bytes of the job's stderr left out" in text


def test_a_short_stderr_is_kept_whole():
    tee = capture.StderrTee()
    tee.keep(b"line 1\r\nline 2\n")
    assert tee.text(0) == "line 1\nline 2\n"


def test_a_line_only_the_jobs_stderr_holds_reaches_the_verdict():
    """No exception record: the store's count was printed by C++ (or by a launcher without the doctor)."""
    sup = Supervisor(list(TORCHRUN_2))
    sup.stderr_tee = capture.StderrTee()
    sup.stderr_tee.keep(STORE_UNFILLED.encode())
    assert "1/2 clients joined" in sup.job_output()
    assert Supervisor(list(TORCHRUN_2)).job_output() == ""  # not captured (a library caller's choice): nothing


def _child_view(out_fd: int) -> tuple:
    tee = capture.StderrTee(out_fd=out_fd)
    err = tee.child_stderr()
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('tty=%s\\nline\\n' % "
                             "sys.stderr.isatty()); sys.stderr.flush()"], stderr=err)
    tee.started()
    proc.wait(timeout=60)
    tee.wait(10)
    return tee.mode, tee.text(0)


@pytest.mark.slow
def test_through_a_pipe_the_job_sees_no_terminal_and_every_byte_is_copied_on():
    """Needs a process: the fact is what the job's own isatty() says about the stderr it was given."""
    r, w = os.pipe()
    try:
        mode, kept = _child_view(w)
        os.close(w)
        w = None
        copied = os.read(r, 65536).decode()
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
    assert mode == "pipe" and kept == "tty=False\nline\n" and copied == kept


@pytest.mark.slow
def test_on_a_terminal_the_job_still_sees_a_terminal_and_its_bytes_pass_unchanged():
    """Needs a process: the job's own isatty() on a doctor whose stderr is a terminal (a pty here)."""
    import pty

    master, slave = pty.openpty()
    try:
        mode, kept = _child_view(slave)
        copied = os.read(master, 65536).decode()
    finally:
        os.close(master)
        os.close(slave)
    assert mode == "pty" and kept == "tty=True\nline\n"
    assert "tty=True" in copied and "line" in copied


# ---------------------------------------------------------------- (B) a rendezvous that never filled

def test_the_stores_own_count_is_read_from_the_jobs_output():
    end = multinode.rendezvous_end(STORE_UNFILLED)
    assert end["joined"] == 1 and end["expected"] == 2 and end["timeout_s"] == 6 and end["how"] == "store"
    dyn = multinode.rendezvous_end("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    assert dyn["how"] == "rendezvous" and dyn["joined"] is None


@pytest.mark.parametrize("text", ["", CLIENT_TIMEOUT, "RuntimeError: Connection closed by peer [10.0.0.2]:4321\n"])
def test_output_of_no_unfilled_rendezvous_reads_as_none(text):
    assert multinode.rendezvous_end(text) is None


def test_a_two_node_launch_on_one_node_names_the_missing_node_and_the_fix():
    sup = Supervisor(list(TORCHRUN_2))
    found = rendezvous_unfilled(sup, {"ranks": [], "events": []}, STORE_UNFILLED)
    assert [f.id for f in found] == ["RUN024"] and found[0].severity == "error"
    t = found[0].title
    assert "1 of 2 nodes joined" in t and "--node-rank 0" in t and "node rank 1" in t and "--nnodes 2" in t
    assert "127.0.0.1:29611" in t
    assert "--nnodes 1" in found[0].fix and "--master-addr and --master-port" in found[0].fix


def test_the_nodes_whose_doctor_reached_the_store_are_named():
    from ddpdoctor.checks.run import rendezvous_nodes

    rz = {"nnodes": 3, "ended": {"how": "rendezvous", "joined": None}, "this_node": {"host": "a", "node_rank": None},
          "nodes_seen": [{"node": 1, "host": "a", "pid": 5, "this": True}, {"node": 2, "host": "b", "pid": 6}]}
    expected, joined, who, miss, missing_n = rendezvous_nodes(rz)
    assert (expected, joined, missing_n) == (3, 2, 1) and "a (this node)" in who and "b (its ddpdoctor run, pid 6)" in who


def test_a_job_that_failed_otherwise_gets_no_rendezvous_verdict():
    sup = Supervisor(list(TORCHRUN_2))
    sec = {"ranks": [], "events": []}
    assert rendezvous_unfilled(sup, sec, CLIENT_TIMEOUT) == [] and "rendezvous" not in sec
    trained = {"ranks": [{"rank": 0, "step": 40}], "events": []}  # an elastic re-rendezvous after training
    assert rendezvous_unfilled(sup, trained, STORE_UNFILLED) == [] and "rendezvous" not in trained


# ---------------------------------------------------------------- (C) backward starts at the backward() call

def _split_state(monkeypatch, recorder, clock):
    import _thread

    from ddpdoctor.run.inprocess import _NullWriter

    S = recorder.S
    monkeypatch.setattr(recorder._sp, "__defaults__", (lambda: clock[0],))
    for name in type(S).__slots__:
        if hasattr(S, name):
            monkeypatch.setattr(S, name, getattr(S, name))
    for name, value in (("writer", _NullWriter()), ("main", _thread.get_ident()), ("off", False), ("kind", "proc"),
                        ("inside", False), ("ddp_seen", False), ("sp", recorder.OTHER), ("spl", True), ("in_bw", False),
                        ("sp_t", clock[0]), ("sp_acc", [0.0] * recorder.NPARTS)):
        setattr(S, name, value)
    return S


def _tensor_module(recorder, clock):
    """A Tensor class whose backward() was wrapped (before ours) by code that waits 0.2 s before autograd
    starts, as a fault injected into `loss.backward()` does; autograd's backward then computes 0.05 s."""
    import types

    def work(seconds):
        clock[0] += seconds

    autograd_backward = recorder._wrap_backward(lambda t, *a, **k: work(0.05))

    class Tensor:
        def backward(self, gradient=None):
            work(0.2)
            autograd_backward(self, gradient)

    return types.SimpleNamespace(Tensor=Tensor)


def test_time_inside_the_backward_call_before_autograd_is_the_backwards(monkeypatch):
    """A fake clock the "work" advances (exact on a loaded host). With Tensor.backward wrapped (its own patch,
    put over the job's wrapper), the 0.2 s before autograd is compute, once, and none of it is "other"."""
    from ddpdoctor.run import recorder

    clock = [1000.0]
    S = _split_state(monkeypatch, recorder, clock)
    monkeypatch.setattr(recorder, "_ARMED", [])
    monkeypatch.setattr(recorder, "_ARMED_PRE", [])
    monkeypatch.setattr(recorder, "_TENSOR_CLS", [])
    mod = _tensor_module(recorder, clock)
    orig = mod.Tensor.__dict__["backward"]
    recorder._patch_tensor(mod)
    assert mod.Tensor.__dict__["backward"] is not orig and len(recorder._ARMED) == 1
    mod.Tensor().backward()
    acc = S.sp_acc
    assert acc[recorder.COMPUTE] == pytest.approx(0.25, abs=1e-9) and acc[recorder.OTHER] == 0.0, acc
    assert S.sp == recorder.AFTER_BW and not S.in_bw
    recorder._arm(False)  # unsampled steps: the original, no wrapper in the way
    assert mod.Tensor.__dict__["backward"] is orig


def test_torchs_own_tensor_backward_is_left_alone_and_a_later_wrapper_is_wrapped_at_the_next_arming(monkeypatch):
    """Quiet: torch's own Tensor.backward (nothing runs before autograd) is not swapped on the class. Trigger: a
    wrapper the job puts there after the attach is wrapped at the next sampled step's arming."""
    from ddpdoctor.run import recorder

    clock = [1000.0]
    _split_state(monkeypatch, recorder, clock)
    monkeypatch.setattr(recorder, "_ARMED", [])
    monkeypatch.setattr(recorder, "_ARMED_PRE", [])
    monkeypatch.setattr(recorder, "_TENSOR_CLS", [])
    mod = _tensor_module(recorder, clock)
    own = mod.Tensor.__dict__["backward"]
    own.__module__ = "torch._tensor"  # as torch's own
    recorder._patch_tensor(mod)
    assert mod.Tensor.__dict__["backward"] is own and recorder._ARMED == []
    recorder._arm(True)
    assert mod.Tensor.__dict__["backward"] is own

    def theirs(self, *a, **k):  # the job's wrapper, after the attach
        return own(self, *a, **k)

    mod.Tensor.backward = theirs
    recorder._arm(True)
    assert getattr(mod.Tensor.__dict__["backward"], "__ddpdoctor_wrapped__", False)
    recorder._arm(False)
    assert mod.Tensor.__dict__["backward"] is theirs


def test_without_the_tensor_patch_that_time_is_other(monkeypatch):
    """The quiet twin (round 12's behaviour): only torch.autograd.backward wrapped, its part starts there."""
    from ddpdoctor.run import recorder

    clock = [1000.0]
    S = _split_state(monkeypatch, recorder, clock)
    _tensor_module(recorder, clock).Tensor().backward()
    acc = S.sp_acc
    assert acc[recorder.COMPUTE] == pytest.approx(0.05, abs=1e-9) and acc[recorder.OTHER] == pytest.approx(0.2, abs=1e-9)


def test_a_stop_in_the_rendezvous_names_the_nodes_whose_doctor_reached_the_store():
    from run_factory import findings, section as make_section

    rz = {"nnodes": 2, "host": "head", "port": 29400, "ranks_started": 0, "ranks_in_init": 0, "waited_s": 60.0,
          "launcher_frame": None, "this_node": {"host": "head", "node_rank": 0},
          "nodes_seen": [{"node": 1, "host": "head", "pid": 7, "this": True}]}
    kill = {"reason": "ddpdoctor run received SIGTERM", "t": 1.0}
    f = [f for f in findings(make_section([], stall=False, kill=kill, rendezvous=rz)) if f.id == "RUN024"]
    assert len(f) == 1 and "1 of 2 nodes' ddpdoctor run reached its store: head (this node, --node-rank 0)" in f[0].title
    quiet = [f for f in findings(make_section([], stall=False, kill=kill, rendezvous=dict(rz, nodes_seen=[])))
             if f.id == "RUN024"]
    assert len(quiet) == 1 and "reached its store" not in quiet[0].title
