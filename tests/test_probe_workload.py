"""The probe's embedded workload: a realistic model vocabulary by default, changed with --vocab."""
import pytest

from ddpdoctor.probe import workload


def test_default_vocabulary_is_not_the_25_character_one():
    pytest.importorskip("transformers")
    # the tokenizer has 25 tokens; the model must be at least as large as a 2,048-token subword one
    assert workload.bert_config("tiny", 25, 64).vocab_size >= 2048
    assert workload.bert_config("small", 25, 64).vocab_size == 30522
    assert workload.bert_config("base", 25, 128).vocab_size == 30522


def test_vocab_option_sets_the_model_vocabulary_but_never_below_the_tokenizer():
    pytest.importorskip("transformers")
    assert workload.bert_config("tiny", 25, 64, vocab=2000).vocab_size == 2000
    assert workload.bert_config("base", 25, 64, vocab=1000).vocab_size == 1000
    assert workload.bert_config("tiny", 25, 64, vocab=10).vocab_size == 25


def test_the_option_reaches_the_worker_command_line():
    from ddpdoctor.probe.runner import ProbeOptions

    opts = ProbeOptions(vocab=2000)
    args = opts.worker_args("torchrun")
    assert args[args.index("--vocab") + 1] == "2000" and "--vocab 2000" in opts.describe()
    assert "--vocab" not in ProbeOptions().worker_args("torchrun")


def test_a_vocabulary_below_eight_is_refused(capsys):
    from ddpdoctor.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["probe", "--cpu", "--vocab", "4"])
    assert exc.value.code == 2 and "--vocab" in capsys.readouterr().err
