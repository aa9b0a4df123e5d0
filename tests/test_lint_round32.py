"""Round 32 (issue 25, round 24 of the project, lint32): classes of fr162-fr164's wrong and debatable findings, each
with a trigger and a quiet fixture (fixtures/lint/r32/). Pure lint runs: no process is launched."""
from __future__ import annotations

from lint_fixture_walk import Fixtures

FIX = Fixtures("r32")
found = FIX.found


def test_lint037_a_read_retried_until_rank0s_file_loads_is_quiet():
    # `while True: try: pickle.load(open(path, "rb")); break / except: time.sleep(2)` (fr163 DonWick32, wrong x2)
    assert found("rank0_write_retry_read_ok.py", "LINT037") == []


def test_lint037_a_poll_for_the_file_before_the_read_is_quiet():
    # `while not os.path.exists(path): time.sleep(1)` between rank 0's write and everyone's read
    assert found("rank0_write_poll_exists_ok.py", "LINT037") == []


def test_lint037_a_read_tried_once_per_loop_pass_keeps_the_warning():
    # the error is swallowed, nothing waits or goes round again for the file: a read before the write
    assert found("rank0_write_once_read_bad.py", "LINT037") == [(13, "warning")]


def test_lint019_early_stop_on_an_evaluation_over_an_unsplit_loader_is_quiet():
    # `acc1 = validate(val_loader, model)`, val_loader a DataLoader with no sampler (fr164 richardkxu, wrong):
    # identical replicas over the whole set, every rank stops at the same epoch
    assert found("early_stop_unsplit_ok.py", "LINT019") == []


def test_lint019_early_stop_on_an_evaluation_over_a_distributed_sampler_keeps_the_warning():
    assert found("early_stop_split_bad.py", "LINT019") == [(37, "warning")]


def test_lint003_rank_env_by_hand_where_nothing_reads_local_rank_is_a_note():
    # fr164 jingxu10/Resnet50_DDP (debatable): no Trainer/accelerate/DeepSpeed/Lightning, no file names LOCAL_RANK
    assert found("rank_env_nothing_reads_local_rank_ok.py", "LINT003") == [(12, "info")]


def test_lint003_rank_env_by_hand_where_the_script_reads_local_rank_keeps_the_warning():
    assert found("rank_env_script_reads_local_rank_bad.py", "LINT003") == [(17, "warning")]


def test_lint027_a_rank_started_by_hand_per_machine_is_a_note():
    # fr164 Suvin-Sundararajan/cs243 (debatable): `python train.py <rank>` against a remote MASTER_ADDR, no spawn,
    # no local rank: each machine downloads into its own folder
    assert found("download_machine_per_rank_ok.py", "LINT027") == [(17, "info")]


def test_lint027_ranks_started_by_hand_against_localhost_keep_the_warning():
    assert found("download_localhost_by_hand_bad.py", "LINT027") == [(16, "warning")]
