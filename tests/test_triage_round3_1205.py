"""Round-3 classes of issue 24 (triage, 2026-12-05): each a class grounded in its source's message format, with a trigger
and a quiet case whose assertion can fail. Fixtures in fixtures/triage/rules/ were written from the formats (no logs)."""
from __future__ import annotations

import os

from ddpdoctor.triage.api import triage_paths

RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "triage", "rules")


def _found(name):
    return triage_paths([os.path.join(RULES, name + ".log")]).sorted_findings()


def test_ranks_with_no_line_in_the_log_are_not_said_to_have_never_joined():
    """Evidence before inference: one rank's excerpt of an 8-rank job (NCCL's nranks 8) shows no other rank at all;
    the title says ranks 1-7 are not in this log and marks the laggard as inferred, never "never joined"."""
    f = _found("LOG001_trigger_one_rank_excerpt_of_eight")[0]
    assert f.id == "LOG001" and "never joined" not in f.title, f.title
    assert "not in this log" in f.title and "inferred" in f.title, f.title
    assert f.evidence["ranks_not_in_log"] == [1, 2, 3, 4, 5, 6, 7]


def test_a_rank_the_log_shows_without_a_timeout_is_named_as_such():
    """The quiet side: rank 1 appears (its NCCL init line) and printed no timeout: a fact, said without inference."""
    f = _found("LOG001_trigger_two_ranks_one_silent_but_present")[0]
    assert f.id == "LOG001" and "rank 1 printed no timeout while rank 0 waited" in f.title, f.title
    assert f.evidence["ranks_not_in_log"] == [] and "inferred" not in f.title


def test_remote_error_before_the_watchdog_timeout_is_a_lost_peer():
    """ncclRemoteError ("remote process exited or there was a network error", a socket closed by the remote peer or a
    Broken pipe) before the watchdog timeout: the peer died first (LOG022, naming it), the timeout is folded in."""
    for name, peer in (("LOG022_trigger_remote_error_then_watchdog_timeout", "node-b"),
                       ("LOG022_trigger_socket_broken_pipe_then_timeout", "10.0.0.12")):
        f = _found(name)
        assert [x.id for x in f] == ["LOG022"], [(x.id, x.title) for x in f]
        assert peer in f[0].title and f[0].evidence["timed_out_ranks"] == [3], f[0].title


def test_a_remote_error_after_the_timeout_leaves_the_timeout_first():
    """The quiet side: the timeout comes first and the remote error after it (the watchdog's abort reaching the
    peers): LOG001 stays the first finding."""
    f = _found("LOG001_trigger_timeout_before_remote_error")
    assert f[0].id == "LOG001", [(x.id, x.title) for x in f]


def test_environ_keyerror_for_a_launcher_variable_is_a_launch_without_launcher():
    """os.environ['RANK'] under plain `python` raises KeyError: 'RANK' (Lib/os.py): LOG023, not LOG004."""
    f = _found("LOG023_trigger_environ_keyerror_rank")
    assert [x.id for x in f] == ["LOG023"] and "os.environ['RANK']" in f[0].title, [(x.id, x.title) for x in f]
    q = _found("LOG023_quiet_keyerror_not_a_launcher_variable")
    assert [x.id for x in q] == ["LOG004"], [(x.id, x.title) for x in q]


def test_megatron_parallel_size_asserts_are_config_mismatches():
    """Megatron-LM's validate_args / initialize_model_parallel asserts (world size vs TP x PP, layers vs PP): LOG024
    with the numbers; a user's own "divisible" assert stays LOG004."""
    f = _found("LOG024_trigger_megatron_world_not_divisible")
    assert [x.id for x in f] == ["LOG024"] and "8 processes" in f[0].title, [(x.id, x.title) for x in f]
    f = _found("LOG024_trigger_megatron_layers_not_divisible_pp")
    assert [x.id for x in f] == ["LOG024"] and "pipeline stages" in f[0].title, [(x.id, x.title) for x in f]
    q = _found("LOG024_quiet_user_assert_divisible")
    assert [x.id for x in q] == ["LOG004"], [(x.id, x.title) for x in q]
