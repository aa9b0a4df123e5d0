"""Round 24 (issue 24, triage30): classes from the sources, each with a trigger and a quiet case.

- argparse's rejection (CPython Lib/argparse.py @8ea6cc14, ArgumentParser.error): the usage banner on stderr, then
  "PROG: error: MESSAGE", exit 2, before any training. Any of its messages (a required argument missing, an invalid
  value or choice, an option without its value) is a launch that failed at start (LOG023), the prog a script's or a
  launcher's (data/launchers.json: torchrun, deepspeed, accelerate, run.py of `python -m torch.distributed.run`).
- The banner with nothing after it but its own wrapped lines: argparse prints it alone only in error() (-h's help
  goes on with its option list), so a log that ends inside it is an argument rejected at start whose error line is
  cut (the held-out review of round 23: read "cannot show health").
"""
from ddpdoctor.facts import messages
from triage_loud import brief as _ids, loud_findings as _found

_LAUNCH = ("+ torchrun --nproc_per_node 2 --master_port 29400 finetune.py --data_path data.json --bf16 True\n"
           "WARNING:torch.distributed.run:\n*****************************************\n"
           "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default\n"
           "*****************************************\n")
_BANNER = ("usage: finetune.py [-h] --model_name_or_path MODEL_NAME_OR_PATH --data_path\n"
           "                   DATA_PATH [--lora_r LORA_R] [--output_dir OUTPUT_DIR]\n")


def test_a_log_that_ends_in_argparse_usage_banner_is_an_argument_rejected_at_start(tmp_path):
    f = _found(tmp_path, _LAUNCH + _BANNER + _BANNER)
    assert f and f[0].id == "LOG023" and f[0].severity == "error", _ids(f)
    assert "usage banner (line 6)" in f[0].title and "error:' line cut" in f[0].title, _ids(f)
    assert f[0].evidence["prog"] == "finetune.py" and f[0].evidence["launcher"] is None, f[0].evidence


def test_a_launcher_banner_cut_names_the_launcher(tmp_path):
    f = _found(tmp_path, "$ python -m torch.distributed.run --nproc-per-node=2 train.py\n"
                         "usage: run.py [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]\n"
                         "              [--rdzv-backend RDZV_BACKEND] [--rdzv-endpoint RDZV_ENDPOINT]\n\n")
    assert f and f[0].id == "LOG023" and f[0].evidence["launcher"] == "torchrun", _ids(f)
    assert "the launcher (torchrun, printed as run.py)" in f[0].title, _ids(f)


def test_the_banner_then_its_error_line_is_read_from_the_error_line(tmp_path):
    f = _found(tmp_path, _LAUNCH + _BANNER + "finetune.py: error: the following arguments are required: "
                                             "--model_name_or_path\n")
    assert f and f[0].id == "LOG023" and f[0].severity == "error", _ids(f)
    assert "the following arguments are required: --model_name_or_path" in f[0].title, _ids(f)
    assert "usage banner" not in f[0].title, _ids(f)


def test_a_launcher_own_argparse_error_names_the_launcher(tmp_path):
    f = _found(tmp_path, "[2024-03-02 11:20:04,118] [INFO] [real_accelerator.py:191:get_accelerator] Setting "
                         "ds_accelerator to cuda (auto detect)\n"
                         "deepspeed: error: argument --num_gpus/--num-gpus: invalid int value: 'all'\n")
    assert f and f[0].id == "LOG023", _ids(f)
    assert f[0].title.startswith("the launcher deepspeed rejected its command line"), _ids(f)


def test_help_output_is_no_rejection(tmp_path):
    f = _found(tmp_path, "$ python train.py -h\nusage: train.py [-h] [--lr LR] --data DATA\n\nFine-tune.\n\n"
                         "options:\n  -h, --help   show this help message and exit\n  --lr LR      learning rate\n")
    assert not [x for x in f if x.id == "LOG023" or x.severity == "error"], _ids(f)


def test_a_banner_the_program_goes_on_after_is_no_rejection(tmp_path):
    # a script that prints its usage itself (parser.print_usage()) and trains on: a line after the banner closes it
    f = _found(tmp_path, _BANNER + "Loading data from data.json\n"
                         "{'loss': 2.31, 'learning_rate': 1e-05, 'epoch': 0.1}\n"
                         "{'train_runtime': 120.5, 'train_samples_per_second': 3.2, 'train_loss': 2.0, 'epoch': 1.0}\n")
    assert not [x for x in f if x.id == "LOG023"], _ids(f)


def test_the_argparse_entries_carry_their_source_and_read_only_argparse_lines():
    by_id = {e["id"]: e for e in messages.entries()}
    for i in ("cpython.argparse.error", "cpython.argparse.usage_banner"):
        assert by_id[i]["source"]["path"] == "Lib/argparse.py" and len(by_id[i]["source"]["commit"]) == 40
    assert [m.entry["id"] for m in messages.match_all("Memory usage: 3.2 GB [-h]")] == []
    assert [m.entry["id"] for m in messages.match_all("srun: error: Unable to create step for job 42")] != \
        ["cpython.argparse.error"]
    assert "cpython.argparse.error" not in [m.entry["id"] for m in messages.match_all(
        "RuntimeError: error: the following arguments are required")]


_TABLE = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: {code}) local_rank: 0 (pid: 51233) of "
          "binary: /usr/bin/python3\n")


def test_a_banner_then_the_launcher_exit_2_is_the_rejection_before_the_exit(tmp_path):
    f = _found(tmp_path, _BANNER + _BANNER + _TABLE.format(code=2))
    assert f and f[0].id == "LOG023" and "exit code 2 (line 5)" in f[0].title, _ids(f)
    assert [x.id for x in f].index("LOG004") > 0 if "LOG004" in [x.id for x in f] else True, _ids(f)


def test_a_banner_then_a_launcher_exit_of_another_code_is_not_read_as_argparse(tmp_path):
    f = _found(tmp_path, _BANNER + _TABLE.format(code=1))
    assert not [x for x in f if x.id == "LOG023"], _ids(f)
    assert f and f[0].id == "LOG004", _ids(f)


def test_a_cut_banner_that_declares_only_local_rank_names_the_launcher_argument_as_a_guess(tmp_path):
    f = _found(tmp_path, "usage: pretrain.py [-h] [--config CONFIG] [--local_rank LOCAL_RANK]\n")
    assert f and f[0].id == "LOG023", _ids(f)
    assert "--local-rank=N" in f[0].detail and "a guess" in f[0].detail, f[0].detail
    g = _found(tmp_path, "usage: pretrain.py [-h] [--config CONFIG] [--local-rank LOCAL_RANK]\n", name="other.log")
    assert g and g[0].id == "LOG023" and "a guess" not in g[0].detail, g[0].detail


def test_the_keyword_test_in_one_pass_says_what_the_keywords_one_by_one_say():
    lines = ['  File "train.py", line 9, in <module>', "queue.Empty", "Traceback (most recent call last):",
             "usage: a.py [-h]", "E1207 12:00:01.123456  4242 client.cc:88] Connect failed", "", "\u00e9\u4e2d rror"]
    for t in lines:
        want = any(a in t for a in messages._PLAIN_ANCHOR_STR) or (
            messages.GLOG_LEVEL.match(t) is not None and messages._GLOG_HEAD_RX.search(t) is not None)
        assert messages.has_anchor(t) == want, t


def test_the_cuda_driver_check_out_of_memory_is_gpu_oom(tmp_path):
    # c10/cuda/driver_api.h C10_CUDA_DRIVER_CHECK: "CUDA driver error: " + cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY)
    f = _found(tmp_path, "[09:57:48.548] [error] application.cpp:45 Training error: Error computing loss: CUDA driver "
                         "error: out of memory\nException raised from setAccess at /pytorch/c10/cuda/"
                         "CUDACachingAllocator.cpp:552 (most recent call first):\n")
    assert f and f[0].id == "LOG005", _ids(f)


def test_another_cuda_driver_error_is_not_read_as_out_of_memory(tmp_path):
    f = _found(tmp_path, "RuntimeError: CUDA driver error: invalid argument\n")
    assert not [x for x in f if x.id == "LOG005"], _ids(f)


def test_a_log_that_stops_says_where_it_stops_in_time(tmp_path):
    lines = "".join(f"2020-07-17 06:5{i}:03 | INFO | train_inner | epoch 001:    {i}00 / 160368 loss=12.{i}, "
                    f"num_updates={i}00\n" for i in range(1, 6))
    f = _found(tmp_path, lines)
    assert f and f[0].id == "LOG029", _ids(f)
    assert "its latest time stamp 07-17 06:55:03 (line 5)" in f[0].detail, f[0].detail
    assert f[0].evidence["last_stamp"] == "07-17 06:55:03", f[0].evidence
    g = _found(tmp_path, "epoch 1 step 100 loss 2.3\nepoch 1 step 200 loss 2.1\n", name="unstamped.log")
    assert g and g[0].id == "LOG029" and "time stamp" not in g[0].detail and g[0].evidence["last_stamp"] is None, _ids(g)


_DS_EXIT = ("[2023-08-01 10:00:00,000] [INFO] [launch.py:163:main] dist_world_size=2\n"
            "[2023-08-01 10:05:00,000] [ERROR] [launch.py:320:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
            "'--local_rank={n}', '--deepspeed', 'ds.json'] exits with return code = 1\n")


def test_deepspeed_launcher_exit_of_a_later_local_rank_says_the_rank_is_unknown(tmp_path):
    f = _found(tmp_path, _DS_EXIT.format(n=1))
    assert f and f[0].id == "LOG004" and "rank unknown" in f[0].title and "code 1" in f[0].title, _ids(f)
    assert not [s for s in f[0].subjects if s.startswith("rank:")], f[0].subjects
    g = _found(tmp_path, _DS_EXIT.format(n=0).replace("dist_world_size=2", "dist_world_size=1"), name="one.log")
    assert g and g[0].id == "LOG004" and "rank unknown" not in g[0].title, _ids(g)
