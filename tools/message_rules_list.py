"""The curation rules of tools/mine_messages.py: which extracted messages become catalogue entries, with
their class, meaning and fix. A rule: repo, a regex over the source path, a regex over the message (its
format text, holes written `{name}`), the class, an id prefix, and the meaning and fix (None: the class's).
Optional: `how` (regex over the extraction kind: raise:, log:, c:WARN, strings), `prefix` (what stands
before the message in a log line, for the example), `pattern` (a hand pattern where the format's own is
not enough: wrapped watchdog lines, versions that changed the wording), `examples` (real excerpts), `max`,
`source_path` (a shared library's string attributed to a file by hand where the nearest `__FILE__` misleads).
"""
from __future__ import annotations

from tools.message_classes import CLASSES


def R(repo, path, match, cls, idp, meaning=None, fix=None, **kw):
    rule = {"repo": repo, "path": path, "match": match, "class": cls, "id_prefix": idp,
            "meaning": meaning or CLASSES[cls]["meaning"], "fix": fix or CLASSES[cls]["fix"]}
    rule.update(kw)
    return rule


T, N, DS, AC, TF, SL, RAY, CU, K, PY, UV = ("pytorch/pytorch", "NVIDIA/nccl", "deepspeedai/DeepSpeed",
                                            "huggingface/accelerate", "huggingface/transformers", "SchedMD/slurm",
                                            "ray-project/ray", "ROCm/clr", "torvalds/linux", "python/cpython",
                                            "libuv/libuv")
NV = "NVIDIA/open-gpu-kernel-modules"
GL = "pytorch/gloo"
WARN = r"^c:WARN$"
NCCL_PREFIX = "node-a:48213:48290 [3] NCCL WARN "
NCCL_RES = r"(?:NCCL error[^\n]*?, |NCCL Error \d+: |NCCL error: |Original reason for failure was: )"
EXC = r"^raise:"
# torch prints a CUDA runtime error as "CUDA error: <text>", NCCL as "Cuda failure [code] '<text>'", applications with their own
# prefix as "Cuda error <text>" (paboyle/Grid, round 9), nccl-tests as
# "Test CUDA failure common.cu:730 '<text>'"
CUDA_CTX = (r"(?:CUDA error|Cuda error|Cuda failure|CUDA failure|CUDA Error|cuda error|cuda runtime error \(\d+\) ?|"
            r"THCudaCheck FAIL file=\S+ line=\d+ error=\d+ ?)(?: [\w./\-]+\.\w+:\d+)?(?: \d+)?:? ?'?")

RULES = [
    # ================================================================ torch: elastic rendezvous (the agents' node set)
    R(T, r"elastic/rendezvous/api\.py$", r"^Rendezvous(?:Timeout|Closed|Connection|State)Error$", "rendezvous_failed",
      "torch.elastic.rendezvous_error",
      "torchrun's rendezvous failed, the step where the agents of all nodes agree on the node set before starting "
      "workers: Timeout - fewer than --nnodes (min) agents joined within the rendezvous timeout (900 s by default): a "
      "node that never started torchrun, or a different --rdzv-id/--rdzv-endpoint on it; Connection - this agent could "
      "not reach the store at --rdzv-endpoint; Closed - the rendezvous was closed (another agent failed, finished or "
      "used up its restarts); State - the store's rendezvous state was inconsistent.",
      "Start torchrun on every node with the same --rdzv-id, --rdzv-backend=c10d and --rdzv-endpoint=<host:port of one "
      "node>, and --nnodes matching the nodes you start; check the endpoint is reachable from each node (`nc -zv host "
      "port`); raise the timeout with --rdzv-conf timeout=1800 for slow starts.", how=r"^class:$",
      pattern=r"\bRendezvous(?:Timeout|Closed|Connection|State)Error\b", max=1,
      examples=['    "message": "RendezvousTimeoutError: ",',
                "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
                "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store "
                "has failed. See inner exception for details."]),
    # ================================================================ torch: elastic launcher (torchrun)
    R(T, r"elastic/multiprocessing/api\.py$", r"^failed \(exitcode", "launcher_teardown", "torch.elastic.failed_exitcode",
      "torchrun's agent saw a worker exit with a non-zero code (negative: killed by that signal, -9 SIGKILL, -6 SIGABRT, "
      "-11 SIGSEGV, -15 SIGTERM); the exit of the first worker is the failure, the others are the teardown.",
      "Look at that local rank's own output just before it; exit -9 without a traceback is usually the OOM killer.",
      prefix="E0624 16:39:03.239000 140 torch/distributed/elastic/multiprocessing/api.py:833] "),
    R(T, r"elastic/multiprocessing/api\.py$", r"^Sending process .* closing signal", "launcher_teardown",
      "torch.elastic.closing_signal",
      "torchrun sends SIGTERM to the remaining workers because one of them failed (or the agent was signalled).",
      "The worker that failed first (the 'Root Cause' of the table) is the one to read.",
      prefix="W0902 00:42:50.212000 1333 torch/distributed/elastic/multiprocessing/api.py:858] ",
      examples=["WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 52311 closing signal SIGTERM"]),
    R(T, r"elastic/multiprocessing/api\.py$", r"got signal: ", "job_terminated", "torch.elastic.signal_exception",
      "torchrun itself received a signal (SIGTERM 15 from the scheduler, scancel, a timeout wrapper or a user; SIGINT "
      "from Ctrl-C) and stopped its workers. Nothing in the workers failed by itself: if they had stopped making "
      "progress before it, the job was hung and was ended from outside.",
      "If the job hit its time limit, ask for more (--time) or checkpoint more often; if it was hung, rerun under "
      "`ddpdoctor run -- torchrun ...` to name the stuck rank and line.",
      pattern=r"SignalException: Process (?P<pid>\d+) got signal: (?P<sig>\d+)",
      examples=["torch.distributed.elastic.multiprocessing.api.SignalException: Process 40121 got signal: 15"]),
    R(T, r"elastic/multiprocessing/api\.py$", r"did not exit after|Unable to shutdown process", "launcher_teardown",
      "torch.elastic.shutdown",
      "A worker did not exit when torchrun stopped it (stuck in the kernel or in a CUDA call); torchrun killed it or "
      "gave up on it.", "The first failure before the shutdown is the cause; a worker stuck in D state points at the "
      "filesystem or the GPU driver (`dmesg` on the node).", how=r"^log:", prefix="W0902 00:42:50.212000 1333 api.py:1] "),
    R(T, r"elastic/agent/server/api\.py$", r"death signal, shutting down workers|Got termination signal", "job_terminated",
      "torch.elastic.agent_death_signal",
      "torchrun's agent received a signal (usually SIGTERM from the scheduler or a user) and shuts its workers down.",
      "If the workers had stopped making progress before, the job hung: rerun under `ddpdoctor run -- torchrun ...`; "
      "if it was the scheduler's time limit, ask for more time.",
      prefix="W0104 13:49:33.551000 2120 torch/distributed/elastic/agent/server/api.py:704] ",
      examples=["[2024-01-04 13:49:33,551] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM "
                "death signal, shutting down workers"]),
    R(T, r"elastic/agent/server/api\.py$", r"Error waiting on exit barrier", "store_timeout", "torch.elastic.exit_barrier",
      "A node finished but the other nodes did not reach torchrun's exit barrier in time: another node failed or is "
      "still running.", "Read the other nodes' logs: their failure is the cause.",
      prefix="E0104 13:49:33.551000 2120 torch/distributed/elastic/agent/server/api.py:700] "),
    R(T, r"elastic/agent/server/api\.py$", r"Worker group in \{name\} state|D-state", "launcher_teardown",
      "torch.elastic.worker_group_state",
      "torchrun's agent ended the worker group in a failed or unhealthy state.",
      "The first worker failure before this line is the cause."),
    R(T, r"elastic/agent/server/api\.py$", r"Local worker group finished|worker group successfully finished|Done waiting for "
      r"other agents", "job_ended_well", "torch.elastic.finished",
      "torchrun's agent saw all its local workers exit with code 0.", "Nothing to fix: this node ended well.",
      how=r"^log:", prefix="I0104 13:49:33.551000 2120 torch/distributed/elastic/agent/server/api.py:879] "),
    R(T, r"elastic/agent/server/local_elastic_agent\.py$", r"exceeds available GPUs", "cuda_setup",
      "torch.elastic.local_rank_exceeds_gpus",
      "torchrun was asked for more processes per node than CUDA_VISIBLE_DEVICES has GPUs.",
      "--nproc-per-node must not exceed the visible GPUs: `nvidia-smi -L`, and check CUDA_VISIBLE_DEVICES."),
    R(T, r"elastic/rendezvous/(?:api|dynamic_rendezvous|c10d_rendezvous_backend|static_tcp_rendezvous|utils)\.py$",
      r"connection to the C10d store has failed|Rendezvous|rendezvous has been closed|timed out|closed|"
      r"failed to keep|not reachable|could not be resolved|cannot be resolved|not a valid", "rendezvous_failed",
      "torch.elastic.rendezvous", how=EXC),
    R(T, r"elastic/utils/distributed\.py$|elastic/rendezvous/utils\.py$", r"port|host|address|connect|timed out|timeout",
      "store_timeout", "torch.elastic.store_util", how=EXC),
    R(T, r"elastic/multiprocessing/errors/__init__\.py$", r"Failed to parse reply file", "api_misuse",
      "torch.elastic.errors_parse", "torchrun could not read a worker's error file.",
      "The worker's own output has the exception; decorate the entry point with @record to get it in the table."),

    # ================================================================ torch: c10d (Python)
    R(T, r"distributed/rendezvous\.py$", r"expected, but not set|environment variable", "launch_misconfigured",
      "torch.c10d.env_not_set",
      "init_process_group(init_method='env://') read RANK, WORLD_SIZE, MASTER_ADDR or MASTER_PORT from the environment "
      "and one was missing: the script was started with plain `python`, not with a launcher that sets them.",
      "torchrun --nproc-per-node N train.py   (it sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT);\n"
      "under SLURM: srun ... torchrun --nnodes $SLURM_NNODES --rdzv-endpoint $MASTER_ADDR:29500 ...",
      pattern=r"environment variable (?P<var>\w+) expected, but not set",
      examples=["ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
                "expected, but not set"]),
    R(T, r"distributed/rendezvous\.py$", r"missing$|must be an integer|port must have|No rendezvous handler",
      "launch_misconfigured", "torch.c10d.init_method", how=EXC),
    R(T, r"distributed/distributed_c10d\.py$", r"Default process group has not been initialized", "launch_misconfigured",
      "torch.c10d.default_pg_not_initialized",
      "A collective or get_rank() ran before init_process_group(): the script assumes a launcher or an accelerate/"
      "Trainer set-up that did not happen (started with plain python, or the call runs before the Trainer's).",
      "Start it with torchrun (or accelerate launch) and call dist.init_process_group() first; "
      "or guard: `if dist.is_available() and dist.is_initialized():`."),
    R(T, r"distributed/distributed_c10d\.py$", r"store based barrier", "store_barrier", "torch.c10d.store_barrier",
      pattern=r"Timed out initializing process group in store based barrier on rank:? (?P<rank>\d+), for key: "
              r"(?P<key>\S+) \(world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<count>\d+), "
              r"timeout=(?P<timeout>[^)]+)\)"),
    R(T, r"distributed/distributed_c10d\.py$", r"doesn't have (?:NCCL|Gloo|MPI|XCCL) built in|We detected accelerator",
      "cuda_setup", "torch.c10d.backend_missing",
      "The requested backend is not in this torch build (e.g. NCCL in a CPU-only or macOS build).",
      "Install a CUDA build of torch on GPU nodes, or use backend='gloo' on CPUs."),
    R(T, r"distributed/distributed_c10d\.py$", r"device_id .* out of range|device_id .* does not match|Invalid process group"
      r"|has been destroyed|Mismatched bound device", "api_misuse", "torch.c10d.api", how=EXC),
    R(T, r"distributed/distributed_c10d\.py$", r"world size.*divisible|must not exceed the world size|out of range\. Valid "
      r"ranks|should be less or equal to the world_size", "config_mismatch", "torch.c10d.world_size", how=EXC),
    R(T, r"distributed/distributed_c10d\.py$", r"barrier\(\): using the device under current context|No device id is "
      r"provided|Backend .* as a ProcessGroup|Please specify timeout arg as a timedelta", "benign_warning",
      "torch.c10d.warning", "A torch.distributed warning about how the process group was set up; the job goes on.",
      "Pass device_id=torch.device('cuda', local_rank) to init_process_group to silence it and to bind the rank to "
      "its GPU early.", how=r"^(warn|log:warning)"),
    R(T, r"distributed/run\.py$", r"is not available\.|Unsupported nproc_per_node", "cuda_setup", "torch.run.nproc",
      "torchrun could not find the devices --nproc-per-node asked for (gpu/cuda with no CUDA available).",
      "Check `python -c 'import torch; print(torch.cuda.is_available())'` on the node; use a CUDA build of torch."),
    R(T, r"distributed/run\.py$", r"Setting OMP_NUM_THREADS", "benign_warning", "torch.run.omp",
      "torchrun sets OMP_NUM_THREADS=1 for every worker unless it is set; a performance note, not a failure.",
      "Set OMP_NUM_THREADS yourself (cores per node / ranks per node) if CPU work is a bottleneck."),

    # ================================================================ torch: DDP, FSDP, DataLoader, spawn (Python)
    R(T, r"nn/parallel/distributed\.py$", r"find_unused_parameters|static_graph|unused", "benign_warning",
      "torch.ddp.warning", "A DDP performance warning about its configuration; training goes on.",
      "Follow the warning: drop find_unused_parameters=True when no parameter is unused, or set static_graph=True.",
      how=r"^(warn|log:warning)"),
    R(T, r"nn/parallel/distributed\.py$", r".", "api_misuse", "torch.ddp.api", how=EXC),
    R(T, r"distributed/fsdp/", r".", "api_misuse", "torch.fsdp.api",
      "FSDP refused the model, the wrapping policy or the call (FSDP needs every rank to wrap the same modules, "
      "with parameters of one dtype per flat parameter, on the device given as device_id).",
      "Follow the message; in the Trainer, check fsdp_config (auto_wrap_policy, transformer_layer_cls_to_wrap, "
      "use_orig_params) and that every rank runs the same wrapping.", how=EXC, max=45),
    R(T, r"utils/data/_utils/signal_handling\.py$|utils/data/dataloader\.py$", r"killed by signal|exited unexpectedly",
      "worker_killed", "torch.dataloader.worker_died",
      pattern=r"DataLoader worker \(pids? ?(?P<pid>[\d, ()]+)\) (?:is killed by signal: (?P<signal>[\w ]+)|exited "
              r"unexpectedly)",
      examples=["RuntimeError: DataLoader worker (pid 8121) is killed by signal: Killed.",
                "RuntimeError: DataLoader worker (pid(s) 4157, 4158) exited unexpectedly"]),
    R(T, r"utils/data/dataloader\.py$", r"timed out after", "collective_timeout", "torch.dataloader.timeout",
      "A DataLoader worker did not deliver a batch within DataLoader(timeout=...): a worker is stuck (a deadlock after "
      "fork, a slow filesystem).", "Rerun with num_workers=0 to find where it hangs; set TOKENIZERS_PARALLELISM=false."),
    R(T, r"multiprocessing/spawn\.py$", r"terminated with signal|terminated with exit code", "launcher_teardown",
      "torch.spawn.terminated",
      "A process started by torch.multiprocessing.spawn died (by a signal or with a non-zero exit code); spawn then "
      "raises in the parent and stops the others.",
      "Read that process's own output above; a signal without a traceback: SIGKILL is usually the OOM killer, "
      "SIGSEGV a native crash."),
    R(T, r"cuda/__init__\.py$", r"NVIDIA driver|no NVIDIA|CUDA driver|not compiled with CUDA|invalid device|"
      r"CUDA call failed lazily|CUDA_VISIBLE_DEVICES|No CUDA GPUs", "cuda_setup", "torch.cuda.setup", how=EXC),

    # ================================================================ Gloo (torch's CPU backend; pytorch/gloo)
    R(GL, r"tcp/pair\.cc$", r"^Connection closed by peer", "nccl_remote_error", "gloo.closed_by_peer",
      "Gloo's TCP connection to a peer closed: the peer process exited (crashed, was killed, or finished early) or the "
      "network between them dropped. The peer's own failure, earlier, is the cause.",
      "Find the rank that died first (its log; `dmesg` on its node for the OOM killer); the ranks that print this are "
      "its peers.", how=r"^c:GLOO_ERROR_MSG$", max=1,
      pattern=r"Connection closed by peer \[?(?P<peer>[\w.:\-]+?)\]?:(?P<port>\d+)",
      examples=["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                "[10.0.0.2]:12345"]),
    R(GL, r"tcp/pair\.cc$", r"^Read error", "nccl_remote_error", "gloo.read_error",
      "Gloo could not read from a peer's connection (reset or timed out): the peer crashed, hung, or the network "
      "dropped.", "Find the peer that failed first (its log names the cause); a reset after a long wait is a hang on "
      "the other side.", how=r"^c:GLOO_ERROR_MSG$", max=1,
      pattern=r"Read error \[?(?P<peer>[\w.:\-]+?)\]?:(?P<port>\d+): (?:Connection reset by peer|Connection timed "
              r"out|No route to host|Broken pipe)",
      examples=["RuntimeError: [/opt/conda/conda-bld/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
                "[127.0.0.1]:57442: Connection reset by peer"]),
    R(GL, r"tcp/unbound_buffer\.cc$", r"^Application timeout caused pair closure$", "collective_timeout",
      "gloo.pair_timeout",
      "Gloo closed its connections because an operation timed out (the process group's timeout): a peer never reached "
      "the same collective. The rank's own 'Timed out waiting ...' line is the timeout itself.",
      "Find the rank that did not reach the collective (it printed no timeout, or it died first); raise the timeout "
      "only for slow-but-progressing steps.", how=r"^c:signalException$", max=1,
      examples=["RuntimeError: Application timeout caused pair closure"]),
    R(GL, r"tcp/device\.cc$", r"^Unable to find (?:address|interface) for", "address_unresolved", "gloo.address",
      "Gloo could not find the address or network interface to use: GLOO_SOCKET_IFNAME names an interface this node "
      "does not have, or this host's name does not resolve to one of its addresses.",
      "GLOO_SOCKET_IFNAME=<an interface `ip -o -4 addr` lists on every node>, or put this host's name in /etc/hosts.",
      how=r"^c:", prefix="RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] "),

    R(GL, r"uv/libuv\.h$", r"^uv_accept: \{reason\}$", "transport_abort", "gloo.uv_assert",
      "Gloo's libuv transport (torch's Gloo backend on macOS and Windows, and where torch is built with USE_LIBUV) got "
      "an error from a libuv call (the name before the colon: uv_accept, uv_listen, uv_read_start...) and aborted the "
      "process: the text after the colon is libuv's error (uv_strerror). 'invalid argument' from uv_accept or "
      "uv_listen is a socket the transport cannot use: an address family it does not expect (IPv6 against IPv4), or "
      "a listener set up from the wrong interface.",
      "Pin Gloo to one interface and address family: GLOO_SOCKET_IFNAME=<an interface with the address the peers "
      "use> (on macOS, lo0 for one machine) and MASTER_ADDR=127.0.0.1 rather than localhost on a single machine "
      "(localhost can resolve to both ::1 and 127.0.0.1); other errors after the colon (address already in use, "
      "too many open files) name what the call met.",
      how=r"^c:UV_ASSERT$", max=1,
      pattern=r"gloo/transport/uv/libuv\.h:\d+\] (?P<call>uv_\w+): (?P<reason>[\w ,'()\-]+)",
      prefix="[/Users/runner/work/pytorch/pytorch/pytorch/third_party/gloo/gloo/transport/uv/libuv.h:596] ",
      examples=["(RayTrainWorker pid=7315) [/Users/runner/work/pytorch/pytorch/pytorch/third_party/gloo/gloo/transport/"
                "uv/libuv.h:596] uv_accept: invalid argument"]),

    # torch's checks on the tensors handed to a collective
    R(T, r".", r"^Tensors must be (?:CUDA and dense|contiguous|non-overlapping and dense|on the same device)$",
      "api_misuse", "torch.c10d.tensor_check",
      "A collective got a tensor it cannot send: NCCL needs dense CUDA tensors on this rank's GPU, contiguous in memory "
      "(a slice, a transpose or an expanded view is not), all on one device.",
      "Pass `t.contiguous()` (and `.cuda(local_rank)` for NCCL) to the collective, or all_gather into a list of "
      "contiguous tensors; with the Gloo backend CPU tensors are fine.", how=r"^strings$",
      examples=["RuntimeError: Tensors must be CUDA and dense", "RuntimeError: Tensors must be contiguous"]),
    R(T, r".", r"^Detected mismatch between collectives on ranks", "api_misuse", "torch.c10d.collective_mismatch",
      "TORCH_DISTRIBUTED_DEBUG=DETAIL compared the ranks' collectives and they differ (another operation, shapes or "
      "dtypes, or one rank calling a collective the others skip): left alone this is a hang.",
      "Make every rank call the same collectives in the same order with the same shapes: no collective under `if "
      "rank == 0:`, the same number of batches per rank (DistributedSampler(drop_last=True)), the same model on every "
      "rank.", how=r"^strings$", max=1,
      pattern=r"Detected mismatch between collectives on ranks\.(?: Rank (?P<rank>\d+) is running collective)?",
      examples=["RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running collective: "
                "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[20], TensorDtypes=Float)"]),
    # cuBLAS status names (CUDABlas.cpp's _cublasGetErrorEnum): ALLOC_FAILED is memory, the others faults
    R(T, r".", r"^CUBLAS_STATUS_ALLOC_FAILED$", "cuda_oom", "torch.cublas.alloc_failed",
      "cuBLAS could not allocate its workspace or handle: the GPU's memory was exhausted (by this process, or by "
      "another on the same GPU) when the first matmul created its handle.",
      "As for CUDA out of memory: smaller batch or sequence, or free the GPU (nvidia-smi: is another process, or "
      "another rank, on this GPU?).", how=r"^strings$", max=1,
      pattern=r"CUBLAS_STATUS_ALLOC_FAILED",
      examples=["RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"]),
    R(T, r".", r"^CUBLAS_STATUS_(?:EXECUTION_FAILED|INTERNAL_ERROR|MAPPING_ERROR)$", "cuda_fault", "torch.cublas.failed",
      "A cuBLAS kernel failed on the GPU: usually an earlier illegal memory access (reported late, at this call), "
      "out-of-range inputs (an embedding index beyond the vocabulary), or a GPU fault.",
      "Rerun with CUDA_LAUNCH_BLOCKING=1 to see the real failing call; check token ids against the embedding size; "
      "`dmesg` for Xid errors.", how=r"^strings$",
      examples=["RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, "
                "n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`"]),
    # ================================================================ torch C++: ProcessGroupNCCL, store, reducer, allocators
    R(T, r"distributed/c10d/|c10/|aten/", r"^Watchdog caught collective operation timeout", "collective_timeout",
      "torch.c10d.watchdog_timeout",
      "A collective on this rank did not complete within the process group's timeout. Every waiting rank prints it; "
      "the rank missing from these lines (or behind in sequence numbers) is the one that never joined.",
      "Find the laggard: compare SeqNum across ranks (ddpdoctor triage does), or rerun under `ddpdoctor run`.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
      pattern=r"Watchdog caught collective operation timeout: WorkNCCL\(\s*SeqNum=\s*(?P<seq>\d+),\s*OpType=(?P<op>\w+)",
      examples=["[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, "
                "Timeout(ms)=600000) ran for 600060 milliseconds before timing out."]),
    R(T, r"distributed/c10d/|c10/|aten/", r"failure detected by watchdog at work sequence id", "collective_timeout",
      "torch.c10d.watchdog_failure_detected",
      "The watchdog (torch >= 2.4 wording) saw a collective fail or time out: it names the sequence number and the last "
      "enqueued and completed work of this rank's process group.",
      "Compare the last enqueued work across ranks: the rank behind is the laggard.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
      pattern=r"(?:Exception \(either an error or timeout\) detected by watchdog at work|failure detected by watchdog at "
              r"work sequence id):?\s*(?P<seq>\d+)",
      examples=["[rank2]:[E1206 09:54:03.447920361 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
                "Exception (either an error or timeout) detected by watchdog at work: 4402, last enqueued NCCL work: 4402, "
                "last completed NCCL work: 4401."]),
    R(T, r"distributed/c10d/|c10/|aten/", r"^Some NCCL operations have failed or timed out|To avoid data "
      r"inconsistency, we are taking the entire process down", "watchdog_abort", "torch.c10d.watchdog_takes_down",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
      examples=["[rank1]:[E1206 09:54:04.101 ProcessGroupNCCL.cpp:621] [Rank 1] To avoid data inconsistency, we are taking "
                "the entire process down."]),
    R(T, r"distributed/c10d/|c10/|aten/", r"^Process group watchdog thread terminated with exception", "watchdog_abort",
      "torch.c10d.watchdog_terminated",
      "ProcessGroupNCCL's watchdog thread ended with the exception that follows (a timeout, an NCCL error, a CUDA error); "
      "then the process aborts (SIGABRT, 'terminate called after throwing').",
      "The exception after the colon is the failure on this rank; if it is a timeout, another rank is the cause.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
      examples=["terminate called after throwing an instance of 'c10::DistBackendError'\n  what():  [PG ID 0 PG GUID 0(default_pg) "
                "Rank 3] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
                "encountered"]),
    R(T, r"distributed/c10d/|c10/|aten/", r"watchdog got stuck for|Heartbeat monitor timed out|heartbeat monitor",
      "watchdog_abort", "torch.c10d.heartbeat",
      "ProcessGroupNCCL's heartbeat monitor found the watchdog itself stuck (a CUDA or NCCL call hung, or another "
      "thread held the GIL inside CUDA) and terminates the process.",
      "Usually the GPU or a peer is gone: look for an Xid/ECC error or a dead peer first; TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC "
      "raises the limit if the node is only slow.", source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"Received a dump signal due to a collective timeout from",
      "collective_timeout", "torch.c10d.dump_signal",
      "Another rank timed out and asked every rank to dump its Flight Recorder trace.",
      "Read the dumps (TORCH_NCCL_DEBUG_INFO_TEMP_FILE) with `ddpdoctor triage`.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"is setting up NCCL communicator|retrieving ncclUniqueId|"
      r"possible application crash on rank 0", "store_timeout", "torch.c10d.unique_id",
      "A rank waited for rank 0's ncclUniqueId through the store and did not get it: rank 0 crashed, is slow, or "
      "the network between them is broken.", "Read rank 0's log first.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"^NCCL communicator was aborted|NCCL communicator encountered "
      r"error|remote error detected from rank", "nccl_aborted", "torch.c10d.comm_aborted",
      source_path="torch/csrc/distributed/c10d/NCCLUtils.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"^ncclRemoteError: A call failed", "nccl_remote_error",
      "torch.c10d.remote_error", source_path="torch/csrc/distributed/c10d/NCCLUtils.hpp",
      examples=["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote "
                "process exited or there was a network error, NCCL version 2.21.5\nncclRemoteError: A call failed possibly "
                "due to a network error or a remote process exiting prematurely."]),
    R(T, r"distributed/c10d/|c10/|aten/", r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
      "cuda_setup", "torch.c10d.no_gpus", source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"Guessing device ID based on global rank|can cause a hang if rank to GPU",
      "benign_warning", "torch.c10d.guessing_device",
      "ProcessGroupNCCL did not know this rank's GPU and guessed it from the global rank: if the guess is wrong the "
      "first collective hangs.", "init_process_group(..., device_id=torch.device('cuda', local_rank)) after "
      "torch.cuda.set_device(local_rank).", source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"distributed/c10d/|c10/|aten/", r"destroy_process_group\(\) was not called before program exit",
      "benign_warning", "torch.c10d.not_destroyed",
      "The program exited without destroy_process_group(); resources may leak and, with some backends, the exit can "
      "abort (SIGABRT) after the work is done.", "Call dist.destroy_process_group() at the end of main().",
      source_path="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    R(T, r"socket\.cpp$|TCPStore|DMAConnectivity", r"has failed to bind|Address already in use", "port_in_use",
      "torch.c10d.bind_failed", source_path="torch/csrc/distributed/c10d/socket.cpp",
      pattern=r"failed to bind to (?:\[?(?P<addr>[^\]\s]*)\]?:(?P<port>\d+))?.*?(?:errno: 98|Address already in use)",
      examples=["[W socket.cpp:436] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address "
                "already in use)."]),
    R(T, r"socket\.cpp$|TCPStore|DMAConnectivity", r"client socket has timed out after", "store_timeout",
      "torch.c10d.client_timeout", source_path="torch/csrc/distributed/c10d/socket.cpp",
      pattern=r"The client socket has timed out after (?P<secs>\S+?)s? while trying to connect to \((?P<addr>[^,]+), "
              r"(?P<port>\d+)\)",
      examples=["torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
                "(node-0, 29500)."]),
    R(T, r"socket\.cpp$|TCPStore|DMAConnectivity", r"client socket has failed to connect", "store_refused",
      "torch.c10d.client_connect_failed", source_path="torch/csrc/distributed/c10d/socket.cpp",
      pattern=r"The client socket has failed to connect to (?:any network address of \((?P<addr2>[^,]+), (?P<port2>\d+)\)|"
              r"\[?(?P<addr>[^\]\s]+?)\]?:(?P<port>\d+))",
      examples=["[W1015 10:02:11.305000 817 socket.cpp:697] [c10d] The client socket has failed to connect to "
                "[node-0]:29500 (errno: 111 - Connection refused)."]),
    # c10d's socket warnings while it tries each address family and address: it goes on to the next one, so they say
    # nothing about the job by themselves (the failure, when there is one, is the error that follows them)
    R(T, r"socket\.cpp$|DMAConnectivity", r"hostname of the client socket cannot be retrieved|network addresses of .* cannot "
      r"be retrieved \(gai error|socket cannot be initialized (?:on|to connect to)", "store_address_retry",
      "torch.c10d.socket_try",
      "c10d could not use one address while it tried them all: a reverse lookup of a client's name for its own log "
      "lines, an IPv6 (or IPv4) lookup of the store's host, or a socket of an address family the machine lacks "
      "(errno 97). It goes on with the other addresses; the job is not failing because of it.",
      "Nothing, unless an error follows (then that error is the one to read). To quiet it: a host name that resolves "
      "(MASTER_ADDR set to a name in /etc/hosts or DNS, or an IP), or TORCH_CPP_LOG_LEVEL=ERROR.",
      source_path="torch/csrc/distributed/c10d/socket.cpp",
      examples=["[W522 06:29:34.248915854 socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved. "
                "err=-3",
                "[W socket.cpp:601] [c10d] The IPv6 network addresses of (node-0, 29500) cannot be retrieved (gai error: "
                "-2 - Name or service not known).",
                "[W socket.cpp:558] [c10d] The client socket cannot be initialized to connect to [localhost]:29501 (errno: "
                "97 - Address family not supported by protocol)."]),
    R(T, r"TCPStore", r"Timed out after .* seconds waiting for clients|wait timeout after|barrier timeout after|"
      r"failed to connect/validate", "store_timeout", "torch.c10d.tcpstore",
      source_path="torch/csrc/distributed/c10d/TCPStore.cpp"),
    R(T, r"ProcessGroupGloo", r"Unable to resolve hostname", "address_unresolved", "torch.c10d.gloo_hostname",
      "Gloo looks up this machine's own host name to pick the address it listens on, and the name does not resolve "
      "(it is not in /etc/hosts or DNS: a container or a fresh VM).",
      "GLOO_SOCKET_IFNAME=<the NIC to use> (then Gloo needs no lookup), or add the host name to /etc/hosts.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp",
      examples=["RuntimeError: Unable to resolve hostname to a (local) address."]),
    R(T, r"ProcessGroupGloo", r"timed out in monitoredBarrier", "store_timeout",
      "torch.c10d.gloo", source_path="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"),
    R(T, r"reducer|sequence_num|comm\.cpp|logger\.cpp", r"Expected to have finished reduction in the prior iteration",
      "unused_params", "torch.ddp.reducer_unused", source_path="torch/csrc/distributed/c10d/reducer.cpp",
      examples=["[rank0]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new "
                "one. This error indicates that your module has parameters that were not used in producing loss."]),
    # the same error's later lines: a paste that starts below its first line still shows which parameters and rank
    R(T, r"reducer|sequence_num|comm\.cpp|logger\.cpp", r"^Parameter(?:s| indices) which did not receive grad for rank",
      "unused_params", "torch.ddp.reducer_unused_list",
      "DDP finished a backward pass in which these parameters got no gradient on this rank (the rest of the 'Expected "
      "to have finished reduction in the prior iteration' error): they were not used to compute the loss.",
      "Use them in the loss, freeze them (requires_grad=False) before wrapping in DDP, or pass "
      "find_unused_parameters=True (slower); static_graph=True when the unused set never changes.",
      source_path="torch/csrc/distributed/c10d/reducer.cpp",
      pattern=r"Parameter(?:s| indices) which did not receive grad for rank (?P<rank>\d+)", max=1,
      examples=["Parameters which did not receive grad for rank 3: mask_encoder.sensory_update.transform.bias",
                "Parameter indices which did not receive grad for rank 0: 35 36 37 38 39 40 41 42"]),
    R(T, r"reducer|sequence_num|comm\.cpp|logger\.cpp", r"marked as ready twice|mark a variable ready only once",
      "ready_twice", "torch.ddp.reducer_ready_twice", source_path="torch/csrc/distributed/c10d/reducer.cpp"),
    R(T, r"reducer|sequence_num|comm\.cpp|logger\.cpp", r"DDP expects same model across all ranks|appears not to match "
      r"(?:strides|sizes) of the same param in process", "ddp_model_mismatch", "torch.ddp.model_mismatch",
      source_path="torch/csrc/distributed/c10d/comm.cpp"),
    R(T, r"reducer|sequence_num|comm\.cpp|logger\.cpp", r"find_unused_parameters=True was specified in DDP constructor, but "
      r"did not find any unused|Grad strides do not match bucket view strides", "benign_warning", "torch.ddp.perf",
      "A DDP performance warning (an extra traversal of the graph, or a gradient copy per step); training goes on.",
      "Drop find_unused_parameters=True when nothing is unused; make the gradients contiguous.",
      source_path="torch/csrc/distributed/c10d/reducer.cpp"),
    R(T, r"csrc/DataLoader\.cpp$|csrc/", r"^ERROR: Unexpected bus error encountered in worker", "bus_error",
      "torch.dataloader.bus_error", source_path="torch/csrc/DataLoader.cpp", prefix=""),
    R(T, r"alloc_cpu\.cpp$|CPUAllocator\.cpp$", r"can't allocate memory|Out of Memory", "host_oom",
      "torch.c10.cpu_alloc",
      "torch could not allocate host memory for a tensor: the node (or the job's memory limit) is out of RAM. With "
      "ZeRO-3 / FSDP CPU offload, loading a checkpoint on every rank, or many DataLoader workers, host RAM per node "
      "is the limit.", None, source_path="c10/core/impl/alloc_cpu.cpp",
      pattern=r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)(?:: you tried to allocate "
              r"(?P<bytes>\d+) bytes)?",
      examples=["RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: can't allocate memory: you "
                "tried to allocate 11811160064 bytes. Error code 12 (Cannot allocate memory)"]),
    R(T, r"CUDACachingAllocator|CUDAMallocAsync|c10/cuda/", r"^CUDA out of memory\. Tried to allocate|^Tried to allocate",
      "cuda_oom", "torch.cuda.caching_allocator_oom", source_path="c10/cuda/CUDACachingAllocator.cpp",
      pattern=r"CUDA out of memory\. Tried to allocate (?P<want>[\d.]+ [KMGT]i?B)",
      examples=["[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity "
                "of 79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in "
                "use. Of the allocated memory 74.2 GiB is allocated by PyTorch, and 2.3 GiB is reserved by PyTorch but "
                "unallocated."]),
    R(T, r"CUDACachingAllocator|CUDAMallocAsync|c10/cuda/", r"^Process \d+ has|memory in use\. Process|Including non-PyTorch",
      "cuda_oom", "torch.cuda.oom_processes",
      "The CUDA out-of-memory message lists every process holding memory on that GPU. More than one process on one "
      "GPU means other ranks created CUDA contexts there: torch.load(...) without map_location restores tensors to "
      "the GPU they were saved from (GPU 0) on every rank, or a rank never called torch.cuda.set_device.",
      "torch.load(path, map_location='cpu') (or map_location=f'cuda:{local_rank}'); "
      "torch.cuda.set_device(local_rank) before any CUDA work.", source_path="c10/cuda/CUDACachingAllocator.cpp",
      pattern=r"Process (?P<pid>\d+) has (?P<mem>[\d.]+ [KMGT]i?B) memory in use",
      examples=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
                "23.64 GiB of which 3.06 MiB is free. Process 39341 has 20.79 GiB memory in use. Process 39342 has 1.40 "
                "GiB memory in use. Process 39343 has 1.40 GiB memory in use."]),
    R(T, r"c10/cuda/|CUDAException|CUDAFunctions|driver_api", r"CUDA kernel errors might be asynchronously reported|"
      r"compile with `TORCH_USE_CUDA_DSA`|CUDA_LAUNCH_BLOCKING", "cuda_error_hint", "torch.cuda.async_error_hint",
      source_path="c10/cuda/CUDAException.cpp"),
    R(T, r"c10/cuda/|CUDAFunctions|driver_api", r"invalid device ordinal|CUDA driver initialization failed|no CUDA-capable|"
      r"Found no NVIDIA driver|CUDA driver version is insufficient|busy or unavailable", "cuda_setup", "torch.cuda.device",
      source_path="c10/cuda/CUDAFunctions.cpp"),

    # ================================================================ NCCL: error strings and WARN lines
    R(N, r"src/misc/socket\.cc$", r"error encountered when getting address info", "address_unresolved",
      "nccl.socket.getaddrinfo",
      "NCCL could not resolve a host name to an address (getaddrinfo failed): NCCL_COMM_ID or a peer's host name "
      "does not resolve on this node.", "Use IP addresses (NCCL_COMM_ID=<ip>:<port>), or add the names to /etc/hosts "
      "or DNS on every node.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"remote process exited or there was a network error", "nccl_remote_error",
      "nccl.result.remote_error", how=r"^c:return",
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, ",
      examples=["RuntimeError: NCCL communicator was aborted on rank 1. Original reason for failure was: NCCL error: remote "
                "process exited or there was a network error, NCCL version 2.18.1"]),
    # ncclGetErrorString's texts as torch prints them: "NCCL error in: FILE:LINE, <text>[ (run with NCCL_DEBUG=INFO for
    # details)], NCCL version X" (older NCCL has no parenthesis), or "NCCL Error 2: <text>" (torch < 1.7)
    R(N, r"src/init\.cc$", r"^unhandled system error", "nccl_system_error", "nccl.result.system_error", how=r"^c:return",
      pattern=NCCL_RES + r"unhandled system error\b", max=1,
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, ",
      examples=["RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled system error, "
                "NCCL version 2.7.8", "RuntimeError: NCCL Error 2: unhandled system error"]),
    R(N, r"src/init\.cc$", r"^unhandled cuda error", "nccl_internal_error", "nccl.result.cuda", how=r"^c:return",
      pattern=NCCL_RES + r"unhandled cuda error\b", max=1,
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, ",
      examples=["RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL "
                "version 2.7.8"]),
    R(N, r"src/init\.cc$", r"^internal error", "nccl_internal_error", "nccl.result.internal", how=r"^c:return",
      pattern=NCCL_RES + r"internal error\b", max=1,
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "),
    R(N, r"src/init\.cc$", r"^invalid usage", "nccl_invalid_usage", "nccl.result.invalid_usage", how=r"^c:return",
      pattern=NCCL_RES + r"invalid usage\b", max=1,
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, ",
      examples=["RuntimeError: NCCL error in: /opt/pytorch/pytorch/torch/lib/c10d/../c10d/NCCLUtils.hpp:82, invalid usage, "
                "NCCL version 2.7.8"]),
    R(N, r"src/init\.cc$", r"^invalid argument", "api_misuse", "nccl.result.invalid_argument",
      "An NCCL call got an invalid argument (ncclInvalidArgument): a tensor on the wrong device or not contiguous, a "
      "dtype NCCL does not support, a null buffer, a communicator used after it was destroyed.",
      "Rerun with NCCL_DEBUG=WARN: NCCL's WARN line names the argument. Check that every tensor passed to a collective "
      "is on this rank's GPU (torch.cuda.current_device()), contiguous, and of a dtype NCCL supports.",
      pattern=NCCL_RES + r"invalid argument\b", max=1, how=r"^c:return",
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, ",
      examples=["ncclInvalidArgument: Invalid value for an argument."]),
    R(N, r"src/init\.cc$", r"^timeout$", "collective_timeout", "nccl.result.timeout", how=r"^c:return",
      pattern=r"NCCL error[^\n]*?, timeout(?:, NCCL version|$)",
      prefix="torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:95, "),
    R(N, r"src/include/checks\.h$", r"Cuda failure", "nccl_internal_error", "nccl.cuda_failure",
      "NCCL's call into the CUDA runtime failed; the quoted text is the CUDA error (out of memory, an illegal memory "
      "access, ...), which decides the cause.",
      "Read the quoted CUDA error: 'out of memory' is the GPU's memory (NCCL allocates its buffers when it sets up "
      "transports, on top of the model); an illegal memory access or ECC error is the GPU or a kernel.",
      how=WARN, prefix=NCCL_PREFIX, pattern=r"Cuda failure (?:\d+ )?'(?P<error>[^']*)'",
      examples=["node-b:901:1002 [2] NCCL WARN Cuda failure 'out of memory'",
                "node-b:901:1002 [2] NCCL WARN Cuda failure 700 'an illegal memory access was encountered'"]),
    R(N, r"src/include/(?:checks|alloc)\.h$|src/allocator\.cc$|src/misc/cudawrap\.cc$", r"alloc|calloc|Cuda|cuMem|CUDA",
      "cuda_oom", "nccl.alloc",
      "NCCL could not allocate memory for its buffers or connections (GPU memory, or pinned host memory): it allocates "
      "them while it sets up transports, after the model is already on the GPU.",
      "Leave room on the GPU for NCCL (a smaller model shard or batch); NCCL_BUFFSIZE lowers its buffers; errors that "
      "follow on other ranks are consequences.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/misc/socket\.cc$|src/misc/utils\.cc$", r".", "nccl_network", "nccl.socket", how=WARN, prefix=NCCL_PREFIX,
      examples=["node-a:2245:2290 [0] NCCL WARN socketProgress: Connection closed by remote peer node-b<40522>"]),
    R(N, r"src/bootstrap\.cc$", r"has already checked in", "launch_misconfigured", "nccl.bootstrap.duplicate_rank",
      "NCCL's bootstrap root got the same rank twice: two processes were started as one rank (a launcher started the "
      "job twice over, or RANK/node_rank is computed the same on two nodes), so the communicator never completes.",
      "Give every process a distinct rank: one launcher per node with its own --node_rank, or srun tasks that each "
      "read SLURM_PROCID; check RANK = node_rank * nproc_per_node + local_rank.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/bootstrap\.cc$", r".", "nccl_network", "nccl.bootstrap",
      "NCCL's bootstrap (the out-of-band socket exchange at communicator creation) failed: a rank could not reach "
      "another over the interface NCCL chose, or a rank was gone.",
      "NCCL_SOCKET_IFNAME=<the NIC that routes between nodes> on every node; open the ports between the nodes.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/transport/net_socket\.cc$|src/transport/net\.cc$|src/plugin/net\.cc$", r".", "nccl_network",
      "nccl.net_socket", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/misc/ibvwrap\.cc$", r"^Failed to open libibverbs", "benign_warning", "nccl.ibvwrap.no_libibverbs",
      "NCCL found no InfiniBand verbs library (libibverbs) and uses its socket transport instead: normal on machines "
      "without InfiniBand or RoCE, and not an error. Between nodes that do have InfiniBand it means NCCL runs over "
      "TCP, much slower.", "Nothing to do without InfiniBand. With it: install rdma-core (libibverbs1) in the "
      "container or environment, then NCCL_DEBUG=INFO shows 'NET/IB : Using ...'.", how=WARN, max=1,
      prefix="node-a:48213:48213 [0] misc/ibvwrap.cc:63 NCCL WARN ",
      examples=["gpu-01:1379562:1379562 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
                "[1,0]<stdout>:gpu-01:11007:11098 [0] misc/ibvwrap.cu:63 NCCL WARN Failed to open libibverbs.so[.1]"]),
    R(N, r"src/transport/net_ib/common\.cc$", r"non-fatal async event", "benign_warning", "nccl.net_ib.async_event",
      "NCCL's InfiniBand transport reports a port event it treats as non-fatal (a client reregistration after a subnet "
      "manager sweep, a port coming back active, a LID or P_Key change): the job goes on.",
      "Nothing, unless the job then fails: a port error followed by completion errors means a link went down "
      "(`ibv_devinfo`, the fabric manager's logs).", how=WARN, prefix=NCCL_PREFIX,
      pattern=r"NET/IB\s*:\s*(?:\S+:\d+ )?Got (?:non-fatal )?async event\s*:\s*(?![\s]|port error|path migration error)"
              r"(?P<event>[\w ]+)",
      examples=["gpu1:5021:5386 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration"]),
    R(N, r"src/transport/net_ib/|src/misc/ibvwrap\.cc$|src/misc/ibvsymbols\.cc$", r".", "nccl_network", "nccl.net_ib",
      "NCCL's InfiniBand/RoCE transport failed: a work completion with an error (a peer gone, a link down, a wrong GID "
      "index on RoCE) or a verbs call that failed.",
      "ibv_devinfo on both nodes (port state ACTIVE); RoCE: NCCL_IB_GID_INDEX=3; restrict to working HCAs with "
      "NCCL_IB_HCA; NCCL_IB_DISABLE=1 to confirm.", how=WARN, prefix=NCCL_PREFIX, max=60),
    R(N, r"src/transport/shm\.cc$|src/misc/shmutils\.cc$|src/os/linux\.cc$", r"shm|shared|/dev/shm|fallocate|mmap|open",
      "nccl_shm", "nccl.shm", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/transport/p2p\.cc$|src/graph/paths\.cc$", r"P2P|p2p|IPC|peer", "nccl_system_error", "nccl.p2p",
      "NCCL's peer-to-peer transport between GPUs of one node failed (IPC handles, or P2P that the topology says is "
      "there but does not work: ACS/IOMMU, virtualised GPUs).",
      "NCCL_P2P_DISABLE=1 confirms it; disable PCIe ACS / use iommu=pt; check `nvidia-smi topo -m`.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"Duplicate GPU detected|same GPU", "duplicate_gpu", "nccl.init.duplicate_gpu", how=WARN,
      prefix=NCCL_PREFIX,
      pattern=r"Duplicate GPU detected ?: rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>\w+)",
      examples=["node-a:2245:2245 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device "
                "1000"]),
    R(N, r"src/init\.cc$", r"Mismatched NCCL version", "nccl_version_mismatch", "nccl.init.version", how=WARN,
      prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"Invalid rank|Invalid device|invalid device count|exceeds ndev|Attempt to use communicator|"
      r"improper usage|not initialized", "nccl_invalid_usage", "nccl.init.usage", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$|src/transport\.cc$|src/group\.cc$", r"No transport found|failed|Failed|error", "nccl_internal_error",
      "nccl.init.failed", "NCCL failed while creating the communicator or connecting ranks.",
      "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; the WARN line just before names the failing step.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/enqueue\.cc$|src/collectives\.cc$|src/misc/argcheck\.cc$", r".", "nccl_invalid_usage", "nccl.enqueue",
      "NCCL rejected a collective's arguments or could not launch it (mismatched types or counts, a send without a "
      "matching receive, an invalid communicator).",
      "Every rank must call the same collectives with the same dtype and count; check the tensor's device is this "
      "rank's GPU.", how=WARN, prefix=NCCL_PREFIX, max=40),
    R(N, r"src/proxy\.cc$", r"failed|Failed|error|Error|abort|closed", "nccl_network", "nccl.proxy",
      "NCCL's proxy thread (which drives network transfers) failed: usually because a peer died or a connection "
      "closed.", "Look for the first failing rank; a peer's death causes these on the others.", how=WARN,
      prefix=NCCL_PREFIX),
    R(N, r"src/misc/nvmlwrap\.cc$|src/graph/topo\.cc$|src/graph/xml\.cc$", r"nvml|NVML|failed|Could not|Error",
      "nccl_system_error", "nccl.topology",
      "NCCL could not read the machine's topology (NVML, sysfs PCI paths): often a container without /sys or a GPU "
      "that NVML cannot see.", "Run with --privileged or mount /sys; check `nvidia-smi` works in the container.",
      how=WARN, prefix=NCCL_PREFIX, max=25),

    # ================================================================ CUDA runtime error strings (HIP's copy of cudaGetErrorString)
    R(CU, r"hip_error\.cpp$", r"^(an illegal memory access was encountered|misaligned address|an illegal instruction was "
      r"encountered|unspecified launch failure|device-side assert triggered|uncorrectable ECC error encountered|the launch "
      r"timed out and was terminated|unspecified launch failure in prior launch|invalid program counter|hardware stack "
      r"error|too many resources requested for launch)$", "cuda_fault", "cuda.error", how=r"^c:return",
      prefix="RuntimeError: CUDA error: ", context=CUDA_CTX),
    R(CU, r"hip_error\.cpp$", r"^unknown error$", "cuda_fault", "cuda.error",
      "The CUDA driver failed in a way it does not name (cudaErrorUnknown, 999). On a machine that worked before it "
      "is usually the GPU or its driver: a GPU that fell off the bus (Xid 79), a driver that lost the device after a "
      "fault, or a driver/runtime mismatch after an update without a reboot.",
      "On that node: `nvidia-smi` (does it list every GPU?), `dmesg -T | grep -iE 'NVRM|Xid'`; after a driver update "
      "reboot; a GPU that fell off the bus needs the node drained and the GPU reset or replaced.", how=r"^c:return",
      prefix="RuntimeError: CUDA error: ", context=CUDA_CTX,
      examples=["Test CUDA failure common.cu:730 'unknown error'",
                "node-c:2852:3596 [0] include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'"]),
    R(CU, r"hip_error\.cpp$", r"^out of memory$", "cuda_oom", "cuda.error", how=r"^c:return",
      prefix="RuntimeError: CUDA error: ", context=CUDA_CTX),
    R(CU, r"hip_error\.cpp$", r"^(invalid device ordinal|no kernel image is available for execution on the device|driver "
      r"version is insufficient for runtime version|initialization error|exclusive-thread device already in use by a "
      r"different thread|invalid device function|peer access is not supported between these two devices|operation not "
      r"supported|device kernel image is invalid|no ROCm-capable device is detected)$", "cuda_setup", "cuda.error",
      how=r"^c:return", prefix="RuntimeError: CUDA error: ", context=CUDA_CTX, hip_to_cuda=True,
      examples=["RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at "
                "/pytorch/aten/src/THC/THCGeneral.cpp:74",
                "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=74 error=35 : CUDA driver version is "
                "insufficient for CUDA runtime version", "RuntimeError: No CUDA GPUs are available",
                "RuntimeError: CUDA error: no CUDA-capable device is detected"]),

    # ================================================================ DeepSpeed
    R(DS, r"deepspeed/runtime/config\.py$", r"train_batch_size is not equal to micro_batch_per_gpu|batch related "
      r"parameters|has to be greater than 0|needs to be provided", "config_mismatch", "deepspeed.config.batch",
      "DeepSpeed checks train_batch_size == train_micro_batch_size_per_gpu x gradient_accumulation_steps x world size "
      "(data-parallel ranks). The config's numbers do not multiply out for this many ranks, often because the config "
      "was written for another GPU count.",
      "Set the three to \"auto\" under the HF Trainer (it fills them from its arguments), or recompute them for this "
      "world size; give only two of them and DeepSpeed derives the third.",
      pattern=r"train_batch_size is not equal to micro_batch_per_gpu \* gradient_acc_step \* world_size "
              r"(?P<train>\d+) != (?P<micro>\d+) \* (?P<accum>\d+) \* (?P<world>\d+)",
      examples=["AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                "gradient_acc_step * world_size 16 != 2 * 1 * 4"]),
    R(DS, r"deepspeed/runtime/config\.py$|deepspeed/runtime/zero/config\.py$|deepspeed/runtime/config_utils\.py$",
      r".", "config_mismatch", "deepspeed.config",
      "DeepSpeed rejected its configuration (ds_config.json): the message names the setting.",
      "Fix that key in the DeepSpeed config; under the HF Trainer keep the values the Trainer also sets as \"auto\".",
      how=EXC, max=30),
    R(DS, r"deepspeed/runtime/engine\.py$", r"LOCAL_RANK|local_rank|local rank", "launch_misconfigured",
      "deepspeed.engine.local_rank",
      "DeepSpeed did not find the rank variables a launcher sets (LOCAL_RANK), or they disagree: the script was started "
      "without the deepspeed launcher, torchrun or accelerate launch, so it runs as one process with world size 1.",
      "deepspeed --num_gpus N train.py ... (or torchrun / accelerate launch); with ZeRO-3 a plain `python train.py` "
      "runs one rank that holds the whole model.", how=EXC),
    R(DS, r"deepspeed/runtime/engine\.py$|deepspeed/runtime/state_dict_factory\.py$|deepspeed/checkpoint/",
      r"world size|world_size|mp_world_size|DP world size|mp size|divisible", "config_mismatch",
      "deepspeed.checkpoint.world_size",
      "The checkpoint was saved with another parallel layout (data-, tensor- or pipeline-parallel sizes) than the job "
      "that loads it.",
      "Load with the same world size and model-parallel sizes it was saved with, or convert it (DeepSpeed's universal "
      "checkpoint: ds_to_universal.py, then load_universal).", how=EXC),
    R(DS, r"deepspeed/runtime/engine\.py$|deepspeed/runtime/zero/|deepspeed/runtime/pipe/engine\.py$", r"ZeRO|zero stage|"
      r"incompatible|not compatible|not supported|requires", "api_misuse", "deepspeed.engine",
      "DeepSpeed refused a combination of features (a ZeRO stage with an optimizer, pipeline parallelism, offload...).",
      "Change the DeepSpeed config as the message says.", how=EXC, max=40),
    R(DS, r"deepspeed/launcher/launch\.py$", r"exits with return code", "launcher_teardown", "deepspeed.launcher.exit",
      "The deepspeed launcher saw a rank's process exit with a non-zero return code (negative: the signal that killed "
      "it, -9 is usually the OOM killer) and stops the others.",
      "Read that rank's output above; with -9 check host memory (ZeRO-3 CPU offload keeps optimizer states in RAM).",
      pattern=r"exits with return code = (?P<code>-?\d+)",
      examples=["[2024-02-27 07:12:02,123] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
                "'--local_rank=3'] exits with return code = -9"]),
    R(DS, r"deepspeed/launcher/launch\.py$", r"Killing subprocess|Main process received", "launcher_teardown",
      "deepspeed.launcher.kill",
      "The deepspeed launcher kills the remaining ranks because one failed or it received a signal.",
      "The first rank that exited is the cause.", how=r"^log:",
      prefix="[2024-02-27 07:12:02,123] [INFO] [launch.py:315:sigkill_handler] "),
    R(DS, r"deepspeed/launcher/runner\.py$|deepspeed/launcher/multinode_runner\.py$|deepspeed/launcher/launcher_helper\.py$",
      r".", "launch_misconfigured", "deepspeed.runner",
      "The deepspeed launcher could not start the job as asked (hostfile, ssh, master address, resources).",
      "Fix the hostfile / --master_addr / --num_gpus as the message says; `ssh` to every host must work without a "
      "password for multi-node launches.", how=r"^(raise|log:error)", max=30),
    R(DS, r"deepspeed/comm/|deepspeed/utils/distributed\.py$", r".", "launch_misconfigured", "deepspeed.comm",
      "deepspeed.comm could not set up or use the process group (missing rank variables, backend not available, "
      "init not called).", "Start with a launcher and call deepspeed.init_distributed() (the engine does it).",
      how=EXC, max=20),
    R(DS, r"deepspeed/runtime/fp16/loss_scaler\.py$|deepspeed/runtime/fp16/fused_optimizer\.py$|"
      r"deepspeed/runtime/zero/stage_1_and_2\.py$|deepspeed/runtime/zero/stage3\.py$|deepspeed/runtime/bf16_optimizer\.py$",
      r"[Oo]verflow|Skipping step|skipping step", "overflow_skip", "deepspeed.overflow", how=r"^(log|warn)"),
    R(DS, r"deepspeed/runtime/zero/", r"out of memory|OOM|not enough|insufficient|pin", "host_oom", "deepspeed.zero.memory",
      "ZeRO could not allocate the memory it needs for partitions or offloaded states (pinned host memory, NVMe, or "
      "GPU).", "Offload less (offload_param off, offload_optimizer to nvme), fewer ranks per node, or more RAM.",
      how=r"^(raise|log:error|log:warning)"),

    # ================================================================ accelerate
    R(AC, r"src/accelerate/state\.py$", r"P2P|p2p|broadband", "nccl_system_error",
      "accelerate.p2p", "accelerate found GPUs (RTX 40xx) whose driver advertises peer-to-peer support that does not work.",
      "export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1, or a driver >= 550.40.07."),
    R(AC, r"src/accelerate/state\.py$|src/accelerate/utils/launch\.py$|src/accelerate/commands/launch\.py$|"
      r"src/accelerate/utils/environment\.py$", r"num_processes|world|local_rank|LOCAL_RANK|MASTER|rank|distributed|"
      r"launch|GPU|gpus", "launch_misconfigured", "accelerate.launch",
      "accelerate could not set up the processes as configured (accelerate config against the launch arguments, the "
      "rank variables, the machines).",
      "Check `accelerate env` and the config file (~/.cache/huggingface/accelerate/default_config.yaml); "
      "num_processes must equal the GPUs used across machines.", how=r"^(raise|log:error|log:warning)", max=40),
    R(AC, r"src/accelerate/utils/deepspeed\.py$|src/accelerate/accelerator\.py$", r"deepspeed|DeepSpeed|ds_config|"
      r"mismatch|gradient_accumulation|batch", "config_mismatch", "accelerate.deepspeed",
      "accelerate found the DeepSpeed config and its own settings in disagreement (batch sizes, accumulation steps, "
      "mixed precision, the model or optimizer given twice).",
      "Set the clashing keys to \"auto\" in the DeepSpeed config, or make them equal to accelerate's settings.",
      how=EXC, max=40),
    R(AC, r"src/accelerate/accelerator\.py$|src/accelerate/utils/fsdp_utils\.py$|src/accelerate/utils/dataclasses\.py$",
      r".", "api_misuse", "accelerate.api",
      "accelerate refused how it was called or configured; the message says what it expected.",
      "Follow the message; `accelerate env` shows the configuration in force.", how=EXC, max=45),

    # ================================================================ transformers (Trainer, TrainingArguments, DeepSpeed)
    R(TF, r"trainer\.py$|modeling_utils\.py$", r"out-of-memory|out of memory", "cuda_oom", "transformers.oom", how=EXC),
    R(TF, r"trainer\.py$", r"Training completed", "job_ended_well", "transformers.trainer.completed",
      "The Trainer finished its training loop.", "Nothing to fix: training ended.", how=r"^log:",
      pattern=r"Training completed\. Do not forget to share your model"),
    R(TF, r"integrations/deepspeed\.py$", r"mismatch TrainingArguments|Please correct the following DeepSpeed config",
      "config_mismatch", "transformers.deepspeed.mismatch",
      "The Trainer compared the DeepSpeed config with its own arguments (per-device batch size, gradient accumulation, "
      "learning rate, fp16/bf16, ...) and they differ: the message lists each key and both values.",
      "Write \"auto\" for those keys in the DeepSpeed config (the Trainer then fills them from TrainingArguments), or "
      "make both sides equal.",
      pattern=r"Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\s*(?P<mismatches>.*)",
      examples=["ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n"
                "- ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=8"]),
    R(TF, r"integrations/deepspeed\.py$", r".", "config_mismatch", "transformers.deepspeed",
      "The Trainer's DeepSpeed integration refused the configuration or the checkpoint.",
      "Fix the DeepSpeed config key or the checkpoint path the message names.", how=EXC),
    R(TF, r"training_args\.py$", r"distributed|local_rank|world|launch|DDP|ddp|fsdp|deepspeed", "launch_misconfigured",
      "transformers.training_args.distributed",
      "TrainingArguments found the distributed set-up inconsistent with how the script was launched.",
      "Launch with torchrun / accelerate launch and let TrainingArguments read the environment; do not set local_rank "
      "by hand.", how=r"^(raise|log:warning)", max=25),
    R(TF, r"trainer\.py$", r"distributed|DeepSpeed|Zero-3|fsdp|FSDP|batch|gradient_accumulation", "config_mismatch",
      "transformers.trainer.config",
      "The Trainer refused a combination of its arguments with the distributed set-up (DeepSpeed ZeRO-3, FSDP, batch "
      "options).", "Change the TrainingArguments the message names.", how=EXC, max=25),
    R(TF, r"modeling_utils\.py$", r"device_map|DeepSpeed|deepspeed|zero|ZeRO|low_cpu_mem_usage|FSDP|fsdp",
      "api_misuse", "transformers.modeling.distributed",
      "from_pretrained refused the loading options with the distributed set-up (device_map with DDP/DeepSpeed, "
      "ZeRO-3 init).", "Under DDP/DeepSpeed/FSDP do not pass device_map='auto'; let the Trainer place the model.",
      how=EXC, max=20),

    # ================================================================ SLURM
    R(SL, r"src/srun/launch\.c$", r"Out Of Memory", "oom_killer", "slurm.srun.oom",
      "srun reports that a task's step was killed by the memory cgroup: it used more than the job's --mem / "
      "--mem-per-cpu / --mem-per-gpu.",
      "Ask for more memory (`#SBATCH --mem=...`) or lower host memory per task (DataLoader workers, offload).",
      pattern=r"srun: error: (?P<host>[\w.\-]+): tasks? (?P<tasks>[\d,\-]+): Out Of Memory",
      examples=["srun: error: gpu-b02: task 5: Out Of Memory"]),
    R(SL, r"src/srun/launch\.c$", r"Exited with exit code", "launcher_teardown", "slurm.srun.exit",
      "srun reports a task that exited with a non-zero code.", "Read that task's output for its exception.",
      prefix="srun: error: ", examples=["srun: error: gpu-a01: tasks 0-3: Exited with exit code 1"]),
    R(SL, r"src/slurmd/slurmstepd/req\.c$", r"DUE TO TIME LIMIT", "job_terminated", "slurm.cancel.time_limit",
      "SLURM cancelled the job because it reached its time limit (--time).",
      "Ask for more time (#SBATCH --time=...), or save checkpoints often and resume (--resume_from_checkpoint).",
      prefix="slurmstepd: error: "),
    R(SL, r"src/slurmd/slurmstepd/req\.c$", r"DUE TO PREEMPTION|DUE TO JOB REQUEUE", "job_terminated",
      "slurm.cancel.preempted",
      "SLURM preempted or requeued the job for another one.",
      "Use a partition/QOS that is not preemptible, or checkpoint and resume (--requeue with --signal).",
      prefix="slurmstepd: error: "),
    R(SL, r"src/slurmd/slurmstepd/req\.c$", r"CANCELLED AT \{s\} \*\*\*$", "job_terminated", "slurm.cancel.plain",
      "SLURM cancelled the job or step: scancel (by you, an admin or a workflow tool), a failed dependency, or, on "
      "versions before 2025, a signal; the message gives no reason. Nothing in the job itself failed unless its own "
      "lines say so before this.",
      "`sacct -j JOBID --format=JobID,State,ExitCode,Reason` says who or what cancelled it; if the job had stopped "
      "making progress before, it hung and was ended from outside: rerun under `ddpdoctor run -- ...`.",
      prefix="slurmstepd: error: ",
      pattern=r"\*\*\* (?:JOB|STEP) (?P<id>\S+) ON (?P<node>\S+) CANCELLED AT (?P<time>\S+) \*\*\*",
      examples=["slurmstepd: error: *** JOB 168885 ON gpu-a17 CANCELLED AT 2023-08-31T18:04:42 ***",
                "slurmstepd: error: *** STEP 6053.0 ON gpu-a17 CANCELLED AT 2024-04-23T12:18:08 ***"]),
    R(SL, r"src/slurmd/slurmstepd/req\.c$", r"DUE TO NODE|DUE to SIGNAL|DUE TO TASK FAILURE|CANCELLED AT %s \*\*\*|"
      r"CANCELLED AT \{s\} \*\*\*", "job_terminated", "slurm.cancel",
      "SLURM cancelled the job step: a node failed, someone ran scancel, a signal was sent, or a task failed and the "
      "step was configured to end with it.",
      "`sacct -j JOBID --format=JobID,State,ExitCode,NodeList` shows which; for a node failure, exclude the node.",
      prefix="slurmstepd: error: "),
    R(SL, r"src/api/step_launch\.c$", r"^Task launch for .* failed on node", "launch_misconfigured", "slurm.task_launch",
      "srun could not start the tasks on a node: the error after the colon says why (an expired job credential: the "
      "nodes' clocks or munge keys disagree; a node down; a missing program).",
      "Read the reason: for 'Job credential expired' sync the clocks (chrony/ntp) and munge keys and restart slurmd on "
      "that node; otherwise exclude the node (--exclude) and tell the admins.",
      prefix="srun: error: ", pattern=r"Task launch for (?P<step>\S+) failed on node (?P<node>[^:\s]+): (?P<reason>.+)",
      examples=["srun: error: Task launch for 36.0 failed on node cn131: Job credential expired"]),
    R(SL, r"src/slurmd/slurmstepd/task\.c$", r"^execve\(\)", "launch_misconfigured", "slurm.execve",
      "slurmstepd could not execute the task's program: the path does not exist on the compute node (a script or "
      "interpreter on a filesystem that node does not mount, a node-local /tmp), is not executable, or its #! "
      "interpreter is missing.", "Put the script and the environment on a shared filesystem; `chmod +x`; check the "
      "#! line and that the interpreter exists on the compute node.", prefix="slurmstepd: error: ",
      pattern=r"execve\(\): (?:bad interpreter\((?P<interp>[^)]*)\): )?(?P<path>\S+): (?P<err>.+)", max=1,
      examples=["slurmstepd: error: execve(): /tmp/slurmd/job2997814/slurm_script: No such file or directory"]),
    R(SL, r"src/slurmd/slurmstepd/step_terminate_monitor\.c$", r"TERMINATED ON", "job_terminated", "slurm.stepd_terminated",
      "slurmstepd gave up waiting for the step's processes to end after signalling them (processes stuck in the "
      "kernel or in a GPU call).", "Check the node (`dmesg`, GPU health); a rank stuck in D state blocks the exit.",
      prefix="slurmstepd: error: "),
    R(SL, r"src/plugins/task/cgroup/task_cgroup_memory\.c$", r"oom_kill event", "oom_killer", "slurm.cgroup.oom",
      "The job's memory cgroup recorded OOM kills: a task used more memory than the job was given.",
      "Ask for more memory (#SBATCH --mem=...) or lower host memory per task.",
      pattern=r"Detected (?P<count>\d+) oom[_-]kill events? in (?P<step>\S+)",
      prefix="slurmstepd: error: ",
      examples=["slurmstepd: error: Detected 1 oom_kill event in StepId=123456.0. Some of the step tasks have been OOM "
                "Killed.", "slurmstepd: error: Detected 1 oom-kill event(s) in step 4187.batch cgroup. Some of your "
                "processes may have been killed by the cgroup out-of-memory handler."]),
    R(SL, r"src/slurmd/slurmstepd/mgr\.c$", r"Out Of Memory|Killed by signal", "oom_killer", "slurm.stepd.task_exit",
      "slurmstepd recorded a task killed by the OOM handler or by a signal.", None, how=r"^c:verbose",
      prefix="slurmstepd: error: "),
    R(SL, r"src/srun/signals\.c$|src/srun/srun_job\.c$", r"forcing job termination", "launcher_teardown",
      "slurm.srun.forcing_termination",
      "srun ends the whole step: a task failed (with --kill-on-bad-exit) or srun was signalled twice.",
      "The first task that failed is the cause.", prefix="srun: ",
      pattern=r"srun: forcing job termination"),

    # ================================================================ Ray
    R(RAY, r"python/ray/exceptions\.py$", r"worker died unexpectedly|actor died|The actor is dead|local raylet died|"
      r"node .* died|NodeDied", "process_died", "ray.died", how=EXC),
    R(RAY, r"python/ray/exceptions\.py$", r"lost|owner has exited|Failed to retrieve object", "process_died",
      "ray.object_lost",
      "An object Ray needed was lost because the worker or node that held it died.",
      "Find why that worker or node died (its log, the raylet's OOM messages, `dmesg`).", how=EXC),
    R(RAY, r"python/ray/exceptions\.py$", r"object store is full|ObjectStoreFull", "host_oom", "ray.object_store_full",
      how=EXC),
    R(RAY, r"src/ray/raylet/", r"running low on memory|Memory on the node|killing policy|memory usage threshold",
      "oom_killer", "ray.memory_monitor",
      "Ray's memory monitor killed a worker because the node's memory use passed the threshold "
      "(RAY_memory_usage_threshold, 0.95 by default): the table that follows names the processes that held the RAM.",
      "Lower memory per worker (fewer concurrent tasks or actors per node, smaller batches), or raise the threshold / "
      "give the node more RAM; RAY_memory_monitor_refresh_ms=0 turns the monitor off (then the kernel's OOM killer "
      "acts instead).", how=r"^strings$",
      pattern=r"(?:\d+ worker\(s\) were killed due to the node running low on memory|Task was killed due to the node "
              r"running low on memory|Memory on the node \(IP: (?P<ip>[^,]+), ID: \w+\)(?: where the task \(.*?\) was "
              r"running)? was (?P<used>[\d.]+)GB(?: used)? / (?P<total>[\d.]+)GB)",
      examples=["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
                "Memory on the node (IP: 10.2.7.14, ID: 0a1b2c3d) where the task (task ID: 77ab, name=TrainWorker.train, "
                "pid=5120, memory used=41.02GB) was running was 120.10GB / 125.00GB (0.9608), which exceeds the memory "
                "usage threshold of 0.95. Ray killed this worker (ID: 9f8e7d) because it was the most recently "
                "scheduled task"]),
    R(RAY, r"src/ray/raylet/|src/ray/core_worker/", r"A worker died or was killed while executing a task|Worker unexpectedly "
      r"exits with a connection error", "process_died", "ray.worker_died",
      "Ray lost a worker process while it ran a task: it was killed (SIGKILL, most often by the kernel's OOM killer when "
      "host memory runs out), crashed, or `ray stop --force` ran. The message lists these as possibilities; the "
      "worker's own log and the node's kernel log say which.",
      "ray logs worker-<Worker ID>*err --ip <Worker IP>   # the dead worker's own output\n"
      "dmesg -T | grep -iE 'killed process|out of memory'   # on that node: the OOM killer\n"
      "# then lower memory per worker (fewer concurrent tasks/actors per node) or give the node more RAM",
      how=r"^strings$",
      examples=["(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
                "troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 0c62 "
                "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
                "code 2. End of file."]),
    R(RAY, r"python/ray/_private/worker\.py$", r"Unhandled error", "process_died", "ray.unhandled_error",
      "A Ray task or actor method raised and nobody retrieved its result: Ray prints the remote exception as an "
      "'Unhandled error' when the object is freed. The remote traceback that follows is the failure.",
      "Read the remote traceback after the line; fetch results with ray.get() so errors surface where they happen.",
      pattern=r"Unhandled error \(suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'\):\s*(?P<task>.*)",
      examples=["(Runner pid=104) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
                "ray::WorkerDict.update_actor() (pid=118847, ip=10.1.2.3)"]),
    R(RAY, r"python/ray/train/", r"fail|Fail|died|error|Error", "process_died", "ray.train",
      "Ray Train reports that a training worker (a rank) failed; the worker's own error follows or is in its log.",
      "Read the failing worker's traceback (RayTaskError(...) shows it); `ray logs` for that worker.",
      how=r"^(raise|log:error)", max=15),

    # ================================================================ Python's standard library
    R(PY, r"Lib/multiprocessing/reduction\.py$", r"items of ancdata", "too_many_files", "cpython.mp.ancdata",
      "A DataLoader worker passed a tensor to the main process as a file descriptor and the receive failed: the "
      "process hit its open-file limit (`ulimit -n`) under the file_descriptor sharing strategy.",
      "ulimit -n 65536 before launching, or torch.multiprocessing.set_sharing_strategy('file_system').",
      pattern=r"received (?P<n>\d+) items of ancdata"),
    R(PY, r"Lib/multiprocessing/spawn\.py$", r"bootstrapping phase", "bootstrapping", "cpython.mp.bootstrapping",
      pattern=r"An attempt has been made to start a new process before(?:\s+the)?\s+current process has finished its "
              r"bootstrapping phase"),
    R(PY, r"Lib/pickle\.py$", r"Can't pickle", "unpicklable", "cpython.pickle", how=EXC),
    R(PY, r"Lib/multiprocessing/resource_tracker\.py$", r"leaked", "benign_warning", "cpython.mp.leaked",
      "multiprocessing's resource tracker cleaned up semaphores or shared memory that worker processes left behind "
      "when they were killed or exited early. A consequence of an earlier death (or a harmless note at exit), not a "
      "cause.", "Nothing for this line; if the job failed, look for the process that died first.",
      pattern=r"resource_tracker: There appear to be (?P<n>\d+) leaked (?P<what>[\w ]+?) objects to clean up at shutdown",
      examples=["/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear "
                "to be 6 leaked semaphore objects to clean up at shutdown"]),

    # ================================================================ Linux kernel
    R(K, r"mm/oom_kill\.c$", r"Killed process|Kill process", "oom_killer", "linux.oom_kill",
      "The kernel's OOM killer chose this process and killed it with SIGKILL because the node (or the memory cgroup) "
      "ran out of memory. The killed process prints nothing; its parent sees exit -9.",
      "Find which process (the name in parentheses: a rank, a DataLoader worker) and lower its memory: fewer workers, "
      "torch.load(..., mmap=True), less CPU offload; or more RAM / a higher cgroup limit.",
      pattern=r"(?:(?P<scope>Out of memory|Memory cgroup out of memory)(?: \([^)]*\))?: )?Kill(?:ed)? process (?P<pid>\d+) "
              r"\((?P<comm>[^)]*)\)",
      examples=["[12345.678901] Out of memory: Killed process 48213 (python) total-vm:98765432kB, anon-rss:65432100kB, "
                "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:130000kB oom_score_adj:0",
                "Memory cgroup out of memory: Killed process 4242 (pt_main_thread) total-vm:30000000kB, anon-rss:2000000kB, "
                "file-rss:0kB, shmem-rss:0kB"]),
    R(K, r"mm/oom_kill\.c$", r"invoked oom-killer", "oom_killer", "linux.oom_invoked",
      "A process's allocation made the kernel run its OOM killer (the report that follows names the victim).",
      "Read the 'Killed process' line that follows it; lower memory per rank or raise the limit.",
      pattern=r"(?P<comm>\S+) invoked oom-killer: gfp_mask=",
      examples=["[ 9123.456] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0"]),
    R(K, r"mm/oom_kill\.c$", r"oom_reaper|no killable processes|panic_on_oom", "oom_killer", "linux.oom_other",
      "The kernel's OOM handling: the reaper freeing a killed process's memory, or nothing left to kill.",
      "As for any OOM kill: lower memory per rank or raise the limit."),

    # ================================================================ the NVIDIA kernel driver (dmesg)
    R(NV, r"osapi\.c$|osinit\.c$", r"fallen off the bus", "cuda_fault", "nvidia.driver.fallen_off_bus",
      "The GPU stopped answering on the PCIe bus (the driver's Xid 79): a hardware, power, thermal or PCIe-link "
      "failure. Every process on it fails; its peers then lose it (NCCL remote errors, watchdog timeouts).",
      "Drain the node; `nvidia-smi` (the GPU is missing or ERR!), reset it (`nvidia-smi -r`) or reboot; if it "
      "recurs, check power, cooling and the riser, and have the GPU replaced.",
      pattern=r"(?:GPU has )?fallen off the bus(?: and is not responding to commands)?",
      examples=["               NVRM: fallen off the bus and is not responding to commands.",
                "[ 512.77] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."]),
    R(NV, r"kernel_rc\.c$", r"^NVRM: Xid", "cuda_fault", "nvidia.driver.xid",
      "The NVIDIA driver reported an Xid error on a GPU; the number says what: 79 fell off the bus, 48/63/64/92/94/95 "
      "memory (ECC) errors, 74 NVLink, 119/120 the GPU's firmware (GSP), 13/31/43 a fault in a running program "
      "(an illegal access: often the program itself), 45 a process's channels cleaned up after another failure.",
      "Read the Xid number (NVIDIA's Xid catalogue); for hardware Xids (48, 63, 64, 74, 79, 92, 94, 95, 119, 120) "
      "drain the node and run `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`; for 13/31/43 debug the program with "
      "CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer.",
      pattern=r"NVRM: Xid \(PCI:(?P<dev>[^)]*)\): (?P<xid>\d+), ", max=1,
      examples=["[Tue Mar  4 10:46:27 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, name=python, GPU has fallen off "
                "the bus.", "NVRM: Xid (PCI:0000:01:00): 48, pid=7194, name=pt_main_thread, An uncorrectable double bit "
                "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."]),

    # ================================================================ libuv (torch RPC's transport, TensorPipe)
    R(UV, r"include/uv\.h$", r"^too many open files$|^file table overflow$", "too_many_files", "libuv.errno",
      "A process hit its open-file limit (EMFILE: `ulimit -n`; ENFILE: the system's table): every connection, shared "
      "memory segment and DataLoader tensor passed between processes holds a descriptor. TensorPipe (torch RPC) and "
      "libuv print the error in lower case.",
      "ulimit -n 65536 (or higher) before launching; fewer connections per process (RPC workers, DataLoader workers); "
      "torch.multiprocessing.set_sharing_strategy('file_system') for DataLoader tensors.",
      pattern=r"(?:rv < 0: |\b)(?:too many open files|file table overflow)\b",
      examples=['  what():  In connectFromLoop at tensorpipe/transport/uv/uv.h:297 "rv < 0: too many open files"']),
    # ================================================================ NCCL: the memory manager (round 9)
    # src/mem_manager.cc @5067397: the communicator's memory manager behind ncclCommSuspend / ncclCommResume (RL
    # frameworks free NCCL's GPU buffers while they generate, then restore them) and its offload of those buffers
    R(N, r"src/mem_manager\.cc$", r"not supported|disabled|Already suspended|Not in suspended state|"
      r"manager not initialized|not found in tracked entries|imported buffer, not a local one|already exported",
      "api_misuse", "nccl.mem_manager.usage",
      "NCCL refused a memory suspend/resume request (ncclCommSuspend / ncclCommResume, or the tracking of a buffer for "
      "them) because its memory manager is off (NCCL_DISABLE_MEM_MANAGER=1, or a communicator made with "
      "split_share), or the communicator is not in the state the call needs (suspended twice, resumed without a "
      "suspend). The call returns ncclInvalidUsage or ncclInternalError and the framework's suspend/offload step fails.",
      "Suspend and resume each communicator once, in order, and only those NCCL made with its memory manager on: not "
      "split_share communicators (ncclCommSplit with splitShare), not with NCCL_DISABLE_MEM_MANAGER=1; or turn off "
      "the framework's NCCL offload (e.g. its 'offload NCCL memory' option) for this NCCL version.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/mem_manager\.cc$", r"^(?:MemManager: )?(?:Failed|Barrier failed|Final barrier|AllGather counts|"
      r"cuMem|ncclCuMemMapAndSetAccess|FABRIC handle|Send to rank|Recv from rank|Could not find matching|"
      r"Cannot re-import|Unknown handle type)",
      "nccl_internal_error", "nccl.mem_manager.failed",
      "NCCL's memory manager failed while it suspended or resumed a communicator's GPU buffers: a host or GPU "
      "allocation for the CPU backup, a cuMem export/import of a buffer's handle, or the exchange of those handles "
      "with the other ranks (a barrier, an allgather, a send/recv to a peer). A peer that failed first makes the "
      "exchange fail on every other rank; an allocation failure is memory.",
      "Look for the first rank's WARN: a failed allocation is host or GPU memory (free some, or offload less); a "
      "failed exchange with rank N is that rank's failure first. NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC shows "
      "the suspend/resume steps.",
      how=WARN, prefix=NCCL_PREFIX),
    # src/transport/shm.cc @5067397: the SHM transport's checks
    R(N, r"src/transport/shm\.cc$", r"^Ignoring SHM locality", "benign_warning", "nccl.shm.locality_ignored",
      "NCCL_SHM_LOCALITY was set to a value other than 1 (the sender's memory) or 2 (the receiver's, the default): "
      "NCCL ignores it and uses the default. The job goes on.",
      "Unset NCCL_SHM_LOCALITY, or set it to 1 or 2.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/transport/shm\.cc$", r"^Invalid argument", "nccl_internal_error", "nccl.shm.invalid_argument",
      "The SHM transport's import of a peer's shared-memory (cuMem) descriptor got a null argument: the peer's "
      "descriptor did not arrive whole (a peer that failed during set-up) or a bug in NCCL.",
      "NCCL_DEBUG=INFO on every rank: a peer that failed first is the cause; otherwise NCCL_SHM_DISABLE=1 as a "
      "workaround and report it to NCCL with the log.", how=WARN, prefix=NCCL_PREFIX),
    # ================================================================ torch elastic / c10d / accelerate (round 9)
    # the launcher's own teardown and its configuration checks (installed torch 2.13.0, the catalogue's torch commit)
    R(T, r"elastic/multiprocessing/api\.py$", r"^Closing process .* via signal|^Unable to shutdown process|"
      r"did not exit after .* within", "launcher_teardown", "torch.elastic.teardown",
      "torchrun's agent stops the remaining workers after one failed: it sends SIGTERM ('Closing process N via "
      "signal SIGTERM'), waits, then SIGKILL to those still alive ('Unable to shutdown process N via SIGTERM, forcefully "
      "exiting via SIGKILL'); a worker that still does not exit is abandoned (a process in uninterruptible kernel sleep, "
      "D state: I/O on a network filesystem or a stuck GPU driver call). The first worker's own failure is the cause.",
      "Find the first worker's failure above these lines; for an abandoned worker: cat /proc/<pid>/stack and dmesg -T "
      "on that node (hung task, NFS or Xid messages)."),
    R(T, r"elastic/agent/server/local_elastic_agent\.py$", r"stuck in uninterruptible sleep", "process_died",
      "torch.elastic.worker_d_state",
      "torchrun's agent found a worker stuck in uninterruptible kernel sleep (D state) for longer than its limit: the "
      "process waits inside the kernel (a network filesystem, a GPU driver call, a dying disk) and cannot even be "
      "killed; the agent marks the worker group UNHEALTHY and will not restart it.",
      "On that node: cat /proc/<pid>/stack; dmesg -T | grep -iE 'hung_task|blocked for more than|nfs|xid'; the "
      "filesystem or GPU the stack names is the fault (drain the node if it is the GPU)."),
    R(T, r"elastic/agent/server/local_elastic_agent\.py$", r"entered uninterruptible sleep", "benign_warning",
      "torch.elastic.worker_d_state_warning",
      "torchrun's agent saw a worker enter uninterruptible kernel sleep (D state); it fails the group only if the "
      "worker stays there past the limit. Short D states (a slow read) are harmless.",
      "Nothing unless a 'stuck in uninterruptible sleep' line follows; then see that line."),
    R(T, r"elastic/multiprocessing/api\.py$", r"Failed to register signal handlers since", "benign_warning",
      "torch.elastic.signal_handlers_thread",
      "torchrun's agent runs on a thread other than the main one (a launcher embedded in another program), so it "
      "cannot install its signal handlers: if the parent is killed, the workers may be left running.",
      "Launch torchrun (or elastic_launch) from the main thread; otherwise kill the workers yourself on a failure."),
    R(T, r"distributed/run\.py$|elastic/rendezvous/(?:dynamic_rendezvous|c10d_rendezvous_backend)\.py$",
      r"must be > 0|must be >= 0|not in \"MIN:MAX\" format|ranks set cannot be empty|local_ranks_filter must be|"
      r"--no-python' flag and the '--module'|run id must be|minimum number of nodes|maximum number of nodes|"
      r"must be positive|read timeout must be|Invalid store type",
      "launch_misconfigured", "torch.elastic.bad_launch_option",
      "torchrun (or its rendezvous) rejected one of its own options before starting any worker: --nnodes MIN:MAX, "
      "--max-restarts, --local-ranks-filter, --rdzv-id, --rdzv-conf (timeouts, keep-alive) or the store type. No "
      "training process ran.",
      "Fix the option the message names: --nnodes=2 or --nnodes=1:4 (MIN <= MAX, both > 0), --max-restarts >= 0, "
      "a non-empty --rdzv-id, positive timeouts in --rdzv-conf."),
    R(T, r"elastic/rendezvous/c10d_rendezvous_backend\.py$", r"file creation for C10d store has failed",
      "rendezvous_failed", "torch.elastic.c10d_file_store",
      "torchrun's c10d rendezvous with a file store (--rdzv-endpoint a path) could not create the file: the path is "
      "not writable or not on a filesystem every node shares.",
      "Point --rdzv-endpoint at a writable path on a shared filesystem, or use a host:port endpoint."),
    # the TCPStore's libuv server (libtorch_cpu.so strings attributed to TCPStoreLibUvBackend.cpp)
    R(T, r"TCPStoreLibUvBackend", r"TCPStoreMasterDaemon::run\(\) failed", "rendezvous_failed",
      "torch.c10d.libuv_store_daemon_failed",
      "The TCPStore's server thread (the libuv backend, on rank 0 or torchrun's agent) stopped on an exception: every "
      "rank then loses the store, and its next store call fails with a connection reset or a timeout.",
      "Read the exception it names; USE_LIBUV=0 (the older TCPStore backend) to tell a libuv fault from the job's "
      "own.", source_path="torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp"),
    R(T, r"TCPStoreLibUvBackend", r"Write setup to client failed|Write to client failed|Failed to setup read callback|"
      r"Failed to accept client|remote address of the client socket cannot be retrieved", "nccl_aborted",
      "torch.c10d.libuv_store_client_lost",
      "The TCPStore's server lost a client: the connection to a rank (or to a node's agent) broke while the store "
      "answered it. The client process exited or its node went away first; this is its echo on the store's host.",
      "Find the rank or node that stopped first (its own log, dmesg on its node); the store itself is fine.",
      source_path="torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp"),
    R(T, r"TCPStoreLibUvBackend", r"Failed to bind to ipv6 address, trying ipv4", "benign_warning",
      "torch.c10d.libuv_store_ipv4_fallback",
      "The TCPStore's libuv server could not listen on IPv6 (a host with IPv6 off) and listens on IPv4 instead. "
      "Harmless.", "Nothing to do.", source_path="torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp"),
    # accelerate's launch checks (installed accelerate 1.16.0)
    R(AC, r"accelerate/utils/launch\.py$|accelerate/commands/launch\.py$",
      r"need to specify the main process (?:IP|port)|mpirun or mpiexec were not found|--module and --no_python|"
      r"only use one of `--cpu`|at least 2 processes to use `--multi_gpu`|should be a python script|"
      r"should have a function named|DeepSpeed is not installed",
      "launch_misconfigured", "accelerate.launch.bad_option",
      "accelerate launch rejected how it was started before any process ran: a multi-machine launch without "
      "--main_process_ip/--main_process_port, --multi_gpu with one process, two of --cpu/--multi_gpu/--use_deepspeed/"
      "--use_fsdp, a missing DeepSpeed or MPI, or a script that is not a python file.",
      "Fix the flag the message names (accelerate config writes a consistent set): on every machine the same "
      "--main_process_ip/--main_process_port, --num_processes >= 2 with --multi_gpu, pip install deepspeed for "
      "--use_deepspeed."),
    R(AC, r"accelerate/state\.py$", r"must be initialized before calling this function|properly initialize your "
      r"accelerator|object has no attribute|assigned backend .* is not available", "api_misuse",
      "accelerate.state.not_initialized",
      "An accelerate helper ran before the Accelerator (or PartialState) existed in this process, or after its state "
      "was reset, or the requested backend (nccl, gloo) is not available here: the process state accelerate needs "
      "(rank, device, backend) was never set up.",
      "Create accelerator = Accelerator() (or PartialState()) first thing in the launched script, in every process, "
      "before any accelerate.utils call; pick a backend this machine has."),
    # ================================================================ torch c10d C++ (round 9, libtorch_cpu.so strings)
    R(T, r"socket\.cpp$", r"could not be initialized on any address for port|Failed to listen on socket initialized from fd|"
      r"listen fd .* is bound to port .* expected to be bound to port", "port_in_use", "torch.c10d.socket.server_listen_failed",
      "The TCPStore's server (rank 0, or torchrun's agent) could not listen on MASTER_PORT on any local address: the port "
      "is taken (another job, a previous run still exiting) or not allowed, or a listen socket handed over by the launcher "
      "is bound to another port.",
      "Pick a free port (--master-port / MASTER_PORT; `ss -ltnp | grep PORT` shows who holds it), or wait for the previous "
      "run's processes to exit.", source_path="torch/csrc/distributed/c10d/socket.cpp"),
    R(T, r"socket\.cpp$", r"network addresses cannot be retrieved \(gai error", "address_unresolved",
      "torch.c10d.socket.local_addresses_gai", "The TCPStore server could not list this host's own addresses "
      "(getaddrinfo failed on its own name): the hostname does not resolve on this node.",
      "Make the node's own hostname resolve (`getent hosts $(hostname)`): fix /etc/hosts or DNS; or set MASTER_ADDR to "
      "an IP address.", source_path="torch/csrc/distributed/c10d/socket.cpp"),
    R(T, r"socket\.cpp$", r"waitForInput: poll for socket .* returned 0, likely a timeout", "store_timeout",
      "torch.c10d.socket.wait_for_input_timeout", "A TCPStore socket waited for data and the poll timed out: the store "
      "(or the rank on the other end) did not answer in time.",
      "Check the store's host is alive and reachable; raise the timeout (init_process_group(timeout=...)) only if the "
      "peers are slow to arrive.", source_path="torch/csrc/distributed/c10d/socket.cpp"),
    R(T, r"socket\.cpp$", r"server socket on .* has failed to accept a connection", "store_refused",
      "torch.c10d.socket.accept_failed", "The TCPStore server failed to accept a client's connection (out of file "
      "descriptors, or the client gave up): ranks then fail to connect to the store.",
      "ulimit -n on the store's host (thousands of ranks each open a connection); check the clients' own errors.",
      source_path="torch/csrc/distributed/c10d/socket.cpp"),
    R(T, r"ProcessGroupGloo\.cpp$", r"^Cannot use ReduceOp\.", "api_misuse", "torch.c10d.gloo.reduce_op_unsupported",
      "The Gloo backend does not support this reduction (PREMUL_SUM, or a bitwise op on a floating-point tensor).",
      "Use SUM (then divide) on Gloo, or the NCCL backend for GPU tensors.",
      source_path="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp"),
    R(T, r"TCPStoreBackend\.cpp$", r"TORCHELASTIC_USE_AGENT_STORE is enabled so ignoring", "benign_warning",
      "torch.c10d.store.agent_store_bind_ignored", "The worker's TCPStore could not bind its port, but under torchrun the "
      "agent already hosts the store (TORCHELASTIC_USE_AGENT_STORE=True): the worker uses that one. Harmless.",
      "Nothing to do.", source_path="torch/csrc/distributed/c10d/TCPStoreBackend.cpp"),
    R(T, r"TCPStoreBackend\.cpp$", r"^recvValueWithTimeout failed on", "store_timeout", "torch.c10d.store.recv_timeout",
      "A TCPStore read waited past its timeout: the store's host stopped answering (dead, or overloaded), or the key "
      "another rank should have set never came.",
      "Find the rank or node that stopped first; the store's host (rank 0 or torchrun's agent) must be alive.",
      source_path="torch/csrc/distributed/c10d/TCPStoreBackend.cpp"),
    # ================================================================ NCCL (round 9, second pass) @5067397
    R(N, r"src/os/linux_ipcsocket\.cc$|src/proxy\.cc$", r"^UDS: |^ncclIpcSocketGetFd: |\[Proxy Service UDS\] Get listenSock",
      "nccl_system_error", "nccl.uds",
      "NCCL's Unix-domain-socket exchange between the ranks of one node failed (it passes cuMem / shared-memory file "
      "descriptors and proxy requests over abstract sockets named after the job): a peer process on the node exited "
      "first, the ranks do not share a network namespace (separate containers or pods per rank), or the socket name was "
      "too long.",
      "Run the node's ranks in one container / pod (or share its network and IPC namespaces: --ipc=host --network=host); "
      "look for the local rank that exited first; NCCL_CUMEM_ENABLE=0 avoids the descriptor exchange as a workaround.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"Multiple Ranks are using the same GPU", "duplicate_gpu", "nccl.init.multi_rank_same_gpu",
      "NCCL found several ranks of the communicator on one GPU (or one MIG partition): two processes picked the same "
      "device (no torch.cuda.set_device(local_rank), or CUDA_VISIBLE_DEVICES narrowed to one GPU for all).",
      "torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group, one process per GPU; "
      "NCCL_MULTI_RANK_GPU_ENABLE=1 only if sharing one GPU is intended.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"Detected mixed local (?:Coll)?Net device counts across ranks", "config_mismatch",
      "nccl.init.mixed_net_device_counts",
      "The nodes of the job see different numbers of network devices (HCAs/NICs) for NCCL: one node has a NIC down, "
      "missing from the container, or filtered differently by NCCL_IB_HCA / NCCL_SOCKET_IFNAME.",
      "Make every node expose the same NICs to NCCL (ibstat / ibv_devinfo on each node, the same NCCL_IB_HCA); "
      "NCCL_IGNORE_NET_MISMATCH=1 to run anyway.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"^Invalid config|^Invalig config|has already been destroyed|^ncclCommGrow: |"
      r"^Split shares resources, but parent", "api_misuse", "nccl.init.bad_config",
      "NCCL rejected a communicator's configuration or a call on it: an ncclConfig_t attribute out of range, a call on "
      "a communicator already destroyed, a shared-resource split across different networks, or ncclCommGrow's "
      "arguments. The framework that creates the communicator passed it (torch's ProcessGroupNCCL options, vLLM, "
      "NeMo).", "Check the NCCL options the framework sets (pg_options / NCCL config env vars) against this NCCL "
      "version's documented ranges; do not use a process group after destroy_process_group().",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/init\.cc$", r"is being ignored because it is not a power of 2|Unsetting POLICY_EFFICIENCY|"
      r"falling back to graphStreamOrdering", "benign_warning", "nccl.init.setting_ignored",
      "NCCL ignored or adjusted a setting it cannot honour (a FIFO size that is not a power of two, conflicting CTA "
      "policies, a graph stream ordering) and goes on with its default.", "Correct or unset the setting named.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/graph/search\.cc$", r".", "nccl_internal_error", "nccl.graph.search",
      "NCCL's topology search could not place a ring or tree over the GPUs and NICs it detected (no path between two "
      "devices, a rank or NIC missing from a topology XML): usually a NCCL_TOPO_FILE / NCCL_GRAPH_FILE that does not "
      "match this machine, or a device hidden from the container.",
      "Unset NCCL_TOPO_FILE / NCCL_GRAPH_FILE (or regenerate them on this machine with NCCL_TOPO_DUMP_FILE); check "
      "every GPU and NIC is visible in the container; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=GRAPH shows the search.",
      how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/proxy\.cc$", r"has no transport for|out of bounds|Too many connections|Unknown command|opId|"
      r"nonexistent async|null operation|Could not find pool|List loop|Inactive op|Proxy append|incomplete proxy op",
      "nccl_internal_error", "nccl.proxy.internal",
      "NCCL's proxy thread found its own bookkeeping inconsistent (an operation or response it does not know, a peer "
      "without a transport, too many connections): most often after another rank or the network failed first and the "
      "proxy saw a half-finished exchange; rarely an NCCL bug.",
      "Look for the first failure on any rank (a peer that died, a network error); if none, report it to NCCL with "
      "NCCL_DEBUG=INFO logs of all ranks.", how=WARN, prefix=NCCL_PREFIX),
    R(N, r"src/register/register\.cc$", r".", "nccl_internal_error", "nccl.register.deregister_failed",
      "NCCL could not deregister a user buffer (NET, NVLS, CollNet or IPC registration) it had registered for a peer: "
      "usually at teardown after the peer or its proxy was already gone.",
      "The first failure on another rank is the cause; if the job otherwise ended well, it is teardown noise.",
      how=WARN, prefix=NCCL_PREFIX),
    # ================================================================ torch elastic / accelerate (round 9, third pass)
    R(T, r"elastic/multiprocessing/api\.py$", r"already initialized\. Most likely the start method got called twice|"
      r"local rank mapping mismatch|is a file$", "api_misuse", "torch.elastic.pcontext_misuse",
      "torch elastic's process context was used in a way it refuses: started twice, a local-rank mapping that does not "
      "match the processes, no environment per worker, or a log directory that is a file. This comes from a launcher "
      "built on torch.distributed.elastic (not plain torchrun).",
      "Start the PContext once per worker group; give one env dict per local rank; point --log-dir at a directory."),
    R(T, r"elastic/agent/server/local_elastic_agent\.py$", r"worker pids do not match process_context pids",
      "api_misuse", "torch.elastic.worker_pid_mismatch",
      "torchrun's agent found the worker pids it recorded different from its process context's: a worker was "
      "restarted or replaced behind the agent's back.",
      "Let the agent own its workers (no external restarts of ranks); rerun the job."),
    R(AC, r"accelerate/state\.py$", r"requires `transformer_engine` or `torchao`|DeepSpeed is not available|"
      r"Using `cp_size>1` requires FSDP2|`cp_size > 1` specified", "api_misuse",
      "accelerate.state.unsupported_setting",
      "accelerate's state refused a setting this machine or configuration cannot honour: FP8 without Transformer Engine "
      "/ torchao, DeepSpeed not installed, context parallelism without FSDP2.",
      "Install what the message names (pip install deepspeed / transformer_engine / torchao), pick bf16 on GPUs without "
      "FP8, or enable FSDP2 (fsdp_version=2) for cp_size > 1."),
    # ================================================================ accelerate's own refusals (round 22, triage25)
    # Every raise in state.py, accelerator.py, utils/launch.py, commands/launch.py and utils/dataclasses.py at
    # 16cb6eb that the rules above left out (the api_misuse rule stops at 45): each family with the class of what it
    # refuses. Order matters (the first rule that matches keeps the message): DeepSpeed-config and parallel-size
    # disagreements, then devices, mixed precision, the launcher's values, FSDP's settings, the rest of the config.
    R(AC, r"src/accelerate/utils/dataclasses\.py$", r"DeepSpeed config|deepspeed_config_file|ZeRO optimization config|"
      r"not found in kwargs", "config_mismatch", "accelerate.deepspeed_config",
      "accelerate's DeepSpeed plugin found the DeepSpeed config file and accelerate's own settings in disagreement, or "
      "a key it needs missing: a value in the JSON that differs from the launch's (--mixed_precision, "
      "gradient_accumulation_steps, batch sizes), an \"auto\" it cannot fill, accelerate config variables set beside "
      "deepspeed_config_file, no zero_optimization section.",
      "Set the clashing keys to \"auto\" in the DeepSpeed config (train_micro_batch_size_per_gpu, "
      "gradient_accumulation_steps, bf16/fp16 \"enabled\"), or make them equal to accelerate's; with "
      "deepspeed_config_file, put the settings in the JSON and drop them from the accelerate config.", how=EXC),
    R(AC, r"src/accelerate/accelerator\.py$", r"tp_size in the plugin .* should be same as model's tp size",
      "config_mismatch", "accelerate.world_size",
      "The tensor-parallel size accelerate's plugin was given differs from the size the model was sharded with: the "
      "parallel sizes do not fit the world the job runs in.",
      "Give the plugin (TorchTensorParallelPlugin / ParallelismConfig tp_size) the size the model was loaded with "
      "(from_pretrained(..., tp_plan='auto') under the same number of processes); tp_size must divide the world size.",
      how=EXC),
    R(AC, r"src/accelerate/(?:state|accelerator|utils/launch|commands/launch|utils/dataclasses)\.py$",
      r"no available devices found|a supported device|MPS device", "cuda_setup", "accelerate.device",
      "accelerate found no device in this process that can do what its configuration asks: no accelerator visible "
      "(no CUDA, XPU, MLU, NPU, MUSA or HPU), or bf16 asked of a device (or a torch build) that has none.",
      "Check the devices this process sees (nvidia-smi; echo $CUDA_VISIBLE_DEVICES; python -c 'import torch; "
      "print(torch.cuda.is_available())'), or run on CPU (accelerate launch --cpu).", how=EXC),
    R(AC, r"src/accelerate/(?:state|accelerator|utils/launch|commands/launch|utils/dataclasses)\.py$",
      r"mixed precision|mixed_precision|\bfp8\b|`fp8`|FP8|\bbf16\b|MS-AMP|TransformerEngine|transformer_engine|"
      r"TorchAO|opt_level|fp8_format|amax_compute_algo", "api_misuse", "accelerate.precision",
      "accelerate refused the mixed-precision setting it was given: a mode it does not know, bf16 on a device or torch "
      "that has none, FP8 without Transformer Engine / MS-AMP / torchao installed, or an FP8 recipe value outside the "
      "allowed set. A setting of the job, refused before training, not a GPU fault.",
      "Use one of accelerate's modes (--mixed_precision no|fp16|bf16|fp8); bf16 needs an Ampere or newer GPU (or a CPU "
      "with bf16) and a recent torch; for fp8 pip install transformer_engine (or torchao / msamp) first, else bf16.",
      how=EXC),
    R(AC, r"src/accelerate/(?:utils/launch|commands/launch)\.py$", r"Unknown dynamo backend|SageMaker",
      "launch_misconfigured", "accelerate.launch.bad_value",
      "accelerate launch refused a value of its own arguments before any process ran: a dynamo backend it does not "
      "know, a SageMaker launch of something that is not a python script or with store_true flags.",
      "Fix the argument the message names (accelerate config writes a valid set): --dynamo_backend one of the listed "
      "names (or no); under SageMaker a training script file and explicitly typed arguments.", how=EXC),
    R(AC, r"src/accelerate/(?:accelerator|utils/dataclasses)\.py$",
      r"FSDP|fsdp|reshard_after_forward|forward_prefetch|cpu_offload|auto wrap policy|transformer layer class|"
      r"min_num_params|mixed_precision_policy|LOCAL_STATE_DICT|DTensor|tensor parallel|Context parallelism|"
      r"cp_comm_strategy|sp_seq_length|sp_attn_implementation|TP requires", "api_misuse", "accelerate.sharding",
      "accelerate refused its sharding or parallelism settings (FSDP1/FSDP2, tensor, context or sequence parallelism): "
      "a value outside what that version supports, a layer class to wrap that the model does not have, a model with "
      "DTensor parameters handed to DDP, or a torch/transformers too old for the feature.",
      "Fix the setting the message names in the accelerate config (fsdp_config: fsdp_version, "
      "fsdp_transformer_layer_cls_to_wrap = the model's decoder layer class, e.g. LlamaDecoderLayer; "
      "fsdp_state_dict_type SHARDED_STATE_DICT or FULL_STATE_DICT), or upgrade torch/transformers to the version it names.",
      how=EXC),
    R(AC, r"src/accelerate/(?:state|accelerator|utils/launch|commands/launch|utils/dataclasses)\.py$", r".",
      "api_misuse", "accelerate.config",
      "accelerate refused a value of its configuration or of how it was called (a kwargs handler given twice, "
      "DummyOptim without an optimizer in the DeepSpeed config, a Megatron-LM model or optimizer it does not support, "
      "quantisation settings of the wrong type, a checkpoint folder that exists or is missing); the message says what "
      "it expected.",
      "Follow the message; `accelerate env` shows the configuration in force.", how=EXC),
]
