"""Issue 25's speed goal, round 17 (perf17): facts several rules ask for are derived once per file (module_fact), the
plugin entry points are read from a cache keyed on sys.path, and LINT007 names the first DDP model in source order.
Pure functions and in-process lints of small texts; no process is started."""
from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
from pathlib import Path

from ddpdoctor.lint.api import lint_paths
from bench_modules import load

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    return load("bench_lint")


def _index(text: str):
    from ddpdoctor.lint.analysis import ModuleIndex

    return ModuleIndex(ast.parse(textwrap.dedent(text)), "train.py", textwrap.dedent(text))


# ---------------------------------------------------------------- once-per-file facts
def test_ddp_bindings_are_derived_once_per_index_and_each_caller_gets_its_own_list():
    from ddpdoctor.lint.rules.rank0_forward import _ddp_bindings

    index = _index("""
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(torch.nn.Linear(2, 2))
    """)
    inner = _ddp_bindings.__wrapped__

    first = _ddp_bindings(index)
    assert [b[0] for b in first] == ["model"]
    first.append(("intruder", 0, None))  # a caller changing its list changes nobody else's
    got = _ddp_bindings(index)
    assert [b[0] for b in got] == ["model"] and got is not first
    assert any(v for k, v in index.memo.items() if k.endswith("_ddp_bindings"))
    assert inner(index) == got
    index.release()
    assert index.memo == {}


def test_module_fact_copies_sets_and_keeps_none():
    from ddpdoctor.lint.analysis import module_fact

    seen = []

    @module_fact
    def names(index):
        seen.append(index)
        return {"a"}

    @module_fact
    def nothing(index):
        seen.append(index)
        return None

    index = _index("x = 1\n")
    a = names(index)
    a.add("b")
    assert names(index) == {"a"}
    assert nothing(index) is None and nothing(index) is None
    assert len(seen) == 2  # one derivation each, None included


def test_a_file_of_many_findings_walks_its_tree_for_buffers_once(tmp_path, monkeypatch):
    """LINT007 asked ProjectFacts.has_buffers for every rank-0 forward it reported, and has_buffers walked every
    file's whole tree each time (~55% of a lint of bench_lint's findings file, 111 forwards). Checked to fail with
    main a6ccb0a's facts.py (5 walks)."""
    from ddpdoctor.lint import facts

    walks = []
    real = facts.buffer_marker
    monkeypatch.setattr(facts, "buffer_marker", lambda tree: walks.append(tree) or real(tree))
    script = tmp_path / "train.py"
    # round 23: a file whose text names no marker at all is not walked (facts.index_buffer_marker); the comment puts a
    # marker in the text but in no identifier, so the one walk this test counts still runs to the end
    script.write_text("# no BatchNorm here\n" + _bench().generate(260, findings=True))
    found = lint_paths([str(script)]).findings
    assert sum(f.id == "LINT007" for f in found) >= 5
    assert len(walks) == 1
    walks.clear()
    script.write_text(_bench().generate(260, findings=True))
    assert sum(f.id == "LINT007" for f in lint_paths([str(script)]).findings) >= 5
    assert walks == []


def test_bench_files_one_quiet_one_with_findings(tmp_path):
    bench = _bench()
    quiet, loud = tmp_path / "quiet.py", tmp_path / "loud.py"
    quiet.write_text(bench.generate(150))
    loud.write_text(bench.generate(150, findings=True))
    assert lint_paths([str(quiet)]).findings == []
    ids = {f.id for f in lint_paths([str(loud)]).findings}
    assert {"LINT007", "LINT009", "LINT013", "LINT030"} <= ids


# ---------------------------------------------------------------- LINT007's choice among several DDP models
def test_lint007_names_the_first_ddp_model_in_source_order(tmp_path):
    """With several DDP models handed to one rank-0 call, the finding named one or the other by PYTHONHASHSEED
    (a set's order); now the first wrapped in source order. The names are many so that a hash order is unlikely to
    be the source order by chance."""
    names = ["zeta", "alpha", "mid", "beta", "omega", "kappa"]
    wraps = "\n".join(f"    {n} = DDP(torch.nn.BatchNorm1d(2).to(rank), device_ids=[rank])" for n in names)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP


        def evaluate(m1, m2, m3, m4, m5, m6):
            x = torch.ones(2, 2)
            return m1(x), m2(x), m3(x), m4(x), m5(x), m6(x)


        def train(rank):
            dist.init_process_group("nccl")
        """) + wraps + "\n    if dist.get_rank() == 0:\n        evaluate(" + ", ".join(reversed(names)) + ")\n")
    found = [f for f in lint_paths([str(script)]).findings if f.id == "LINT007"]
    assert found and all("`zeta`" in f.title for f in found)


# ---------------------------------------------------------------- the plugin scan's cache
class _Eps(list):
    def select(self, group):
        return [e for e in self if e.group == group]


def _counting_scan(monkeypatch, entries):
    import importlib.metadata as md

    scans = []

    def entry_points():
        scans.append(1)
        return _Eps(md.EntryPoint(n, v, "ddpdoctor.checks") for n, v in entries)
    monkeypatch.setattr(md, "entry_points", entry_points)
    return scans


def test_plugin_entry_points_are_scanned_once_until_a_sys_path_folder_changes(tmp_path, monkeypatch):
    from ddpdoctor.pipeline import runner

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DDPDOCTOR_NO_PLUGIN_CACHE", raising=False)
    monkeypatch.setattr(sys, "path", [str(site)] + sys.path)
    scans = _counting_scan(monkeypatch, [("acme", "acme_checks:register")])
    assert runner.plugin_entries() == [("acme", "acme_checks:register")]
    assert runner.plugin_entries() == [("acme", "acme_checks:register")]
    assert len(scans) == 1
    saved = json.loads(Path(runner._plugin_cache_file()).read_text())
    assert saved["version"] == runner._CACHE_VERSION
    (site / "other-1.0.dist-info").mkdir()  # a distribution installed: the folder's mtime moves
    st = os.stat(site)
    os.utime(site, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    runner.plugin_entries()
    assert len(scans) == 2
    monkeypatch.setenv("DDPDOCTOR_NO_PLUGIN_CACHE", "1")
    runner.plugin_entries()
    assert len(scans) == 3


def test_an_unwritable_or_damaged_plugin_cache_is_only_a_slower_start(tmp_path, monkeypatch):
    from ddpdoctor.pipeline import runner

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("DDPDOCTOR_NO_PLUGIN_CACHE", raising=False)
    scans = _counting_scan(monkeypatch, [("acme", "acme_checks")])
    assert runner.plugin_entries() == [("acme", "acme_checks")] == runner.plugin_entries()
    assert len(scans) == 2
    monkeypatch.setenv("DDPDOCTOR_CACHE_DIR", str(tmp_path / "cache"))
    os.makedirs(tmp_path / "cache")
    Path(runner._plugin_cache_file()).write_text("{not json")
    assert runner.plugin_entries() == [("acme", "acme_checks")]
    assert json.loads(Path(runner._plugin_cache_file()).read_text())["entries"]


def test_an_entry_point_value_loads_as_importlib_metadata_would():
    import os.path

    from ddpdoctor.pipeline.runner import _load_entry

    assert _load_entry("os.path:join") is os.path.join
    assert _load_entry("os.path") is os.path
    assert _load_entry("os : path.join [extra]") is os.path.join
