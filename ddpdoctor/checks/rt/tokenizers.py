"""Runtime tokenizers checks (RT010-RT012): has the Rust pool been used, and what happens at a fork.

The state comes from the process itself (the library's USED_PARALLELISM flag, or the rayon pool's
threads in /proc/self/task), never from the fork warning, which changed wording twice and has been
silent since tokenizers 0.22.2.
"""
from __future__ import annotations

from ddpdoctor.model import error, info, warning
from ddpdoctor.model.registry import check
from ddpdoctor.facts.runtime import (at_fork, fork_phrase, forked_workers, local_ranks, rank_subject, rt, section,
                       spawned_workers, tokenizers_parallelism_off, usable_cpus, workers, workers_tokenize)
from ddpdoctor.facts.env import truthy


def _tok(snap) -> dict:
    return rt(snap).get("tokenizers") or {}


def _silent(version) -> bool:
    try:
        parts = tuple(int(p) for p in str(version).split(".")[:3])
        return parts >= (0, 22, 2)
    except ValueError:
        return True


@check("RT010", "tokenizers-used-before-fork", when=("static", "fork"), reads=("runtime_data",), family="tokenizers", needs=("runtime",), catalogue=("D1",))
def tokenizers_used_before_fork(snap):
    """The tokenizers thread pool was used in this process, and the process is about to fork.

    What it checks
        The library's own flag (or its rayon threads) says parallelism was used, TOKENIZERS_PARALLELISM
        is unset, and forked DataLoader workers are configured (or a fork is happening now).

    Why it matters
        tokenizers' at-fork handler disables parallelism in every forked child. Since 0.22.2 it does
        so silently; 0.8.1-0.22.1 print "The current process just got forked, after parallelism has
        already been used. Disabling parallelism to avoid deadlocks...". Either way the workers
        tokenize on one thread. Under spawn/forkserver workers this does not apply. See
        huggingface/transformers#5486 and #14936; tokenizers `utils/parallelism.rs`.

    Example
        tokenizer(texts) in the parent (a fast tokenizer on a list), then a DataLoader with
        num_workers=2 under the default fork start method.

    Fix
        export TOKENIZERS_PARALLELISM=false   # before the script starts; or pre-tokenize the dataset
    """
    tok = _tok(snap)
    if not tok.get("used_parallelism") or tok.get("env") is not None or tok.get("disabled_by_fork"):
        return
    if workers_tokenize(snap) is False:
        return  # the workers only collate pre-tokenized rows: parallelism off in them changes nothing
    if not (forked_workers(snap) or at_fork(snap)):
        if spawned_workers(snap) or section(snap, "runtime_data") or rt(snap).get("start_method") != "fork":
            return
        yield info(
            "the tokenizers thread pool was used; a later fork would disable it in the child",
            detail=("No DataLoader was given to preflight, so whether workers fork is unknown. The fork guard "
                    "installed by preflight will report it if a fork happens."),
            fix="export TOKENIZERS_PARALLELISM=false",
            subjects=["TOKENIZERS_PARALLELISM", "pkg:tokenizers"],
            evidence={"evidence": tok.get("evidence"), "version": tok.get("version")},
        )
        return
    version = tok.get("version")
    what = ("silently (tokenizers >= 0.22.2 prints nothing)" if _silent(version) else
            "and prints \"The current process just got forked, after parallelism has already been used. "
            "Disabling parallelism to avoid deadlocks...\"")
    yield warning(
        f"tokenizers parallelism was already used and {fork_phrase(snap)}",
        detail=(f"The parent used the tokenizers thread pool ({tok.get('evidence')}) and TOKENIZERS_PARALLELISM is "
                f"unset, so tokenizers {version} disables parallelism in each forked child {what}. The workers "
                "then tokenize on one thread each."),
        fix="export TOKENIZERS_PARALLELISM=false   # or pre-tokenize before building the DataLoader",
        subjects=["TOKENIZERS_PARALLELISM", "pkg:tokenizers"],
        evidence={"used_parallelism": True, "evidence": tok.get("evidence"), "version": version,
                  "workers": workers(snap)[0]},
    )


@check("RT011", "tokenizers-fork-deadlock", when=("static", "fork"), family="tokenizers", needs=("runtime",), catalogue=("D2",))
def tokenizers_fork_deadlock(snap):
    """TOKENIZERS_PARALLELISM is forced on, the pool was used, and the process forks: workers deadlock.

    What it checks
        TOKENIZERS_PARALLELISM is truthy, the tokenizers flag (or its threads) shows the pool was
        used in this process, and forked workers are configured or a fork is happening now.

    Why it matters
        With the variable set explicitly the at-fork handler keeps parallelism on in the child,
        whose copy of the rayon pool has no threads: the first `encode_batch` in a worker hangs
        forever. We measured this deadlock with tokenizers 0.23.3. The static check flags the
        variable with the fork start method; this one confirms the pool really was used. See
        huggingface/tokenizers#187 and #258.

    Example
        TOKENIZERS_PARALLELISM=true, tokenizer(batch) in the parent, DataLoader(num_workers=2).

    Fix
        export TOKENIZERS_PARALLELISM=false   # or use multiprocessing_context="spawn" for the DataLoader
    """
    tok = _tok(snap)
    if not tok.get("used_parallelism") or not truthy(tok.get("env")) or tokenizers_parallelism_off(tok.get("env")):
        return
    if not (forked_workers(snap) or at_fork(snap)):
        return
    yield error(
        f"TOKENIZERS_PARALLELISM={tok.get('env')} after the pool was used, and {fork_phrase(snap)}: workers can deadlock",
        detail=("The rayon pool was used in this process and parallelism is forced on, so a forked child keeps it "
                "on with no pool threads: its first batch encode blocks forever."),
        fix="export TOKENIZERS_PARALLELISM=false",
        subjects=["TOKENIZERS_PARALLELISM", "pkg:tokenizers"] + rank_subject(snap),
        evidence={"TOKENIZERS_PARALLELISM": tok.get("env"), "evidence": tok.get("evidence"),
                  "version": tok.get("version")},
    )


@check("RT012", "rayon-oversubscription", family="tokenizers", needs=("runtime",), catalogue=("D3",))
def rayon_oversubscription(snap):
    """Every rank runs its own tokenizers pool as wide as the machine.

    What it checks
        The tokenizers pool was used, parallelism is not turned off, RAYON_NUM_THREADS is unset, and
        more than one rank runs on this host (or spawned workers each start their own pool).

    Why it matters
        Each process's rayon pool has one thread per CPU, so R ranks (times W spawned workers) put
        R x CPUs tokenizer threads on the same cores, on top of torch's. See
        huggingface/tokenizers#72 and #1149, allenai/allennlp#5128.

    Example
        4 ranks on an 8-core node tokenizing on the fly in the main process: 32 rayon threads.

        DataLoader workers count as pools only when the dataset or collate_fn tokenizes (spawned
        workers); workers that collate pre-tokenized rows with a padding collator, and ranks whose
        data was tokenized before training (datasets.map under main_process_first), run none.

    Fix
        export RAYON_NUM_THREADS=<cores / ranks>   # or TOKENIZERS_PARALLELISM=false
    """
    tok = _tok(snap)
    if not tok.get("used_parallelism") or tok.get("disabled_by_fork") or tok.get("rayon_num_threads_env"):
        return
    if tokenizers_parallelism_off(tok.get("env")):
        return
    tokenizes = workers_tokenize(snap)
    if tokenizes is False:
        # Pre-tokenized rows, padded by the collator: no pool runs while training. The ranks tokenized
        # once before it (under main_process_first one after the other), which is no oversubscription.
        return
    cpus = usable_cpus(snap) or 1
    n_local, how = local_ranks(snap)
    n_workers = workers(snap)[0] if spawned_workers(snap) and tokenizes else 0
    pools = n_local * (1 + n_workers)
    if pools <= 1:
        return
    yield warning(
        f"{pools} tokenizers pools x {cpus} threads each on {cpus} CPUs",
        detail=(f"{n_local} ranks on this host ({how})" + (f", each with {n_workers} spawned workers," if n_workers else "")
                + f" run a rayon pool of {cpus} threads each once they tokenize: {pools * cpus} threads competing "
                  "with torch for the same cores."),
        fix=f"export RAYON_NUM_THREADS={max(1, cpus // pools)}   # or TOKENIZERS_PARALLELISM=false",
        subjects=["RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM"],
        evidence={"local_ranks": n_local, "spawned_workers": n_workers, "usable_cpus": cpus,
                  "rust_pool_threads": tok.get("rust_pool_threads")},
    )
