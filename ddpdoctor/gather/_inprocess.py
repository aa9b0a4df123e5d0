"""The field types of the sections written inside the training process (`runtime`, `runtime_*`).

These sections are not gathered by a gatherer here: preflight() / DoctorCallback / `ddpdoctor run`'s recorder write
them inside the job (ddpdoctor/inprocess/runtime/*, inprocess/callback.py). A snapshot holding them may still be
hand-edited or written by another version, so they are declared like a gatherer's `fields` (pipeline/shapes.py
checks them when a recorded snapshot loads: a wrong type is exit 2 naming the field, not a crashed RT check).

Derived from what the writers record: read from their code and from a real record (gather_sections() with a
DataLoader + DistributedSampler, DDP model and TrainingArguments, Gloo on CPU; tests/test_robustness_round19b.py
records one again and asserts every value in it fits). Only fields whose type the writers fix are declared;
a field the writers leave null (unknown) may be null; numbers are NUM where a writer may round or divide.
"""
from __future__ import annotations

# the names of ddpdoctor.gather's JSON types (gather.schema() maps them; importing gather here would be a cycle)
BOOL, LIST, NUM, OBJ, STR = "BOOL", "LIST", "NUM", "OBJ", "STR"

_PROCESS = {  # inprocess/runtime/__init__.py runtime_section + process.py process_facts
    "pid": NUM, "python": STR, "seconds_since_start": NUM, "seconds_since_group": NUM, "wall_time": NUM,
    "start_method": STR, "start_method_set": BOOL, "mp_process_name": STR, "started_by": STR, "usable_cpus": NUM,
    "main_module": STR, "when": STR, "host": STR,
    "distributed": OBJ, "distributed.initialized": BOOL, "distributed.backend": STR, "distributed.rank": NUM,
    "distributed.world_size": NUM, "distributed.timeout_s": NUM, "distributed.up_wall": NUM,
    "distributed.entered_wall": NUM, "distributed.coll_wait_max_s": NUM, "distributed.coll_wait_max_op": STR,
    "cuda": OBJ, "cuda.initialized": BOOL,
    "threads": OBJ, "threads.os_threads": NUM, "threads.python_threads": LIST, "threads.python_thread_kinds": LIST,
    "threads.omp_num_threads_env": STR, "threads.mkl_num_threads_env": STR, "threads.torch_num_threads": NUM,
    "threads.rust_pool_threads": NUM,
    "tokenizers": OBJ, "tokenizers.imported": BOOL, "tokenizers.object": OBJ, "tokenizers.object.type": STR,
    "tokenizers.object.is_fast": BOOL,
    "h5py": OBJ, "h5py.imported": BOOL,
    "forks": OBJ, "forks.guard_installed": BOOL, "forks.count": NUM, "forks.by_caller": OBJ, "forks.findings": LIST,
}

_DATA = {  # inprocess/runtime/data.py data_facts
    "source": STR, "num_workers": NUM, "start_method": STR, "persistent_workers": BOOL, "length": NUM,
    "batch_size": NUM, "pin_memory": BOOL,
    # the sampler's num_replicas/rank/epoch/seed/shuffle/drop_last are the user's sampler's own attributes, copied
    # as they are (data.py _sampler_facts): no type is fixed, none declared
    "sampler": OBJ, "sampler.type": STR, "sampler.distributed": BOOL,
    "dataset": OBJ, "dataset.type": STR, "dataset.iterable": BOOL, "dataset.length": NUM, "dataset.h5py": LIST,
    "dataset.cuda_tensors": BOOL, "dataset.tokenizes": BOOL,
}

_TRAINER = {  # inprocess/runtime/trainer.py trainer_facts
    "transformers": STR, "has_trainer": BOOL,
    "args": OBJ, "args.type": STR, "args.gradient_accumulation_steps": NUM, "args.gradient_checkpointing": BOOL,
    "args.bf16": BOOL, "args.fp16": BOOL, "args.use_cpu": BOOL, "args.dataloader_num_workers": NUM,
    "args.dataloader_persistent_workers": BOOL, "args.per_device_train_batch_size": NUM, "args.max_steps": NUM,
    "args.logging_steps": NUM, "args.world_size": NUM, "args.process_index": NUM, "args.local_process_index": NUM,
    "args.n_gpu": NUM, "args.train_batch_size": NUM, "args.num_processes": NUM, "args.parallel_mode": STR,
    "args.distributed_type": STR, "args.device": STR,
    "model": OBJ, "model.type": STR, "model.parameters": NUM, "model.trainable": NUM, "model.dtype": STR,
    "model.device": STR, "model.ddp": OBJ, "model.ddp.find_unused_parameters": BOOL, "model.ddp.static_graph": BOOL,
    "model.ddp.bucket_cap_mb": NUM, "model.ddp.gradient_as_bucket_view": BOOL,
}

_PEERS = {  # inprocess/runtime/peers.py exchange (rank 0; other ranks: unavailable + published)
    "world_size": NUM, "ranks": OBJ, "ranks.*": OBJ, "missing": LIST, "timeout_s": NUM, "label": STR,
    "published": BOOL,
}

_STEPS = {  # inprocess/callback.py steps_sections
    "steps_measured": NUM, "grad_accum": NUM, "ddp": BOOL, "find_unused_parameters": BOOL,
}

FIELDS = {f"{section}.{k}": v for section, declared in (("runtime", _PROCESS), ("runtime_data", _DATA),
                                                         ("runtime_trainer", _TRAINER), ("runtime_peers", _PEERS),
                                                         ("runtime_steps", _STEPS))
          for k, v in declared.items()}
