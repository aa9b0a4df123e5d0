"""A rank torchrun terminated, whose own exit status never reached `run`: its end is the signal the agent
says it sent (evidence), never a guessed SIGKILL that then reads as "SIGTERM not obeyed"."""
from ddpdoctor.run.section import end_of

TERMINATED = {"role": "terminated", "signal": "SIGTERM", "after": [1], "reason": "a worker failed", "t": 100.0,
              "exitcode": None}


def test_the_agents_signal_is_the_end_when_no_status_reached_us():
    end = end_of({"alive": False, "launcher": dict(TERMINATED), "end_t": 100.1}, 0)
    assert end["signal"] == "SIGTERM" and end["signal_from"] == "launcher" and not end.get("signal_guessed")
    assert end["secondary"] and end["terminated_by"]["after_ranks"] == [1]


def test_a_status_of_its_own_wins_over_the_agents_record():
    end = end_of({"alive": False, "status": -9, "launcher": dict(TERMINATED), "end_t": 100.1}, 0)
    assert end["signal"] == "SIGKILL" and "signal_from" not in end and not end.get("signal_guessed")


def test_with_nothing_known_the_sigkill_stays_a_guess():
    end = end_of({"alive": False, "end_t": 100.1}, 0)
    assert end["how"] == "vanished" and end["signal"] == "SIGKILL" and end["signal_guessed"]
