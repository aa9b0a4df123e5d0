"""Round-12 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (facebookincubator/gloo gloo/transport/tcp, the torch 2.13.0
wheel); pure in-process tests."""
from __future__ import annotations

from ddpdoctor.triage.api import triage_paths


def _found_text(tmp_path, text):
    p = tmp_path / "job.log"
    p.write_text(text, encoding="utf-8")
    return [f for f in triage_paths([str(p)]).sorted_findings() if f.severity in ("error", "warning")]


def _first(tmp_path, text):
    found = _found_text(tmp_path, text)
    assert found, "no finding"
    return found[0]


# --- Gloo's transport errors, routed to their root cause or consequence -----------------------------------------
_TB = ("Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    dist.all_gather(out, t)\n")


def test_gloo_received_size_mismatch_is_a_collective_mismatch(tmp_path):
    f = _first(tmp_path, _TB + "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:525] "
               "op.preamble.length <= op.nbytes. 68157440 vs 62914560. Received data size doesn't match expected size. "
               "Is there a distributed collective mismatch in your code?\n")
    assert f.id == "LOG027" and f.severity == "error"


def test_gloo_application_timeout_alone_is_a_collective_timeout(tmp_path):
    f = _first(tmp_path, "RuntimeError: Application timeout caused pair closure\n")
    assert f.id == "LOG001" and "Gloo" in f.title


def test_gloo_pair_closure_beside_the_timeout_is_no_failure_of_its_own(tmp_path):
    found = _found_text(tmp_path, "[rank3]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81]"
                        " Timed out waiting 1800000ms for recv operation to complete\n"
                        "[rank2]: RuntimeError: Application timeout caused pair closure\n")
    assert found[0].id == "LOG001" and not [x for x in found if x.id == "LOG004"]


def test_gloo_read_timeout_is_a_collective_timeout(tmp_path):
    f = _first(tmp_path, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:520] Read timeout [10.0.0.2]:41234\n")
    assert f.id == "LOG001"


def test_gloo_socket_closed_is_a_lost_peer(tmp_path):
    f = _first(tmp_path, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:797] Socket closed [10.0.0.2]:41234\n")
    assert f.id == "LOG022"


def test_gloo_writev_error_is_a_lost_peer(tmp_path):
    f = _first(tmp_path, "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:339] writev [10.0.0.2]:41234: "
               "No route to host\n")
    assert f.id == "LOG022"


def test_gloo_writev_after_a_rank_death_names_that_death(tmp_path):
    found = _found_text(tmp_path, "[rank1]: ValueError: bad shape in batch 7\n[rank0]: RuntimeError: "
                        "[../third_party/gloo/gloo/transport/tcp/pair.cc:339] writev [10.0.0.3]:50211: Broken pipe\n")
    assert found[0].id == "LOG004" and "ValueError" in found[0].title


def test_gloo_timeout_without_a_rank_says_so(tmp_path):
    f = _first(tmp_path, _TB + "RuntimeError: [/opt/conda/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
               "waiting 1800000ms for recv operation to complete\n")
    assert f.id == "LOG001" and "rank none" not in f.title


def test_gloo_timeout_after_a_rank_death_stays_a_consequence(tmp_path):
    found = _found_text(tmp_path, "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                        "[rank0]: RuntimeError: Application timeout caused pair closure\n")
    assert found[0].id != "LOG001" and not [x for x in found if x.id == "LOG001"]


def test_gloo_clean_run_is_quiet(tmp_path):
    found = _found_text(tmp_path, "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error"]


# --- a catalogued timeout event (XLA's rendezvous watchdog) is a hang finding, not an unexplained failure ----------
def test_xla_rendezvous_stuck_last_is_a_collective_timeout(tmp_path):
    f = _first(tmp_path, "2024-07-29 17:14:59.920189: E external/xla/xla/service/rendezvous.cc:38] This thread has been "
               "waiting for `initialize clique for rank 6; clique=devices=[0,1]; stream=0; run_id=1` for 10 seconds and may "
               "be stuck. Expected 8 threads to join the rendezvous, but not all of them arrived on time.\n")
    assert f.id == "LOG001" and "XLA" in f.title


# --- left by round 11: PSM3's 'host:rankN:' label names the rank; XLA's coordination-agent error ------------------
def test_psm_assertion_names_the_rank_of_its_label(tmp_path):
    f = _first(tmp_path, "machine:rank1: Assertion failure at psm3/ptl_am/ptl.c:196: nbytes == req->req_data.recv_msglen\n")
    assert f.id == "LOG027" and "rank:1" in f.subjects


def test_psm_cma_fallback_notice_is_no_failure(tmp_path):
    found = _found_text(tmp_path, "[1705415958.879795729] machine:rank1.cpu_allreduce_test: Reading from remote process' "
                        "memory failed. Disabling CMA support\nEpoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error" or x.title.startswith("unexplained failure")]


def test_label_like_words_are_not_a_psm_host(tmp_path):
    from ddpdoctor.triage.lines import parse
    assert parse(0, 1, 0, b"epoch:rank1: x").rank is None


def test_xla_coordination_agent_error_is_the_coordinator_unreached(tmp_path):
    f = _first(tmp_path, "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination "
               "service agent in error status: DEADLINE_EXCEEDED: Deadline Exceeded\n")
    assert f.id == "LOG008" and "JAX coordination service" in f.title and "MASTER_ADDR" not in f.title


def test_xla_coordination_heartbeat_error_is_a_lost_peer(tmp_path):
    f = _first(tmp_path, "E0101 00:00:00.000000 1 client.cc:96] Coordination service agent in error status: UNAVAILABLE: "
               "Task /job:jax_worker/replica:0/task:3 heartbeat timeout. This indicates that the remote task has failed\n")
    assert f.id == "LOG022"


# --- batch 77's class: a Python exception of the connect that failed after Gloo's loopback fallback ----------------
_LOOPBACK = ("[rank8] Warning: Unable to resolve hostname to a (local) address. Using the loopback\n"
             "        address as fallback. Manually set the network interface with GLOO_SOCKET_IFNAME\n")


def test_connect_exception_after_loopback_fallback_is_the_fallback(tmp_path):
    found = _found_text(tmp_path, _LOOPBACK + "[rank8] Gloo connectFullMesh failed ... timed out connecting: SO_ERROR: "
                        "Connection refused,\n        remote=[127.0.0.1]:14215\nRuntimeError: Gloo connectFullMesh failed ...\n")
    assert found[0].id == "LOG025" and not [x for x in found if x.id in ("LOG004", "LOG008")]


def test_loopback_fallback_on_one_host_then_training_is_no_failure(tmp_path):
    found = _found_text(tmp_path, _LOOPBACK + "Epoch 1 step 10 loss 2.345\nEpoch 1 step 20 loss 2.101\n")
    assert not [x for x in found if x.severity == "error"]


def test_other_exception_after_loopback_fallback_stays_its_own_failure(tmp_path):
    found = _found_text(tmp_path, _LOOPBACK + "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
                        "ValueError: bad batch size\n")
    assert found[0].id == "LOG004"


# --- batch 79's classes: Horovod's shutdown is a peer's failure; torch_xla's 'Exception in device=TPU:N' names it ----
_HVD = ("RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to "
        "allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused "
        "by an exception, you should see the exception in the log before the first shutdown message.\n")


def test_horovod_shutdown_is_a_lost_peer_not_a_rank_failure(tmp_path):
    f = _first(tmp_path, "Traceback (most recent call last):\n  File \"train_hvd.py\", line 57, in train\n"
               "    hvd.broadcast_parameters(model.state_dict(), root_rank=0)\n" + _HVD)
    assert f.id == "LOG022" and "Horovod" in f.title


def test_horovod_shutdown_after_the_real_exception_names_that_exception(tmp_path):
    found = _found_text(tmp_path, "[1,1]<stderr>:ValueError: bad label 7\n[1,0]<stderr>:" + _HVD)
    assert found[0].id == "LOG004" and "ValueError" in found[0].title


def test_xla_device_exception_names_its_device_as_a_local_rank(tmp_path):
    from ddpdoctor.triage.lines import parse
    line = parse(0, 1, 0, b"Exception in device=TPU:3: tensorflow/compiler/xla/xla_client/mesh_service.cc:243 : "
                          b"Failed to meet rendezvous 'init': Socket closed (14)")
    assert line.local_rank == 3 and "Failed to meet rendezvous" in line.text


def test_exception_in_device_inside_a_sentence_is_not_a_prefix(tmp_path):
    from ddpdoctor.triage.lines import parse
    assert parse(0, 1, 0, b"We saw Exception in device=TPU:3: x").local_rank is None
