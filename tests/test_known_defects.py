"""ddpdoctor/data/known_defects.json: every entry says where it was read (repo, path, full commit) and what
reported it, and its version spans parse; the lookup honours the spans."""
import json
import re

from ddpdoctor.facts import known_defects
from ddpdoctor.facts.torch_floors import release


def test_every_entry_names_its_source_and_spans():
    with open(known_defects.DATA, encoding="utf-8") as fh:
        doc = json.load(fh)
    assert doc["schema"] == "ddpdoctor/known-defects/1" and doc["entries"]
    for e in doc["entries"]:
        src = e["source"]
        assert src["repo"] and src["path"] and re.fullmatch(r"[0-9a-f]{40}", src["commit"]), e["id"]
        assert e["reports"] and all(r.startswith("https://github.com/") for r in e["reports"])
        for key in ("torch", "nccl"):
            if key in e:
                assert release(e[key]["first"]) <= release(e[key]["last"])


def test_matching_respects_torch_and_nccl_spans():
    assert [e["id"] for e, known in known_defects.matching("2.7.0+cu126", (2, 26, 2)) if known] == \
        ["torch-2.7.0-nccl-2.26-nonblocking-eager-init"]
    assert [known for _, known in known_defects.matching("2.7.0", None)] == [False]  # NCCL unknown: kept, flagged
    assert known_defects.matching("2.7.1", (2, 26, 2)) == []
    assert known_defects.matching("2.7.0", (2, 27, 3)) == []


def test_an_nccl_only_entry_needs_the_nccl_version():
    ids = lambda t, n: [e["id"] for e, _ in known_defects.matching(t, n)]  # noqa: E731
    assert "nccl-2.19.3-nvlstree-64k-chunk-at-4-nodes" in ids("2.2.0", (2, 19, 3))
    assert "nccl-2.19.3-nvlstree-64k-chunk-at-4-nodes" in ids(None, (2, 19, 4))
    assert "nccl-2.19.3-nvlstree-64k-chunk-at-4-nodes" not in ids("2.2.0", None)  # nothing ties the job to 2.19
    assert "nccl-2.19.3-nvlstree-64k-chunk-at-4-nodes" not in ids("2.2.0", (2, 19, 1))  # no cap in v2.19.1-1
    assert "nccl-2.19.3-nvlstree-64k-chunk-at-4-nodes" not in ids("2.3.0", (2, 20, 5))  # the knob exists


def _nvls_job(nodes: int, nccl: str = "2.19.3", cap=(9, 0), **extra_env):
    from factory import make_snapshot

    env = {"TORCHELASTIC_RUN_ID": "x", "RANK": "8", "WORLD_SIZE": str(8 * nodes), "LOCAL_RANK": "0",
           "LOCAL_WORLD_SIZE": "8", "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", **extra_env}
    gpus = {"count": 8, "devices": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "cuda_capability": list(cap)}
                                    for i in range(8)]}
    return make_snapshot(env=env, packages={"torch": "2.2.0", "nvidia-nccl-cu12": nccl}, gpus=gpus)


def test_pkg010_reports_the_nvlstree_chunk_cap_on_four_nodes_or_more():
    from factory import findings_of

    [f] = findings_of(_nvls_job(8), "PKG010")
    assert f.severity == "warning" and f.title.startswith("NCCL 2.19.3 has a known defect")
    assert "pkg:nccl" in f.subjects and f.env_fix == {"NCCL_ALGO": "^NVLSTree"} and "2.20.3" in f.fix
    assert findings_of(_nvls_job(2), "PKG010") == []  # the cap needs nNodes >= 4
    assert findings_of(_nvls_job(8, nccl="2.20.5"), "PKG010") == []
    assert findings_of(_nvls_job(8, cap=(8, 0)), "PKG010") == []  # A100: no NVLS
    assert findings_of(_nvls_job(8, NCCL_ALGO="^NVLSTree"), "PKG010") == []  # workaround set


def _topo_job(nccl: str, **env):
    from factory import make_snapshot

    base = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    return make_snapshot(env=dict(base, **env), packages={"torch": "1.9.0", "nvidia-nccl-cu11": nccl},
                         pci={"gpus": {}, "nccl_virtual_topology": False})


def test_pkg010_nccl_2_9_6_with_a_topology_file():
    # pytorch/pytorch#58470; NVIDIA/nccl src/graph/xml.cc v2.9.6-1 (a46ea105) vs v2.9.8-1 (ca8485b0)
    from factory import findings_of

    [f] = findings_of(_topo_job("2.9.6", NCCL_TOPO_FILE="/opt/topo.xml"), "PKG010")
    assert f.title.startswith("NCCL 2.9.6 has a known defect") and "2.9.8" in f.fix and f.env_fix == {}
    assert findings_of(_topo_job("2.9.6"), "PKG010") == []  # no topology file: nothing reads it
    assert findings_of(_topo_job("2.9.8", NCCL_TOPO_FILE="/opt/topo.xml"), "PKG010") == []
