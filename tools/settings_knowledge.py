"""What tools/mine_settings.py cannot read mechanically, each item with the file or page that says it.

KNOWLEDGE overlays mined entries (by id): the value grammar of a reader that lives in compiled code
(each such grammar quotes the message the library itself prints, found in the built library's strings
or the source), what a setting costs when it is left on (`cost`), the settings it fights with
(`conflicts`) and deprecations that are not written as an alias list. `verify` names a file and strings
that must appear in it; tests/test_catalogues.py and the mining script check them where the file is
at hand (the installed torch wheel).
"""
from __future__ import annotations

TORCH = "pytorch/pytorch"

PYTHON_SCANS = {
    "torch": ["torch/distributed", "torch/utils/data", "torch/cuda", "torch/multiprocessing", "torch/nn/parallel"],
    "transformers": ["transformers"],
    "accelerate": ["accelerate"],
}

# The CUDA runtime's variables: NVIDIA documents them (the runtime's source is not public).
CUDA_DOC = {
    "repo": "docs.nvidia.com/cuda",
    "path": "cuda-programming-guide/05-appendices/environment-variables.html",
    "commit": "CUDA 12.9/13.x web page, unversioned",
    "how": "NVIDIA's CUDA programming guide, appendix 'CUDA Environment Variables' (the driver and runtime that "
           "read them are closed source)",
    "variables": {
        "CUDA_VISIBLE_DEVICES": dict(type="list", parser="cuda_visible_devices", class_="launcher",
                                     meaning="Which GPUs CUDA enumerates, in this order: indices, GPU UUIDs (a unique "
                                             "prefix is enough) or MIG UUIDs; enumeration stops at the first invalid "
                                             "entry.", example_value="0,1"),
        "CUDA_DEVICE_ORDER": dict(type="enum", parser="exact", values=["FASTEST_FIRST", "PCI_BUS_ID"],
                                  default="FASTEST_FIRST", meaning="FASTEST_FIRST numbers the fastest device 0 "
                                  "(an undocumented heuristic); PCI_BUS_ID follows the bus, like nvidia-smi."),
        "CUDA_MANAGED_FORCE_DEVICE_ALLOC": dict(type="bool", parser="cuda_01", default="0",
                                                meaning="1 forces managed memory onto the device."),
        "CUDA_CACHE_DISABLE": dict(type="bool", parser="cuda_01", default="0",
                                   meaning="1 disables the JIT cache: every start recompiles PTX for this GPU.",
                                   cost={"values": ["1"], "info_at": 1,
                                         "what": "the PTX JIT cache is off, so every rank recompiles kernels at start"}),
        "CUDA_CACHE_PATH": dict(type="path", parser="string", meaning="Where the JIT cache lives (default ~/.nv/ComputeCache)."),
        "CUDA_CACHE_MAXSIZE": dict(type="int", parser="cuda_int", meaning="JIT cache size in bytes (max 4 GiB)."),
        "CUDA_FORCE_PTX_JIT": dict(type="bool", parser="cuda_01", default="0",
                                   meaning="1 ignores embedded binaries and JIT-compiles the PTX."),
        "CUDA_DISABLE_PTX_JIT": dict(type="bool", parser="cuda_01", default="0", meaning="1 disables PTX JIT."),
        "CUDA_FORCE_JIT": dict(type="bool", parser="cuda_01", default="0", meaning="1 forces JIT compilation."),
        "CUDA_DISABLE_JIT": dict(type="bool", parser="cuda_01", default="0", meaning="1 disables JIT compilation."),
        "CUDA_LAUNCH_BLOCKING": dict(
            type="bool", parser="cuda_01", default="0", class_="debug",
            meaning="1 makes every kernel launch synchronous; the guide: 'provided for debugging purposes only and "
                    "should not be used as a way to make production software run reliably'.",
            cost={"values": ["1"], "warning_at": 1,
                  "what": "every CUDA kernel launch waits for the GPU to finish: a debugging setting that serialises "
                          "compute and NCCL's communication (NCCL also reads it, src/init.cc), so each step is slower "
                          "on every rank"}),
        "CUDA_DEVICE_MAX_CONNECTIONS": dict(type="int", parser="cuda_int", default="8",
                                            meaning="Hardware work queues (1-32) per device; Megatron-style overlap sets 1."),
        "CUDA_DEVICE_MAX_COPY_CONNECTIONS": dict(type="int", parser="cuda_int", meaning="Copy-engine work queues."),
        "CUDA_AUTO_BOOST": dict(type="bool", parser="cuda_01", meaning="GPU boost behaviour (when allowed)."),
        "CUDA_SCALE_LAUNCH_QUEUES": dict(type="string", parser="string", meaning="Scales the launch queues: 0.25x, 0.5x, 2x or 4x."),
        "CUDA_MODULE_LOADING": dict(type="enum", parser="exact", values=["DEFAULT", "LAZY", "EAGER"], default="LAZY",
                                    meaning="LAZY loads kernels on first use (default since CUDA 12.2); EAGER at init."),
        "CUDA_MODULE_DATA_LOADING": dict(type="enum", parser="exact", values=["DEFAULT", "LAZY", "EAGER"],
                                         meaning="Lazy or eager loading of module data."),
        "CUDA_ENABLE_MODULE_LAZY_LOADING": dict(type="bool", parser="cuda_01", meaning="An older spelling of lazy loading."),
        "CUDA_DEVICE_WAITS_ON_EXCEPTION": dict(type="bool", parser="cuda_01", class_="debug",
                                               meaning="1: on a device exception the process waits for a debugger.",
                                               cost={"values": ["1"], "warning_at": 1,
                                                     "what": "a device exception leaves the rank waiting for a debugger "
                                                             "instead of failing: the job hangs"}),
        "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": dict(type="bool", parser="cuda_01", class_="debug",
                                                  meaning="1 writes a GPU core dump on a device exception.",
                                                  cost={"values": ["1"], "info_at": 8,
                                                        "what": "a GPU exception writes a core dump of the whole device "
                                                                "memory, per rank"}),
        "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": dict(type="bool", parser="cuda_01", class_="debug",
                                                      meaning="1 also writes a CPU core dump."),
        "CUDA_ENABLE_LIGHTWEIGHT_COREDUMP": dict(type="bool", parser="cuda_01", class_="debug",
                                                 meaning="1 makes GPU core dumps lightweight."),
        "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": dict(type="bool", parser="cuda_01", class_="debug",
                                                    meaning="1 allows core dumps triggered through a pipe."),
        "CUDA_COREDUMP_FILE": dict(type="path", parser="string", class_="debug", meaning="Core dump file name."),
        "CUDA_COREDUMP_PIPE": dict(type="path", parser="string", class_="debug", meaning="Pipe for user-triggered dumps."),
        "CUDA_COREDUMP_SHOW_PROGRESS": dict(type="bool", parser="cuda_01", class_="debug", meaning="Progress of a dump."),
        "CUDA_COREDUMP_GENERATION_FLAGS": dict(type="string", parser="string", class_="debug", meaning="What a dump skips."),
        "CUDA_LOG_FILE": dict(type="path", parser="string", class_="debug", meaning="Where the driver writes its log."),
        "CUDA_MPS_PIPE_DIRECTORY": dict(type="path", parser="string", meaning="The MPS control daemon's pipe directory."),
        "CUDA_MPS_LOG_DIRECTORY": dict(type="path", parser="string", meaning="The MPS log directory."),
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": dict(type="int", parser="cuda_int", meaning="Share of SMs for an MPS client."),
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": dict(type="string", parser="string", meaning="Device memory limit per MPS client."),
        "CUDA_GRAPHS_USE_NODE_PRIORITY": dict(type="bool", parser="cuda_01", meaning="Graph launches honour node priorities."),
    },
}

TORCH_DOC_FACTS = {"sources": {
    "docs.nvidia.com/cuda": {"commit": "CUDA 12.9/13.x web page, unversioned", "how": CUDA_DOC["how"]},
}}

LIBTORCH = "torch/lib/libtorch_cpu.so (strings of the built library)"
LIBC10 = "torch/lib/libc10.so (strings of the built library)"
PGNCCL_HPP = "torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"

# id -> fields that overlay (or create, with `source`) the mined entry.
KNOWLEDGE = {
    # ---------------------------------------------------------------- torch.distributed
    "TORCH_DISTRIBUTED_DEBUG": dict(
        type="enum", parser="exact_upper_raises", values=["OFF", "INFO", "DETAIL"], default="OFF", family="torch",
        class_="debug",
        verify={"path": LIBTORCH, "strings": ["The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL."]},
        meaning="c10d's debug level. DETAIL wraps every process group in a ProcessGroupWrapper that checks, over Gloo, "
                "that all ranks call the same collective with the same shapes before each one "
                "(torch/distributed/distributed_c10d.py, get_debug_level() == DebugLevel.DETAIL), and makes "
                "ProcessGroupNCCL record timing and collective hashes.",
        cost={"values": ["DETAIL"], "info_at": 2, "warning_at": 16,
              "what": "each collective first runs a consistency check across all ranks over Gloo/TCP and records "
                      "timing events: a debugging setting whose cost grows with the number of ranks"}),
    "TORCH_CPP_LOG_LEVEL": dict(
        type="enum", parser="exact_upper_raises", values=["INFO", "WARNING", "ERROR", "FATAL", "0", "1", "2", "3"],
        default="WARNING", family="torch", class_="debug",
        verify={"path": LIBC10, "strings": ["`TORCH_CPP_LOG_LEVEL` environment variable cannot be parsed."]},
        meaning="The minimum level of torch's C++ log (c10); an unparsable value is reported by c10 at import.",
        source={"repo": TORCH, "path": "c10/util/Logging.cpp (message in torch/lib/libc10.so)",
                "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb", "symbol": "TORCH_CPP_LOG_LEVEL"}),
    "TORCH_NCCL_BLOCKING_WAIT": dict(
        type="bool", parser="c10d_bool", default="0", class_="debug",
        cost={"values": ["1", "y", "yes", "t", "true"], "warning_at": 2,
              "what": "wait() blocks the calling CPU thread on every collective and no watchdog thread runs "
                      "(ProcessGroupNCCL: 'TORCH_NCCL_BLOCKING_WAIT is enabled, NO watchdog thread is created'): "
                      "compute and communication no longer overlap"},
        conflicts=[{"with": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "self": ["1", "y", "yes", "t", "true"],
                    "other": ["1", "2", "3"],
                    "why": "with blocking wait there is no watchdog, so asynchronous error handling never runs "
                           "(ProcessGroupNCCL.cpp: 'TORCH_NCCL_BLOCKING_WAIT and TORCH_NCCL_ASYNC_ERROR_HANDLING "
                           "should not both be enabled. Only TORCH_NCCL_BLOCKING_WAIT is being used')"}]),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": dict(
        type="enum", parser="c10d_int_choice", values=["0", "1", "2", "3"], default="3",
        meaning="What the watchdog does on a NCCL error or timeout: 0 nothing, 1 abort communicators and tear the "
                "process down, 2 abort communicators only, 3 (default) tear down without aborting "
                "(ProcessGroupNCCL.hpp, enum ErrorHandlingMode).",
        cost={"values": ["0"], "warning_at": 2, "kind": "risk",
              "what": "no handling of NCCL errors and timeouts: a failed rank leaves the others hanging in the "
                      "collective instead of exiting"}),
    "TORCH_NCCL_DESYNC_DEBUG": dict(
        type="bool", parser="c10d_bool", default="0", class_="debug",
        cost={"values": ["1", "y", "yes", "t", "true"], "info_at": 2, "warning_at": 64,
              "what": "desync debugging records a start event per collective and, on a timeout, queries every "
                      "rank's progress through the store"},
        conflicts=[{"with": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "self": ["1", "y", "yes", "t", "true"], "other": ["0"],
                    "severity": "info",
                    "why": "desync debug needs asynchronous error handling; ProcessGroupNCCL turns it back on "
                           "('TORCH_NCCL_DESYNC_DEBUG and TORCH_NCCL_ASYNC_ERROR_HANDLING must both be enabled')"}]),
    "TORCH_NCCL_ENABLE_TIMING": dict(
        type="bool", parser="c10d_bool", default="0", class_="debug",
        cost={"values": ["1", "y", "yes", "t", "true"], "info_at": 2,
              "what": "a CUDA start event per collective; ProcessGroupNCCL.hpp notes it 'can increase chances of a "
                      "watchdog hang due to performing a CUDA event query'"}),
    "TORCH_NCCL_NAN_CHECK": dict(
        type="bool", parser="c10d_bool", default="0", class_="debug",
        cost={"values": ["1", "y", "yes", "t", "true"], "warning_at": 2,
              "what": "a NaN-check kernel reads every collective's input before it is sent"}),
    "TORCH_FR_CPP_STACK": dict(
        type="bool", parser="c10d_bool", default="0", class_="debug", aliases=["TORCH_NCCL_TRACE_CPP_STACK"],
        cost={"values": ["1", "y", "yes", "t", "true"], "warning_at": 2,
              "what": "the flight recorder unwinds and keeps a C++ stack for every collective"},
        source={"repo": TORCH, "path": "torch/csrc/distributed/c10d/FlightRecorder.hpp",
                "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "getCvarBool({\"TORCH_FR_CPP_STACK\", \"TORCH_NCCL_TRACE_CPP_STACK\"}, false)"},
        meaning="Whether the flight recorder captures C++ stacks (new name of TORCH_NCCL_TRACE_CPP_STACK).",
        family="torch"),
    "TORCH_FR_BUFFER_SIZE": dict(
        type="int", parser="c10d_int", default="2000", aliases=["TORCH_NCCL_TRACE_BUFFER_SIZE"], class_="debug",
        source={"repo": TORCH, "path": "torch/csrc/distributed/c10d/FlightRecorder.hpp",
                "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "getCvarInt({\"TORCH_FR_BUFFER_SIZE\", \"TORCH_NCCL_TRACE_BUFFER_SIZE\"}, 2000)"},
        meaning="Entries of the flight recorder's ring buffer (0 disables it and its dumps).", family="torch"),
    "TORCH_FR_DUMP_TEMP_FILE": dict(
        type="path", parser="string", aliases=["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"], class_="debug",
        source={"repo": TORCH, "path": "torch/csrc/distributed/c10d/FlightRecorder.hpp",
                "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "getCvarString({\"TORCH_FR_DUMP_TEMP_FILE\", \"TORCH_NCCL_DEBUG_INFO_TEMP_FILE\"}, ...)"},
        verify={"path": "torch/lib/libtorch_cpu.so", "strings": ["TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]},
        meaning="Path prefix of the flight recorder's per-rank dump files (new name of TORCH_NCCL_DEBUG_INFO_TEMP_FILE; "
                "torch warns 'TORCH_NCCL_DEBUG_INFO_TEMP_FILE is deprecated; use TORCH_FR_DUMP_TEMP_FILE instead').",
        family="torch"),
    "TORCH_NCCL_DUMP_ON_TIMEOUT": dict(
        type="bool", parser="c10d_bool",
        conflicts=[{"with": "TORCH_FR_BUFFER_SIZE", "self": ["1", "y", "yes", "t", "true"], "other": ["0"],
                    "why": "a dump on timeout needs the flight recorder: ProcessGroupNCCL.hpp says it 'must be set "
                           "together with ... TORCH_NCCL_TRACE_BUFFER_SIZE > 0', so nothing is dumped"},
                   {"with": "TORCH_NCCL_ENABLE_MONITORING", "self": ["1", "y", "yes", "t", "true"],
                    "other": ["0", "n", "no", "f", "false"],
                    "why": "ProcessGroupNCCL.hpp: TORCH_NCCL_DUMP_ON_TIMEOUT 'must be set together with "
                           "TORCH_NCCL_ENABLE_MONITORING=1'; with monitoring off the dump is not taken"}]),
    "TORCH_NCCL_ENABLE_MONITORING": dict(type="bool", parser="c10d_bool", default="1"),
    # the torch release that renamed each alias (torch 2.2: NCCL_* -> TORCH_NCCL_*, pytorch#114077; torch 2.8:
    # the flight recorder's TORCH_FR_*, first in torch 2.8.0's libraries, not in 2.7.1's: dated by
    # tools/mine_settings_history.py, which overwrites these from the releases); getCvar* warns when the old
    # name is read
    "TORCH_NCCL_BLOCKING_WAIT/alias_since": {"NCCL_BLOCKING_WAIT": "2.2"},
    "TORCH_NCCL_ASYNC_ERROR_HANDLING/alias_since": {"NCCL_ASYNC_ERROR_HANDLING": "2.2"},
    "TORCH_NCCL_DESYNC_DEBUG/alias_since": {"NCCL_DESYNC_DEBUG": "2.2"},
    "TORCH_NCCL_ENABLE_TIMING/alias_since": {"NCCL_ENABLE_TIMING": "2.2"},
    "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK/alias_since": {"NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "2.2"},
    "TORCH_FR_BUFFER_SIZE/alias_since": {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2.8"},
    "TORCH_FR_CPP_STACK/alias_since": {"TORCH_NCCL_TRACE_CPP_STACK": "2.8"},
    "TORCH_FR_DUMP_TEMP_FILE/alias_since": {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "2.8"},
    "OMP_NUM_THREADS": dict(
        type="list", parser="omp_num_threads", family="torch", class_="threads",
        meaning="OpenMP threads per process (a comma list for nested levels); read by the libgomp torch ships; "
                "torchrun sets 1 when it is unset. libgomp ignores a value it cannot parse, with a warning.",
        verify={"path": "torch/lib/libgomp.so.1 (strings of the built library)", "strings": ["OMP_NUM_THREADS"]},
        source={"repo": "gcc-mirror/gcc", "path": "libgomp/env.c (torch/lib/libgomp.so.1 in the torch wheel)",
                "commit": "the libgomp shipped in torch 2.13.0", "symbol": "parse_unsigned_long_list"},
        example_value="4"),

    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": dict(
        type="int", parser="c10d_int", default="480", min=1,
        conflicts=[{"with": "TORCH_NCCL_ENABLE_MONITORING", "self": ["*"], "other": ["0", "n", "no", "f", "false"],
                    "why": "the heartbeat timeout is only the period after which the monitoring thread aborts the process "
                           "(ProcessGroupNCCL.hpp: 'Control the watchdog heartbeat timeout period after which the "
                           "monitoring thread will abort the process'); with TORCH_NCCL_ENABLE_MONITORING off there is no "
                           "such thread, so it has no effect, and neither changes the collective timeout, which is "
                           "init_process_group(timeout=...)"}]),
    "TORCH_NCCL_AVOID_RECORD_STREAMS": dict(
        type="bool", parser="c10d_bool", default="0", deprecated_note=(
            "ProcessGroupNCCL: 'TORCH_NCCL_AVOID_RECORD_STREAMS is the default now, this environment variable is "
            "thus deprecated.'"), replaced_by="(the default behaviour)"),
    # ---------------------------------------------------------------- the CUDA caching allocator
    "PYTORCH_CUDA_ALLOC_CONF": dict(
        type="alloc_conf", parser="alloc_conf", family="torch", class_="memory",
        meaning="The CUDA caching allocator's options, key:value pairs separated by commas, lists in [ ] "
                "(c10/core/AllocatorConfig.h, ConfigTokenizer). The CUDA allocator reads it first and "
                "PYTORCH_ALLOC_CONF only when it is unset (c10/cuda/CUDAAllocatorConfig.h).",
        example_value="expandable_segments:True,max_split_size_mb:128",
        # keys that fight inside the value, on the torch versions named
        key_conflicts=[{"keys": ["expandable_segments=True", "max_split_size_mb|garbage_collection_threshold"],
                        "torch_before": "2.5",
                        "why": "before torch 2.5 the allocator could free expandable segments while splitting or "
                               "collecting garbage and fail with '!block->expandable_segment_ INTERNAL ASSERT FAILED' "
                               "near out-of-memory (fixed by pytorch/pytorch#134338, 'expandable_segments <-> other "
                               "allocator options', in 2.5)"}],
        conflicts=[{"with": "PYTORCH_ALLOC_CONF", "self": ["*"], "other": ["*"], "different": True,
                    "why": "the CUDA allocator reads PYTORCH_CUDA_ALLOC_CONF and ignores PYTORCH_ALLOC_CONF when both "
                           "are set (c10/cuda/CUDAAllocatorConfig.h, CUDAAllocatorConfig::instance), while the "
                           "device-generic config prefers PYTORCH_ALLOC_CONF (c10/core/AllocatorConfig.h)"}],
        source={"repo": TORCH, "path": "c10/cuda/CUDAAllocatorConfig.h", "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "CUDAAllocatorConfig::instance"}),
    "PYTORCH_ALLOC_CONF": dict(
        type="alloc_conf", parser="alloc_conf", family="torch", class_="memory",
        meaning="The device-generic name of PYTORCH_CUDA_ALLOC_CONF (torch 2.9 and later); same grammar.",
        example_value="expandable_segments:True",
        source={"repo": TORCH, "path": "c10/core/AllocatorConfig.h", "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "AcceleratorAllocatorConfig"}),
    "PYTORCH_HIP_ALLOC_CONF": dict(
        type="alloc_conf", parser="alloc_conf", family="torch", class_="memory",
        meaning="ROCm's spelling of PYTORCH_CUDA_ALLOC_CONF.", example_value="expandable_segments:True",
        source={"repo": TORCH, "path": "c10/cuda/CUDAAllocatorConfig.h", "commit": "cf30153c4c131c8164ee7798e5022d810682e2cb",
                "symbol": "PYTORCH_HIP_ALLOC_CONF"}),
    "PYTORCH_NO_CUDA_MEMORY_CACHING": dict(
        type="bool", parser="c10_flag", family="torch", class_="debug",
        meaning="1 disables the CUDA caching allocator (torch docs: 'This can be useful for debugging').",
        cost={"values": ["1"], "warning_at": 1,
              "what": "every tensor allocation and free goes to cudaMalloc/cudaFree: a debugging setting that "
                      "makes training much slower and fragments memory"},
        source={"repo": TORCH, "path": "docs/source/cuda_environment_variables.rst", "commit": "torch 2.x documentation",
                "symbol": "PYTORCH_NO_CUDA_MEMORY_CACHING"},
        # before 2.7 the allocator tests only that the variable exists: =0 disables caching too (pytorch#145661)
        presence_before={"release": "2.7",
                         "source": {"repo": TORCH, "path": "c10/cuda/CUDACachingAllocator.cpp",
                                    "commit": "001074d25084fdb87a799823e395a50f5ec044d3",
                                    "symbol": "forceUncachedAllocator: getenv(\"PYTORCH_NO_CUDA_MEMORY_CACHING\") != nullptr"},
                         "changed_by": "https://github.com/pytorch/pytorch/pull/145905",
                         "note": "#145905 (only the value 1, c10::utils::check_env) merged 2025-01-30, after the 2.6 "
                                 "branch cut: 2.7 is inferred from that date"}),
    # `since`: the first torch release whose allocator parses the key (an older torch raises "Unrecognized
    # CachingAllocator option"), from torch's versioned documentation (docs/<version>/notes/cuda.rst,
    # "Memory management"): max_split_size_mb from 1.10, roundup_power2_divisions and
    # garbage_collection_threshold from 1.12, backend from 2.0, expandable_segments from 2.1.
    "alloc_conf:expandable_segments": dict(type="bool", parser="alloc_true_false", default="False",
                                           example_value="True", since="2.1"),
    "alloc_conf:pinned_use_background_threads": dict(type="bool", parser="alloc_true_false", default="False",
                                                     example_value="True"),
    "alloc_conf:release_lock_on_cudamalloc": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:release_lock_on_hipmalloc": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:pinned_use_cuda_host_register": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:pinned_use_hip_host_register": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:graph_capture_record_stream_reuse": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:max_split_size_mb": dict(type="int", parser="alloc_mb", min=20, example_value="128", since="1.10",
                                         verify={"path": LIBC10, "strings": [
                                             "CachingAllocator option max_split_size_mb too small, must be >= "]}),
    "alloc_conf:max_non_split_rounding_mb": dict(type="int", parser="alloc_mb", min=20, example_value="64"),
    "alloc_conf:large_segment_size_mb": dict(type="int", parser="alloc_mb", min=1, example_value="20"),
    "alloc_conf:pinned_max_round_threshold_mb": dict(type="int", parser="alloc_mb", min=0, example_value="64"),
    "alloc_conf:pinned_max_cached_size_mb": dict(type="int", parser="alloc_mb", min=0, example_value="1024"),
    "alloc_conf:pinned_reserve_segment_size_mb": dict(type="int", parser="alloc_mb", min=0, example_value="64"),
    "alloc_conf:garbage_collection_threshold": dict(type="float", parser="alloc_fraction_open", example_value="0.6",
                                                    since="1.12",
                                                    verify={"path": LIBC10, "strings": [
                                                        "garbage_collect_threshold is invalid, set it in (0.0, 1.0)"]}),
    "alloc_conf:per_process_memory_fraction": dict(type="float", parser="alloc_fraction_closed", example_value="0.5"),
    "alloc_conf:roundup_power2_divisions": dict(type="list", parser="alloc_roundup", example_value="[256:1,>:4]",
                                                since="1.12",
                                                verify={"path": LIBC10, "strings": [
                                                    "For roundups, the intervals have to be power of 2 "]}),
    "alloc_conf:backend": dict(type="enum", parser="alloc_choice", values=["native", "cudaMallocAsync"],
                               example_value="cudaMallocAsync", since="2.0"),
    "alloc_conf:pinned_num_register_threads": dict(type="int", parser="alloc_pow2", example_value="8"),
    "alloc_conf:pinned_free_catch_all": dict(type="bool", parser="alloc_true_false", example_value="True"),
    "alloc_conf:throw_on_cudamalloc_oom": dict(type="bool", parser="alloc_true_false", example_value="True"),
    # ---------------------------------------------------------------- tokenizers
    "TOKENIZERS_PARALLELISM": dict(
        type="bool", parser="rust_falsy", default="true", family="tokenizers", class_="threads",
        meaning="Whether the Rust tokenizers use their thread pool. Off for \"\", off, false, f, no, n, 0 "
                "(any case); on for any other value, and when unset.",
        source={"repo": "huggingface/tokenizers", "path": "tokenizers/src/utils/parallelism.rs",
                "commit": "140053484c0ef0e3a15f332bd70416799febc37f", "symbol": "get_env_parallelism"}),
    "RAYON_NUM_THREADS": dict(
        type="int", parser="rust_usize", family="tokenizers", class_="threads", aliases=["RAYON_RS_NUM_CPUS"],
        meaning="Threads of the Rayon pool the tokenizers use (0 or unset: one per CPU); rayon-core still reads the "
                "deprecated RAYON_RS_NUM_CPUS when this one is unset.",
        verify={"path": "site:tokenizers/tokenizers.abi3.so", "strings": ["RAYON_NUM_THREADS", "RAYON_RS_NUM_CPUS"]},
        source={"repo": "rayon-rs/rayon", "path": "rayon-core/src/registry.rs",
                "commit": "the rayon-core linked into tokenizers 0.23.3", "symbol": "default_num_threads"}),
    # ---------------------------------------------------------------- accelerate
    "ACCELERATE_MIXED_PRECISION": dict(
        type="enum", parser="py_choice", values=["no", "fp8", "fp16", "bf16"], family="accelerate",
        verify={"path": "site:accelerate/utils/dataclasses.py", "strings": ['NO = "no"', 'FP8 = "fp8"', 'FP16 = "fp16"',
                                                                           'BF16 = "bf16"']},
        meaning="The mixed precision accelerate sets up: one of PrecisionType's values "
                "(accelerate/utils/dataclasses.py); another value raises ValueError when the state is created."),
    # ---------------------------------------------------------------- transformers' retired cache names
    # Read (with a FutureWarning) by transformers 4.x, src/transformers/utils/hub.py; transformers 5 reads none
    # of them (not in the installed 5.x sources): the cache silently moves to huggingface_hub's HF_HUB_CACHE.
    "TRANSFORMERS_CACHE": dict(
        type="path", parser="string", family="transformers", class_="behaviour",
        source={"repo": "huggingface/transformers", "path": "src/transformers/utils/hub.py",
                "commit": "00511f2b97756629c5668aec5ad4371cbfd9c466", "symbol": "TRANSFORMERS_CACHE"},
        retired={"reader": "transformers", "removed_in": "5.0", "use": "HF_HUB_CACHE",
                 "note": "Using `TRANSFORMERS_CACHE` is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead."},
        meaning="The directory transformers 4.x caches downloaded models in (the hub cache); transformers 5 ignores it."),
    "PYTORCH_TRANSFORMERS_CACHE": dict(
        type="path", parser="string", family="transformers", class_="behaviour",
        source={"repo": "huggingface/transformers", "path": "src/transformers/utils/hub.py",
                "commit": "00511f2b97756629c5668aec5ad4371cbfd9c466", "symbol": "PYTORCH_TRANSFORMERS_CACHE"},
        retired={"reader": "transformers", "removed_in": "5.0", "use": "HF_HUB_CACHE",
                 "note": "Using `PYTORCH_TRANSFORMERS_CACHE` is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead."},
        meaning="The directory transformers 4.x caches downloaded models in (the hub cache); transformers 5 ignores it."),
    "PYTORCH_PRETRAINED_BERT_CACHE": dict(
        type="path", parser="string", family="transformers", class_="behaviour",
        source={"repo": "huggingface/transformers", "path": "src/transformers/utils/hub.py",
                "commit": "00511f2b97756629c5668aec5ad4371cbfd9c466", "symbol": "PYTORCH_PRETRAINED_BERT_CACHE"},
        retired={"reader": "transformers", "removed_in": "5.0", "use": "HF_HUB_CACHE",
                 "note": "Using `PYTORCH_PRETRAINED_BERT_CACHE` is deprecated and will be removed in v5 of Transformers. Use `HF_HOME` instead."},
        meaning="The directory transformers 4.x caches downloaded models in (the hub cache); transformers 5 ignores it."),
    "HUGGINGFACE_CO_RESOLVE_ENDPOINT": dict(
        type="string", parser="string", family="transformers", class_="behaviour",
        source={"repo": "huggingface/transformers", "path": "src/transformers/utils/hub.py",
                "commit": "00511f2b97756629c5668aec5ad4371cbfd9c466", "symbol": "HUGGINGFACE_CO_RESOLVE_ENDPOINT"},
        retired={"reader": "transformers", "removed_in": "5.0", "use": "HF_ENDPOINT",
                 "note": "Using the environment variable `HUGGINGFACE_CO_RESOLVE_ENDPOINT` is deprecated and will be "
                         "removed in Transformers v5. Use `HF_ENDPOINT` instead."},
        meaning="The Hub endpoint transformers 4.x downloads from; HF_ENDPOINT wins when both are set."),
    # NCCL path levels: NCCL 2.5 read them as integers (NCCL_PARAM: strtoll, so "NVL" is 0 = LOC, P2P off);
    # NCCL 2.6.4 added the names (ncclGetLevel in src/graph/paths.cc). Read from the NCCL git tags.
    "NCCL_P2P_LEVEL/text_since": {
        "since": "2.6.4", "integer_source": "src/transport/p2p.cc NCCL_PARAM(P2pLevel, \"P2P_LEVEL\", -2) at v2.5.6-2",
        "text_source": "src/graph/paths.cc ncclGetLevel(&ncclTopoUserP2pLevel, \"NCCL_P2P_DISABLE\", \"NCCL_P2P_LEVEL\") "
                       "at v2.6.4-1"},
    "NCCL_NET_GDR_LEVEL/text_since": {
        "since": "2.6.4", "integer_source": "src/transport/net.cc NCCL_PARAM(NetGdrLevel, \"NET_GDR_LEVEL\", PATH_PHB) "
                                            "at v2.5.6-2",
        "text_source": "src/graph/paths.cc ncclGetLevel(&ncclTopoUserGdrLevel, NULL, \"NCCL_NET_GDR_LEVEL\") at v2.6.4-1"},
    # values a GPU must be able to run: judged against the visible GPUs' compute capability (SET002)
    "ACCELERATE_MIXED_PRECISION/needs_capability": {
        "bf16": {"min": [8, 0],
                 "source": {"repo": "pytorch/pytorch", "path": "torch/cuda/__init__.py", "symbol": "is_bf16_supported"},
                 "verify": {"path": "site:torch/cuda/__init__.py",
                            "strings": ["def is_bf16_supported", "get_device_properties(device).major >= 8"]},
                 "why": "bf16 runs natively from compute capability 8.0 (Ampere); below it torch.cuda.is_bf16_supported() "
                        "is True only by emulation, without bf16 tensor cores, and older accelerate releases ignore "
                        "the setting without a word (huggingface/accelerate#1693)"},
        "fp8": {"min": [8, 9],
                "source": {"repo": "NVIDIA/TransformerEngine", "path": "transformer_engine/pytorch/fp8.py",
                           "symbol": "check_fp8_support"},
                "why": "FP8 needs compute capability 8.9 (Ada) or later: Transformer Engine refuses with 'Device compute "
                       "capability 8.9 or higher required for FP8 execution.'"},
    },
    "ACCELERATE_DEBUG_MODE": dict(
        type="bool", parser="str_to_bool", family="accelerate", class_="debug",
        verify={"path": "site:accelerate/utils/operations.py", "strings": ["def verify_operation", "gather_object([shapes])"]},
        meaning="accelerate's debug mode: before every gather/reduce/broadcast it gathers every process's tensor "
                "shapes to compare them (accelerate/utils/operations.py, verify_operation).",
        cost={"values": ["1", "y", "yes", "t", "true", "on"], "info_at": 2, "warning_at": 16,
              "what": "every accelerate collective is preceded by a gather_object of all processes' shapes: one extra "
                      "collective per call"}),
    # ---------------------------------------------------------------- NCCL
    "NCCL_DEBUG": dict(
        class_="debug", cost={"values": ["TRACE"], "info_at": 2, "warning_at": 8,
                              "what": "NCCL logs every call of every rank (TRACE: 'Prints replayable trace info on all "
                                      "calls', src/debug.cc)"},
        conflicts=[{"with": "NCCL_DEBUG_SUBSYS", "self": ["INFO", "TRACE"], "other": ["ALL", "COLL", "CALL", "PROXY"],
                    "kind": "cost", "info_at": 2, "warning_at": 8,
                    "why": "INFO with the per-call subsystems (COLL, CALL, PROXY, or ALL) logs a line per "
                           "collective on every rank (src/debug.cc, NCCL_DEBUG_SUBSYS options)"}]),
    "NCCL_SOCKET_FAMILY": dict(type="enum", parser="exact", values=["AF_INET", "AF_INET6"],
                               verify={"path": "nccl:src/misc/socket.cc", "strings": ['"AF_INET"', '"AF_INET6"']}),
    # NCCL's thread-count parameters: getNthreads (src/graph/tuning.cc) resets a value that is not a multiple of
    # WARP_SIZE (32) or is outside [min, max] ("Invalid NCCL_NTHREADS %d (must be a multiple of 32)"); NCCL's
    # environment documentation accepts 64, 128, 256 and 512 only (docs.nvidia.com/deeplearning/nccl, env.html
    # #nccl-nthreads); other multiples of 32 pass the check and give wrong results with the SIMPLE protocol when
    # they do not divide its slices (NVIDIA/nccl#698)
    "NCCL_NTHREADS": dict(type="int", parser="nccl_nthreads", multiple_of=32, min=64, max=512,
                          meaning="Threads per block of NCCL's SIMPLE/LL kernels. NCCL resets a value that is not a multiple of 32 or outside 64..512 (getNthreads, src/graph/tuning.cc); its documentation accepts 64, 128, 256 and 512.",
                          documented=[64, 128, 256, 512], example_value="256",
                          verify={"path": "nccl:src/graph/tuning.cc",
                                  "strings": ['"Invalid %s %d (must be a multiple of %d)"', "2 * WARP_SIZE"]}),
    "NCCL_LL128_NTHREADS": dict(type="int", parser="nccl_nthreads", multiple_of=32, min=160, max=640,
                                meaning="Threads per block of NCCL's LL128 kernels; NCCL resets a value that is not a multiple of 32 or outside 160..640 (getNthreads, src/graph/tuning.cc).",
                                example_value="640",
                                verify={"path": "nccl:src/graph/tuning.cc", "strings": ["NCCL_LL128_MAX_NTHREADS / 4"]}),
    "NCCL_LAUNCH_MODE": dict(type="enum", parser="nccl_enum", values=["PARALLEL", "GROUP"],
                             verify={"path": "nccl:src/init.cc", "strings": ['"PARALLEL"', '"GROUP"']}),
    "NCCL_DEBUG_SUBSYS": dict(
        conflicts=[{"with": "NCCL_DEBUG", "self": ["*"], "other": [None], "severity": "info",
                    "why": "NCCL_DEBUG_SUBSYS only filters what NCCL_DEBUG prints; without NCCL_DEBUG nothing is "
                           "printed (src/debug.cc: the level defaults to NONE)"}]),
    "NCCL_GRAPH_FILE": dict(
        class_="debug",
        meaning="Read by NCCL as a string: an XML graph file that replaces NCCL's topology search.",
        cost={"values": ["*"], "warning_at": 1,
              "what": "NCCL skips its own search for rings and trees and loads them from this XML file (src/graph/search.cc, ncclTopoCompute: NCCL_GRAPH_FILE); a graph dumped on one machine (NCCL_GRAPH_DUMP_FILE) names that machine's GPUs and NICs, so on another NCCL fails at init (ncclSystemError, ncclInternalError) or runs on a wrong graph. A debugging override: NCCL's maintainers say it should never be set in production (NVIDIA/nccl#1240)"},
        verify={"path": "nccl:src/graph/search.cc", "strings": ['ncclGetEnv("NCCL_GRAPH_FILE")']}),
    "NCCL_DEBUG_FILE": dict(
        conflicts=[{"with": "NCCL_DEBUG", "self": ["*"], "other": [None], "severity": "info",
                    "why": "NCCL_DEBUG_FILE redirects what NCCL_DEBUG prints; without NCCL_DEBUG the file stays empty"}]),
    "NCCL_P2P_DISABLE": dict(
        conflicts=[{"with": "NCCL_P2P_LEVEL", "self": ["1"], "other": ["*"], "severity": "info",
                    "why": "NCCL_P2P_DISABLE=1 turns the P2P transport off, so NCCL_P2P_LEVEL is never consulted"},
                   {"with": "NCCL_SHM_DISABLE", "self": ["1"], "other": ["1"],
                    "why": "with both P2P and SHM off, ranks on one node exchange data through the network transport "
                           "(sockets or InfiniBand loopback): the slowest path NCCL has"}]),
    "NCCL_IB_DISABLE": dict(
        conflicts=[{"with": "NCCL_IB_HCA", "self": ["1"], "other": ["*"], "severity": "info",
                    "why": "NCCL_IB_DISABLE=1 disables the IB transport, so the HCA selection has no effect"},
                   {"with": "NCCL_NET", "self": ["1"], "other": ["IB"],
                    "why": "NCCL_NET=IB asks for the network the other variable disables: NCCL fails to find network "
                           "'IB' at init (src/net.cc)"}]),
}
