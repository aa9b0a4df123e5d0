"""The embedded workload: the original question's protein masked-LM job, with nothing to download.

- synthetic amino-acid sequences written to an HDF5 file (`write_sequences`), read by
  `ProteinH5Dataset`, which opens the file lazily in each process and DataLoader worker and never
  pickles an open handle (catalogue E3/E4);
- a character-level fast tokenizer trained in memory with `tokenizers` and wrapped as
  `PreTrainedTokenizerFast` (`char_tokenizer`);
- `BertForMaskedLM` from a `BertConfig` of size tiny / small / base (`bert_config`);
- `DataCollatorForLanguageModeling`.

Everything is deterministic from a seed, so N ranks and the 1-rank baseline see the same data.
Heavy imports (torch, transformers, h5py) happen inside the functions that need them.
"""
from __future__ import annotations

import os
from typing import Any, Optional

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# The model vocabulary (rows of the embedding and of the MLM head) when --vocab is not given. The
# tokenizer is character-level (25 tokens), but real jobs train subword vocabularies, and the MLM head
# over them is a large share of the compute and of the gradient DDP all-reduces: with the bare 25
# tokens, the tiny model's step took 0.70x and its gradient 0.51x those of a 2,048-token vocabulary
# (benchmarks/bench_probe_vocab.py), so the probe understated compute and communication alike. The
# tokenizer's ids stay below 25; the extra rows are trained, synchronised and updated like real ones.
# tiny: 8,192, a small SentencePiece/BPE vocabulary, so that the CPU default stays a short run;
# small (BERT-Mini's shape) and base (BERT-base): BERT's own WordPiece 30,522.
DEFAULT_VOCAB = 8192

# hidden, layers, heads, intermediate[, vocabulary when it is not DEFAULT_VOCAB].
MODELS = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                  vocab_size=30522),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 vocab_size=30522),
}


def write_sequences(path: str, count: int, seq_len: int, seed: int = 0) -> str:
    """Write `count` random protein sequences (lengths seq_len/2 .. 2*seq_len) as UTF-8 bytes."""
    import h5py
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.frombuffer(AMINO_ACIDS.encode(), dtype=np.uint8)
    lengths = rng.integers(max(4, seq_len // 2), 2 * seq_len + 1, size=count)
    seqs = [letters[rng.integers(0, len(letters), size=n)].tobytes() for n in lengths]
    tmp = f"{path}.tmp{os.getpid()}"
    with h5py.File(tmp, "w") as fh:
        fh.create_dataset("sequences", data=np.array(seqs, dtype=h5py.string_dtype(encoding="utf-8")))
        fh.attrs["seed"] = seed
    os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
    return path


def sequence_count(path: str) -> int:
    import h5py

    with h5py.File(path, "r") as fh:
        return int(fh["sequences"].shape[0])


class ProteinH5Dataset:
    """A map-style dataset over the HDF5 file.

    The file is opened on first `__getitem__` in each process (checked by pid, so a forked DataLoader
    worker opens its own handle) and the handle is dropped when pickled (spawned workers, mp.spawn).
    Optional `delay_s` makes every item slow: the probe's "slow dataset" fault injection.
    """

    def __init__(self, path: str, tokenizer: Any, seq_len: int, length: Optional[int] = None,
                 delay_s: float = 0.0) -> None:
        self.path = path
        self.tokenizer = tokenizer
        self.seq_len = seq_len
        self._len = length if length is not None else sequence_count(path)
        self.delay_s = delay_s
        self._fh = None
        self._pid: Optional[int] = None

    def __len__(self) -> int:
        return self._len

    def _data(self):
        if self._fh is None or self._pid != os.getpid():
            import h5py

            self._fh = h5py.File(self.path, "r")
            self._pid = os.getpid()
        return self._fh["sequences"]

    def __getitem__(self, idx: int) -> dict:
        if self.delay_s:
            import time

            time.sleep(self.delay_s)
        raw = self._data()[idx]
        seq = raw.decode() if isinstance(raw, bytes) else str(raw)
        enc = self.tokenizer(seq, truncation=True, max_length=self.seq_len, padding="max_length",
                             return_special_tokens_mask=True)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                "special_tokens_mask": enc["special_tokens_mask"]}

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_fh"] = None  # h5py objects cannot be pickled (h5py#1512)
        state["_pid"] = None
        return state


def char_tokenizer(model_max_length: int = 512):
    """A character-level WordLevel tokenizer trained in memory on the amino-acid alphabet."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    trainer = trainers.WordLevelTrainer(special_tokens=SPECIAL)
    tok.train_from_iterator([AMINO_ACIDS, AMINO_ACIDS[::-1]], trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=model_max_length)


def model_vocab(size: str, tokenizer_len: int, vocab: Optional[int] = None) -> int:
    """The model's vocabulary: `vocab` (--vocab) or the size's default, never below the tokenizer's."""
    return max(tokenizer_len, vocab if vocab else MODELS[size].get("vocab_size", DEFAULT_VOCAB))


def bert_config(size: str, vocab_size: int, seq_len: int, vocab: Optional[int] = None):
    """`vocab_size` is the tokenizer's length; the embedding and the MLM head get `model_vocab` rows."""
    from transformers import BertConfig

    spec = {k: v for k, v in MODELS[size].items() if k != "vocab_size"}
    return BertConfig(vocab_size=model_vocab(size, vocab_size, vocab), max_position_embeddings=max(512, seq_len + 2),
                      **spec)


def build_model(size: str, tokenizer: Any, seq_len: int, seed: int = 0, vocab: Optional[int] = None):
    import torch
    from transformers import BertForMaskedLM

    torch.manual_seed(seed)  # same initial weights on every rank and in every mode
    return BertForMaskedLM(bert_config(size, len(tokenizer), seq_len, vocab))


def collator(tokenizer: Any, seed: int = 0):
    from transformers import DataCollatorForLanguageModeling

    return DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=True, mlm_probability=0.15)


def samples_needed(steps: int, batch_size: int, grad_accum: int, world: int) -> int:
    """Enough sequences for `steps` optimizer steps on `world` ranks, with a margin."""
    return steps * batch_size * grad_accum * max(1, world) + 4 * batch_size
