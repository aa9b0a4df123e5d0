"""Round-16 wave-2 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (the HF Trainer's loss dicts and train_runtime summary, mmcv's
"Epoch [1][50/2569]" lines, tqdm bars); pure in-process tests."""
from __future__ import annotations

import pytest

from ddpdoctor.triage.api import triage_paths
from ddpdoctor.triage.rules.health import progress_at


def _all(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return list(triage_paths([str(p)]).sorted_findings())


def _found(tmp_path, text, name="job.log"):
    return [f for f in _all(tmp_path, text, name) if f.severity in ("error", "warning")]


def _steps(n):
    return "".join(f"{{'loss': {2.0 - i / 100:.4f}, 'grad_norm': 3.2, 'learning_rate': 1e-05, 'epoch': {i / 100:.2f}}}\n"
                   for i in range(1, n + 1))


_MMDET = "".join(f"2023-03-01 10:{i:02d}:00,000 - mmdet - INFO - Epoch [1][{50 * i}/2569]\tlr: 1.000e-02, eta: 1 day, "
                 f"1:00:00, time: 0.600, data_time: 0.010, memory: 5000, loss_cls: 0.9, loss: {1.9 - i / 100:.4f}\n"
                 for i in range(1, 7))
_END = ("{'train_runtime': 400.1, 'train_samples_per_second': 4.0, 'train_steps_per_second': 0.5, 'train_loss': 1.1, "
        "'epoch': 1.0}\n")


# --- an excerpt of steady progress (the lead's decision, round 16): a warning that says no failure and no end ---------
def test_progress_excerpt_warns_no_failure_and_no_end(tmp_path):
    found = _found(tmp_path, _steps(8))
    assert [f.id for f in found] == ["LOG029"] and found[0].severity == "warning"
    assert found[0].title == ("no failure in this excerpt, and no end either: steady progress up to line 8 "
                              "(epoch 0.08), then the log stops")
    assert "last 200 lines" in found[0].fix and "ddpdoctor run" in found[0].fix


def test_mmdet_progress_excerpt_names_epoch_and_iteration(tmp_path):
    # b102_11's form (open-mmlab/mmdetection#1888: a job that crashed after these lines) is no longer a note
    found = _found(tmp_path, _MMDET)
    assert [f.id for f in found] == ["LOG029"]
    assert "up to line 6 (epoch 1, iteration 300/2569)" in found[0].title


def test_progress_then_an_end_is_quiet(tmp_path):
    # the Trainer's summary ends the run: health is shown, LOG029 says nothing, and no note is left either
    assert [f.id for f in _all(tmp_path, _steps(8) + _END) if f.id == "LOG029"] == []


def test_short_progress_keeps_the_plain_wording(tmp_path):
    found = _found(tmp_path, _steps(2))
    assert [f.id for f in found] == ["LOG029"] and not found[0].title.startswith("no failure in this excerpt")


@pytest.mark.parametrize("line,at", [
    ("{'loss': 1.93, 'learning_rate': 1e-05, 'epoch': 0.3448275862068966}", "epoch 0.34"),
    ("Epoch: [0]  [ 100/1251]  eta: 0:10:00  lr: 0.0001  loss: 6.9", "epoch 0, iteration 100/1251"),
    (" 35%|███▌      | 350/1000 [01:00<02:00,  5.0it/s, loss=1.2]", "bar at 350/1000"),
    ("step 800/2000 loss 1.23", "step 800/2000"),
    ("[epoch:  3, iter:   12,000, lr:(1e-4)]", "epoch 3, iteration 12,000"),
    ("2024/05/07 12:15:14 - mmengine - INFO - Iter(train) [1070/2046]  lr: 9.7e-05  loss: 0.7879", "iteration 1070/2046"),
    ("250/250 [==============================] - 8s 31ms/step - loss: 0.0145", "bar at 250/250"),
    ("2020-12-21 19:32:08.746938: train loss : 1.1718", ""),
])
def test_progress_at(line, at):
    assert progress_at(line) == at


# --- a log collector's severity column (Cloud Logging gives every stderr line ERROR): the line's own text decides ----
_TAG = "ERROR 2025-07-25T19:28:34.118198985Z [resource.labels.taskName: workerpool0-0] "   # Vertex AI (GiGL#217's form)


def test_collector_error_tag_on_a_plain_line_is_no_failure(tmp_path):
    text = (_TAG + "loading configuration file /gcs/out/config.json\n" + _TAG + "Configuration saved in "
            "/gcs/out/config.json\n")
    assert [f.id for f in _found(tmp_path, text)] == ["LOG029"]


def test_collector_error_tag_on_a_failure_line_stays_a_failure(tmp_path):
    text = (_TAG + "Configuration saved in /gcs/out/config.json\n" + _TAG + "ValueError: the text is a failure\n")
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG028" and "line 2" in found[0].title


# --- MPI's error classes and MPI_Abort (pmodels/mpich errnames.txt; the MPI standard's MPI_Abort) ---------------------
_OMPI_BANNER = ("[g2-nasp:24252] *** An error occurred in MPI_Reduce\n"
                "[g2-nasp:24252] *** reported by process [1140785153,1]\n"
                "[g2-nasp:24252] *** on communicator MPI_COMM_WORLD\n"
                "[g2-nasp:24252] *** MPI_ERR_ROOT: invalid root\n"
                "[g2-nasp:24252] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
                "[g2-nasp:24252] ***    and potentially your MPI job)\n")


@pytest.mark.parametrize("text,words", [
    (_OMPI_BANNER, "MPI_ERR_ROOT"),
    ("Fatal error in PMPI_Recv: Message truncated, error stack:\n"
     "PMPI_Recv(200): MPI_Recv(buf=0x7ffd, count=10, MPI_INT, src=0, tag=0, MPI_COMM_WORLD, status=0x1) failed\n",
     "Message truncated"),
    ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    comm.Send(buf, dest=size)\n"
     "  File \"mpi4py/MPI/Comm.pyx\", line 406, in mpi4py.MPI.Comm.Send\nmpi4py.MPI.Exception: MPI_ERR_RANK: invalid rank\n",
     "MPI_ERR_RANK"),
])
def test_mpi_error_class_is_named(tmp_path, text, words):
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG027" and found[0].severity == "error" and words in found[0].title


def test_mpi_abort_names_its_rank(tmp_path):
    text = ("--------------------------------------------------------------------------\n"
            "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n\n"
            "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n")
    found = _found(tmp_path, text)
    assert found and found[0].id == "LOG027" and found[0].title.startswith("rank 2:")


def test_mpi_errors_are_fatal_alone_is_no_error_class(tmp_path):
    # the handler's name carries 'MPI_ERR' too; alone it names no class (quiet for LOG027)
    text = "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
    assert [f.id for f in _found(tmp_path, text) if f.id == "LOG027"] == []


# --- batch 105/106 classes (not first reads) -------------------------------------------------------------------------
def test_olmo_rank_field_names_the_rank(tmp_path):
    # allenai/OLMo olmo/util.py RichHandler: "[time] LEVEL    [name, rank=<local_rank>]" (MatFormer-OLMo#2's line)
    text = ("[2024-04-18 09:09:04] CRITICAL [root, rank=1] Uncaught ValueError: Must flatten tensors on the same device "
            "but got both cuda:0 and meta\n")
    found = _found(tmp_path, text)
    assert found and found[0].title.startswith("rank 1")


def test_a_rank_word_in_a_message_is_no_olmo_field(tmp_path):
    text = "[2024-04-18 09:09:04] CRITICAL Uncaught ValueError: bad value for [layer, rank=3] in the config\n"
    found = _found(tmp_path, text)
    assert found and not found[0].title.startswith("rank 3")


def test_invalid_usage_with_a_network_last_error_names_the_network(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2897, invalid usage (run with "
            "NCCL_DEBUG=WARN for details), NCCL version 2.27.3\n"
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
            "Bootstrap : no socket interface found\n")
    found = _found(tmp_path, text)
    assert found[0].id == "LOG006" and "no socket interface found" in found[0].title
    assert "not two ranks on one GPU" in found[0].title and "NCCL_SOCKET_IFNAME" in found[0].fix


def test_invalid_usage_alone_keeps_the_two_ranks_wording(tmp_path):
    text = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2897, invalid usage (run with "
            "NCCL_DEBUG=WARN for details), NCCL version 2.27.3\n"
            "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n")
    found = _found(tmp_path, text)
    assert found[0].id == "LOG006" and found[0].title.endswith("usually two ranks on one GPU")


_RAY_WRAPPED = (
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
    "unexpectedly exits with a connection\n"
    " error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM "
    "killer due to high memory usage. (2) ra\n"
    "y stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.\n")


def test_ray_list_of_possible_causes_is_no_segfault(tmp_path):
    # ray-project/ray src/ray/raylet/node_manager.cc: SIGSEGV is one of the causes Ray lists, not a signal it saw
    found = _found(tmp_path, _RAY_WRAPPED)
    assert found and found[0].id != "LOG003"


def test_a_real_segfault_stays_a_segfault(tmp_path):
    text = "Fatal Python error: Segmentation fault\n\nThread 0x00007f (most recent call first):\n"
    found = _found(tmp_path, text + "Segmentation fault (core dumped)\n")
    assert found and found[0].id == "LOG003"
