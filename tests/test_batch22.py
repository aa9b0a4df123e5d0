"""Batch 22's classes (issue 26): libvirt's virbr* bridge taken by an NCCL older than 2.28.3 (NET003), and a
c10d rendezvous endpoint that names this host in a way torch does not recognise (NET008)."""
from factory import findings_of, make_snapshot

from ddpdoctor.facts import net as netfacts
from ddpdoctor.pipeline.snapshot import Snapshot


def _iface(name, addr):
    return {"name": name, "up": True, "mtu": 1500, "speed_mbps": 1000,
            "addresses": [{"family": "ipv4", "address": addr}]}


LIBVIRT = [_iface("lo", "127.0.0.1"), _iface("enp5s0", "192.168.1.10"), _iface("virbr0", "192.168.122.1")]
TWO_NODES = {"TORCHELASTIC_RUN_ID": "none", "RANK": "0", "WORLD_SIZE": "16", "LOCAL_RANK": "0",
             "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "0", "MASTER_ADDR": "192.168.1.10", "MASTER_PORT": "29500"}


def _libvirt_host(nccl=None, wheel=None):
    doc = make_snapshot(env=TWO_NODES).to_dict()
    s = doc["sections"]
    s["network"]["interfaces"] = LIBVIRT
    s["network"]["master_addr"] = {"host": "192.168.1.10", "addresses": ["192.168.1.10"]}
    if nccl:
        s.setdefault("torch", {})["nccl_version"] = nccl
    if wheel:
        s["packages"]["versions"]["nvidia-nccl-cu12"] = wheel
    return Snapshot.from_dict(doc)


# ------------------------------------------------------------------ NET003: virbr0 under NCCL < 2.28.3
def test_nccl_default_pick_takes_virbr_only_before_2_28_3():
    assert netfacts.nccl_default_pick(LIBVIRT)[0] == ["enp5s0"]
    assert netfacts.nccl_default_pick(LIBVIRT, skip_virbr=False)[0] == ["enp5s0", "virbr0"]


def test_net003_virbr0_with_an_nccl_older_than_2_28_3():
    # deepinsight/insightface#1905: NCCL opened sockets on libvirt's virbr0 as well, which never answered
    for snap in (_libvirt_host(nccl="2.10.3"), _libvirt_host(wheel="2.27.5"), _libvirt_host()):
        found = findings_of(snap, "NET003")
        assert found and found[0].severity == "warning" and "virbr0" in found[0].title, [f.title for f in found]
    assert "not recorded" in findings_of(_libvirt_host(), "NET003")[0].detail  # the version is a guess: said so


def test_net003_quiet_on_virbr0_with_nccl_2_28_3_or_later():
    assert not findings_of(_libvirt_host(nccl="2.28.3"), "NET003")
    assert not findings_of(_libvirt_host(wheel="2.29.2"), "NET003")


# ------------------------------------------------------------------ NET008: c10d endpoint not recognised as this host
POD = "sh-0-0"
POD_IFACES = [_iface("lo", "127.0.0.1"), _iface("eth0", "192.168.15.246")]


def _rdzv(endpoint, resolved, torch="1.10.0", canonical="sh-0-0.sh.default.svc.cluster.local", backend="c10d",
          own=("192.168.15.246",), conf=None):
    env = {"PET_RDZV_BACKEND": backend, "PET_RDZV_ENDPOINT": f"{endpoint}:29400", "PET_NNODES": "2"}
    if conf:
        env["PET_RDZV_CONF"] = conf
    doc = make_snapshot(env=env).to_dict()
    s = doc["sections"]
    s["network"]["hostname"] = POD
    s["network"]["interfaces"] = POD_IFACES
    s["network"]["own_hostname"] = {"host": POD, "addresses": list(own), **({"canonical": canonical} if canonical else {})}
    s["network"]["rdzv_endpoint"] = {"host": endpoint, "addresses": resolved}
    s["packages"]["versions"]["torch"] = torch
    return Snapshot.from_dict(doc)


def test_net008_second_name_of_this_host_under_torch_before_2_0():
    # pytorch/pytorch#73380: Volcano's host.subdomain name for a pod whose hostname is host
    found = findings_of(_rdzv("sh-0-0.sh", ["192.168.15.246"]), "NET008")
    assert found and found[0].severity == "warning" and "sh-0-0.sh" in found[0].title
    assert "FQDN) was not recorded" not in found[0].detail
    unknown_fqdn = findings_of(_rdzv("sh-0-0.sh", ["192.168.15.246"], canonical=None), "NET008")
    assert unknown_fqdn and "was not recorded" in unknown_fqdn[0].detail  # the guess is said


def test_net008_address_of_a_nic_the_hostname_does_not_resolve_to():
    # torch >= 2.0 compares addresses too, but not those of a NIC the hostname does not resolve to
    # (Debian's `127.0.1.1 hostname` line)
    snap = _rdzv("192.168.15.246", ["192.168.15.246"], torch="2.5.1", own=("127.0.1.1",))
    assert findings_of(snap, "NET008")


def test_net008_quiet_when_torch_recognises_the_endpoint_or_it_is_another_host():
    assert not findings_of(_rdzv("sh-0-0.sh", ["192.168.15.246"], torch="2.5.1"), "NET008")  # shared address
    assert not findings_of(_rdzv(POD, ["192.168.15.246"]), "NET008")  # the hostname itself
    assert not findings_of(_rdzv("sh-0-0.sh.default.svc.cluster.local", ["192.168.15.246"]), "NET008")  # the FQDN
    assert not findings_of(_rdzv("192.168.15.246", ["192.168.15.246"]), "NET008")  # an address of the hostname
    assert not findings_of(_rdzv("sh-1-0.sh", ["192.168.15.247"]), "NET008")  # another host: a client, rightly
    assert not findings_of(_rdzv("sh-0-0.sh", ["192.168.15.246"], backend="static"), "NET008")  # rank decides
    assert not findings_of(_rdzv("sh-0-0.sh", ["192.168.15.246"], conf="is_host=1"), "NET008")


def test_endpoint_host_splits_like_torch():
    from ddpdoctor.gather.network import endpoint_host

    assert endpoint_host("node1:29400") == "node1"
    assert endpoint_host("node1") == "node1"
    assert endpoint_host("[fe80::1]:29400") == "fe80::1"
    assert endpoint_host("10.0.0.1:29400") == "10.0.0.1"


def test_network_gatherer_resolves_the_rdzv_endpoint_and_the_canonical_name():
    from ddpdoctor.gather import Sources
    from ddpdoctor.gather.network import gather_network, resolve

    out = gather_network(Sources(environ={"PET_RDZV_ENDPOINT": "127.0.0.1:29400"}))
    assert out["rdzv_endpoint"] == {"host": "127.0.0.1", "addresses": ["127.0.0.1"]}
    assert "rdzv_endpoint" not in gather_network(Sources(environ={}))
    assert resolve("127.0.0.1", canonical=True)["addresses"] == ["127.0.0.1"]
