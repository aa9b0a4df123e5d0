"""check30b (issue 26, round 24): ENV/NET/launch classes, each with a trigger and a quiet fixture.
Pure: snapshots are built by the factory over recorded facts; no process is started."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.facts.launch import parse_command
from ddpdoctor.facts.launchers import mpi_root_refusal

# -- ENV014: Open MPI's mpirun as root (data/launchers.json mpi_root_refusal, open-mpi/ompi orte/orted/orted_submit.c
# orte_submit_init: geteuid() == 0 without --allow-run-as-root or OMPI_ALLOW_RUN_AS_ROOT=1 + _CONFIRM=1 exits 1) --


def _mpi(argv, uid=0, env=None):
    cmd = parse_command(argv)
    return make_snapshot(env=env or {}, host={"uid": uid}, packages={},
                         launch={"commands": [dict(cmd, depth=1)] if cmd else [], "depth_read": 1})


def test_the_table_records_the_refusal_with_its_source():
    table = mpi_root_refusal()
    assert table["source"]["repo"] == "open-mpi/ompi" and len(table["source"]["commit"]) == 40
    assert table["allow_env"] == {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert parse_command(["mpirun", "-np", "4", "python", "a.py"]) == {"launcher": "mpirun", "options": {},
                                                                       "program": None}
    assert parse_command(["/opt/ompi/bin/mpiexec", "--allow-run-as-root", "-n", "2", "x"])["options"] == {
        "allow_run_as_root": "1"}


def test_mpirun_as_root_without_the_override_is_refused():
    [f] = findings_of(_mpi(["mpirun", "-np", "5", "python", "main.py"]), "ENV014")
    assert f.severity == "warning" and "root" in f.title and "--allow-run-as-root" in f.fix
    assert "has detected an attempt to run as root" in f.detail
    # one variable alone does not lift it: both are compared with "1"
    [g] = findings_of(_mpi(["mpirun", "-np", "2", "a.out"], env={"OMPI_ALLOW_RUN_AS_ROOT": "1"}), "ENV014")
    assert "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in g.detail


def test_mpirun_with_the_override_or_as_a_user_is_quiet():
    assert findings_of(_mpi(["mpirun", "--allow-run-as-root", "-np", "5", "python", "main.py"]), "ENV014") == []
    both = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    assert findings_of(_mpi(["mpirun", "-np", "5", "python", "main.py"], env=both), "ENV014") == []
    assert findings_of(_mpi(["mpirun", "-np", "5", "python", "main.py"], uid=1000), "ENV014") == []
    assert findings_of(_mpi(["torchrun", "--nproc-per-node", "2", "train.py"]), "ENV014") == []
    # a rank of that mpirun (Open MPI's OMPI_COMM_WORLD_RANK, PMIx's PMIX_RANK): it did start
    assert findings_of(_mpi(["mpirun", "-np", "2", "a.out"], env={"OMPI_COMM_WORLD_RANK": "0"}), "ENV014") == []


# -- NET002/NET006/ENV005: a rank other than 0, ranks set by hand, whose MASTER_ADDR names another host yet resolves
# here to loopback only (pytorch/pytorch#42879: every node's name on Debian's 127.0.1.1 line): the job may span hosts --


def _looped(rank="1", master="node1", resolved=("127.0.1.1",), own=("127.0.1.1",)):
    env = {"RANK": rank, "WORLD_SIZE": "2", "MASTER_ADDR": master, "MASTER_PORT": "29500"}
    return make_snapshot(env=env, network={"hostname": "node0",
                                           "own_hostname": {"host": "node0", "addresses": list(own)},
                                           "master_addr": {"host": master, "addresses": list(resolved)}})


def test_another_hosts_name_on_loopback_is_a_guessed_span():
    snap = _looped()
    [f] = findings_of(snap, "NET002")
    assert f.severity == "warning" and "127.0.1.1" in f.title and "if rank 0 runs on another machine" in f.title
    [g] = findings_of(snap, "NET006")
    assert g.severity == "warning" and "127.0.1.1" in g.title and "if other ranks run on other hosts" in g.title
    [e] = findings_of(snap, "ENV005")
    assert e.severity == "info"


def test_this_hosts_own_names_and_routable_masters_are_quiet():
    # the FQDN of this host is this host: one host, loopback is right
    assert findings_of(_looped(master="node0.cluster"), "NET002") == []
    assert findings_of(_looped(master="node0.cluster"), "NET006") == []
    # rank 0 publishes the store; the name resolving to a routable address is master_elsewhere's (no guess needed)
    assert findings_of(_looped(rank="0"), "NET002") == []
    assert [f.title for f in findings_of(_looped(resolved=("10.0.0.7",)), "NET002")] == []
    # an address, not a name; and localhost
    assert findings_of(_looped(master="127.0.0.1", resolved=("127.0.0.1",)), "NET002") == []
    assert findings_of(_looped(master="localhost", resolved=("127.0.0.1",)), "NET002") == []
    # this host's name resolving to its own routable address: nothing for Gloo to fall back from
    assert findings_of(_looped(own=("10.0.0.5",)), "NET006") == []


# -- NET002: a deepspeed launch with no --master_addr whose first active hostfile host does not resolve here (data/
# launchers.json deepspeed_master_from_hostfile, runner.py main(): ssh check + `ssh <first host> hostname -I`) --


def _ds_launch(options, hostfile, resolved):
    cmd = {"launcher": "deepspeed", "options": options, "program": "train.py", "depth": 0, "hostfile": hostfile}
    if resolved is not None:
        cmd["master_resolved"] = resolved
    return make_snapshot(packages={"deepspeed": "0.14.0"}, launch={"commands": [cmd], "depth_read": 0})


HOSTS = {"path": "/etc/hostfile", "hosts": {"main-0.svc": 8, "worker-0.svc": 8}, "errors": []}


def test_active_hosts_follow_include_and_exclude_in_hostfile_order():
    from ddpdoctor.facts.launch import deepspeed_active_hosts

    hosts = ["a", "b", "c"]
    assert deepspeed_active_hosts(hosts) == hosts
    assert deepspeed_active_hosts(hosts, include="c:0@b") == ["b", "c"]
    assert deepspeed_active_hosts(hosts, exclude="a@b:1") == ["b", "c"]


def test_the_gatherer_reads_the_named_hostfile_and_resolves_its_first_active_host(tmp_path):
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.launch import deepspeed_command_facts

    (tmp_path / "hf").write_text("# pods\nmain-0.svc slots=8\nworker-0.svc slots=8\n")
    asked = []
    cmd = {"launcher": "deepspeed", "options": {"hostfile": "hf", "exclude": "main-0.svc"}}
    deepspeed_command_facts(Sources(), cmd, str(tmp_path), resolver=lambda h: asked.append(h) or {"host": h,
                                                                                              "error": "gaierror"})
    assert cmd["hostfile"]["hosts"] == {"main-0.svc": 8, "worker-0.svc": 8} and asked == ["worker-0.svc"]
    assert cmd["master_resolved"]["host"] == "worker-0.svc"
    given = {"launcher": "deepspeed", "options": {"hostfile": "hf", "master_addr": "10.0.0.1"}}
    deepspeed_command_facts(Sources(), given, str(tmp_path), resolver=lambda h: asked.append(h))
    assert "master_resolved" not in given and asked == ["worker-0.svc"]


def test_a_first_hostfile_host_that_does_not_resolve_stops_the_launch():
    gai = {"host": "main-0.svc", "error": "[Errno -2] Name or service not known"}
    [f] = findings_of(_ds_launch({"hostfile": "/etc/hostfile"}, HOSTS, gai), "NET002")
    assert f.severity == "error" and "main-0.svc" in f.title and "resolve" in f.title
    assert "was not reachable via ssh" in f.detail and "host:main-0.svc" in f.subjects


def test_a_resolving_first_host_or_a_given_master_is_quiet():
    ok = {"host": "main-0.svc", "addresses": ["10.1.0.4"]}
    assert findings_of(_ds_launch({"hostfile": "/etc/hostfile"}, HOSTS, ok), "NET002") == []
    assert findings_of(_ds_launch({"hostfile": "/etc/hostfile", "master_addr": "10.1.0.4"}, HOSTS, None),
                       "NET002") == []
    assert findings_of(_ds_launch({"hostfile": "/etc/hostfile"}, HOSTS, None), "NET002") == []  # not resolved: unknown
    gai = {"host": "main-0.svc", "error": "[Errno -2] Name or service not known"}
    started = _ds_launch({"hostfile": "/etc/hostfile"}, HOSTS, gai)
    started["env"]["vars"].update({"RANK": "3", "LOCAL_RANK": "3"})  # a rank of that launch: it got past the check
    assert findings_of(started, "NET002") == []
    assert findings_of(_ds_launch({"hostfile": "/etc/hostfile", "include": "worker-0.svc"}, HOSTS,
                                  {"host": "worker-0.svc", "addresses": ["10.1.0.5"]}), "NET002") == []


# -- launch settings that arrive as environment: a torchrun worker's inherited CUDA_VISIBLE_DEVICES (local_elastic_agent
# _set_local_rank_env: the agent's list passed unchanged unless --virtual-local-rank) and torchrun's PET_<OPTION>
# defaults (argparse_util.env): data/launchers.json elastic_worker_visible_devices --


def _worker(local_rank, cvd="0", lws="4", gpus=None):
    env = {"TORCHELASTIC_RUN_ID": "none", "RANK": local_rank, "LOCAL_RANK": local_rank, "WORLD_SIZE": lws,
           "LOCAL_WORLD_SIZE": lws, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "CUDA_VISIBLE_DEVICES": cvd}
    extra = {} if gpus is None else {"gpus": gpus}
    return make_snapshot(env=env, **extra)


def test_a_torchrun_worker_shares_the_one_gpu_its_agent_saw():
    [f] = findings_of(_worker("1"), "ENV017")
    assert f.severity == "error" and "4 local ranks" in f.title and "CUDA_VISIBLE_DEVICES=0" in f.title


def test_local_rank_0_or_a_list_per_rank_is_left_alone():
    assert findings_of(_worker("0"), "ENV017") == []  # --virtual-local-rank sets LOCAL_RANK=0 and one entry each
    assert findings_of(_worker("1", cvd="0,1,2,3"), "ENV017") == []
    plain = make_snapshot(env={"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
                               "MASTER_ADDR": "127.0.0.1", "CUDA_VISIBLE_DEVICES": "0"})
    assert findings_of(plain, "ENV017") == []  # no elastic agent: a wrapper may bind one GPU per rank


def _torchrun(options, env):
    return make_snapshot(env=env, launch={"commands": [{"launcher": "torchrun", "options": options,
                                                        "program": "train.py", "depth": 0}], "depth_read": 0})


def test_torchrun_reads_its_count_from_pet_when_the_command_omits_it():
    [f] = findings_of(_torchrun({}, {"PET_NPROC_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "0"}), "ENV017")
    assert "4 local ranks" in f.title
    [g] = findings_of(_torchrun({}, {"PET_NPROC_PER_NODE": "a100:4"}), "ENV025")
    assert g.severity == "error" and "PET_NPROC_PER_NODE='a100:4'" in g.title and "PET_NPROC_PER_NODE" in g.subjects


def test_the_command_line_wins_over_pet_and_numbers_are_quiet():
    assert findings_of(_torchrun({"nproc_per_node": "1"}, {"PET_NPROC_PER_NODE": "4", "CUDA_VISIBLE_DEVICES": "0"}),
                       "ENV017") == []
    assert findings_of(_torchrun({"nproc_per_node": "4"}, {"PET_NPROC_PER_NODE": "a100:4"}), "ENV025") == []
    assert findings_of(_torchrun({}, {"PET_NPROC_PER_NODE": "4"}), "ENV025") == []


def test_a_wrapper_between_the_agent_and_the_worker_may_bind_per_rank():
    from ddpdoctor.facts.ranks import elastic_worker_shares_devices

    child = make_snapshot(env={"TORCHELASTIC_RUN_ID": "x", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "RANK": "1",
                               "WORLD_SIZE": "4", "CUDA_VISIBLE_DEVICES": "0", "MASTER_ADDR": "127.0.0.1"},
                          launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "t.py", "depth": 1}],
                                  "depth_read": 1})
    assert elastic_worker_shares_devices(child) and len(findings_of(child, "ENV017")) == 1
    wrapped = make_snapshot(env=dict(child["env"]["vars"]),
                            launch={"commands": [{"launcher": "torchrun", "options": {}, "program": "b.sh",
                                                  "depth": 2}], "depth_read": 2})
    assert not elastic_worker_shares_devices(wrapped) and findings_of(wrapped, "ENV017") == []


def test_net002_reads_a_torchrun_command_without_node_rank_as_node_0():
    # a worker of `python -m torch.distributed.launch --nproc_per_node=4 train.py` (no --node_rank): NET002 crashed
    # with KeyError 'node_rank' (DOC001) before round 24
    env = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    snap = make_snapshot(env=env, network={"master_addr": {"host": "127.0.0.1", "addresses": ["127.0.0.1"]}},
                         launch={"commands": [{"launcher": "torchrun", "options": {"nproc_per_node": "4"},
                                               "program": "train.py", "depth": 1}], "depth_read": 1})
    found = findings_of(snap)
    assert [f.title for f in found if f.id == "DOC001" and "NET002" in f.title] == []
    assert [f for f in found if f.id == "NET002"] == []


# -- ENV020: `sh script.sh` read by a POSIX-only sh (dash) while the script uses bash-only syntax (data/launchers.json
# shell_syntax: POSIX XCU 2.6.2, bash's substring expansion; open-mmlab/mmsegmentation#3820 "Bad substitution") --

DIST_TRAIN = """#!/usr/bin/env bash
# ${@:3} in a comment is not code
CONFIG=$1
GPUS=$2
PORT=${PORT:-29500}
python -m torch.distributed.launch --nproc_per_node=$GPUS --master_port=$PORT \\
    $(dirname "$0")/train.py $CONFIG --launcher pytorch ${@:3}
"""


def test_bash_only_lines_skip_comments_and_posix_forms():
    from ddpdoctor.facts.launchers import bash_only_lines

    rows = bash_only_lines(DIST_TRAIN)
    assert [(r["line"], r["dash_says"]) for r in rows] == [(7, "Bad substitution")]
    assert bash_only_lines('X=${X:-1}\nY=${Y:=2}\n[ -f a ] && . ./env.sh\n') == []
    assert [r["line"] for r in bash_only_lines('if [[ -f a ]]; then\n  arr=(1 2)\nfi\nsource x\n')] == [1, 2, 4]


def test_the_gatherer_records_the_shell_and_the_scripts_bash_lines(tmp_path):
    import os

    from ddpdoctor.gather.launch import shell_run_facts

    script = tmp_path / "dist_train.sh"
    script.write_text(DIST_TRAIN)
    (tmp_path / "bin").mkdir()
    dash = tmp_path / "bin" / "dash"
    dash.write_text("")
    dash.chmod(0o755)
    os.symlink(dash, tmp_path / "bin" / "sh")
    run = shell_run_facts(["sh", str(script), "cfg.py", "4"], str(script), {"PATH": str(tmp_path / "bin")})
    assert run["shell"] == "sh" and run["shell_is"] == "dash" and run["shebang"] == "bash"
    assert [r["line"] for r in run["bash_only"]] == [7]
    assert shell_run_facts([str(script)], str(script), {"PATH": ""}) is None  # run itself: the kernel reads #!


def _shell_run(**run):
    return make_snapshot(launch={"commands": [], "depth_read": 0, "shell_run": run})


def test_a_bash_script_read_by_dash_stops_at_its_first_bash_line():
    lines = [{"line": 7, "what": "substring expansion ${parameter:offset}", "dash_says": "Bad substitution",
              "text": "... ${@:3}"}]
    [f] = findings_of(_shell_run(shell="sh", shell_is="dash", script="tools/dist_train.sh", shebang="bash",
                                 bash_only=lines), "ENV020")
    assert f.severity == "warning" and "line 7" in f.title and "Bad substitution" in f.title
    assert f.fix.startswith("bash tools/dist_train.sh")
    [g] = findings_of(_shell_run(shell="sh", shell_is="dash", script="x.sh", shebang="bash", bash_only=[]), "ENV020")
    assert g.severity == "info"


def test_bash_itself_or_a_posix_script_is_quiet():
    lines = [{"line": 3, "what": "[[ ... ]] test", "dash_says": "[[: not found", "text": "[[ -f a ]]"}]
    assert findings_of(_shell_run(shell="sh", shell_is="bash", script="x.sh", shebang="bash", bash_only=lines),
                       "ENV020") == []
    assert findings_of(_shell_run(shell="bash", shell_is="bash", script="x.sh", shebang="bash", bash_only=lines),
                       "ENV020") == []
    assert findings_of(_shell_run(shell="sh", shell_is="dash", script="x.sh", shebang="sh", bash_only=[]),
                       "ENV020") == []


# -- the hostfile a deepspeed launch names (--hostfile /etc/hostfile) is the one its checks judge, not only /job/hostfile
# (check29b's left class: ENV014's ssh keys, ENV021's pool, ENV018, NET018 read facts.launch.deepspeed_hostfile_of) --


def test_the_commands_own_hostfile_is_the_one_judged():
    from ddpdoctor.facts.launch import deepspeed_hostfile_of

    named = {"path": "/etc/hostfile", "hosts": {"w1": 8, "w2": 8}, "errors": []}
    cmd = {"launcher": "deepspeed", "options": {"hostfile": "/etc/hostfile"}, "program": "t.py", "depth": 0,
           "hostfile": named}
    ssh = {"client": "/usr/bin/ssh", "keys": [], "agent": False, "config": False}
    snap = make_snapshot(packages={"deepspeed": "0.14.0"}, host={"ssh": ssh},
                         launch={"commands": [cmd], "depth_read": 0})
    assert deepspeed_hostfile_of(snap) == named
    [f] = findings_of(snap, "ENV014")
    assert "/etc/hostfile" in f.title and "2 hosts" in f.title
    # a --hostfile that was not read, beside a gathered /job/hostfile: neither is taken for it
    other = make_snapshot(packages={"deepspeed": "0.14.0"}, host={"ssh": ssh, "deepspeed_hostfile": {
        "path": "/job/hostfile", "hosts": {"a": 1, "b": 1}, "errors": []}},
        launch={"commands": [dict(cmd, hostfile=None)], "depth_read": 0})
    assert deepspeed_hostfile_of(other) is None and findings_of(other, "ENV014") == []
