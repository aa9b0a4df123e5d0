"""Round 19, wave 5 (issue 24, after the held-out review): the TCPStore client's read getting 0 bytes is the store's
host gone (torch/csrc/distributed/c10d/Utils.hpp recvBytes' "Failed to recv, got 0 bytes. Connection was likely
closed. Did the remote server shutdown or crash?", pytorch/pytorch @cf30153c4c131c8164ee7798e5022d810682e2cb; the
line TCPStore.cpp writes around it names the store: "recvValue failed on SocketImpl(..., remote=[H]:P)"): LOG008 with
its cause and the store's host:port, not an unexplained failure."""
from ddpdoctor.triage.api import triage_paths

_CLOSED = ("[rank1]:[W1207 07:40:19.968570826 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=64, "
           "addr=[node2]:35986, remote=[node1]:29500): Failed to recv, got 0 bytes. Connection was likely closed. "
           "Did the remote server shutdown or crash?\n")
_RAISED = ("[rank1]: Traceback (most recent call last):\n"
           '[rank1]:   File "train.py", line 10, in <module>\n'
           '[rank1]:     dist.barrier()\n'
           "[rank1]: torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
           "Did the remote server shutdown or crash?\n")


def _found(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text)
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def test_store_closed_with_its_exception_is_the_store_lost_naming_host_and_port(tmp_path):
    f = _found(tmp_path, _CLOSED + _RAISED)
    assert f and f[0].id == "LOG008" and f[0].severity == "error", [(x.id, x.severity, x.title) for x in f]
    assert "node1:29500" in f[0].title and "rank:1" in f[0].subjects and "got 0 bytes" in f[0].title, f[0].title
    assert not any(x.id == "LOG028" for x in f), [(x.id, x.title) for x in f]


def test_store_closed_without_the_address_says_the_settings_not_a_guess(tmp_path):
    f = _found(tmp_path, _RAISED)
    assert f and f[0].id == "LOG008" and "MASTER_ADDR:MASTER_PORT" in f[0].title, [(x.id, x.title) for x in f]


def test_store_closed_after_rank0s_own_failure_is_a_consequence(tmp_path):
    """The quiet side: rank 0 (the store's host) failed first with its own cause: that is the root cause named."""
    f = _found(tmp_path, "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
               "total capacity of 79.15 GiB of which 1.10 GiB is free.\n" + _CLOSED + _RAISED)
    assert f and f[0].id == "LOG005" and "rank:0" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_store_closed_only_in_warnings_is_a_warning_not_an_error(tmp_path):
    """The quiet side of the severity: c10d's warning lines alone (the heartbeat's last store check racing the store
    host's exit at the end of a run looks like this) are a warning that says so, not an error."""
    steps = "".join(f"[rank0]: step {i} loss 0.5\n" for i in range(30))
    f = _found(tmp_path, steps + _CLOSED)
    assert f and f[0].id == "LOG008" and f[0].severity == "warning", [(x.id, x.severity, x.title) for x in f]
    assert not any(x.severity == "error" for x in f), [(x.id, x.severity, x.title) for x in f]


def test_other_zero_byte_prose_is_not_the_store(tmp_path):
    from ddpdoctor.facts import messages
    for line in ("got 0 bytes from the cache, retrying", "recv failed: connection closed (0 bytes), retrying"):
        assert not any(m.entry["id"] == "torch.c10d.utils.failed_to_recv_got_0_bytes" for m in messages.match_all(line))


# --- the TPU runtime's host count against a pod slice's host topology (libtpu; pytorch/xla docs/pjrt.md 'Pods') -----
def test_tpu_pod_started_on_one_host_is_a_launch_misconfiguration(tmp_path):
    f = _found(tmp_path, "RuntimeError: Bad StatusOr access: INTERNAL: Invalid system configuration: 2x2x1 host topology "
               "with 0 missing hosts, but 1 hosts in total.\n")
    assert f and f[0].id == "LOG023", [(x.id, x.title) for x in f]
    assert "1 of its 4 hosts" in f[0].title and "--worker=all" in f[0].title, f[0].title


def test_tpu_hosts_of_separate_tpus_say_so_not_worker_all(tmp_path):
    f = _found(tmp_path, "*** InternalError: Invalid system configuration: 1x1 host topology with 0 missing hosts, but 2 "
               "hosts in total.\n")
    assert f and f[0].id == "LOG023" and "separate TPUs" in f[0].title, [(x.id, x.title) for x in f]


def test_tpu_topology_words_elsewhere_are_not_the_launch(tmp_path):
    """The quiet side: a TPU log's own topology lines and prose are no catalogue match and no LOG023."""
    from ddpdoctor.facts import messages
    for line in ("Initializing TPU system with 2x2x1 host topology, 4 hosts in total",
                 "invalid system configuration file: /etc/tpu.yaml"):
        assert not any(m.entry["id"].startswith("libtpu.") for m in messages.match_all(line)), line
    f = _found(tmp_path, "I1207 10:00:00.000 tpu_system.cc:50] TPU host topology 2x2x1, 4 hosts in total\n"
               "step 1 loss 0.5\n")
    assert not any(x.id == "LOG023" for x in f), [(x.id, x.title) for x in f]


# --- NCCL's collective trace: different operations at one opCount of one communicator (NVIDIA/nccl src/enqueue.cc) --
def _init(host, pid, dev, comm, rank, n):
    return f"{host}:{pid}:{pid} [{dev}] NCCL INFO comm {comm} rank {rank} nranks {n} cudaDev {dev} busId {dev}000 commId 0xabc - Init START\n"


def _coll(host, pid, dev, op, opc, comm, n):
    return (f"{host}:{pid}:{pid} [{dev}] NCCL INFO {op}: opCount {opc:x} sendbuff 0x7f0000 recvbuff 0x7f0000 count 1024 "
            f"datatype 7 op 0 root 0 comm {comm} [nranks={n}] stream 0x55aa\n")


def test_nccl_trace_with_two_ops_at_one_opcount_is_a_mismatch_naming_ranks_and_ops(tmp_path):
    log = (_init("n1", 100, 0, "0x55d5a8f0c0", 0, 2) + _init("n2", 200, 0, "0x5612aa00d0", 1, 2)
           + "".join(_coll("n1", 100, 0, "AllReduce", i, "0x55d5a8f0c0", 2) for i in range(17))
           + "".join(_coll("n2", 200, 0, "AllReduce", i, "0x5612aa00d0", 2) for i in range(16))
           + _coll("n2", 200, 0, "Broadcast", 16, "0x5612aa00d0", 2))
    f = _found(tmp_path, log)
    assert f and f[0].id == "LOG019", [(x.id, x.title) for x in f]
    t = f[0].title
    assert "opCount 10 " in t and "AllReduce on rank 0" in t and "Broadcast on rank 1" in t, t
    assert {"rank:0", "rank:1"} <= set(f[0].subjects), f[0].subjects


def test_nccl_trace_that_agrees_or_is_other_communicators_is_quiet(tmp_path):
    """The quiet side: the same ops at each opCount; and a 2-rank subgroup's Broadcast at the opCount of the 4-rank
    group's AllReduce is another communicator, not a mismatch."""
    same = "".join(_coll(h, p, 0, "AllReduce", i, c, 2) for i in range(5)
                   for h, p, c in (("n1", 100, "0xa0"), ("n2", 200, "0xb0")))
    other = (_coll("n1", 100, 0, "AllReduce", 0, "0xa0", 4) + _coll("n2", 200, 0, "AllReduce", 0, "0xb0", 4)
             + _coll("n1", 100, 0, "Broadcast", 0, "0xa1", 2) + _coll("n3", 300, 0, "Broadcast", 0, "0xc1", 2))
    for log in (same, other):
        f = _found(tmp_path, log)
        assert not any(x.id == "LOG019" for x in f), [(x.id, x.title) for x in f]
