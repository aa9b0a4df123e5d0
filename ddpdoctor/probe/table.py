"""The probe's summary table, as text lines shown above the findings (Report.extra["text_sections"])."""
from __future__ import annotations

from typing import List, Optional

COLUMNS = (("data", "data"), ("sync", "sync"), ("forward", "fwd"), ("backward", "bwd"), ("allreduce", "allred"),
           ("optimizer", "optim"), ("other", "other"))


def _f(x: Optional[float], nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _bytes(n: Optional[float]) -> str:
    if not n:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024.0
    return "?"


def summary_lines(section: dict) -> List[str]:
    modes = section.get("modes") or {}
    head = ["mode", "rank", "step ms"] + [short for _, short in COLUMNS] + ["samples/s", "start s", "ar/step", "status"]
    rows = [head]
    for name, mode in modes.items():
        ranks = mode.get("ranks") or []
        for r in ranks:
            ph = r.get("phases_ms") or {}
            c = r.get("comm") or {}
            status = "ok" if r.get("complete") else ("error" if r.get("error") else "incomplete")
            rows.append([name, str(r.get("rank")), _f(r.get("step_ms"))] + [_f(ph.get(p)) for p, _ in COLUMNS] +
                        [_f(r.get("samples_per_s"), 0), _f(r.get("to_first_step_s"), 2),
                         _f(c.get("calls_per_step"), 1) if c else "-", status])
        for f in mode.get("failures") or []:
            if f.get("rank") is not None and any(r.get("rank") == f.get("rank") for r in ranks):
                continue
            state = ("failed" if f.get("root_cause") else
                     f"stopped ({f['signal']})" if f.get("signal") else "failed" if f.get("error") else "no report")
            rows.append([name, str(f.get("rank", "?"))] + ["-"] * (len(head) - 3) + [state])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["Where the time goes (steady-state means per optimizer step, ms; start s = launch to first step end):"]
    for i, row in enumerate(rows):
        cells = [c.ljust(widths[j]) if j < 2 or j == len(head) - 1 else c.rjust(widths[j]) for j, c in enumerate(row)]
        lines.append("  " + "  ".join(cells).rstrip())
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    main = modes.get(section.get("main") or "") or {}
    sc = section.get("scaling") or {}
    if sc.get("efficiency") is not None:
        be = sc.get("break_even_steps")
        n = sc["nproc"]
        if "break_even_steps" not in sc:
            be_text = ""
        elif be is None:
            be_text = f"; {n} ranks never catch up, start-up counted: they are not faster per sample"
        elif be == 0:
            be_text = f"; {n} ranks are ahead from the first step, start-up counted"
        else:
            be_text = f"; counting start-up, {n} ranks win after {be} optimizer steps"
        lines.append(f"Scaling: {n} ranks {sc['samples_per_s']:.0f} samples/s against 1 rank "
                     f"{sc['baseline_samples_per_s']:.0f} samples/s: efficiency {sc['efficiency']:.2f} "
                     f"(speedup {sc['speedup']:.2f}x){be_text}.")
    ranks = [r for r in main.get("ranks") or [] if r.get("comm")]
    if ranks:
        c = ranks[0]["comm"]
        bits = [f"{_f(c.get('calls_per_step'), 1)} bucket all-reduce(s) in {_f(c.get('rounds_per_step'), 1)} round(s) "
                f"per optimizer step", f"{_bytes(c.get('bytes_per_round'))} per round"]
        if c.get("busbw_gbps") is not None:
            ref = (section.get("comm_reference") or {}).get("busbw_gbps")
            bits.append(f"busbw {c['busbw_gbps']:.2f} GB/s" + (f" (a bare all_reduce of that size: {ref:.2f} GB/s)"
                                                                 if ref else ""))
        waits = [r["comm"].get("peer_wait_ms") for r in ranks if r["comm"].get("peer_wait_ms") is not None]
        if waits:
            bits.append("waiting for peers " + "/".join(_f(w) for w in waits) + " ms (rank order)")
        lines.append("All-reduce: " + ", ".join(bits) + ".")
    worst = max((r for r in main.get("ranks") or [] if r.get("startup_s")),
                key=lambda r: r.get("to_first_step_s") or 0, default=None)
    if worst:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in worst["startup_s"].items())
        lines.append(f"Start-up of rank {worst.get('rank')} (s): {parts}.")
    sums = [r.get("phase_sum_ratio") for m in modes.values() for r in m.get("ranks") or [] if r.get("phase_sum_ratio")]
    if sums:
        walls = [r.get("steps_vs_wall") for m in modes.values() for r in m.get("ranks") or [] if r.get("steps_vs_wall")]
        tail = (f"; the steps to {100 * min(walls):.1f}-{100 * max(walls):.1f}% of the wall-clock time between "
                "Trainer's on_step_end callbacks" if walls else "")
        lines.append(f"The phases add up to {100 * min(sums):.1f}-{100 * max(sums):.1f}% of the measured step{tail}.")
    if section.get("trace"):
        lines.append(f"Trace (open in https://ui.perfetto.dev or chrome://tracing): {section['trace']}")
    return lines
