"""Round 21 (runcol21's batch run-r21c, noticed and not scored): `ddpdoctor run`'s last line counted RUN021 (the ranks
train alone: a set-up finding) as "1 stall/death finding(s)" on a healthy job. It is told apart, like RUN025."""
from ddpdoctor.commands import run as run_cmd
from ddpdoctor.model import Report, warning


class _Sup:
    stopped = False
    events: list = []
    procs = [object()]

    def exit_status(self):
        return 0


def _line(capsys, findings):
    report = Report(command="run", findings=findings)
    run_cmd._summary(_Sup(), report)
    return capsys.readouterr().err.strip().splitlines()[-1]


def _f(id_, title):
    return warning(title).stamped(id_, id_.lower(), "run")


def test_ranks_training_alone_is_not_a_stall_or_a_death(capsys):
    line = _line(capsys, [_f("RUN021", "each rank trains alone")])
    assert "stall/death" not in line and "no stall, no death" in line and "RUN021" in line, line


def test_a_stall_is_still_counted(capsys):
    line = _line(capsys, [_f("RUN002", "rank 1 is blocked"), _f("RUN021", "each rank trains alone")])
    assert "1 stall/death finding(s)" in line and "RUN021" in line, line
