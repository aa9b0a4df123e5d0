"""The `driver` section: the NVIDIA kernel driver's own view, from /proc and the kernel log.

NVML is the driver's user-space library; when it cannot help (a GPU that fell off the bus, a library
that disagrees with the kernel module), the kernel still says what happened:

* /proc/driver/nvidia/version: the kernel module's version (NVML reports the library's);
* /proc/driver/nvidia/gpus/<bdf>/information: every GPU the module bound, even one NVML lost;
* the kernel log (/dev/kmsg, what `dmesg` reads): the driver's Xid events, "NVRM: Xid (PCI:0000:3b:00):
  79, pid=..., GPU has fallen off the bus.", with their age. Reading it needs root or
  kernel.dmesg_restrict=0; otherwise the section says so (and which sysctl), instead of "no Xid".

Only on a machine with the NVIDIA module loaded (/proc/driver/nvidia exists): elsewhere the section is
`unavailable` at no cost. The kernel log is read without blocking and bounded in records and time.
"""
from __future__ import annotations

import errno
import os
import re
import time
from typing import Optional

from ddpdoctor.facts import xid as _xid
from ddpdoctor.gather import BOOL, INT, LIST, NUM, OBJ, STR, Sources, gatherer, parse_int

MAX_RECORDS = 200_000  # a 16 MiB ring buffer at ~80 bytes a record
MAX_EVENTS = 64
READ_BUDGET_S = 1.0

FIELDS = {
    "module_version": STR, "gpus": LIST, "gpus[]": OBJ, "gpus[].bdf": STR, "gpus[].model": STR, "gpus[].uuid": STR,
    "sysctl": OBJ, "sysctl.*": INT,
}
XID_FIELDS = {
    "source": STR, "records_read": INT, "events": LIST, "events[]": OBJ, "events[].code": INT, "events[].bdf": STR,
    "events[].text": STR, "events[].age_s": NUM, "truncated": BOOL,
}
NO_MODULE = "the NVIDIA kernel module is not loaded (no /proc/driver/nvidia)"




def module_gpus(src: Sources) -> list:
    """/proc/driver/nvidia/gpus/<bdf>/information: "Model: ...", "GPU UUID: ...", "Bus Location: ..."."""
    base = src.path("/proc/driver/nvidia/gpus")
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    out = []
    for name in names:
        info = src.read(f"/proc/driver/nvidia/gpus/{name}/information") or ""
        fields = {}
        for line in info.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        out.append({"bdf": name.lower(), "model": fields.get("model") or None,
                    "uuid": fields.get("gpu uuid") or None})
    return out


def parse_kmsg(records, uptime_s: Optional[float]) -> list:
    """Xid events from /dev/kmsg records ("6,1234,567890123,-;NVRM: Xid (PCI:0000:3b:00): 79, ...") or
    plain `dmesg` lines ("[  567.890123] NVRM: Xid ..."), newest last, at most MAX_EVENTS (the newest)."""
    events = []
    for rec in records:
        head, sep, body = rec.partition(";")
        usec = None
        if sep and head.count(",") >= 2:
            usec = parse_int(head.split(",")[2])
        else:
            body = rec
            m = re.match(r"\[\s*(\d+\.\d+)\]\s*(.*)", rec)
            if m:
                usec, body = int(float(m.group(1)) * 1e6), m.group(2)
        event = _xid.parse(body)
        if event is None:
            continue
        event["age_s"] = round(uptime_s - usec / 1e6, 1) if (uptime_s is not None and usec is not None) else None
        events.append(event)
    return events[-MAX_EVENTS:]


def read_kmsg(src: Sources) -> dict:
    path = src.path("/dev/kmsg")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        restrict = parse_int(src.read("/proc/sys/kernel/dmesg_restrict"))
        why = exc.strerror or str(exc)
        if exc.errno in (errno.EPERM, errno.EACCES):
            why = ("the kernel log is readable by root only" + (" (kernel.dmesg_restrict=1)" if restrict == 1 else "")
                   + "; run `sudo dmesg | grep -i xid` or `sudo ddpdoctor check`")
        return {"unavailable": f"cannot read the kernel log: {why}", "source": "/dev/kmsg"}
    chunks, count, truncated = [], 0, False
    deadline = time.monotonic() + READ_BUDGET_S
    try:
        while True:
            if count >= MAX_RECORDS or time.monotonic() > deadline:
                truncated = True
                break
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # a record overwritten while we read: skip it
                    continue
                if exc.errno == errno.EINVAL:  # a plain file in tests: read it whole
                    break
                raise
            if not chunk:
                break
            chunks.append(chunk)  # /dev/kmsg: one record per read; a plain file (tests): any slice
            count += chunk.count(b"\n") or 1
    finally:
        os.close(fd)
    records = b"".join(chunks).decode("utf-8", "replace").splitlines()
    uptime = src.read("/proc/uptime")
    up = float(uptime.split()[0]) if uptime and uptime.split() else None
    return {"source": "/dev/kmsg", "records_read": len(records), "events": parse_kmsg(records, up),
            "truncated": truncated}


@gatherer("driver", fields=FIELDS)
def gather_driver(src: Sources) -> dict:
    if not os.path.isdir(src.path("/proc/driver/nvidia")):
        return {"unavailable": NO_MODULE}
    version = src.read("/proc/driver/nvidia/version") or ""
    m = re.search(r"Kernel Module(?: for \w+)?\s+([0-9][0-9.]+)", version)
    sysctl = {}
    for name, path in (("kernel.dmesg_restrict", "/proc/sys/kernel/dmesg_restrict"),
                       ("kernel.numa_balancing", "/proc/sys/kernel/numa_balancing")):
        value = parse_int(src.read(path))
        if value is not None:
            sysctl[name] = value
    return {"module_version": m.group(1) if m else None, "gpus": module_gpus(src), "sysctl": sysctl}


@gatherer("xid", fields=XID_FIELDS)
def gather_xid(src: Sources) -> dict:
    """The driver's Xid events in the kernel log since boot (`unavailable`, with why, when unreadable)."""
    if not os.path.isdir(src.path("/proc/driver/nvidia")):
        return {"unavailable": NO_MODULE}
    try:
        return read_kmsg(src)
    except Exception as exc:  # noqa: BLE001 - an odd kernel log is an unreadable fact, not a crash
        return {"unavailable": f"cannot read the kernel log: {type(exc).__name__}: {exc}", "source": "/dev/kmsg"}
