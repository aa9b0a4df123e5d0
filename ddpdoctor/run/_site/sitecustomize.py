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


try:
    _chain()
except Exception:  # noqa: BLE001
    pass
try:
    _attach()
except Exception:  # noqa: BLE001
    pass
