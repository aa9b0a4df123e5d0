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
