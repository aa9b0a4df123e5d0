"""Round 24, second cycle (issue 24): classes from batches 215-217's first read, each with a trigger and a quiet case.

- A framework's caught exception in one unit of its work (AutoGluon's "Warning: Exception caused M to fail during
  training... Skipping this model.", autogluon timeseries/.../trainer/abstract_trainer.py @b63bfd40; optuna's "Trial N
  failed with parameters: ... because of the following error: ...", optuna/study/_optimize.py @cf7efcad) is a failure
  line (class work_unit_failed_caught), and a later end line ("Training complete. Models trained: []") neither shows
  health nor makes it a survived attempt (verdict.survived_by_end).
- LAMMPS's "ERROR on proc N: ..." (Error::one, lammps/lammps src/error.cpp @e80bfa4a) names the MPI rank that failed.
- A file whose process printed its launcher-set RANK variable once ("RANK=1 -- LOCAL_RANK=0") holds that rank's output.

Pure: each case is triage over a fixture file or a few lines; no process is launched."""
import os

from ddpdoctor.triage.api import triage_paths
from ddpdoctor.triage.rules.unexplained import _OWN_RANK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RULES = os.path.join(ROOT, "fixtures", "triage", "rules")


def _found(path):
    return [f for f in triage_paths([path]).sorted_findings() if f.severity in ("error", "warning")]


def _write(tmp_path, text, name="job.log"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_a_caught_model_failure_before_the_end_line_is_a_failure_not_health():
    f = _found(os.path.join(RULES, "LOG028_trigger_automl_model_failed_then_training_complete.log"))
    assert f and f[0].id == "LOG028" and "caught an exception" in f[0].title, [(x.id, x.title) for x in f]


def test_a_time_limit_skip_before_the_end_line_stays_healthy():
    f = _found(os.path.join(RULES, "LOG028_quiet_automl_time_limit_skip_then_complete.log"))
    assert f == [], [(x.id, x.title) for x in f]


def test_a_caught_trial_failure_is_not_an_earlier_attempt_that_a_later_end_survived():
    # progress and an end line follow the failed trial: without the class the failure read as a survived attempt
    # (an info note, "No issues found!")
    f = _found(os.path.join(RULES, "LOG028_trigger_optuna_trial_failed_then_later_trials_train.log"))
    assert f and f[0].id == "LOG028" and f[0].severity == "warning", [(x.id, x.title) for x in f]


def test_an_uncatalogued_failure_then_progress_and_an_end_is_still_a_survived_attempt(tmp_path):
    # quiet side of survived_by_end: a failure line no class names, then training and an end, stays a note
    text = ("RuntimeError: address already in use\n" + "".join(f"step {i} loss 0.{9 - i}\n" for i in range(1, 6))
            + "Training completed.\n")
    f = _found(_write(tmp_path, text))
    assert not any(x.id == "LOG028" for x in f), [(x.id, x.title) for x in f]


def test_lammps_error_on_proc_names_its_rank():
    f = _found(os.path.join(RULES, "LOG028_trigger_lammps_error_on_proc_names_its_rank.log"))
    assert f and f[0].id == "LOG028" and "rank:5" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_own_rank_forms():
    assert _OWN_RANK.search("ERROR on proc 34: DeePMD-kit C API Error: x (pair_deepmd.cpp:586)").group("rank") == "34"
    assert _OWN_RANK.search("WARNING on proc 3: Communication cutoff 0 is shorter (src/comm.cpp:723)") is None
    assert _OWN_RANK.search("NO_ERROR on proc 3: x") is None


def test_a_printed_rank_variable_names_the_cut_tracebacks_rank():
    f = _found(os.path.join(RULES, "LOG028_trigger_env_rank_line_then_cut_traceback.log"))
    assert f and f[0].id == "LOG028" and "rank:1" in f[0].subjects, [(x.id, x.title, x.subjects) for x in f]


def test_two_printed_ranks_in_one_file_name_no_rank(tmp_path):
    text = ("RANK=0 -- LOCAL_RANK=0\nRANK=1 -- LOCAL_RANK=1\nTraceback (most recent call last):\n"
            '  File "/work/train.py", line 5, in <module>\n    main()\n'
            '  File "/work/train.py", line 3, in main\n    x = load()\n')
    f = _found(_write(tmp_path, text))
    assert f and f[0].id == "LOG028", [(x.id, x.title) for x in f]
    assert not any(s.startswith("rank:") for s in f[0].subjects), f[0].subjects


def test_local_rank_alone_names_no_rank(tmp_path):
    text = ("LOCAL_RANK=1 NODE_RANK=0\nTraceback (most recent call last):\n"
            '  File "/work/train.py", line 5, in <module>\n    main()\n'
            '  File "/work/train.py", line 3, in main\n    x = load()\n')
    f = _found(_write(tmp_path, text))
    assert f and f[0].id == "LOG028", [(x.id, x.title) for x in f]
    assert not any(s.startswith("rank:") for s in f[0].subjects), f[0].subjects
