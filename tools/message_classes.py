"""The cause classes of the messages catalogue, and the few entries written by hand (a message whose text
the extractor cannot read from its source as one literal). Each class says what it means, the fix, its
role (cause: a failure of its own; consequence: what another failure causes; context: explains a cause;
benign: a warning the job survives; end: the job ended well) and the triage rule that reports it."""

ANCHORS_NOTE = ("Every example carries one of the reader's prefilter keywords (facts.messages.ANCHORS), so "
                "the one streaming pass hands its line on wherever it is in the log.")

CLASSES = {
    # ---- memory
    "oom_killer": {
        "role": "cause", "rule": "LOG002",
        "meaning": "A process was killed because host memory ran out: the kernel's OOM killer, a cgroup limit, SLURM's "
                   "memory enforcement or Ray's memory monitor chose it.",
        "fix": "Confirm with `dmesg -T | grep -iE 'killed process|out of memory'` on that node; then lower host RAM per "
               "rank (fewer DataLoader workers, torch.load(..., mmap=True), load weights on one rank) or ask for more "
               "(`sbatch --mem=...`, a larger node)."},
    "host_oom": {
        "role": "cause", "rule": "LOG002",
        "meaning": "An allocation of host (CPU) memory failed: the process asked for more RAM than the node, or its "
                   "cgroup, had left. With ZeRO-3 or FSDP CPU offload the optimizer states and parameters live in RAM.",
        "fix": "Lower host memory per rank (offload less: ZeRO-3 without offload_optimizer, or offload to NVMe; fewer "
               "ranks per node; torch.load(..., mmap=True)); check the limit: `free -g`, `ulimit -v`, the job's --mem."},
    "cuda_oom": {
        "role": "cause", "rule": "LOG005",
        "meaning": "A GPU ran out of memory (the CUDA caching allocator, a CUDA call, or NCCL allocating its buffers).",
        "fix": "If it happens before the first step (model load, DDP wrap, optimizer init) the model does not fit: shard "
               "it (ZeRO-3 / FSDP) or train adapters (LoRA); a smaller batch will not help. If it happens in a step: "
               "smaller per-device batch with gradient accumulation, gradient checkpointing, "
               "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."},
    # ---- the GPU
    "cuda_fault": {
        "role": "cause", "rule": "LOG020",
        "meaning": "A GPU kernel faulted or the GPU reported a hardware error (illegal memory access, device-side "
                   "assert, uncorrectable ECC error, launch failure, fallen off the bus). CUDA errors are sticky: every "
                   "later call on that rank fails, and its peers then time out or lose it.",
        "fix": "Rerun with CUDA_LAUNCH_BLOCKING=1 to see the kernel that faulted (and TORCH_USE_CUDA_DSA=1 for device-side "
               "asserts: usually an index out of range, e.g. labels >= num_classes or a token id >= vocab size). ECC and "
               "Xid errors are the hardware: `nvidia-smi -q -d ECC,PAGE_RETIREMENT` on that node, then drain it."},
    "cuda_error_hint": {
        "role": "context", "rule": "LOG020",
        "meaning": "torch's note after any CUDA error: kernel errors may be reported at a later call, and how to get "
                   "the real place (CUDA_LAUNCH_BLOCKING=1, TORCH_USE_CUDA_DSA). The CUDA error before it is the cause.",
        "fix": "Read the CUDA error it follows; rerun with CUDA_LAUNCH_BLOCKING=1 to place it."},
    "cuda_setup": {
        "role": "cause", "rule": "LOG021",
        "meaning": "CUDA could not give this rank a usable GPU: an invalid device ordinal (more ranks per node than "
                   "visible GPUs), no GPU or driver, a driver older than the runtime, a build without kernels for this "
                   "GPU, or a GPU in exclusive mode already taken.",
        "fix": "`--nproc-per-node` must not exceed the GPUs in CUDA_VISIBLE_DEVICES (`nvidia-smi -L`); call "
               "torch.cuda.set_device(local_rank) with the LOCAL_RANK the launcher set; match the driver to the "
               "torch build (`python -c 'import torch; print(torch.version.cuda)'`). `ddpdoctor check` on the node."},
    "bus_error": {"role": "cause", "rule": "LOG010",
                  "meaning": "A DataLoader worker died of SIGBUS: /dev/shm is too small for the batches in flight.",
                  "fix": "`docker run --shm-size=8g` (or --ipc=host), or fewer workers / smaller prefetch_factor."},
    "worker_killed": {
        "role": "cause", "rule": "LOG010",
        "meaning": "A DataLoader worker process died (killed by a signal, or exited unexpectedly); the rank then raised.",
        "fix": "Killed by SIGKILL is usually the OOM killer (host RAM): fewer workers, smaller prefetch_factor; a bus "
               "error is /dev/shm; rerun with num_workers=0 to see the worker's own exception."},
    "too_many_files": {"role": "cause", "rule": "LOG011",
                       "meaning": "The process ran out of file descriptors.",
                       "fix": "`ulimit -n 65536` or torch.multiprocessing.set_sharing_strategy('file_system')."},
    # ---- NCCL
    "nccl_system_error": {
        "role": "cause", "rule": "LOG009",
        "meaning": "NCCL failed in a system call (sockets, shared memory, InfiniBand verbs): the WARN lines around it name "
                   "the call and the reason.",
        "fix": "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; set NCCL_SOCKET_IFNAME to the NIC that routes "
               "between the nodes; give containers a larger /dev/shm; on RoCE check NCCL_IB_GID_INDEX."},
    "nccl_network": {
        "role": "context", "rule": "LOG009",
        "meaning": "NCCL's socket or InfiniBand transport failed to connect, send or receive: a peer is unreachable on "
                   "the interface NCCL chose, a port is closed, or a peer died and closed its end.",
        "fix": "NCCL_SOCKET_IFNAME=<the NIC that routes between nodes>; open the ports between nodes; if a peer died "
               "first, its own failure is the cause."},
    "nccl_shm": {"role": "context", "rule": "LOG009",
                 "meaning": "NCCL could not create or map a shared-memory segment in /dev/shm.",
                 "fix": "`docker run --shm-size=1g` or --ipc=host; NCCL_SHM_DISABLE=1 as a slower workaround."},
    "nccl_internal_error": {"role": "cause", "rule": "LOG009",
                            "meaning": "NCCL reported an internal error or an unhandled CUDA error; its WARN lines say which.",
                            "fix": "Rerun with NCCL_DEBUG=INFO; a CUDA failure named in a WARN line is the cause."},
    "nccl_remote_error": {
        "role": "consequence", "rule": "LOG022",
        "meaning": "NCCL lost a peer: the remote process exited or the network between them failed. The peer's own "
                   "failure, earlier, is the cause.",
        "fix": "Find the rank or node that died first (its log, `dmesg` on its node for the OOM killer or Xid errors)."},
    "transport_abort": {"role": "cause", "rule": "LOG027",
                        "meaning": "A communication library's transport hit a system error it does not recover from "
                                   "and aborted the process (SIGABRT): the call and the error it names are the cause.",
                        "fix": "See the entry's fix."},
    "nccl_aborted": {"role": "consequence", "rule": "LOG022",
                     "meaning": "A communicator was aborted, or a connection dropped, after another failure.",
                     "fix": "Look for the first failure before it; this line is a consequence."},
    "nccl_invalid_usage": {"role": "cause", "rule": "LOG006",
                           "meaning": "NCCL refused the call as invalid usage: two ranks on one GPU, mismatched "
                                      "collectives or a wrong argument.",
                           "fix": "torch.cuda.set_device(local_rank) before init; every rank must call the same "
                                  "collectives with the same sizes."},
    "duplicate_gpu": {"role": "cause", "rule": "LOG006",
                      "meaning": "Two ranks use the same GPU.",
                      "fix": "Launch with torchrun and call torch.cuda.set_device(int(os.environ['LOCAL_RANK']))."},
    "nccl_version_mismatch": {"role": "cause", "rule": "LOG017",
                              "meaning": "Ranks run different NCCL versions.",
                              "fix": "One image or environment for every node."},
    # ---- rendezvous, store, addresses
    "port_in_use": {"role": "cause", "rule": "LOG007",
                    "meaning": "The rendezvous port was already taken on the master.",
                    "fix": "`torchrun --master-port <free port>` or free it: `fuser -k PORT/tcp`."},
    "store_refused": {"role": "cause", "rule": "LOG008",
                      "meaning": "Nothing listened on MASTER_ADDR:MASTER_PORT when this rank connected.",
                      "fix": "Same MASTER_ADDR/MASTER_PORT on every node; rank 0 must be up."},
    "store_timeout": {"role": "cause", "rule": "LOG008",
                      "meaning": "The store (or a peer) did not answer in time: an unreachable address, a firewall, or "
                                 "ranks that never arrived.",
                      "fix": "`nc -zv $MASTER_ADDR $MASTER_PORT` from a worker node; check every node started."},
    "address_unresolved": {"role": "cause", "rule": "LOG025",
                           "meaning": "A host name could not be resolved to an address (DNS, /etc/hosts), or resolved to "
                                      "one the other nodes cannot reach.",
                           "fix": "Use an address every node resolves the same way (`getent hosts NAME` on each node), "
                                  "or the IP of the NIC that routes between nodes."},
    "rendezvous_failed": {"role": "cause", "rule": "LOG008",
                          "meaning": "torch elastic's rendezvous failed: it timed out waiting for nodes, was closed, or "
                                     "the nodes disagreed on its settings.",
                          "fix": "Same --rdzv-endpoint, --rdzv-id and --nnodes on every node; every node must start "
                                 "within --rdzv-conf timeout."},
    "store_barrier": {"role": "cause", "rule": "LOG018",
                      "meaning": "init_process_group's store barrier timed out: not every rank arrived.",
                      "fix": "Check every node launched and computed RANK correctly."},
    # ---- hangs and their ends
    "collective_timeout": {"role": "consequence", "rule": "LOG001",
                           "meaning": "A collective (or a barrier) did not complete within the timeout: a rank never "
                                      "joined it, or the transport stalled.",
                           "fix": "Find the rank that did not join (the cross-tab, `ddpdoctor run`, Flight Recorder)."},
    "watchdog_abort": {"role": "consequence", "rule": "LOG001",
                       "meaning": "ProcessGroupNCCL's watchdog took the process down after a collective failed or "
                                  "timed out (SIGABRT).",
                       "fix": "The collective's failure is the cause; this abort is its consequence."},
    "job_terminated": {"role": "cause", "rule": "LOG026",
                       "meaning": "The job was stopped from outside: the scheduler (time limit, preemption, scancel), "
                                  "the launcher after a signal, or a user.",
                       "fix": "If it hit the time limit, ask for more (--time) or checkpoint and resume; if the launcher "
                              "was signalled after the ranks stopped making progress, it was a hang: rerun under "
                              "`ddpdoctor run -- ...` to name the stuck rank."},
    "launcher_teardown": {"role": "consequence", "rule": "LOG026",
                          "meaning": "The launcher stopped the remaining workers after one of them failed.",
                          "fix": "The first worker's failure is the cause."},
    "process_died": {"role": "consequence", "rule": "LOG028",
                     "meaning": "A worker process died without saying why (Ray actor or worker death, a child process "
                                "that exited): its own log or the node's kernel log has the cause.",
                     "fix": "Collect that worker's own log and `dmesg -T` on its node (the OOM killer, Xid errors)."},
    # ---- launch and configuration
    "launch_misconfigured": {
        "role": "cause", "rule": "LOG023",
        "meaning": "The script was not started the way it expects: no launcher set RANK/WORLD_SIZE/MASTER_ADDR, an "
                   "argument the launcher passes was rejected (--local-rank), or the process group was never created.",
        "fix": "Start it with torchrun (or accelerate launch / deepspeed), which sets the rank variables; accept "
               "`--local-rank` (torch >= 2.0 passes the hyphenated form) or read os.environ['LOCAL_RANK']."},
    "config_mismatch": {
        "role": "cause", "rule": "LOG024",
        "meaning": "Two settings of the job disagree: a DeepSpeed config against the Trainer's arguments, a batch size "
                   "that is not micro-batch x accumulation x world size, or a world size the model parallel sizes do "
                   "not divide.",
        "fix": "Set the DeepSpeed values to \"auto\" and let the Trainer fill them, or make them equal; choose a world "
               "size that tensor x pipeline parallel sizes divide."},
    "api_misuse": {"role": "cause", "rule": "LOG027",
                   "meaning": "A library refused how it was called (FSDP, DDP, accelerate, DeepSpeed): the message says "
                              "what it expected.",
                   "fix": "See the entry's fix."},
    "unused_params": {"role": "cause", "rule": "LOG012",
                      "meaning": "DDP found parameters that got no gradient.",
                      "fix": "find_unused_parameters=True, or remove the unused parameters."},
    "ready_twice": {"role": "cause", "rule": "LOG012",
                    "meaning": "A parameter was marked ready twice: reentrant checkpointing or a module used twice "
                               "under DDP.",
                    "fix": "gradient_checkpointing_kwargs={'use_reentrant': False}, or static_graph=True."},
    "ddp_model_mismatch": {"role": "cause", "rule": "LOG027",
                           "meaning": "The ranks built different models (parameter counts or shapes differ), so DDP "
                                      "refuses to start.",
                           "fix": "Build the same model on every rank (same config, same seed for random structure, "
                                  "same checkpoint)."},
    "unpicklable": {"role": "cause", "rule": "LOG014",
                    "meaning": "An object could not be pickled to start a process (spawn).",
                    "fix": "Open files lazily per process; define functions at module level."},
    "bootstrapping": {"role": "cause", "rule": "LOG015",
                      "meaning": "Processes were started at import time: the __main__ guard is missing.",
                      "fix": "Wrap the top level in main() under if __name__ == '__main__':."},
    # ---- benign and ends
    "benign_warning": {"role": "benign", "rule": None,
                       "meaning": "A warning the job survives (a deprecation, a performance hint).",
                       "fix": "Nothing to do for this failure; see the entry."},
    # c10d's address-trying warnings: benign, but printed only while processes connect to the rendezvous store, so a
    # log that ends in them ends in the distributed set-up (phase "setup": triage's Job counts them as set-up lines)
    "store_address_retry": {"role": "benign", "rule": None, "phase": "setup",
                            "meaning": "c10d tried one address of the store (or looked up a client's name) and goes on "
                                       "with the next: printed only while processes connect to the rendezvous store, so "
                                       "it shows the job in its distributed set-up, not failing.",
                            "fix": "Nothing, unless an error follows (then that error is the one to read); if nothing "
                                   "follows, the job stopped or hangs in the set-up."},
    "overflow_skip": {"role": "benign", "rule": None,
                      "meaning": "fp16 loss scaling skipped a step after an overflow; the scaler lowers the scale and "
                                 "training goes on. Normal at the start of training.",
                      "fix": "Nothing, unless every step overflows: then use bf16 or lower the learning rate."},
    "argparse_usage": {"role": "benign", "rule": None, "phase": "setup",
                       "meaning": "argparse's usage banner ('usage: PROG [-h] ...'): printed alone by ArgumentParser.error "
                                  "before its 'PROG: error: MESSAGE' line (then exit 2), or as the head of -h's help. "
                                  "Not a failure by itself: LOG023 reads it when the log ends inside the banner (the "
                                  "error line cut), an argument rejected at start.",
                       "fix": "Read the `PROG: error:` line that follows it in the full output; run the same command "
                              "with -h to see the options PROG takes."},
    "job_ended_well": {"role": "end", "rule": None,
                       "meaning": "The job (or this worker) finished its work and exited normally.",
                       "fix": "Nothing to fix."},
}

HAND_ENTRIES = [
    {
        # The same WARN as nccl.net_ib.async_event (NCCL calls all these events non-fatal and goes on), split by the
        # event: a port error is the link going down, which completion errors or a hang follow when it stays down.
        "id": "nccl.net_ib.async_port_error",
        "source": {"repo": "NVIDIA/nccl", "path": "src/transport/net_ib/common.cc",
                   "commit": "5067397c2676d5aed50042fc39e5c8ee96eb0027", "line": 179,
                   "symbol": "ncclIbAsyncThreadMain: case IBV_EVENT_PORT_ERR / IBV_EVENT_PATH_MIG_ERR: WARN(\"NET/IB : "
                             "%s:%d Got non-fatal async event: %s(%d)\", ...)"},
        "class": "nccl_network",
        "meaning": "An InfiniBand/RoCE port reported an error event: its link went down (a cable, a switch port, a "
                   "flapping link). NCCL goes on and the link may come back; if it does not, the transfers on it fail "
                   "(completion errors 12/5) or hang.",
        "fix": "`ibv_devinfo` / `ibstat` on that node (port state, physical state, link downed counter); the fabric "
               "manager's logs or `ibqueryerrors`; reseat or replace the cable; NCCL_IB_HCA= to leave the port out.",
        "format": "NET/IB : %s:%d Got non-fatal async event: %s(%d)",
        "pattern": r"NET/IB\s*:\s*(?:\S+:\d+ )?Got (?:non-fatal )?async event\s*:\s*(?P<event>port error|path migration "
                   r"error)",
        "examples": ["node-a:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
                     "node-a:5021:5386 [0] NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)"],
    },
    {
        "id": "cpython.argparse.unrecognized_arguments",
        "source": {"repo": "python/cpython", "path": "Lib/argparse.py", "commit": "v3.11.7",
                   "symbol": "ArgumentParser.parse_args: msg = _('unrecognized arguments: %s'); self.error(msg % ...)"},
        "class": "launch_misconfigured",
        "meaning": "The script's argparse rejected an argument. When it is --local-rank=N (or --local_rank=N), the "
                   "launcher passed it: torch.distributed.launch and torch >= 2.0's torchrun with --use-env off pass "
                   "--local-rank (hyphenated); a parser that declares only --local_rank rejects it.",
        "fix": "parser.add_argument('--local-rank', '--local_rank', type=int, default=int(os.environ.get('LOCAL_RANK', 0)))"
               "\n# or drop the argument and read os.environ['LOCAL_RANK'] (torchrun always sets it)",
        "format": "%(prog)s: error: unrecognized arguments: %s",
        "pattern": r"error: unrecognized arguments: (?P<args>.*)",
        "examples": ["train.py: error: unrecognized arguments: --local-rank=0",
                     "[rank1]: train.py: error: unrecognized arguments: --local-rank=1"],
    },
    {
        # ArgumentParser.error: self.print_usage(_sys.stderr); self.exit(2, _('%(prog)s: error: %(message)s\n')) -- every
        # argparse rejection (a required argument missing, an invalid value or choice, an option expecting a value); the
        # prog is the script's basename or a launcher's (torchrun, deepspeed, accelerate's "accelerate <command> [<args>]
        # launch"), or "python -m MOD" (3.12+). "unrecognized arguments" has its own entry (more specific: it names
        # the launcher's --local-rank).
        "id": "cpython.argparse.error",
        "source": {"repo": "python/cpython", "path": "Lib/argparse.py",
                   "commit": "8ea6cc14a5178b456278c35f63b0859c6b5f4f64",
                   "symbol": "ArgumentParser.error: self.print_usage(_sys.stderr); args = {'prog': self.prog, "
                             "'message': message}; self.exit(2, _('%(prog)s: error: %(message)s\\n') % args)"},
        "class": "launch_misconfigured",
        "meaning": "argparse rejected the command line at start and the process exited with code 2 before any "
                   "training: a required argument missing, a value of the wrong type or not among the choices, an "
                   "option given without its value. Under a launcher every rank prints it; when the prog is the "
                   "launcher (torchrun, deepspeed, accelerate launch) the launcher itself refused its options.",
        "fix": "PROG -h   # the options it takes: fix the one the error names (a launcher's options go before the "
               "script, the script's after it)",
        "format": "%(prog)s: error: %(message)s",
        "pattern": r"(?P<prog>[\w.\-]{1,80}\.py|torchrun|deepspeed|accelerate(?: <command> \[<args>\] \w+)?|python[\d.]{0,5} -m [\w.]{1,80}): error: "
                   r"(?P<message>(?:the following arguments are required|argument |ambiguous option|expected |"
                   r"invalid choice|one of the arguments|not allowed with).*)",
        "examples": ["train.py: error: the following arguments are required: --data_path",
                     "[rank0]: finetune.py: error: argument --lr: invalid float value: '1e-4,'",
                     "torchrun: error: argument --nproc-per-node/--nproc_per_node: expected one argument"],
    },
    {
        # ArgumentParser.format_usage / _format_usage: prefix _('usage: '), then prog, then the optionals (-h first when
        # add_help: add_argument('-h', '--help') in __init__) and positionals, wrapped with an indent under the prog
        "id": "cpython.argparse.usage_banner",
        "source": {"repo": "python/cpython", "path": "Lib/argparse.py",
                   "commit": "8ea6cc14a5178b456278c35f63b0859c6b5f4f64",
                   "symbol": "HelpFormatter._format_usage: prefix = _('usage: '); ArgumentParser.error -> print_usage(stderr)"},
        "class": "argparse_usage",
        "meaning": "argparse's usage banner: the first line of an argparse rejection (its 'PROG: error:' line follows) "
                   "or of -h's help (its option list follows).",
        "fix": "Read the line after it: 'PROG: error: ...' names the argument rejected.",
        "format": "usage: %(prog)s [-h] ...",
        "pattern": r"(?:^\s*|\]:\s)usage: (?P<prog>\S.{0,160}?) \[-h\]",
        "examples": ["usage: train.py [-h] [--lr LR] [--epochs EPOCHS]",
                     "usage: deepspeed [-h] [-H HOSTFILE] [-i INCLUDE] [-e EXCLUDE] [--num_nodes NUM_NODES]",
                     "[rank1]: usage: finetune.py [-h] --model_name_or_path MODEL_NAME_OR_PATH"],
    },
]


# torch's C10_CUDA_DRIVER_CHECK (c10/cuda/driver_api.h): the expandable segments' driver calls running out of memory
HAND_ENTRIES.append({'id': 'torch.c10_cuda.driver_check.out_of_memory',
 'source': {'repo': 'pytorch/pytorch',
            'path': 'c10/cuda/driver_api.h',
            'commit': '0007e752d518810f0f8942a830dbbbfc69f34577',
            'symbol': 'C10_CUDA_DRIVER_CHECK(EXPR): on a CUresult other than CUDA_SUCCESS, AT_ERROR("CUDA driver '
                      'error: ", err_str) with err_str from cuGetErrorString; the calls it wraps are the caching '
                      "allocator's expandable segments (cuMemCreate, cuMemMap, cuMemSetAccess, "
                      'cuMemAddressReserve)',
            'read_from': "the driver's text for CUDA_ERROR_OUT_OF_MEMORY (2, data/cuda_errors.json: 'unable to "
                         "allocate enough memory') as users' logs print it: 'out of memory'"},
 'class': 'cuda_oom',
 'meaning': "A CUDA driver call of the caching allocator's expandable segments "
            '(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; cuMemCreate / cuMemSetAccess mapping more memory '
            "into a segment) failed with CUDA_ERROR_OUT_OF_MEMORY: the GPU's memory ran out, raised as a plain "
            "c10::Error rather than torch.OutOfMemoryError (no 'Tried to allocate' summary).",
 'fix': 'As for CUDA out of memory: a smaller batch or sequence, activation checkpointing, sharding (ZeRO/FSDP); '
        'nvidia-smi: is another process on this GPU?; without expandable segments the allocator reports the usual '
        "'CUDA out of memory. Tried to allocate ...' with its figures.",
 'format': 'CUDA driver error: %s',
 'pattern': 'CUDA driver error: out of memory',
 'examples': ['RuntimeError: CUDA driver error: out of memory',
              '[09:57:48.548] [error] application.cpp:45 Training error: Error computing loss: CUDA driver error: '
              'out of memory']})

# ProcessGroupNCCL's heartbeat monitor (watchdog hang) abort: added by hand (triage, 2026-12-05) because the 2.14.1
# wheel's strings no longer carry these texts; the newer two are pinned to real logs, said so in their source.
_PG = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"
_OLD = "0007e752d518810f0f8942a830dbbbfc69f34577"
_UNPINNED = ("not pinned: the format as real logs print it (torch 2.3-2.6, ProcessGroupNCCL.cpp:1316/1550/1653 in "
             "their prefixes); the pytorch commit that introduced it was not read here")
_HB_MEANING = ("ProcessGroupNCCL's heartbeat monitor found its watchdog thread stuck (no heartbeat for "
               "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 480-600 s): a CUDA or NCCL call that never returns (a collective "
               "that another rank never joined, a dead peer, a GPU fault), and it ends this process with SIGABRT. "
               "The abort is a consequence: the rank that hung the collective, or died, is the cause.")
_HB_FIX = ("Find the rank that stopped first (a collective timeout's laggard, a rank killed or faulted earlier: Xid, "
           "OOM, a traceback); `ddpdoctor run -- torchrun ...` names a stuck rank and its line; "
           "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC raises the limit only if the node is merely slow.")
HEARTBEAT_ENTRIES = [
    {"id": "torch.c10d.heartbeat.monitor_timed_out",
     "source": {"repo": "pytorch/pytorch", "path": _PG, "commit": _UNPINNED,
                "symbol": "ProcessGroupNCCL::heartbeatMonitor: errorMsg = c10::str(logPrefix(), \"Heartbeat monitor "
                          "timed out! Process will be terminated after dumping debug info.\", \" workMetaList_.size()=\", ...)"},
     "class": "watchdog_abort", "meaning": _HB_MEANING, "fix": _HB_FIX,
     "format": "%sHeartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=%d",
     "pattern": r"Heartbeat\s+monitor\s+timed\s+out!\s+Process\s+will\s+be\s+terminated",
     "examples": ["[rank25]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 25] Heartbeat monitor timed out! Process will be "
                  "terminated after dumping debug info. workMetaList_.size()=2"]},
    {"id": "torch.c10d.heartbeat.terminating_after_dump",
     "source": {"repo": "pytorch/pytorch", "path": _PG, "commit": _UNPINNED,
                "symbol": "LOG(FATAL) << prefix << \"Terminating the process \" << \"after attempting to dump debug info, "
                          "due to ProcessGroupNCCL watchdog hang.\""},
     "class": "watchdog_abort", "meaning": _HB_MEANING, "fix": _HB_FIX,
     "format": "%sTerminating the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
     "pattern": r"Terminating\s+the\s+process\s+after\s+attempting\s+to\s+dump\s+debug\s+info,\s+due\s+to\s+"
                r"ProcessGroupNCCL\s+watchdog\s+hang",
     "examples": ["[rank0]:[F919 07:00:13.418192812 ProcessGroupNCCL.cpp:1653] [PG ID 0 PG GUID 0(default_pg) Rank 0] "
                  "[PG ID 0 PG GUID 0(default_pg) Rank 0] Terminating the process after attempting to dump debug info, "
                  "due to ProcessGroupNCCL watchdog hang."]},
    {"id": "torch.c10d.heartbeat.no_heartbeat_dumping",
     "source": {"repo": "pytorch/pytorch", "path": _PG, "commit": _OLD,
                "symbol": "dump_debugging_info: LOG(ERROR) << \"No PGNCCL's watchdog heartbeat detected, so we are "
                          "dumping debug info.\""},
     "class": "watchdog_abort", "meaning": _HB_MEANING, "fix": _HB_FIX,
     "format": "No PGNCCL's watchdog heartbeat detected, so we are dumping debug info.",
     "pattern": r"No\s+PGNCCL's\s+watchdog\s+heartbeat\s+detected",
     "examples": ["[E ProcessGroupNCCL.cpp:1012] No PGNCCL's watchdog heartbeat detected, so we are dumping debug info."]},
    {"id": "torch.c10d.heartbeat.monitor_thread_timeout",
     "source": {"repo": "pytorch/pytorch", "path": _PG, "commit": _OLD,
                "symbol": "ProcessGroupNCCL::heartbeatMonitor: exitMsg = c10::str(\"[Rank \", rank_, \"] NCCL monitor "
                          "thread timeout. Basically, this could be due to CUDA or NCCL calls being unexpectedly blocking, ...\")"},
     "class": "watchdog_abort", "meaning": _HB_MEANING, "fix": _HB_FIX,
     "format": "[Rank %d] NCCL monitor thread timeout. Basically, this could be due to CUDA or NCCL calls being "
               "unexpectedly blocking, especially when your program enters a deadlock state in watchdogor destructors.",
     "pattern": r"NCCL\s+monitor\s+thread\s+timeout\.\s+Basically",
     "examples": ["[F ProcessGroupNCCL.cpp:1124] [Rank 2] NCCL monitor thread timeout. Basically, this could be due to "
                  "CUDA or NCCL calls being unexpectedly blocking, especially when your program enters a deadlock state "
                  "in watchdogor destructors. If you see this error, please file a bug to pytorch."]},
    {"id": "torch.c10d.heartbeat.monitoring_thread_will_kill",
     "source": {"repo": "pytorch/pytorch", "path": _PG, "commit": _OLD,
                "symbol": "ProcessGroupNCCL::heartbeatMonitor: logMsg = c10::str(\"[Rank \", rank_, \"] monitoring "
                          "thread detects no heartbeat and will finally kill the process!\", ...)"},
     "class": "watchdog_abort", "meaning": _HB_MEANING, "fix": _HB_FIX,
     "format": "[Rank %d] monitoring thread detects no heartbeat and will finally kill the process! "
               "terminateProcessGroup_%d collectiveDebugInfoMode_%d",
     "pattern": r"monitoring\s+thread\s+detects\s+no\s+heartbeat\s+and\s+will\s+finally\s+kill\s+the\s+process",
     "examples": ["[E ProcessGroupNCCL.cpp:1110] [Rank 2] monitoring thread detects no heartbeat and will finally kill "
                  "the process! terminateProcessGroup_0 collectiveDebugInfoMode_0"]},
]
HAND_ENTRIES.extend(HEARTBEAT_ENTRIES)
