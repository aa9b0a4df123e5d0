"""Round 23 (issue 24, triage27): classes from the sources, each with a trigger and a quiet case.

- Wrapper exceptions (data/wrapper_exceptions.json: Ray's RayTaskError(X) and RayActorError/ActorDiedError,
  python/ray/exceptions.py; Ray Train's TrainingFailedError, ray/train/v2/api/exceptions.py; Ray Tune's TuneError,
  ray/tune/error.py) only carry a cause raised elsewhere: the cause's own exception line is the failure, the wrapper
  folded into it; a wrapper with no cause in the log, not even by its class's name, is an unexplained failure (LOG028).
"""
from ddpdoctor.facts import wrappers
from triage_loud import brief as _ids, loud_findings as _found

_TASK = ("ray.exceptions.RayTaskError(ModuleNotFoundError): ray::TaskRunner.run() (pid=3184, ip=10.0.0.2, "
         "actor_id=afee1f, repr=<main_ppo.TaskRunner object at 0x7f59>)\n")
_CAUSE = ('  File "/home/u/verl/trainer/main_ppo.py", line 138, in run\n    import transfer_queue as tq\n'
          "ModuleNotFoundError: No module named 'transfer_queue'\n")
_DIED = ("ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, "
         "ray::Tester.__init__() (pid=15299, ip=192.168.0.4, actor_id=3d2af3, repr=<w.Tester object at 0x7f68>)\n")


def test_the_wrappers_are_the_sources_classes():
    for name in ("ray.exceptions.RayTaskError(ValueError)", "ActorDiedError", "ray.exceptions.RayActorError",
                 "ray.train.v2.api.exceptions.WorkerTrainingFailedError", "ray.tune.error.TuneError"):
        assert wrappers.is_wrapper(name), name
    for name in ("ValueError", "ModuleNotFoundError", "MyTuneErrorHandler", "RayTaskErrorX"):
        assert not wrappers.is_wrapper(name), name
    assert wrappers.wrapped("RayTaskError(ModuleNotFoundError)") == "ModuleNotFoundError"
    assert all(w["source"]["commit"] and w["source"]["path"] for w in wrappers.doc()["wrappers"])


def test_the_cause_inside_a_ray_task_error_is_the_failure(tmp_path):
    f = _found(tmp_path, "    raise value.as_instanceof_cause()\n" + _TASK + _CAUSE)
    assert f and f[0].id == "LOG004", _ids(f)
    assert "ModuleNotFoundError" in f[0].title and "transfer_queue" in f[0].title, _ids(f)
    assert f[0].evidence["wrapped_by"]["exception"] == "RayTaskError(ModuleNotFoundError)", f[0].evidence
    assert f[0].evidence["first_seen"]["line"] == 5 and f[0].evidence["wrapped_by"]["line"] == 2, f[0].evidence


def test_the_cause_of_an_actor_that_died_in_its_creation_task_is_the_failure(tmp_path):
    frames = '  File "/home/u/w.py", line 12, in __init__\n    dist.init_process_group("nccl")\n'
    f = _found(tmp_path, _DIED + frames + "KeyError: 'model_path'\n")
    assert f and f[0].id == "LOG004" and "KeyError" in f[0].title and "ActorDiedError" not in f[0].title, _ids(f)
    # a cause a specific rule knows is that rule's (the launcher class here), never the wrapper's
    f = _found(tmp_path, _DIED + frames + "ValueError: Error initializing torch.distributed using env:// rendezvous: "
               "environment variable RANK expected, but not set\n")
    assert f and f[0].id == "LOG023" and not any(x.id == "LOG004" for x in f), _ids(f)


def test_a_wrapper_whose_cause_is_cut_is_an_unexplained_failure(tmp_path):
    f = _found(tmp_path, "  File \"/x/ray/_private/worker.py\", line 1025, in get_objects\n    raise value\n" + _DIED
               + '  File "/home/u/w.py", line 1220, in __init__\n    dist.\n')
    assert f and f[0].id == "LOG028" and f[0].severity == "warning", _ids(f)
    assert not any(x.id == "LOG004" for x in f), _ids(f)
    f = _found(tmp_path, "ray.tune.error.TuneError: ('Trials did not complete', [train_fn_1a2b3_00000])\n")
    assert f and f[0].id == "LOG028", _ids(f)


def test_a_wrapper_naming_its_cause_class_stays_a_failure_with_it(tmp_path):
    # quiet: RayTaskError(ValueError) with no traceback below still names the cause's class (round 21's reading)
    f = _found(tmp_path, _TASK.replace("ModuleNotFoundError", "ValueError"))
    assert f and f[0].id == "LOG004" and "RayTaskError(ValueError)" in f[0].title, _ids(f)


def test_a_plain_exception_is_not_taken_for_a_wrapper(tmp_path):
    # quiet: no wrapper, the exception is the failure as before, with no wrapper in its evidence
    f = _found(tmp_path, "Traceback (most recent call last):\n" + _CAUSE)
    assert f and f[0].id == "LOG004" and "transfer_queue" in f[0].title, _ids(f)
    assert "wrapped_by" not in f[0].evidence, f[0].evidence


# --- an attribute read through the DDP / DataParallel wrapper (torch/nn/modules/module.py Module.__getattr__) ---------
def test_an_attribute_read_through_the_ddp_wrapper_is_that_class_with_module_as_the_fix(tmp_path):
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
               "    print(model.config)\n[rank1]: AttributeError: 'DistributedDataParallel' object has no attribute "
               "'config'\n")
    assert f and f[0].id == "LOG027" and "DistributedDataParallel" in f[0].title, _ids(f)
    assert "model.module." in f[0].fix, f[0].fix


def test_an_attribute_missing_on_a_plain_model_is_no_wrapper_read(tmp_path):
    # quiet: the model's own class named, not a wrapper's: a plain AttributeError (LOG004), no `.module` fix
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
               "    print(model.cfg)\nAttributeError: 'LlamaForCausalLM' object has no attribute 'cfg'\n")
    assert f and f[0].id == "LOG004" and "model.module." not in f[0].fix, _ids(f)


# --- DeepSpeed's launcher counting no GPU on its node (deepspeed/launcher/runner.py main: device_count == 0) ----------
def test_the_deepspeed_launcher_seeing_no_gpu_is_the_gpu_setup_class(tmp_path):
    f = _found(tmp_path, "[2024-03-01 10:00:00,000] [WARNING] [runner.py:202:fetch_hostfile] Unable to find hostfile, "
               "will proceed with training with local resources only.\nTraceback (most recent call last):\n"
               '  File "/usr/bin/deepspeed", line 6, in <module>\n    main()\n'
               "RuntimeError: Unable to proceed, no GPU resources available\n")
    assert f and f[0].id == "LOG021", _ids(f)
    assert not any(x.id == "LOG023" for x in f), _ids(f)


def test_a_deepspeed_launch_argument_refusal_stays_a_launch_class(tmp_path):
    # quiet for LOG021: the launcher refusing its arguments, GPUs counted fine
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"/usr/bin/deepspeed\", line 6, in <module>\n"
               "    main()\nValueError: Num nodes is >1 but no extra nodes available via hostfile\n")
    assert f and f[0].id != "LOG021", _ids(f)


# --- a traceback's last line whose class has no Error suffix (CPython traceback.format_exception_only) ----------------
_FRAMES = 'step 1 loss 0.5\nTraceback (most recent call last):\n  File "train.py", line 40, in <module>\n    batch = next(it)\n'


def test_a_bare_exception_class_under_the_frames_is_the_failure(tmp_path):
    for last, etype in (("StopIteration", "StopIteration"), ("queue.Empty", "Empty")):
        f = _found(tmp_path, _FRAMES + last + "\n")
        assert f and f[0].id == "LOG004" and f"failed with {etype} at train.py:40" in f[0].title, (last, _ids(f))


def test_a_plain_word_or_a_successful_exit_under_the_frames_is_no_exception(tmp_path):
    # quiet: a word that is no exception class, and sys.exit(0), are not read as a process failing with them
    for last in ("Done", "SystemExit: 0", "SystemExit: 3"):
        f = _found(tmp_path, _FRAMES + last + "\n")
        assert not any(x.id == "LOG004" for x in f), (last, _ids(f))
    # and a bare class name far from any frame is a word of the log, not an exception
    f = _found(tmp_path, "StopIteration\nstep 1 loss 0.5\nTraining completed.\n")
    assert not f, _ids(f)


# --- zsh's job reports (Src/jobs.c printjob; its own signal texts, Src/signames2.awk: data/strsignal.json "zsh") -------
def test_zshs_report_of_a_job_dead_on_a_signal_is_that_signals_class(tmp_path):
    head = "step 1 loss 0.5\n"
    for report, rid in (("zsh: segmentation fault  python train.py", "LOG003"),
                        ("zsh: killed     python train.py", "LOG002"),
                        ("[1]  + 12345 killed     python train.py", "LOG002"),
                        ("zsh: abort (core dumped)  python train.py", "LOG004")):
        f = _found(tmp_path, head + report + "\n")
        assert f and f[0].id == rid, (report, _ids(f))
    f = _found(tmp_path, head + "zsh: segmentation fault (core dumped)  RANK=3 python train.py\n")
    assert f and f[0].id == "LOG003" and "rank:3" in f[0].subjects, _ids(f)


def test_zshs_words_in_prose_or_its_other_messages_are_no_signal(tmp_path):
    # quiet: the same words where zsh's report format does not hold them, and zsh's own non-signal message
    for text in ("the job was killed  by the admin", "we saw a segmentation fault  twice last week",
                 "zsh: no matches found: --model=llama*"):
        f = _found(tmp_path, "step 1 loss 0.5\n" + text + "\nTraining completed.\n")
        assert not any(x.id in ("LOG002", "LOG003", "LOG004") for x in f), (text, _ids(f))


def test_a_cause_quoted_inside_the_wrappers_own_line_is_the_failure(tmp_path):
    f = _found(tmp_path, _DIED.rstrip("\n") + ": ModuleNotFoundError: No module named 'flash_attn'\n")
    assert f and f[0].id == "LOG004" and "failed with ModuleNotFoundError: No module named 'flash_attn'" in f[0].title, _ids(f)
    assert f[0].evidence["wrapped_by"]["exception"] == "ActorDiedError", f[0].evidence


# --- DeepSpeed refusing a client optimizer under ZeRO-Offload (deepspeed/runtime/engine.py _configure_optimizer) -------
def test_deepspeeds_refusal_of_a_client_optimizer_under_offload_is_a_library_refusal(tmp_path):
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"pretrain.py\", line 88, in <module>\n"
               "    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer)\n"
               "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided "
               "optimizer (<class 'apex.optimizers.fused_adam.FusedAdam'>) which in most cases will yield poor "
               "performance.\n")
    assert f and f[0].id == "LOG027" and "zero_force_ds_cpu_optimizer" in f[0].fix, _ids(f)


def test_another_zero_runtime_exception_is_not_taken_for_the_offload_refusal(tmp_path):
    # quiet: ZeRORuntimeException with another message keeps its own reading, not the offload optimizer's fix
    f = _found(tmp_path, "Traceback (most recent call last):\n  File \"pretrain.py\", line 88, in <module>\n"
               "    engine.step()\ndeepspeed.runtime.zero.utils.ZeRORuntimeException: something else went wrong\n")
    assert f and "zero_force_ds_cpu_optimizer" not in f[0].fix, _ids(f)
