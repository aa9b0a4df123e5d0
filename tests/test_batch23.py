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
