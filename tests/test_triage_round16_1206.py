"""Round-16 classes of issue 24 (triage, 2026-12-06): trigger and quiet cases whose assertions can fail.
Logs are written from the formats the sources print (shells' default prompts, torch's GlooDeviceFactory.cpp and c10d
init.cpp, NCCL's WARN prefix, the HF Trainer's loss dicts); pure in-process tests."""
from __future__ import annotations

import pytest

from ddpdoctor.triage.api import triage_paths
from ddpdoctor.triage.job import _PROMPT_LAUNCH

from triage_factory import found as _found


def _all(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return list(triage_paths([str(p)]).sorted_findings())


# --- the relaunch rule: prompt forms from the shells' defaults, SLURM/MPI launches, Jupyter's shell escape ---------
@pytest.mark.parametrize("line", [
    "[alice@gpu01 proj]$ torchrun --nproc_per_node 2 train.py",          # Red Hat /etc/bashrc '[\u@\h \W]\$ '
    "bash-5.1$ srun --ntasks=8 python train.py",                          # bash's built-in '\s-\v\$ '
    "gpu01% torchrun --nproc_per_node 2 train.py",                        # zsh's '%m%# '
    "alice@mac proj % accelerate launch train.py",                        # macOS zsh '%n@%m %1~ %# '
    "(base) $ mpirun -np 4 python train.py",                              # conda prefix, a bare prompt, mpirun
    "$ sbatch train.slurm",
    "!torchrun --nproc_per_node 8 train.py",                              # IPython/Jupyter shell escape
])
def test_prompt_forms_from_the_shells_read_as_a_launch(line):
    assert _PROMPT_LAUNCH.match(line)


@pytest.mark.parametrize("line", [
    "srun: error: node01: task 0: Exited with exit code 1",
    "INFO python train.py started on 8 ranks",
    "  File \"train.py\", line 3, in <module>",
    "50%|#####     | 5/10 [00:01<00:01]",
])
def test_lines_that_are_not_a_prompt_are_not_a_launch(line):
    assert not _PROMPT_LAUNCH.match(line)


# a line no rule but the unexplained-failure one knows (round 15 b96_04's mistyped module): the relaunch rule's scope
_FAILED_ATTEMPT = ("/usr/bin/python: Error while finding module specification for 'torch.distribute.launch' "
                   "(ModuleNotFoundError: No module named 'torch.distribute')\n")


def test_failed_attempt_then_the_launch_typed_at_a_red_hat_prompt_is_not_the_failure(tmp_path):
    text = ("[alice@gpu01 proj]$ torchrun --nproc_per_node 2 train.py\n" + _FAILED_ATTEMPT
            + "[alice@gpu01 proj]$ pip install -U torch\n[alice@gpu01 proj]$ torchrun --nproc_per_node 2 train.py\n"
            "W1206 12:00:00.000000 1 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for "
            "each process to be 1 in default\n")
    notes = [f for f in _all(tmp_path, text) if f.id == "LOG028"]
    assert notes and notes[0].severity == "info" and "run again" in notes[0].title
    assert not [f for f in _found(tmp_path, text) if f.severity == "error"]


def test_failed_attempt_then_srun_again_is_not_the_failure(tmp_path):
    text = "$ srun -N 2 python train.py\n" + _FAILED_ATTEMPT + "$ srun -N 2 python train.py\nstarting epoch 0\n"
    notes = [f for f in _all(tmp_path, text) if f.id == "LOG028"]
    assert notes and notes[0].severity == "info" and "run again" in notes[0].title


def test_the_failure_after_a_typed_launch_stays_the_failure(tmp_path):
    text = "gpu01% torchrun --nproc_per_node 2 train.py\n" + _FAILED_ATTEMPT
    found = _found(tmp_path, text)
    assert found and found[0].severity in ("error", "warning") and "earlier attempt" not in found[0].title


# --- LOG025 for Gloo's empty interface and host name: says what is empty and what sets it --------------------------
def test_gloo_empty_interface_title_names_what_is_empty_and_what_sets_it(tmp_path):
    top = _found(tmp_path, "Traceback (most recent call last):\n  File \"t.py\", line 5, in <module>\n"
                 "RuntimeError: GlooDeviceFactory::makeUVDevice(): interface or hostname can't be empty\n")[0]
    assert top.id == "LOG025"
    assert "GLOO_SOCKET_IFNAME" in top.title and "host name" in top.title and "makeUVDevice" in top.title
    assert "could not resolve" not in top.title


def test_a_host_lookup_failure_keeps_its_own_title(tmp_path):
    found = _found(tmp_path, "socket.gaierror: [Errno -2] Name or service not known\n")
    assert not any("GLOO_SOCKET_IFNAME" in f.title for f in found)


# --- LOG009 'went on': judged from training progress after the WARN, not from the file's last line -------------------
_WARN = "node1:123:456 [0] misc/ibvwrap.cc:185 (wrap_ibv_alloc_pd) NCCL WARN lib wrapper not initialized.\n"
_LOSS = "{{'loss': 0.{n}, 'learning_rate': 1e-05, 'epoch': 0.{n}}}\n"


def test_nccl_warn_with_training_after_it_is_a_warning(tmp_path):
    found = _found(tmp_path, _LOSS.format(n=1) + _WARN + _LOSS.format(n=2) + _LOSS.format(n=3))
    assert [(f.id, f.severity) for f in found] == [("LOG009", "warning")]
    assert "went on training (line 4)" in found[0].title


def test_nccl_warn_after_the_last_progress_is_not_called_went_on(tmp_path):
    # training printed progress, then the WARN, then only benign lines: the last line alone used to say 'went on'
    found = _found(tmp_path, _LOSS.format(n=1) + _LOSS.format(n=2) + _WARN + "INFO saving config\nINFO loading data\n")
    assert found and found[0].id == "LOG009" and found[0].severity == "error"


def test_nccl_warn_in_a_start_with_no_progress_stays_a_warning(tmp_path):
    found = _found(tmp_path, _WARN + "INFO Building device mesh\nINFO Building llama3 debugmodel\n")
    assert [(f.id, f.severity) for f in found] == [("LOG009", "warning")]
    assert "training" not in found[0].title


# --- batch 101: a negative loss is progress (nnU-Net's Dice+CE epoch summary) ------------------------------------------
_NNUNET = ("epoch:  0\n2020-05-03 21:17:03.876579: train loss : -0.0581\n"
           "2020-05-03 21:22:10.982428: validation loss: -0.2892\n2020-05-03 21:22:12.251979: This epoch took 4794.19 s\n")


def test_negative_loss_lines_are_progress(tmp_path):
    found = _found(tmp_path, _NNUNET)
    assert [f.id for f in found] == ["LOG029"] and "progress up to line 3" in found[0].title


def test_a_negative_number_after_a_word_that_is_not_loss_is_not_progress(tmp_path):
    found = _found(tmp_path, "epoch:  0\n2020-05-03 21:17:03.876579: offset : -0.0581\n")
    assert found and "progress up to" not in found[0].title


# --- batch 103: a collector's ERROR column on progress lines, wandb's network retry notices -------------------------
_TAGGED = ("ERROR 2021-07-15T20:56:{s:02d}.711670      26/99     2.57G   0.01888   0.01462   0.07022    0.1037        "
           "13       832:  27%|▌ | {n}/1860 [02:01<05:17,  4.29it/s]{tail}\n")


def test_progress_lines_a_collector_tagged_error_are_no_failure(tmp_path):
    text = "".join(_TAGGED.format(s=i, n=500 + i, tail="") for i in range(5))
    assert not [f for f in _all(tmp_path, text) if f.id == "LOG028"]


def test_wandb_network_error_resolved_is_a_notice(tmp_path):
    tail = "wandb: Network error resolved after 0:01:10.030828, resuming normal operation."
    text = "".join(_TAGGED.format(s=i, n=500 + i, tail=tail) for i in range(5))
    assert not [f for f in _all(tmp_path, text) if f.severity in ("error", "warning") and f.id != "LOG029"]


def test_a_tagged_line_with_an_error_of_its_own_stays_a_failure(tmp_path):
    text = (_TAGGED.format(s=1, n=501, tail="")
            + "ERROR 2021-07-15T20:56:30.100000 RuntimeError: CUDA error: an illegal memory access was encountered\n")
    found = _found(tmp_path, text)
    assert found and found[0].severity == "error" and found[0].id == "LOG020"


def test_wandb_retry_loop_notice_is_benign(tmp_path):
    text = "".join(f"{{'loss': 0.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(1, 4))
    text += "wandb: Network error (TransientError), entering retry loop.\n"
    assert not [f for f in _found(tmp_path, text) if f.id == "LOG028"]
