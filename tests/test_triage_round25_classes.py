"""Round 25 (issue 24, triage33): classes from the sources, each with a trigger and a quiet fixture.

- A Python script run by a shell, not by python (`bash train.py`, `sh run.py`, a .py launched as a program with no `#!`
  line): the shell's own words for the Python lines it took as commands are a launch failure (LOG023) that names the
  script: bash's "train.py: line 1: import: command not found" (execute_cmd.c) and "train.py: line 6: syntax error near
  unexpected token `('" (parse.y report_syntax_error), dash's "train.py: 1: import: not found" (src/exec.c) and
  'train.py: 6: Syntax error: "(" unexpected' (src/parser.c synexpect), zsh's "train.py:1: command not found: import"
  (Src/exec.c) and ImageMagick's "import: unable to open X server" (MagickWand/import.c: its `import` ran). The texts
  are those bash 5.2.15 and dash 0.5.12 print for a .py (reproduced; data/messages.json records the sources).
  A shell script's own syntax error, or a helper command that is not found, is not this class.
"""
from triage_loud import brief as _ids, loud_findings as _found

_STEPS = "".join(f"step {i} loss 0.{i:02d}\n" for i in range(1, 6))
_END = "Training completed.\n"

# what `bash train.py` and `sh train.py` print for a .py whose lines are: import os / import torch / from torch import
# nn / import torch.distributed as dist / (blank) / def main(): ... (bash 5.2.15, dash 0.5.12-2)
_BASH = ("train.py: line 1: import: command not found\ntrain.py: line 2: import: command not found\n"
         "train.py: line 3: from: command not found\ntrain.py: line 4: import: command not found\n"
         "train.py: line 6: syntax error near unexpected token `('\ntrain.py: line 6: `def main():'\n")
_DASH = ("train.py: 1: import: not found\ntrain.py: 2: import: not found\ntrain.py: 3: from: not found\n"
         "train.py: 4: import: not found\ntrain.py: 6: Syntax error: \"(\" unexpected\n")


def test_a_python_script_run_by_bash_or_dash_is_a_launch_failure_naming_the_script(tmp_path):
    for text in (_BASH, _DASH, "+ srun ./pretrain.py\n" + _BASH.replace("train.py", "/home/u/exp/pretrain.py")):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG023" and f[0].severity == "error", (text[:60], _ids(f))
        assert "run by a shell" in f[0].title and "train.py" in f[0].title, _ids(f)
        assert "python train.py" in f[0].fix and "#!/usr/bin/env python3" in f[0].fix, f[0].fix


def test_the_shells_syntax_error_alone_at_a_python_line_is_the_same_class(tmp_path):
    # the lines before it cut away, or the script's first lines were comments and assignments the shell accepted
    for line in ("train.py: line 6: syntax error near unexpected token `('", "main.py: 14: Syntax error: \"(\" unexpected",
                 "run_glue.py: line 41: syntax error: unexpected end of file"):
        f = _found(tmp_path, "starting job on node01\n" + line + "\n")
        assert f and f[0].id == "LOG023" and "run by a shell" in f[0].title, (line, _ids(f))
        assert "line:2" in f[0].subjects, f[0].subjects


def test_zsh_and_imagemagicks_import_are_the_same_class(tmp_path):
    for line in ("train.py:1: command not found: import", "zsh:1: command not found: from",
                 "import: unable to open X server `' @ error/import.c/ImportImageCommand/359.",
                 "import-im6.q16: unable to open X server `' @ error/import.c/ImportImageCommand/346."):
        f = _found(tmp_path, line + "\n")
        assert f and f[0].id == "LOG023" and "run by a shell" in f[0].title, (line, _ids(f))


def test_a_python_script_run_by_a_shell_past_a_large_log_head_is_read(tmp_path):
    pad = "".join(f"module load step {i}: ok\n" for i in range(40000))
    for text in (_BASH, _DASH):
        f = _found(tmp_path, pad + text)
        assert f and f[0].id == "LOG023" and "run by a shell" in f[0].title, _ids(f)


def test_a_shell_scripts_own_syntax_error_or_a_missing_helper_is_not_this_class(tmp_path):
    # a .sh with a shell syntax error is a broken shell script, not Python read by a shell; a helper not found before
    # a job that trained is no launch failure at all
    for text in ("run.sh: line 6: syntax error near unexpected token `('\nrun.sh: line 6: `foo (ls)'\n",
                 "bash: nvidia-smi: command not found\n" + _STEPS + _END,
                 "+ python train.py --lr 1e-4\nimport torch ok\nfrom config: lr=1e-4\n" + _STEPS + _END):
        f = _found(tmp_path, text)
        assert not any("run by a shell" in x.title for x in f), (text[:60], _ids(f))


# --- every fatal signal's death read the same way ----------------------------------------------------------------------
# bash's foreground report is strsignal(termsig) then " (core dumped)" (jobs.c); srun's _task_finish prints
# "%s: %s %s: %s%s" with strsignal() and " (core dumped)" (SchedMD/slurm src/srun/launch.c @284c3b95); CPython's
# faulthandler opens its dump with "Fatal Python error: <name>" and a blank line (Modules/faulthandler.c)
_FH = ("Fatal Python error: {what}\n\nCurrent thread 0x00007f3a2b4c5740 (most recent call first):\n"
       '  File "/opt/conda/lib/python3.10/site-packages/torch/__init__.py", line 290 in _load_global_deps\n'
       '  File "train.py", line 3 in <module>\n')


def test_sigill_and_sigfpe_in_the_shells_and_sruns_words_are_a_signal_death(tmp_path):
    for line, sig in (("Illegal instruction (core dumped)", "SIGILL"), ("Illegal instruction", "SIGILL"),
                      ("Floating point exception (core dumped)", "SIGFPE"),
                      ("srun: error: node07: task 3: Aborted (core dumped)", "SIGABRT"),
                      ("srun: error: node07: task 3: Illegal instruction (core dumped)", "SIGILL"),
                      ("srun: error: node07: tasks 0-1: Floating point exception", "SIGFPE")):
        f = _found(tmp_path, "+ python train.py --epochs 3\nloading data\n" + line + "\n")
        assert f and f[0].id == "LOG004" and f[0].severity == "error", (line, _ids(f))
        assert sig in f[0].title and "line:3" in f[0].subjects, (line, _ids(f), f[0].subjects)
        if line.startswith("srun"):
            assert "rank 3" in f[0].title or "rank 0" in f[0].title, _ids(f)


def test_a_log_that_opens_with_faulthandlers_header_is_the_crash_not_a_title(tmp_path):
    # the header, then a blank line: the shape of an issue's untagged title, but CPython's own output
    for what, sig in (("Illegal instruction", "SIGILL"), ("Floating point exception", "SIGFPE"), ("Aborted", "SIGABRT")):
        f = _found(tmp_path, _FH.format(what=what))
        assert f and f[0].id == "LOG004" and sig in f[0].title and "train.py:3" in f[0].title, (what, _ids(f))


def test_the_words_of_a_signal_inside_a_program_line_or_without_their_core_note_are_no_death(tmp_path):
    # click's "Aborted!" (a prompt declined), a bare "Aborted" (many programs' own word), a sentence that names the
    # signal: none is the shell's report of a process that died
    for line in ("Aborted!", "Aborted", "note: Illegal instruction checks passed for avx2 kernels",
                 "compiled without Floating point exception traps"):
        f = _found(tmp_path, "+ python train.py\n" + line + "\n" + _STEPS + _END)
        assert not any(x.id in ("LOG004", "LOG028") for x in f), (line, _ids(f))


def test_a_death_on_a_signal_the_cpu_raises_says_what_the_cpu_refused(tmp_path):
    # arch/x86/kernel/traps.c: #UD (invalid opcode) is SIGILL, #DE (divide error) is SIGFPE (data/fatal_signals.json)
    for text, words, cmd in (("Illegal instruction (core dumped)\n", "does not implement", "/proc/cpuinfo"),
                             (_FH.format(what="Illegal instruction"), "does not implement", "/proc/cpuinfo"),
                             ("Floating point exception\n", "division by zero", "zero size")):
        f = _found(tmp_path, "+ python train.py\n" + text)
        assert f and f[0].id == "LOG004", _ids(f)
        assert words in f[0].detail and "an inference" in f[0].detail if "SIGILL" in f[0].title else words in f[0].detail, \
            f[0].detail
        assert cmd in f[0].fix, f[0].fix


def test_a_death_on_a_signal_the_process_raised_itself_carries_no_cpu_trap(tmp_path):
    for text in ("srun: error: node07: task 3: Aborted (core dumped)\n", _FH.format(what="Aborted")):
        f = _found(tmp_path, "+ python train.py\n" + text)
        assert f and f[0].id == "LOG004" and "SIGABRT" in f[0].title, _ids(f)
        assert "does not implement" not in f[0].detail and "/proc/cpuinfo" not in f[0].fix, f[0].detail


# --- a bare exception whose cause is the frame that raised it (data/bare_exceptions.json) -----------------------------
# torch/utils/data/distributed.py @9299e326, DistributedSampler.__iter__: `assert len(indices) == self.num_samples`
def _sampler_tb(path="/opt/conda/lib/python3.10/site-packages/torch/utils/data/distributed.py", exc="AssertionError"):
    return ("[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "/work/train.py", line 88, in <module>\n[rank1]:     for batch in loader:\n'
            '[rank1]:   File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/sampler.py", line 283, in __iter__\n'
            "[rank1]:     for idx in self.sampler:\n"
            f'[rank1]:   File "{path}", line 109, in __iter__\n'
            "[rank1]:     assert len(indices) == self.num_samples\n"
            f"[rank1]: {exc}\n")


def test_a_bare_assert_in_distributedsampler_is_named_by_its_check(tmp_path):
    for path in ("/opt/conda/lib/python3.10/site-packages/torch/utils/data/distributed.py",
                 r"C:\Python310\Lib\site-packages\torch\utils\data\distributed.py"):
        f = _found(tmp_path, _sampler_tb(path))
        assert f and f[0].id == "LOG004" and "rank 1" in f[0].title, _ids(f)
        assert "DistributedSampler" in f[0].title and "len()" in f[0].title, _ids(f)
        assert "length changed after the sampler was built" in f[0].detail, f[0].detail
        assert "DistributedSampler(dataset" in f[0].fix, f[0].fix


def test_an_assert_with_its_message_or_in_a_copied_sampler_is_not_read_as_torchs(tmp_path):
    # torch 2.13's form names its numbers (the message says it); a project's own copy of the sampler is its own check
    for text in (_sampler_tb(exc="AssertionError: Number of subsampled indices (3) does not match num_samples (4)"),
                 _sampler_tb(path="/work/mmdet/datasets/samplers/distributed.py")):
        f = _found(tmp_path, text)
        assert f and f[0].id == "LOG004" and "AssertionError" in f[0].title, _ids(f)
        assert "DistributedSampler's own check" not in f[0].title and "length changed" not in f[0].detail, _ids(f)


# --- Ray Tune's errored-trials report names the failing trial and its error file --------------------------------------
# ray-project/ray python/ray/tune/experimental/output.py @0ff7fa55 (AIR_TABULATE_TABLEFMT's '│' rows) and
# progress_reporter.py @5c1ff57b (psql's '|' rows): "Number of errored trials: N", then Trial name / # failures / error file
_TUNE_NEW = ("Trial status: 3 TERMINATED | 1 ERROR\nCurrent time: 2024-05-01 10:00:00. Total running time: 1min 2s\n"
             "Number of errored trials: 1\n"
             "╭──────────────────────────────────────────────────────────────────────────────╮\n"
             "│ Trial name               # failures   error file                              │\n"
             "├──────────────────────────────────────────────────────────────────────────────┤\n"
             "│ train_fn_3c2a1_00002              1   /root/ray_results/train_fn/train_fn_3c2a1_00002/error.txt │\n"
             "╰──────────────────────────────────────────────────────────────────────────────╯\n")
_TUNE_OLD = ("== Status ==\nMemory usage on this node: 10.2/62.8 GiB\n"
             "Number of trials: 4/4 (1 ERROR, 3 TERMINATED)\nNumber of errored trials: 1\n"
             "+----------------------------+--------------+-----------------------------------------------------+\n"
             "| Trial name                 |   # failures | error file                                          |\n"
             "|----------------------------+--------------+-----------------------------------------------------|\n"
             "| train_cifar_86dca_00014    |            1 | /tmp/ray_results/train_cifar_86dca_00014/error.txt  |\n"
             "+----------------------------+--------------+-----------------------------------------------------+\n")


def test_ray_tunes_errored_trials_report_names_the_trial_and_its_error_file(tmp_path):
    for text, trial, where in ((_TUNE_NEW, "train_fn_3c2a1_00002", "line:3"), (_TUNE_OLD, "train_cifar_86dca_00014", "line:4")):
        f = _found(tmp_path, "Trial train_fn finished iteration 1\n" + text)
        assert f and f[0].id == "LOG028", _ids(f)
        assert f"trial {trial} errored (1 failure" in f[0].title and "error.txt" in f[0].title, _ids(f)
        assert f"line:{int(where.split(':')[1]) + 1}" in f[0].subjects, f[0].subjects
        assert "FailureConfig(fail_fast=True)" in f[0].fix, f[0].fix


def test_a_tune_run_whose_trials_all_ended_is_not_this_class(tmp_path):
    text = ("Trial status: 4 TERMINATED\nNumber of errored trials: 0\n"
            "Trial train_fn_00000 completed after 10 iterations at 2024-05-01 10:00:00. Total running time: 1min 2s\n"
            + _STEPS + _END)
    f = _found(tmp_path, text)
    assert not any("errored" in x.title for x in f), _ids(f)
