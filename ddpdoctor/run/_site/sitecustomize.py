"""ddpdoctor run's attach point. Python imports this at start-up because `ddpdoctor run` put
this folder first on PYTHONPATH. It first runs the sitecustomize it shadows (if any), then, only
when DDPDOCTOR_RUN_DIR is set, loads ddpdoctor's in-process recorder. Nothing here may raise."""


def _chain() -> None:
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mine = sys.modules.get("sitecustomize")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - as site.py does for a broken sitecustomize
        sys.stderr.write(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}\n")
        if mine is not None:
            sys.modules["sitecustomize"] = mine


def _attach() -> None:
    import os

    if not os.environ.get("DDPDOCTOR_RUN_DIR"):
        return
    try:
        from ddpdoctor.run import agent
    except Exception:  # noqa: BLE001 - not importable here (another venv): the job runs unchanged
        return
    agent.install()


def _leave_path() -> None:
    """Take this folder off sys.path again once it has done its work. PYTHONPATH still names it, so
    the job's child processes attach too; but this process no longer looks in it at every import
    that misses (accelerate 1.16 looks up an absent package twice per optimizer step: one more folder
    made each lookup ~45% slower here, 34 -> 49 us), and the job sees the sys.path it would have had."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]


try:
    _chain()
except Exception:  # noqa: BLE001
    pass
try:
    _attach()
except Exception:  # noqa: BLE001
    pass
try:
    _leave_path()
except Exception:  # noqa: BLE001
    pass
