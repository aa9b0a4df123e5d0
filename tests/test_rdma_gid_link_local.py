"""NET017 (check2, round 8, from getainode/ainode#89): a RoCE port NCCL will use carries a 169.254/16 address.

NVIDIA/nccl src/transport/net_ib/connect.cc @ 5067397c: ncclIbGetGidIndex walks the GID table to the first
IPv4-mapped RoCE v2 GID (NCCL_IB_ADDR_FAMILY AF_INET, NCCL_IB_ROCE_VERSION_NUM 2, NCCL_IB_ADDR_RANGE narrows it);
validGid() rejects only fe80::/64 (linkLocalGid), so an IPv4 link-local address is used, and it is never routed.
"""
from factory import findings_of, make_snapshot

from ddpdoctor.checks.net import _nccl_auto_gid


def gid4(ip):
    a = [int(x) for x in ip.split(".")]
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % tuple(a)


def port(*gids, state="4: ACTIVE"):
    return {"link_layer": "Ethernet", "state": state,
            "gids": {str(i): {"gid": g, "type": t} for i, (g, t) in enumerate(gids)}}


LL = port(("fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"), ("fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"),
          (gid4("169.254.3.7"), "IB/RoCE v1"), (gid4("169.254.3.7"), "RoCE v2"))
GOOD = port(("fe80:0000:0000:0000:0000:0000:0000:0002", "IB/RoCE v1"), ("fe80:0000:0000:0000:0000:0000:0000:0002", "RoCE v2"),
            (gid4("10.100.0.13"), "IB/RoCE v1"), (gid4("10.100.0.13"), "RoCE v2"))
TWO_NODES = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "10.100.0.13",
             "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}


def snap(env, ports):
    return make_snapshot(env=env, pci={"rdma_devices": sorted({k.split(":")[0] for k in ports}), "rdma_ports": ports})


def test_nccl_picks_the_first_ipv4_roce_v2_gid():
    assert _nccl_auto_gid(LL, {}) == "3"
    assert _nccl_auto_gid(LL, {"NCCL_IB_ROCE_VERSION_NUM": "1"}) == "2"
    assert _nccl_auto_gid(LL, {"NCCL_IB_ADDR_RANGE": "10.100.0.0/16"}) is None  # no GID in the range
    assert _nccl_auto_gid(LL, {"NCCL_IB_ADDR_FAMILY": "AF_INET6"}) is None  # not judged


def test_link_local_port_selected_on_a_job_across_hosts_warns():
    s = snap(dict(TWO_NODES, NCCL_IB_HCA="roceP2p1s0f0,roceP2p1s0f1"), {"roceP2p1s0f0:1": LL, "roceP2p1s0f1:1": GOOD})
    (f,) = findings_of(s, "NET017")
    assert f.severity == "warning" and "roceP2p1s0f0:1" in f.title and "169.254.3.7" in f.title
    assert "rdma:roceP2p1s0f0:1" in f.subjects and "roceP2p1s0f1:1" not in f.title


def test_quiet_when_the_port_is_left_out_down_one_host_or_a_routable_gid_is_forced():
    ports = {"roceP2p1s0f0:1": LL, "roceP2p1s0f1:1": GOOD}
    assert findings_of(snap(dict(TWO_NODES, NCCL_IB_HCA="=roceP2p1s0f1"), ports), "NET017") == []
    assert findings_of(snap(TWO_NODES, {"roceP2p1s0f0:1": dict(LL, state="1: DOWN"), "roceP2p1s0f1:1": GOOD}), "NET017") == []
    one_host = dict(TWO_NODES, WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
    assert findings_of(snap(one_host, ports), "NET017") == []
    assert findings_of(snap(dict(TWO_NODES, NCCL_IB_HCA="roceP2p1s0f1"), ports), "NET017") == []
    assert findings_of(snap(dict(TWO_NODES, NCCL_IB_DISABLE="1"), ports), "NET017") == []
