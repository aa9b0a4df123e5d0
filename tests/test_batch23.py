"""Batch 23's gathered fact (issue 26): the NCCL config files (/etc/nccl.conf, ~/.nccl.conf, NCCL_CONF_FILE),
read in NCCL's order and parsed as NCCL's setEnvFile parses them (src/misc/param.cc)."""
from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.env import gather_env, nccl_conf_paths, parse_nccl_conf


def test_nccl_conf_paths_follow_nccl_order():
    assert nccl_conf_paths({"HOME": "/home/u"}) == ["/home/u/.nccl.conf", "/etc/nccl.conf"]
    assert nccl_conf_paths({"HOME": "/home/u", "NCCL_CONF_FILE": "/opt/x.conf"}) == ["/opt/x.conf", "/etc/nccl.conf"]
    assert nccl_conf_paths({"NCCL_CONF_FILE": ""}) == ["/etc/nccl.conf"]  # empty: NCCL ignores it


def test_parse_nccl_conf_like_set_env_file():
    text = "# comment\nNCCL_DEBUG=INFO\r\nNCCL_IB_HCA = mlx5_0\nno equals sign\nNCCL_DEBUG=WARN\nA=b=c\n"
    assert parse_nccl_conf(text) == {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA ": " mlx5_0", "A": "b=c"}


def test_gather_env_reads_the_files_under_root(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nccl.conf").write_text("NCCL_IB_USE_INLINE=1\n")
    (tmp_path / "home/u").mkdir(parents=True)
    (tmp_path / "home/u/.nccl.conf").write_text("NCCL_SOCKET_IFNAME=eth0\n")
    out = gather_env(Sources(root=str(tmp_path), environ={"HOME": "/home/u"}))
    assert out["nccl_conf"] == [{"path": "/home/u/.nccl.conf", "vars": {"NCCL_SOCKET_IFNAME": "eth0"}},
                                {"path": "/etc/nccl.conf", "vars": {"NCCL_IB_USE_INLINE": "1"}}]
    assert "nccl_conf" not in gather_env(Sources(root=str(tmp_path / "none"), environ={}))


def test_nccl005_first_file_wins_and_the_environment_wins_over_both():
    confs = [{"path": "/home/u/.nccl.conf", "vars": {"NCCL_IB_USE_INLINE": "0"}},
             {"path": "/etc/nccl.conf", "vars": {"NCCL_IB_USE_INLINE": "1", "NCCL_P2P_DISABLE": "1"}}]
    found = findings_of(make_snapshot(nccl_conf=confs), "NCCL005")
    assert found and found[0].severity == "warning"
    assert found[0].evidence["applied"]["NCCL_IB_USE_INLINE"] == {"value": "0", "file": "/home/u/.nccl.conf"}
    assert "NCCL_IB_USE_INLINE" not in found[0].detail.split("changed from NCCL's defaults:")[1]  # 0 is the default
    quiet = findings_of(make_snapshot(env={"NCCL_P2P_DISABLE": "0", "NCCL_IB_USE_INLINE": "1"}, nccl_conf=confs), "NCCL005")
    assert not quiet


# ------------------------------------------------------------------ NET004: GID 0 under an NCCL older than 2.21.5
def _roce(nccl=None, env_extra=None, multi=True):
    ll = "fe80:0000:0000:0000:0a00:27ff:fe00:0001"
    v4 = "0000:0000:0000:0000:0000:ffff:c0a8:1190"
    gids = {"0": {"gid": ll, "type": "IB/RoCE v1"}, "1": {"gid": ll, "type": "RoCE v2"},
            "2": {"gid": v4, "type": "IB/RoCE v1"}, "3": {"gid": v4, "type": "RoCE v2"}}
    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "8", "WORLD_SIZE": "16" if multi else "8", "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", **(env_extra or {})}
    kw = {"torch": {"nccl_version": nccl, "distributed_available": True}} if nccl else {}
    return make_snapshot(env=env, pci={"rdma_devices": ["mlx5_0"],
                                       "rdma_ports": {"mlx5_0:1": {"link_layer": "Ethernet", "gids": gids}}}, **kw)


def test_net004_default_gid_zero_under_an_old_nccl_across_hosts():
    # pytorch/pytorch#81628: hosts under different switches, fixed with NCCL_IB_GID_INDEX=3
    for snap in (_roce("2.10.3"), _roce()):
        found = findings_of(snap, "NET004")
        assert found and found[0].severity == "warning" and "NCCL_IB_GID_INDEX=3" in found[0].fix
    assert "not recorded" in findings_of(_roce(), "NET004")[0].detail


def test_net004_quiet_with_nccl_2_21_5_one_host_or_an_index_set():
    assert not findings_of(_roce("2.21.5"), "NET004")
    assert not findings_of(_roce("2.10.3", multi=False), "NET004")
    assert not findings_of(_roce("2.10.3", env_extra={"NCCL_IB_GID_INDEX": "3"}), "NET004")


def test_nccl_version_of_never_gathers_the_torch_facts():
    # the `torch` gatherer starts an interpreter: check's network rules must not pull it in
    from ddpdoctor.facts.net import nccl_version_of

    class Lazy:
        sections = {"packages": {"versions": {}}}

        def get(self, name):
            assert name != "torch", "gathered the torch facts"
            return self.sections.get(name)

    assert nccl_version_of(Lazy()) is None


# ------------------------------------------------------------------ PKG004: the mined torch floors of accelerate
def test_torch_floors_data_carries_its_sources():
    import re

    from ddpdoctor.facts import torch_floors

    entries = torch_floors.entries()
    assert {e["when"] for e in entries} >= {"installed", "multi_gpu", "multi_node"}
    for e in entries:
        src = e["source"]
        assert src["repo"] == "huggingface/accelerate" and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
        assert src["path"] and src["line"] > 0 and src["tag"] == "v" + e["versions"]["first"]
        assert torch_floors.release(e["versions"]["first"]) <= torch_floors.release(e["versions"]["last"])
    assert torch_floors.floors("accelerate", "0.17.1", "1.8.1+cu111", ("multi_gpu",))[0]["torch"] == "1.9.1"
    assert not torch_floors.floors("accelerate", "0.21.0", "1.8.1", ("multi_gpu",))  # the guard was gone by then


# ------------------------------------------------------------------ SYS006 (batch 24): torch extension build locks
def test_torch_extension_locks_follow_torchs_build_directory(tmp_path):
    import os

    from ddpdoctor.gather.host import torch_extension_locks

    default = tmp_path / "home/u/.cache/torch_extensions/py310_cu121/fused_adam"
    default.mkdir(parents=True)
    (default / "lock").write_text("")
    (tmp_path / "home/u/.cache/torch_extensions/py310_cu121/clean").mkdir()
    out = torch_extension_locks(Sources(root=str(tmp_path), environ={"HOME": "/home/u"}))
    assert out["path"] == "/home/u/.cache/torch_extensions"
    assert [l["path"] for l in out["locks"]] == [os.path.join("py310_cu121", "fused_adam", "lock")]
    assert out["locks"][0]["age_s"] >= 0
    own = tmp_path / "ext/op"  # TORCH_EXTENSIONS_DIR=<dir>: <dir>/<name>/lock, one level
    own.mkdir(parents=True)
    (own / "lock").write_text("")
    got = torch_extension_locks(Sources(root=str(tmp_path), environ={"TORCH_EXTENSIONS_DIR": "/ext"}))
    assert [l["path"] for l in got["locks"]] == [os.path.join("op", "lock")]
    assert torch_extension_locks(Sources(root=str(tmp_path), environ={"HOME": "/nobody"})) is None


# ------------------------------------------------------------------ PKG006 (batch 24): DeepSpeed's hostfile and pdsh
def test_deepspeed_hostfile_parsed_as_its_runner_does(tmp_path):
    from ddpdoctor.gather.host import deepspeed_hostfile, launcher_tools

    (tmp_path / "job").mkdir()
    (tmp_path / "job/hostfile").write_text("# two nodes\nnode1 slots=8\nnode2 lots=8\nnode1 slots=4\n\n")
    out = deepspeed_hostfile(Sources(root=str(tmp_path), environ={}))
    assert out["hosts"] == {"node1": 8}
    assert out["errors"] == ["bad entry: node2 lots=8", "repeated host: node1"]
    assert deepspeed_hostfile(Sources(root=str(tmp_path / "none"), environ={})) is None
    tools = launcher_tools(Sources())
    assert set(tools) == {"found", "missing"} and ("pdsh" in tools["found"]) != ("pdsh" in tools["missing"])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/pdsh").write_text("#!/bin/sh\n")
    (tmp_path / "bin/pdsh").chmod(0o755)
    assert launcher_tools(Sources(environ={"PATH": str(tmp_path / "bin")}))["found"] == {"pdsh": str(tmp_path / "bin/pdsh")}
    assert launcher_tools(Sources(environ={"PATH": str(tmp_path / "none")}))["missing"] == ["pdsh"]
