"""The snapshot: every fact a check may judge, as one JSON document.

A live snapshot gathers each section on first use (so `check` never pays for facts that no
selected check needs, and never imports torch unless a check needs torch facts). A recorded
snapshot is plain JSON loaded without executing anything, and is validated before any check sees it.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterable, Mapping, Optional

from ddpdoctor.model.redact import redact_tree

SNAPSHOT_SCHEMA = "ddpdoctor/snapshot/1"
_SCHEMA_PREFIX = "ddpdoctor/snapshot/"
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
# robust22: the most one live gatherer (or the reading of check's `-- COMMAND`) may take before its facts are given up as
# an error: above every bound a gatherer sets itself (Sources.timeout_s = 20 s for importing torch, cuInit; name
# resolution 3 s), so only a read that never returns reaches it: a FIFO with no writer where a regular file was expected
# (fifo(7): open() waits for a writer for ever), a hung network mount.
GATHER_DEADLINE_S = 45.0


class SnapshotError(ValueError):
    """A snapshot file that cannot be judged. The CLI prints it on one line and exits 2."""


class Snapshot:
    """Sections by name. Missing sections are gathered lazily when a gatherer is known."""

    def __init__(self, sections: Optional[dict] = None, gatherers: Optional[Mapping[str, Callable[[], dict]]] = None,
                 meta: Optional[dict] = None):
        self.sections: dict = dict(sections or {})
        self._gatherers = dict(gatherers or {})
        self.meta: dict = dict(meta or {})
        self.deadline_s: Optional[float] = None  # live snapshots: GATHER_DEADLINE_S (see call_gatherer)

    # -- access -------------------------------------------------------------------
    def get(self, name: str) -> Optional[dict]:
        if name not in self.sections and name in self._gatherers:
            self.sections[name] = call_gatherer(name, self._gatherers.pop(name), self.deadline_s)
        return self.sections.get(name)

    def __getitem__(self, name: str) -> dict:
        section = self.get(name)
        if section is None:
            raise KeyError(name)
        return section

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def missing_reason(self, needs: Iterable[str]) -> Optional[str]:
        """Why a check needing these sections cannot run, or None. Sections are read in order, so
        an unavailable first section stops the later (possibly costly) ones from being gathered."""
        for name in needs:
            section = self.get(name)
            if section is None:
                return f"no '{name}' facts in this snapshot"
            if section.get("error"):
                return f"the '{name}' facts could not be gathered: {section['error']}"
            if section.get("unavailable"):
                return str(section["unavailable"])
        return None

    def errors(self) -> dict:
        return {k: str(v["error"]) for k, v in self.sections.items() if isinstance(v, dict) and v.get("error")}

    def gather_all(self) -> "Snapshot":
        for name in list(self._gatherers):
            self.get(name)
        return self

    # -- (de)serialisation --------------------------------------------------------
    def to_dict(self) -> dict:
        from ddpdoctor import __version__

        doc = {"schema": SNAPSHOT_SCHEMA, "tool_version": __version__, "created": self.meta.get("created"),
               "sections": self.sections}
        return redact_tree(doc)

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, default=str)

    @classmethod
    def from_dict(cls, doc: Any) -> "Snapshot":
        validate(doc)
        sections = dict(doc["sections"])
        meta = {"created": doc.get("created"), "recorded": True, "tool_version": doc.get("tool_version")}
        why = rederive_launcher(sections)
        if why:
            meta["launcher_rederived"] = why
        return cls(sections=sections, meta=meta)

    @classmethod
    def load(cls, path: str) -> "Snapshot":
        try:
            from ddpdoctor.model.inputs import open_input, read_limited, stdin_input

            if path == "-":  # `ddpdoctor snapshot | ddpdoctor check --snapshot -`, as `snapshot -o -` writes
                path = "<stdin>"
                raw = read_limited(stdin_input(), MAX_SNAPSHOT_BYTES + 1)
            else:  # a FIFO or a terminal is read under the idle bound of model.inputs, never waited on forever
                with open_input(path) as fh:
                    raw = read_limited(fh, MAX_SNAPSHOT_BYTES + 1)
        except OSError as exc:
            raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror or exc}") from None
        if len(raw) > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(f"snapshot {path} is larger than {MAX_SNAPSHOT_BYTES // 2**20} MiB")
        try:
            doc = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise SnapshotError(f"snapshot {path} is not UTF-8 text (is it a binary file?)") from None
        except json.JSONDecodeError as exc:
            raise SnapshotError(f"snapshot {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                f"{exc.msg}); was it truncated?") from None
        except RecursionError:
            raise SnapshotError(f"snapshot {path} is nested too deeply to be a ddpdoctor snapshot") from None
        except ValueError as exc:  # robust25: a number of 4,300+ digits (CPython's int limit, gh-95778): exit 3 before
            raise SnapshotError(f"snapshot {path} holds a value JSON cannot give here ({str(exc)[:120]})") from None
        try:
            return cls.from_dict(doc)
        except SnapshotError as exc:
            raise SnapshotError(f"snapshot {path}: {exc}") from None


def rederive_launcher(sections: dict) -> str:
    """On replay, derive the launcher section from the recorded env when it is missing or contradicts
    it (kind "none" or another kind while the env says torchrun, srun...): a section cut by hand or
    written by an older version must not turn a torchrun worker into a shell (a false "port in use")
    or hide the local ranks (a MIG error read as a warning). Returns why, or "" when it was kept."""
    env = (sections.get("env") or {}).get("vars")
    if not isinstance(env, dict):
        return ""
    from ddpdoctor.gather.launcher import launcher_from_env

    derived = launcher_from_env({k: v for k, v in env.items() if isinstance(v, str)})
    recorded = sections.get("launcher")
    if not isinstance(recorded, dict):
        sections["launcher"] = derived
        return "missing"
    if derived.get("kind") not in (None, "none") and recorded.get("kind") != derived.get("kind"):
        merged = dict(recorded)
        merged.update({k: v for k, v in derived.items() if v is not None})
        sections["launcher"] = merged
        return f"recorded kind {recorded.get('kind')!r} contradicts the env ({derived['kind']})"
    return ""


def validate(doc: Any) -> None:
    """Reject anything that is not a snapshot this version can judge."""
    if not isinstance(doc, dict):
        raise SnapshotError("not a ddpdoctor snapshot (the top level is not a JSON object)")
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith(_SCHEMA_PREFIX):
        raise SnapshotError(f"not a ddpdoctor snapshot (schema is {schema!r}, expected {SNAPSHOT_SCHEMA!r})")
    version = schema[len(_SCHEMA_PREFIX):]
    if not version.isdigit():
        raise SnapshotError(f"unknown snapshot schema {schema!r}")
    if int(version) > int(SNAPSHOT_SCHEMA.rsplit("/", 1)[1]):
        raise SnapshotError(f"snapshot schema {schema!r} is newer than this ddpdoctor understands "
                            f"({SNAPSHOT_SCHEMA}); upgrade with `pip install -U ddpdoctor`")
    sections = doc.get("sections")
    if not isinstance(sections, dict):
        raise SnapshotError("snapshot has no 'sections' object")
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise SnapshotError(f"snapshot section {name!r} is a {type(section).__name__}, expected an object")
    from ddpdoctor.pipeline.shapes import shape_error

    wrong = shape_error(sections)
    if wrong:
        raise SnapshotError(f"{wrong}; was the snapshot edited by hand?")


def bounded(fn: Callable[[], Any], deadline_s: Optional[float]) -> tuple:
    """(fn's result, None), or (None, why) when it raised or did not return within `deadline_s` (None: no deadline, run
    here). With a deadline fn runs in a daemon thread, so a read that never returns (a FIFO opened as a file, a hung
    mount) costs the deadline and never the whole command: the thread is left blocked and ends with the process."""
    if deadline_s is None:
        try:
            return fn(), None
        except Exception as exc:  # noqa: BLE001
            return None, f"{type(exc).__name__}: {exc}"[:500]
    import threading

    box: dict = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except Exception as exc:  # noqa: BLE001 - reported to the caller's thread
            box["error"] = f"{type(exc).__name__}: {exc}"[:500]

    t = threading.Thread(target=work, name="ddpdoctor-bounded", daemon=True)
    t.start()
    t.join(deadline_s)
    if t.is_alive():
        return None, (f"did not finish within {deadline_s:g} s (a file it reads may be a FIFO with no writer or on a "
                      "hung mount)")
    if "error" in box:
        return None, box["error"]
    return box.get("result"), None


def call_gatherer(name: str, fn: Callable[[], dict], deadline_s: Optional[float] = None) -> dict:
    """A gatherer never raises: its failure is stored in its section and reported as a finding. With `deadline_s`
    (live snapshots: GATHER_DEADLINE_S), one that does not return within it is a failure too (`bounded`)."""
    start = time.perf_counter()
    section, why = bounded(fn, deadline_s)
    if why is None and not isinstance(section, dict):
        why = f"TypeError: gatherer returned {type(section).__name__}"
    if why is not None:
        section = {"error": why}
    section.setdefault("_elapsed_ms", round((time.perf_counter() - start) * 1000, 2))
    return section


def live_snapshot(sources=None, only: Optional[set] = None) -> Snapshot:
    """A snapshot of this machine whose sections are gathered on first use."""
    from ddpdoctor.gather import GATHERERS, ORDER, Sources, load_gatherers

    load_gatherers()
    src = sources or Sources()
    names = sorted(GATHERERS, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    gatherers = {n: (lambda fn=GATHERERS[n][0]: fn(src)) for n in names
                 if (only is None or n in only) and GATHERERS[n][1]}
    snap = Snapshot(gatherers=gatherers, meta={"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    snap.deadline_s = GATHER_DEADLINE_S
    return snap
