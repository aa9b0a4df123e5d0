"""`ddpdoctor probe`: the click command. Parses, runs `runner.run_probe`, renders, exits."""
from __future__ import annotations

import sys

import click

from ddpdoctor.commands.common import UsageError, emit, output_options, selection


def _gpu_count() -> int:
    from ddpdoctor.gather.gpus import visible_gpu_count

    return visible_gpu_count()


@click.command("probe")
@click.option("--gpus", type=click.IntRange(1, 512), default=None, help="Ranks on GPUs (NCCL), one per GPU. Default: every visible GPU.")
@click.option("--cpu", "use_cpu", is_flag=True, help="Run on the CPU with Gloo (the default without GPUs).")
@click.option("--nproc", type=click.IntRange(1, 512), default=None, help="Ranks with --cpu.  [default: 2]")
@click.option("--model", type=click.Choice(["tiny", "small", "base"]), default=None,
              help="BERT size. [default: tiny on CPU, base on GPU]")
@click.option("--steps", type=int, default=20, show_default=True, help="Optimizer steps per run.")
@click.option("--batch-size", type=int, default=8, show_default=True, help="Per-device batch size.")
@click.option("--grad-accum", type=int, default=1, show_default=True, help="gradient_accumulation_steps.")
@click.option("--workers", type=int, default=0, show_default=True, help="dataloader_num_workers.")
@click.option("--seq-len", type=int, default=None, help="Tokens per sequence. [default: 64 on CPU, 128 on GPU]")
@click.option("--vocab", type=click.IntRange(8, 1_000_000), default=None,
              help="Model vocabulary (embedding and MLM-head rows). [default: 8192 for tiny, 30522 for small and base]")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--find-unused", type=click.Choice(["auto", "true", "false"]), default="auto", show_default=True,
              help="ddp_find_unused_parameters (auto: Trainer's own default).")
@click.option("--trainer-arg", "trainer_args", multiple=True, metavar="NAME=VALUE",
              help="Extra TrainingArguments for every run, to try a fix (e.g. ddp_find_unused_parameters=False).")
@click.option("--compare", "compare", multiple=True, type=click.Choice(["spawn", "dp"]),
              help="Also run the job via torch.multiprocessing.spawn with hand-set env (spawn), or DataParallel (dp).")
@click.option("--with-comm", is_flag=True,
              help="Also measure the link (ddpdoctor comm) at the gradient size, as the busbw reference.")
@click.option("--no-baseline", is_flag=True, help="Skip the 1-rank baseline (no scaling efficiency).")
@click.option("--inject", default="", metavar="FAULTS",
              help="Self-test: slow-data@R, sleep@R=S, crash@R=STEP, no-sync, omp=N (see docs/probe.md).")
@click.option("--deadline", type=float, default=240.0, show_default=True, help="Seconds for the whole probe.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write a Chrome/Perfetto trace-event JSON file.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@output_options
def command(gpus, use_cpu, nproc, model, steps, batch_size, grad_accum, workers, seq_len, vocab, seed, find_unused, trainer_args,
            compare, with_comm,
            no_baseline, inject, deadline, trace_path, quiet, fmt, as_json, only, ignore, fail_on, verbose):
    """Instrumented DDP Trainer run: where the time goes, and why.

    Runs a short BERT masked-LM Trainer job (synthetic protein sequences in HDF5, no download)
    on N ranks through torch's elastic launcher and on 1 rank, measures start-up, every step's
    phases and the all-reduces, and reports findings with fixes.
    """
    from ddpdoctor.probe.runner import ProbeOptions, Progress, run_probe
    from ddpdoctor.probe.worker import parse_inject, parse_trainer_args

    if use_cpu and gpus:
        raise UsageError("--cpu and --gpus are exclusive")
    for name, value, low in (("--steps", steps, 1), ("--batch-size", batch_size, 1), ("--grad-accum", grad_accum, 1),
                             ("--workers", workers, 0), ("--deadline", deadline, 5)):
        if value < low:
            raise UsageError(f"{name} must be at least {low}, got {value}")
    if seq_len is not None and not 8 <= seq_len <= 512:
        raise UsageError(f"--seq-len must be between 8 and 512, got {seq_len}")
    try:
        parse_inject(inject)
        parse_trainer_args(list(trainer_args))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    visible = 0 if use_cpu else _gpu_count()
    if gpus is not None and gpus > visible:
        # Never fall back silently: --gpus on a host without them would run something else.
        raise UsageError(f"--gpus {gpus}: only {visible} GPU(s) visible" if visible else
                         "--gpus: no NVIDIA GPU is visible (no driver, or CUDA_VISIBLE_DEVICES is empty); "
                         "use --cpu --nproc N")
    if use_cpu or (gpus is None and visible == 0):
        device, n = "cpu", 2 if nproc is None else nproc
    else:
        device, n = "cuda", visible if gpus is None else gpus
        if nproc is not None:
            raise UsageError("--nproc is for --cpu; use --gpus N on GPUs")
    compare = list(dict.fromkeys(compare))
    progress = Progress(stream=sys.stderr, enabled=not quiet)
    if "dp" in compare and (device == "cpu" or n < 2):
        progress.say("--compare dp needs at least 2 GPUs; skipped")
        compare.remove("dp")
    only_ids, ignore_ids = selection(only, ignore)
    opts = ProbeOptions(nproc=n, device=device, model=model, steps=steps, batch_size=batch_size, grad_accum=grad_accum,
                        workers=workers, seq_len=seq_len, vocab=vocab, seed=seed, find_unused=find_unused, compare=compare,
                        baseline=not no_baseline, inject=inject, deadline_s=deadline,
                        trainer_args=list(trainer_args), with_comm=with_comm)
    from ddpdoctor.launch import Interrupted

    try:
        report = run_probe(opts, progress=progress, trace_path=trace_path, only=only_ids, ignore=ignore_ids)
    except Interrupted:  # SIGTERM: every rank is already torn down by the launcher
        raise click.exceptions.Abort() from None
    emit(report, fmt, as_json, verbose, fail_on)
