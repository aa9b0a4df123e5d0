"""NET006 on one host, replayed on a recorded machine (fixtures/snapshots): before torchrun starts, a host name that
does not resolve is what torchrun --standalone will hand its workers as MASTER_ADDR (nyu-systems/Grendel-GS#9's
'The IPv6 network addresses of (user, 53821) cannot be retrieved'); once inside a worker, NET002 judges MASTER_ADDR."""
from factory import findings_of, fixture_snapshot

UNRESOLVED = {"host": "user", "addresses": [], "error": "[Errno -3] Temporary failure in name resolution"}


def _net(s, own):
    s["network"]["hostname"] = own["host"]
    s["network"]["own_hostname"] = own


def test_replay_before_launch_warns_on_the_standalone_master_addr():
    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: _net(s, UNRESOLVED))
    found = findings_of(snap, "NET006")
    assert len(found) == 1 and found[0].severity == "warning"
    assert "MASTER_ADDR=user" in found[0].title and "host:user" in found[0].subjects


def test_replay_inside_a_worker_leaves_it_to_net002():
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "user", "MASTER_PORT": "53821"}

    def edit(s):
        _net(s, UNRESOLVED)
        s["network"]["master_addr"] = dict(UNRESOLVED)

    snap = fixture_snapshot("rtx4090-4x-no-p2p", env=env, edit=edit)
    assert findings_of(snap, "NET006") == []
    assert any(f.severity == "error" for f in findings_of(snap, "NET002"))


def test_replay_resolving_host_stays_quiet():
    snap = fixture_snapshot("rtx4090-4x-no-p2p", edit=lambda s: _net(s, {"host": "user", "addresses": ["127.0.1.1"]}))
    # no warning; with no launcher or rank variable at all, whether other machines connect is unknown, and since
    # round 10 a note names that (tests/test_round10_check.py)
    found = findings_of(snap, "NET006")
    assert all(f.severity == "info" and "cannot tell" in f.title for f in found), [f.title for f in found]
