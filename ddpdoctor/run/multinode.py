"""Across nodes: each node's `ddpdoctor run` watches its own ranks; at a stall or a death it puts
its ranks' records into a small store beside the job's rendezvous (one key per node, once per
event), and the node that holds rank 0 merges them, judges the whole job and writes the verdict
once. Nothing is exchanged while the job makes progress.

The store listens on the rendezvous host at the rendezvous port + 1 (or --store HOST:PORT); the
first `ddpdoctor run` on that host to bind it serves it, the others connect to it.

Store traffic (the rules of docs/scale.md: no polling): once connected, each node takes a slot
(one `add`) and leaves its host and pid under it (one `set`); at an event, one `set` of its
records. The node of rank 0 blocks in one `wait` on every node's key until its deadline and reads
them with one `multi_get`; the other nodes block in one `wait` on the verdict key. A node missing
at the deadline is named from its slot (host and pid), or as never connected.
"""
from __future__ import annotations

import functools
import json
import os
import re
import socket
import threading
from typing import List, Optional, Tuple

from ..gather.storekeys import read_keys, read_present, wait_keys

PREFIX = "ddpdoctor/run/"


def endpoint_from_argv(argv: List[str]) -> Optional[Tuple[str, int, int]]:
    """(host, port, nnodes) of a multi-node torchrun-style command line, else None."""
    opts = launch_options(argv)
    if "standalone" in opts:
        return None
    try:
        nnodes = int(str(opts.get("nnodes", "1")).split(":")[-1])
    except ValueError:
        return None
    if nnodes <= 1:
        return None
    host, port = None, None
    if opts.get("rdzv-endpoint"):
        host, _, p = opts["rdzv-endpoint"].rpartition(":")
        port = int(p) if p.isdigit() else 29400
        host = host or opts["rdzv-endpoint"]
    elif opts.get("master-addr"):
        host, port = opts["master-addr"], int(opts.get("master-port") or 29500)
    if not host or port is None:
        return None
    return host, port + 1, nnodes


def launch_options(argv: List[str]) -> dict:
    """The launcher's own `--key value` / `--key=value` options (dashes for underscores), up to the script."""
    opts: dict = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--"):
            key, eq, val = a[2:].partition("=")
            key = key.replace("_", "-")
            if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                val = argv[i + 1]
                i += 1
            opts[key] = val
        elif a.endswith(".py") or (opts and not a.startswith("-") and "nnodes" in opts and a == argv[-1]):
            break
        i += 1
    return opts


# torch's TCPStore server (static rendezvous: torchrun --master-addr/--master-port, or init_method tcp://) when the
# clients it waits for do not all come (TCPStore.cpp, the messages catalogue's
# torch.c10d.tcpstore.timed_out_after_f0_seconds_waiting), and torch elastic's dynamic rendezvous ending unfilled
_STORE_JOIN_ID = "torch.c10d.tcpstore.timed_out_after_f0_seconds_waiting"
_RDZV_TIMEOUT = re.compile(r"(?:torch\.distributed\.elastic\.rendezvous\.api\.)?RendezvousTimeoutError\b")
_PARTICIPANT = re.compile(r"The node '([^']+)' added itself to the participants of round")


@functools.lru_cache(maxsize=1)
def _store_join() -> "re.Pattern":
    """The store's count line, from the messages catalogue's entry (its "format": the message as TCPStore.cpp
    writes it, each {fN} a number here: timeout, joined, expected)."""
    from ..facts.messages import by_id

    parts = re.split(r"\{(f\d+)\}", by_id(_STORE_JOIN_ID)["format"])  # text, field, text, field, ..., text
    return re.compile("".join(re.escape(p) if i % 2 == 0 else rf"(?P<{p}>\d+)" for i, p in enumerate(parts)))


def rendezvous_end(text: str) -> Optional[dict]:
    """How the launch's rendezvous ended unfilled, from what the job printed, else None: the store's own count
    ("1/2 clients joined" after its timeout: joined, expected, timeout_s) or the dynamic rendezvous's timeout
    (RendezvousTimeoutError; the nodes its log lines say joined, when it logged them)."""
    m = None
    for m in _store_join().finditer(text or ""):
        pass
    if m:
        return {"how": "store", "timeout_s": int(m["f0"]), "joined": int(m["f1"]), "expected": int(m["f2"]),
                "line": m.group(0)}
    if _RDZV_TIMEOUT.search(text or ""):
        nodes = list(dict.fromkeys(_PARTICIPANT.findall(text)))
        return {"how": "rendezvous", "timeout_s": None, "joined": len(nodes) if nodes else None, "expected": None,
                "nodes_joined": nodes, "line": "RendezvousTimeoutError"}
    return None


def is_local(host: str) -> bool:
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    if any(a.startswith("127.") or a == "::1" for a in addrs):
        return True
    for a in addrs:
        try:
            with socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.bind((a, 0))
                return True
        except OSError:
            continue
    return False


class Link:
    """The store beside the job's rendezvous. Connects in the background; every call is bounded."""

    def __init__(self, host: str, port: int, nnodes: int, connect_timeout_s: float = 600.0):
        self.host, self.port, self.nnodes = host, port, nnodes
        self.store = None
        self.serving = False
        self.slot: Optional[int] = None  # this node's number (1..), taken once connected
        self.error: Optional[str] = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._connect, args=(connect_timeout_s,), daemon=True,
                                        name="ddpdoctor-run-link")
        self._thread.start()

    def _connect(self, timeout_s: float) -> None:
        try:
            from datetime import timedelta

            from torch.distributed import TCPStore

            if is_local(self.host):
                try:
                    self.store = TCPStore(self.host, self.port, is_master=True, wait_for_workers=False,
                                          timeout=timedelta(seconds=30))
                    self.serving = True
                except Exception:  # noqa: BLE001 - another node's run on this host serves it
                    self.store = None
            if self.store is None:
                self.store = TCPStore(self.host, self.port, is_master=False, timeout=timedelta(seconds=timeout_s))
            slot = int(self.store.add(PREFIX + "nodes", 1))
            self.store.set(PREFIX + f"node/{slot}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
            self.slot = slot
        except Exception as exc:  # noqa: BLE001
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self._ready.set()

    def ready(self, wait_s: float) -> bool:
        return self._ready.wait(wait_s) and self.store is not None and self.slot is not None

    def publish(self, kind: str, records: list) -> Optional[int]:
        """This node's rank records for the job's first `kind` event. Returns this node's slot."""
        if not self.ready(5.0):
            return None
        self.store.set(PREFIX + f"{kind}/node/{self.slot}", json.dumps(records, default=str))
        return self.slot

    def gather(self, kind: str, wait_s: float = 8.0) -> Tuple[list, list]:
        """(every node's records, the nodes missing at the deadline) on the node of rank 0: one
        `wait` on all the nodes' keys (bounded by `wait_s`), one `multi_get`. A missing node is
        {"node": slot, "host": ..., "pid": ...} (its slot's entry), or {"node": slot, "host": None}
        when no run took that slot (never connected to the store)."""
        keys = [PREFIX + f"{kind}/node/{n}" for n in range(1, self.nnodes + 1)]
        got, missing = read_keys(self.store, keys, wait_s)
        out: list = []
        for k in keys:
            if k in got:
                try:
                    out.extend(json.loads(got[k].decode()))
                except (ValueError, AttributeError):
                    continue
        gone = [int(k.rsplit("/", 1)[1]) for k in missing]
        if gone:  # a run that connected again (a restarted node) took a slot past nnodes: read those too
            try:
                total = int(self.store.add(PREFIX + "nodes", 0))
            except Exception:  # noqa: BLE001
                total = self.nnodes
            late = read_present(self.store, [PREFIX + f"{kind}/node/{n}" for n in range(self.nnodes + 1, total + 1)])
            for k in sorted(late, key=lambda k: int(k.rsplit("/", 1)[1])):
                try:
                    out.extend(json.loads(late[k].decode()))
                except (ValueError, AttributeError):
                    continue
        who = read_present(self.store, [PREFIX + f"node/{n}" for n in gone])
        named = []
        for n in gone:
            try:
                entry = json.loads(who[PREFIX + f"node/{n}"].decode())
            except (KeyError, ValueError, AttributeError):
                entry = {"host": None}
            named.append(dict(entry, node=n))
        return out, named

    def nodes_seen(self) -> list:
        """Every node whose `ddpdoctor run` took a slot in this store: [{"node", "host", "pid"}], [] when not
        connected. Bounded (one add, one read of the slots present); never raises."""
        if not self.ready(0.5):
            return []
        try:
            total = int(self.store.add(PREFIX + "nodes", 0))
            got = read_present(self.store, [PREFIX + f"node/{n}" for n in range(1, total + 1)])
        except Exception:  # noqa: BLE001
            return []
        out = []
        for n in range(1, total + 1):
            try:
                out.append(dict(json.loads(got[PREFIX + f"node/{n}"].decode()), node=n))
            except (KeyError, ValueError, AttributeError):
                continue
        return out

    def put_verdict(self, kind: str, text: str) -> None:
        self.store.set(PREFIX + f"{kind}/verdict", text)

    def get_verdict(self, kind: str, wait_s: float = 12.0) -> Optional[str]:
        """The job-wide verdict (other nodes): one `wait` on its key, bounded by `wait_s`."""
        key = PREFIX + f"{kind}/verdict"
        try:
            if not wait_keys(self.store, [key], wait_s):
                return None
            return self.store.get(key).decode()
        except Exception:  # noqa: BLE001
            return None


def missing_text(missing: list, wait_s: float = 8.0) -> str:
    """'node 2 (host h, ddpdoctor run pid 123) did not report within 8 s' for the verdict's headline."""
    parts = []
    for m in missing:
        if m.get("host"):
            parts.append(f"node {m['node']} ({m['host']}, ddpdoctor run pid {m.get('pid')})")
        else:
            parts.append(f"node {m['node']} (never connected to the store)")
    return f"{', '.join(parts)} did not report within {wait_s:g} s"
