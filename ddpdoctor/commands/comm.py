"""`ddpdoctor comm`: launch local ranks, run the bounded phases, judge, render."""
from __future__ import annotations

import sys

import click

from ddpdoctor.commands.common import UsageError, emit, output_options, selection


@click.command("comm")
@click.option("--cpu", is_flag=True, help="Use Gloo on the CPU (the default without GPUs).")
@click.option("--nproc", type=click.IntRange(1, 512), default=None, help="Local ranks (default: 2 on CPU, all GPUs).")
@click.option("--gpus", type=click.IntRange(1, 512), default=None, help="Ranks on this many GPUs (NCCL).")
@click.option("--sizes", default="1K:256M", show_default=True,
              help="Sweep sizes: '1K,1M,64M' or a x4 range '1K:256M'.")
@click.option("--deadline", type=click.FloatRange(2, 3600), default=60.0, show_default=True,
              help="Whole-run bound in seconds; nothing outlives it.")
@click.option("--phase-timeout", type=click.FloatRange(0.5, 3600), default=None,
              help="Bound of each phase (default: deadline/4, at most 15 s).")
@click.option("--master-addr", default="127.0.0.1", show_default=True,
              help="Rendezvous address to bind and test (e.g. this host's NIC address).")
@click.option("--master-port", type=click.IntRange(1, 65535), default=None, help="Rendezvous port (default: a free one).")
@click.option("--no-pairs", is_flag=True, help="Skip the pairwise send/recv matrix.")
@click.option("--no-sweep", is_flag=True, help="Skip the bandwidth sweep.")
@output_options
def command(cpu, nproc, gpus, sizes, deadline, phase_timeout, master_addr, master_port, no_pairs, no_sweep,
            fmt, as_json, only, ignore, fail_on, verbose):
    """Bounded connectivity and bandwidth test between ranks; names the rank, host and phase to blame.

    Multi-node: run the worker under your launcher instead, e.g.
    `torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m ddpdoctor.comm --deadline 60`
    (or `srun python -m ddpdoctor.comm`); rank 0 prints the report.
    """
    from ddpdoctor.comm import metrics
    from ddpdoctor.comm.api import report_for_section, run_local

    try:
        metrics.parse_sizes(sizes)
    except ValueError as exc:
        raise UsageError(f"--sizes: {exc}") from None
    backend, n = _backend_and_nproc(cpu, nproc, gpus)
    only_ids, ignore_ids = selection(only, ignore)
    if _binds_here(master_addr) is False:
        raise UsageError(f"--master-addr {master_addr} is not an address of this host, and this local test binds its "
                         "rendezvous there; across hosts run `python -m ddpdoctor.comm` under torchrun or srun")
    from ddpdoctor.launch import Interrupted

    try:
        section = run_local(nproc=n, backend=backend, sizes=sizes, deadline_s=deadline,
                            phase_timeout_s=phase_timeout, master_addr=master_addr, master_port=master_port,
                            pairs=not no_pairs, sweep=not no_sweep)
    except Interrupted:
        # SIGTERM: the ranks are already gone (launch tears down before re-raising).
        click.echo("ddpdoctor: terminated; every rank was stopped", err=True)
        sys.exit(143)
    from ddpdoctor.pipeline.snapshot import live_snapshot

    # Lazy: only a check that needs more facts (COMM012 reads the GPU topology) gathers them.
    report = report_for_section(section, snapshot=live_snapshot(), only=only_ids, ignore=ignore_ids)
    emit(report, fmt, as_json, verbose, fail_on)


def _binds_here(addr: str):
    """Whether a socket can bind to `addr` on this host; None when it does not resolve (the comm
    section reports that as COMM007)."""
    import socket

    try:
        infos = socket.getaddrinfo(addr, 0, type=socket.SOCK_STREAM)
    except OSError:
        return None
    for family, socktype, proto, _name, sockaddr in infos:
        try:
            with socket.socket(family, socktype, proto) as s:
                s.bind(sockaddr)
                return True
        except OSError:
            continue
    return False


def _backend_and_nproc(cpu: bool, nproc, gpus) -> tuple:
    """Gloo on CPU unless GPUs were asked for or are visible (counted through NVML, not torch)."""
    if cpu and gpus:
        raise UsageError("--cpu and --gpus exclude each other")
    if cpu:
        return "gloo", nproc or 2
    visible = _gpu_count()
    if gpus:
        if not visible:
            raise UsageError("--gpus: no NVIDIA GPU is visible (no driver, or CUDA_VISIBLE_DEVICES is empty); "
                             "use --cpu --nproc N for a Gloo test")
        if gpus > visible:
            raise UsageError(f"--gpus {gpus}: only {visible} GPU(s) visible")
        return "nccl", gpus
    if visible >= 1 and not nproc:
        return "nccl", visible
    if visible >= 1 and nproc:
        if nproc > visible:  # never fewer ranks than asked for without a word
            raise UsageError(f"--nproc {nproc}: only {visible} GPU(s) visible; use --cpu --nproc {nproc} for Gloo ranks")
        return "nccl", nproc
    return "gloo", nproc or 2


def _gpu_count() -> int:
    from ddpdoctor.gather.gpus import visible_gpu_count

    return visible_gpu_count()
