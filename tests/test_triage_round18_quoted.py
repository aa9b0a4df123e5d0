"""Round-18 wave-2 class of issue 24 (triage, 2026-12-07): a failure QUOTED by a text that is not a run's output.

- A message's format (its values left out as placeholders: "status=... opcode=... vendor_err=...", printf's "%s",
  "<name>") is no message a process printed: no failure line and no catalogue class from it.
- A pull request's description (GitHub's closing keywords "Fixes #N", "This PR ...", the HF template's "What does this
  PR do?", ghstack/Phabricator trailers, a title that names a change: "# resolve KeyError: ...") quotes the error its
  change removes; when no line is a run's own output (rank/NCCL/host prefix, launcher exit, traceback frames,
  progress), the failure is reported as quoted (info) and the report says that it cannot show health.
- A failure log pasted in such a text with its run's prefixes or its traceback stays a failure.
Pure in-process.
"""
from __future__ import annotations

from ddpdoctor.triage.prose import is_format_template

from triage_factory import failed as _failed, found as _found


# NVIDIA/nccl#2220's shape: a logging-only change showing the WARN's format before and after
_FORMAT = ("# net/ib: Print qp_num in completion error log\n\n"
           "The detailed NET/IB completion error WARN now changes from:\n\n"
           "NET/IB: Got completion from peer ... status=... opcode=... vendor_err=... localGid ... remoteGid ... hca ...\n\n"
           "to:\n\n"
           "NET/IB: Got completion from peer ... status=... opcode=... vendor_err=... qp_num=... localGid ... hca ...\n")


def test_a_message_format_with_placeholders_is_no_failure(tmp_path):
    assert not _failed(_found(tmp_path, _FORMAT))


def test_a_shortened_real_message_is_no_format():
    assert is_format_template("NET/IB: Got CQE with error (... devIndex=..., req=..., comm=..., wr_id=..., qp_num=...)")
    assert is_format_template("%s:%d -> %d (%s)")
    # a real watchdog line the writer shortened keeps its values: a message, not a format
    assert not is_format_template("[E ProcessGroupNCCL.cpp:...] [Rank 0] Watchdog caught collective operation timeout: "
                                  "WorkNCCL(SeqNum=..., OpType=ALLREDUCE, NumelIn=..., NumelOut=..., Timeout(ms)=600000) "
                                  "ran for 600053 milliseconds before timing out.")


def test_a_real_ib_error_with_its_values_stays_a_failure(tmp_path):
    found = _found(tmp_path, "node1:2041:2101 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<41242> with "
                             "status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid "
                             "::ffff:10.0.0.2 hca mlx5_0\n"
                             "node1:2041:2101 [3] NCCL INFO transport/net.cc:1303 -> 6\n")
    assert found and found[0].id == "LOG009"


# b142_02's shape (deepspeedai/DeepSpeed#5318): a PR titled by its change, quoting the KeyError it removes
_PR = ("# resolve KeyError: 'PDSH_SSH_ARGS_APPEND'\n\n"
       "when start job with `deepspeed --hostfile hostfile --ssh_port 20023 train.py`\n\n"
       "get error: KeyError: 'PDSH_SSH_ARGS_APPEND' in deepspeed/launcher/multinode_runner.py#L77\n\n"
       "because PDSH_SSH_ARGS_APPEND not in environment.\n")
# b151_04's shape (huggingface/accelerate#4180): "This PR raises ..." after the KeyError it replaces
_THIS_PR = ("When FSDP2 is enabled on a mesh with no shard dimension, fsdp2_prepare_model fails with a confusing error:\n\n"
            "```\nKeyError: \"Invalid mesh_dim_names ('dp_shard_cp',) specified. Valid mesh_dim_names are ['tp'].\"\n```\n\n"
            "This PR raises an explicit error instead.\n\nFixes #4177\n")


def test_a_pull_request_quoting_the_error_it_fixes_is_no_failure(tmp_path):
    for text in (_PR, _THIS_PR):
        found = _found(tmp_path, text)
        assert not _failed(found), text
        # and it is no claim of health: the health rule says what the log cannot show
        assert any(f.id == "LOG029" for f in found)


def test_the_quote_is_still_reported_as_quoted(tmp_path):
    from ddpdoctor.triage.api import triage_paths

    p = tmp_path / "pr.md"
    p.write_text(_THIS_PR, encoding="utf-8")
    infos = [f for f in triage_paths([str(p)]).findings if f.severity == "info" and f.title.startswith("quoted")]
    assert infos and "KeyError" in infos[0].title and "pull request" in infos[0].detail


def test_a_pull_request_with_a_run_log_pasted_stays_a_failure(tmp_path):
    # the same PR text, and a run's output (rank-prefixed lines) that shows a job failing: a failure
    text = _THIS_PR + ("\nWith this PR I still get, on 2 nodes:\n"
                       "[rank1]: Traceback (most recent call last):\n"
                       "[rank1]:   File \"train.py\", line 12, in <module>\n"
                       "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert _failed(_found(tmp_path, text))


def test_a_pull_request_with_a_traceback_stays_a_failure(tmp_path):
    # b125_07's shape (huggingface/trl#825): the PR pastes the failed run's traceback, frames and all
    text = ("# Fix DeepSpeed ZeRO-{1,2} for DPOTrainer\n\nThis PR fixes:\n\n"
            "Traceback (most recent call last):\n"
            "  File \"/fsx/trl/examples/dpo.py\", line 154, in <module>\n    trainer = DPOTrainer(\n"
            "  File \"/fsx/trl/trl/trainer/dpo_trainer.py\", line 248, in __init__\n    self.model = prep(model)\n"
            "AssertionError: zero stage 2 requires an optimizer\n")
    assert _failed(_found(tmp_path, text))


def test_an_issue_quoting_its_error_stays_a_failure(tmp_path):
    # the same quote in an issue (no change marked): a job failed
    text = ("# Invalid mesh_dim_names with FSDP2 and tp_size == world_size\n\nI run it and get:\n\n"
            "KeyError: \"Invalid mesh_dim_names ('dp_shard_cp',) specified. Valid mesh_dim_names are ['tp'].\"\n")
    assert _failed(_found(tmp_path, text))
