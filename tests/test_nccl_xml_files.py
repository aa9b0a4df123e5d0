"""NCCL_TOPO_FILE / NCCL_GRAPH_FILE (issue 26, round 10): the gatherer records whether the file NCCL would open is
there and what ties it to a machine; NCCL006 judges it (trigger and quiet cases in test_checks_static too)."""
from __future__ import annotations

from factory import findings_of, make_snapshot

from ddpdoctor.gather import Sources
from ddpdoctor.gather.env import gather_env, nccl_xml_summary
from ddpdoctor.pipeline.snapshot import Snapshot

# The shape NCCL's own dump writes (NVIDIA/nccl src/graph/xml.cc ncclTopoDumpXmlRec: <system> / <cpu> / <pci> nested
# by PCIe switch / <gpu> inside its device's <pci>); the attribute values are a made-up 2-GPU host.
TOPO = """<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:03:00.0" class="0x060400" link_speed="16.0 GT/s PCIe" link_width="16">
      <pci busid="0000:07:00.0" class="0x030200" vendor="0x10de" device="0x20b2" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="80" rank="0" gdr="1"/>
      </pci>
      <pci busid="0000:0f:00.0" class="0x030200" vendor="0x10de" device="0x20b2" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="80" rank="1" gdr="1"/>
      </pci>
      <pci busid="0000:0c:00.0" class="0x020700" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="200000" port="1" gdr="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>
"""
GRAPH = """<graphs version="1">
  <graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="20" speedinter="20" typeintra="NVL" typeinter="PIX">
    <channel><net dev="0"/><gpu dev="0"/><gpu dev="1"/><gpu dev="2"/><gpu dev="3"/><net dev="0"/></channel>
  </graph>
</graphs>
"""
GPUS = {"devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": "00000000:07:00.0"},
                    {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "pci_bus_id": "00000000:0F:00.0"}]}


def test_topology_summary_takes_the_pci_around_each_gpu():
    s = nccl_xml_summary("NCCL_TOPO_FILE", TOPO)
    assert s["parsed"] and s["gpu_bus_ids"] == ["0000:07:00.0", "0000:0f:00.0"]  # not the switch, not the NIC
    assert nccl_xml_summary("NCCL_GRAPH_FILE", GRAPH)["gpu_devs"] == [0, 1, 2, 3]
    assert not nccl_xml_summary("NCCL_TOPO_FILE", "not xml")["parsed"]


def _gathered(tmp_path, env):
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "etc" / "topo.xml").write_text(TOPO)
    (tmp_path / "etc" / "graph.xml").write_text(GRAPH)
    out = gather_env(Sources(root=str(tmp_path), environ=env))
    return out


def test_gathered_files_round_trip_the_schema_and_judge(tmp_path):
    env = {"NCCL_TOPO_FILE": "/etc/topo.xml", "NCCL_GRAPH_FILE": "/etc/graph.xml"}
    sec = _gathered(tmp_path, env)
    files = {f["name"]: f for f in sec["nccl_files"]}
    assert files["NCCL_TOPO_FILE"]["exists"] and files["NCCL_TOPO_FILE"]["parsed"]
    doc = make_snapshot(env=env, gpus=GPUS).to_dict()
    doc["sections"]["env"] = sec
    snap = Snapshot.from_dict(doc)  # the declared field types accept what the gatherer writes
    found = findings_of(snap, "NCCL006")
    # the topology file is this machine's: quiet; the graph file uses GPUs 2 and 3 of a 2-GPU host
    assert [f.subjects[0] for f in found] == ["env:NCCL_GRAPH_FILE"] and found[0].severity == "warning"


def test_a_missing_topology_file_is_gathered_as_missing(tmp_path):
    sec = _gathered(tmp_path, {"NCCL_TOPO_FILE": "/opt/microsoft/ndv4-topo.xml"})
    [f] = sec["nccl_files"]
    assert f["exists"] is False and f["readable"] is False
    doc = make_snapshot(env={"NCCL_TOPO_FILE": "/opt/microsoft/ndv4-topo.xml"}).to_dict()
    doc["sections"]["env"] = sec
    [finding] = findings_of(Snapshot.from_dict(doc), "NCCL006")
    assert finding.severity == "warning" and "skips it silently" in finding.title
    assert "nccl_files" not in gather_env(Sources(root=str(tmp_path), environ={}))


def test_bus_ids_without_a_domain_match_nvmls():
    """A hand-written topology file may give busid="07:00.0"; NVML says 00000000:07:00.0: the same device."""
    f = {"name": "NCCL_TOPO_FILE", "path": "/etc/topo.xml", "exists": True, "readable": True, "parsed": True,
         "gpu_bus_ids": ["07:00.0", "0f:00.0"], "gpu_devs": []}
    assert findings_of(make_snapshot(env={"NCCL_TOPO_FILE": "/etc/topo.xml"}, gpus=GPUS, nccl_files=[f]), "NCCL006") == []
    f = dict(f, gpu_bus_ids=["07:00.0"])  # one of this host's two GPUs is not in the file
    [finding] = findings_of(make_snapshot(env={"NCCL_TOPO_FILE": "/etc/topo.xml"}, gpus=GPUS, nccl_files=[f]), "NCCL006")
    assert "gpu:1" in finding.subjects
