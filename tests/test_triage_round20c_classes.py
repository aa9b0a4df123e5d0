"""Round 20 wave 6 (issue 24, triage22): classes the held-out review found, fixed after it (disclosed as such in
docs/measured/triage.md; the held-out figures stay the first-read figures).

- A launcher's own command-line failure is a failure of the launch (LOG023), not "no failure": MPICH Hydra's
  "[mpiexec@host] match_arg (...): unrecognized argument X" (pmodels/mpich src/pm/hydra/lib/utils/args.c), bash's
  "<launcher>: command not found" (execute_cmd.c) and dash's "/bin/sh: 1: <launcher>: not found" (src/exec.c) for the
  launcher or python: no rank ever started. A command that is no launcher (nvidia-smi, ninja) is not this class.
- CPython faulthandler's dump of a fatal signal ("Fatal Python error: Segmentation fault" / "Aborted" / "Floating point
  exception" / "Illegal instruction", then "Current thread 0x... (most recent call first):" and `File "x.py", line N in
  f` frames, no Traceback header: Modules/faulthandler.c, Python/traceback.c) is a crash of that process at the
  crashing thread's innermost frame of the program's own code (LOG003 for SIGSEGV, LOG004 for the others). Another
  thread's frames are not the crash's; faulthandler's timeout dump ("Timeout (0:05:00)!") is no crash.
"""
import pytest
from triage_loud import brief as _ids, loud_findings as _found


_STEPS = "".join(f"step {i} loss 0.{i:02d}\n" for i in range(1, 6))
_END = "Training completed.\n"


# --- a launcher's own command-line failure ---------------------------------------------------------------------------
_HYDRA = ("[mpiexec@node01] match_arg (utils/args/args.c:163): unrecognized argument bind-to-core\n"
          "[mpiexec@node01] HYDU_parse_array (utils/args/args.c:178): argument matching returned error\n"
          "[mpiexec@node01] parse_args (ui/mpich/utils.c:1642): error parsing input array\n"
          "[mpiexec@node01] HYD_uii_mpx_get_parameters (ui/mpich/utils.c:1694): unable to parse user arguments\n"
          "[mpiexec@node01] main (ui/mpich/mpiexec.c:148): error parsing parameters\n")


def test_hydra_rejecting_its_own_argument_is_a_launch_failure(tmp_path):
    f = _found(tmp_path, "$ mpirun -np 2 --bind-to-core python train.py\n" + _HYDRA)
    assert f and f[0].id == "LOG023" and f[0].severity == "error", _ids(f)
    assert "bind-to-core" in f[0].title and "line:2" in f[0].subjects, _ids(f)


def test_a_shell_that_finds_no_launcher_is_a_launch_failure(tmp_path):
    for line, cmd in (("/bin/sh: 1: torchrun: not found", "torchrun"), ("bash: deepspeed: command not found", "deepspeed"),
                      ("train.sh: line 12: python: command not found", "python"),
                      ("run.sh: 4: /opt/conda/bin/accelerate: not found", "accelerate"),
                      ("bash: line 1: python3: command not found", "python3")):
        f = _found(tmp_path, "Loading modules\nstarting job on node01\n" + line + "\n")
        assert f and f[0].id == "LOG023", (line, _ids(f))
        assert f"`{cmd}`" in f[0].title and "never started" in f[0].title, (line, _ids(f))


def test_a_launcher_not_found_at_the_end_of_a_large_log_is_read(tmp_path):
    pad = "".join(f"module load step {i}: ok\n" for i in range(40000))
    f = _found(tmp_path, pad + "/bin/sh: 1: torchrun: not found\n")
    assert f and f[0].id == "LOG023", _ids(f)


def test_a_command_that_is_no_launcher_is_not_a_launch_failure(tmp_path):
    # a helper the job script calls and goes on without: the training ran and ended
    for line in ("bash: nvidia-smi: command not found", "/bin/sh: 1: ninja: not found",
                 "bash: module: command not found"):
        f = _found(tmp_path, line + "\n" + _STEPS + _END)
        assert not any(x.id == "LOG023" for x in f), (line, _ids(f))


def test_a_hydra_run_that_parsed_its_arguments_is_no_launch_failure(tmp_path):
    f = _found(tmp_path, "$ mpiexec -n 2 -bind-to core python train.py\n" + _STEPS + _END)
    assert not any(x.id == "LOG023" for x in f), _ids(f)


# --- CPython faulthandler's dump of a fatal signal --------------------------------------------------------------------
def _dump(what, prefix=""):
    return "".join(prefix + x + "\n" for x in (
        f"Fatal Python error: {what}", "",
        "Thread 0x00007f00aa11 (most recent call first):",
        '  File "/work/loader.py", line 12 in run', "",
        "Current thread 0x00007f9ea402fb80 (most recent call first):",
        '  File "/opt/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 768 in _engine_run_backward',
        '  File "/work/train.py", line 44 in step',
        '  File "/work/train.py", line 80 in main',
        '  File "/work/train.py", line 90 in <module>'))


def test_a_faulthandler_segfault_is_a_crash_at_the_innermost_user_frame(tmp_path):
    f = _found(tmp_path, _STEPS + _dump("Segmentation fault"))
    assert f and f[0].id == "LOG003", _ids(f)
    assert "/work/train.py:44 in step" in f[0].title, _ids(f)
    assert "PYTHONFAULTHANDLER" not in f[0].fix, f[0].fix   # it is on already: the stack is in the log


def test_faulthandler_dumps_of_other_fatal_signals_are_crashes(tmp_path):
    for what, sig in (("Aborted", "SIGABRT"), ("Floating point exception", "SIGFPE"), ("Illegal instruction", "SIGILL")):
        f = _found(tmp_path, _STEPS + _dump(what))
        assert f and f[0].id == "LOG004" and f[0].severity == "error", (what, _ids(f))
        assert sig in f[0].title and "/work/train.py:44 in step" in f[0].title, (what, _ids(f))
        assert not any(x.id == "LOG028" for x in f), (what, _ids(f))


def test_a_rank_prefixed_dump_names_its_rank(tmp_path):
    text = "".join(f"[rank0]: step {i}\n[rank1]: step {i}\n" for i in range(1, 4)) + _dump("Aborted", "[rank1]: ")
    f = _found(tmp_path, text)
    assert f and f[0].id == "LOG004" and "rank 1" in f[0].title and "/work/train.py:44" in f[0].title, _ids(f)


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_real_faulthandler_dump(tmp_path):
    """A real segfault under python -X faulthandler (ctypes.string_at(0)), its output as the interpreter wrote it."""
    import subprocess
    import sys
    script = tmp_path / "crash.py"
    script.write_text("import ctypes\ndef inner():\n    ctypes.string_at(0)\nprint('step 1 loss 0.5', flush=True)\ninner()\n")
    out = subprocess.run([sys.executable, "-X", "faulthandler", str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Fatal Python error: Segmentation fault" in out.stderr, out.stderr[-400:]
    f = _found(tmp_path, out.stdout + out.stderr)
    assert f and f[0].id == "LOG003" and f"{script}:3 in inner" in f[0].title, _ids(f)


def test_a_timeout_dump_and_a_traceback_frame_are_no_faulthandler_crash(tmp_path):
    # faulthandler.dump_traceback_later's dump ("Timeout (0:05:00)!") is a watchdog's report, the job went on
    f = _found(tmp_path, "step 1 loss 0.5\nTimeout (0:05:00)!\nThread 0x00007f00aa (most recent call first):\n"
               '  File "/work/train.py", line 12 in wait\n\n' + _STEPS + _END)
    assert not f, _ids(f)
    # a Python error that names no fatal signal is not a faulthandler crash
    f = _found(tmp_path, _STEPS + "Fatal Python error: init_fs_encoding: failed to get the Python codec\n")
    assert not any("faulthandler" in x.title for x in f), _ids(f)
