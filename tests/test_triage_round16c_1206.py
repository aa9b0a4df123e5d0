"""Round-16 wave-3 classes of issue 24 (triage, 2026-12-06): an orchestrator's job-status transition line (DLRover's
master, the Kubeflow training operator, `ray job submit`) and Ray's actor death read as the node/job failure they
report, with a title that says who reported what. Lines written from the formats the sources print; pure in-process."""
from __future__ import annotations

import pytest

from triage_factory import found as _found


_DLROVER = ("[2026-01-27 08:56:08,459] [INFO] [reporter.py:68:report] [2026-01-27, 08:56:08][{kind}][edljob-worker-30-30]"
            "[status_update][Running to {to}][{{\"from_state\": \"Running\", \"to_state\": \"{to}\", \"node\": "
            "\"edljob-worker-30-30\", \"exit reason\": \"Deleted\"}}]\n"
            "[2026-01-27 08:56:09,749] [INFO] [pod_scaler.py:502:_create_pod] Create Pod edljob-worker-13-58 with "
            "resource {{'cpu': 128.0}}\n")


@pytest.mark.parametrize("to", ["Failed", "Deleted"])
def test_dlrover_node_to_failed_is_a_node_failure(tmp_path, to):
    found = _found(tmp_path, _DLROVER.format(kind="warn", to=to))
    assert [f.id for f in found] == ["LOG028"]
    assert found[0].title == "unexplained failure: DLRover's job master reported a node failed (line 1)"
    assert "kubectl logs" in found[0].fix


def test_dlrover_node_to_running_is_not_a_failure(tmp_path):
    found = _found(tmp_path, _DLROVER.format(kind="info", to="Running").replace("Running to Running",
                                                                                 "Pending to Running"))
    assert not any(f.id == "LOG028" for f in found)


def test_kubeflow_job_failed_replicas(tmp_path):
    found = _found(tmp_path, "Normal  PyTorchJobFailed  2m  pytorchjob-controller  PyTorchJob default/dist-mnist is "
                             "failed because 1 Worker replica(s) failed.\n")
    assert [f.id for f in found] == ["LOG028"]
    assert "Kubeflow training operator marked the job failed" in found[0].title


def test_kubeflow_job_succeeded_is_quiet(tmp_path):
    found = _found(tmp_path, "Normal  PyTorchJobSucceeded  2m  pytorchjob-controller  PyTorchJob default/dist-mnist "
                             "successfully completed.\n")
    assert not any(f.id == "LOG028" for f in found)


def test_ray_job_failed_status(tmp_path):
    text = ("---------------------------------------\nJob 'raysubmit_73nQ2jgcpZATWrNN' failed\n"
            "---------------------------------------\n\nStatus message: Job entrypoint command failed with exit code 1, "
            "last available logs (truncated to 20,000 chars):\n")
    found = _found(tmp_path, text)
    assert [f.id for f in found] == ["LOG028"]
    assert found[0].title == ("unexplained failure: the Ray job ended with status FAILED (its entrypoint exited "
                              "non-zero) (line 2)")


def test_ray_job_succeeded_is_quiet(tmp_path):
    found = _found(tmp_path, "------------------------------------------\nJob 'raysubmit_73nQ2jgcpZATWrNN' succeeded\n"
                             "------------------------------------------\n")
    assert not any(f.id == "LOG028" for f in found)


_ACTOR = ("The actor is dead because its worker process has died. Worker exit type: {t} Worker exit detail: Worker "
          "unexpectedly exits with a connection\n error code 2. End of file. There are some potential root causes. "
          "(1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ra\n")


def test_wrapped_ray_actor_death_titled_as_a_worker_death(tmp_path):
    found = _found(tmp_path, _ACTOR.format(t="SYSTEM_ERROR"))
    assert [f.id for f in found] == ["LOG028"]
    assert found[0].title == "unexplained failure: Ray reported a worker process died (killed or crashed) (line 1)"


def test_intended_actor_exit_is_not_a_worker_death(tmp_path):
    text = ("The actor is dead because its worker process has died. Worker exit type: INTENDED_USER_EXIT Worker exit "
            "detail: Worker exits by an user request. exit_actor() is called.\n")
    found = _found(tmp_path, text)
    assert not any("Ray reported a worker process died" in f.title for f in found)


# --- batch classes (not first reads): a zero failure counter, PBS/Torque limit kills, UCX's own sockets ---------------
@pytest.mark.parametrize("line", [
    "| Failed requests                   |   0      |",
    "detecting02-trainer-2bnnd   Succeeded   2018-03-23T12:41:10Z   0           Failed trainer count beyond the "
    "threshold:  0",
    "Validation done: errors: 0, warnings: 2",
])
def test_zero_failure_counter_is_no_failure(tmp_path, line):
    found = _found(tmp_path, line + "\n")
    assert not any(f.id == "LOG028" or f.severity == "error" for f in found)


@pytest.mark.parametrize("line", [
    "| Failed requests                   |   3      |",
    "Failed trainer count beyond the threshold:  2",
])
def test_nonzero_failure_counter_still_a_failure(tmp_path, line):
    found = _found(tmp_path, line + "\n")
    assert [f.id for f in found] == ["LOG028"]


def test_pbs_walltime_kill_is_job_stopped(tmp_path):
    found = _found(tmp_path, "Epoch 3: loss 0.41\n=>> PBS: job killed: walltime 86415 exceeded limit 86400\n")
    assert found[0].id == "LOG026"
    assert found[0].title.startswith("PBS killed the job at its walltime limit (86415 s used, limit 86400 s)")


def test_pbs_server_abort_is_job_stopped(tmp_path):
    text = ("PBS Job Id: 3264864.mskcc-fe1.local\nAborted by PBS Server\nJob exceeded its walltime limit. Job was "
            "aborted\nSee Administrator for help\nExit_status=-11\n")
    found = _found(tmp_path, text)
    assert found[0].id == "LOG026" and found[0].title.startswith("PBS aborted the job at its walltime limit")


def test_pbs_memory_kill_is_host_oom(tmp_path):
    found = _found(tmp_path, "=>> PBS: job killed: vmem 34359738368 exceeded limit 17179869184\n")
    assert found[0].id == "LOG002"


def test_ucx_connection_refused_is_not_the_store(tmp_path):
    text = ("[1742467344.413567] [node1:2808 :0]            sock.c:334  UCX  ERROR   connect(fd=143, "
            "dest_addr=10.0.0.0:43833) failed: Connection refused\n")
    found = _found(tmp_path, text)
    assert found and found[0].id != "LOG008"


def test_store_connection_refused_still_the_store(tmp_path):
    text = ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [node0]:29500 (errno: 111 - "
            "Connection refused).\n")
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG008"


@pytest.mark.parametrize("line", [
    "E1213 02:57:10.528410  5811 worker_pool.cpp:274] Worker: Process failed for slice (opcode: 0, length: 404, "
    "retry_cnt: 0): transport retry counter exceeded",
    "2025:03:13-10:36:27:(  636) |CCL_ERROR| ze_fd_manager.cpp:214 fill_device_fds: condition fds[dev_idx] > 0 failed",
])
def test_a_zero_inside_a_failure_line_is_not_a_counter(tmp_path, line):
    found = _found(tmp_path, line + "\n")
    assert [f.id for f in found] == ["LOG028"]


def test_cloud_preemption_notice_is_job_stopped(tmp_path):
    text = ("Dec 17 16:03:58Z worker-1 start-worker 2024/12/17 16:03:58 GCP Metadata Service says termination is "
            "imminent\nDec 17 16:04:09Z worker-1 systemd-logind Power key pressed.\n")
    found = _found(tmp_path, text)
    assert found[0].id == "LOG026" and found[0].title.startswith("the cloud instance was preempted")


def test_termination_polling_is_quiet(tmp_path):
    found = _found(tmp_path, "2024/12/17 16:03:01 polling for termination-time\n")
    assert not any(f.id == "LOG026" for f in found)
