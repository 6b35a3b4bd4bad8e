"""Training options against the models they belong to (ckqti.train.options, behind ckqti.api.train)."""

import pytest

from ckqti import api
from ckqti.errors import OptionError
from ckqti.train.options import train_config


def test_reranker_options_make_their_config():
    config = train_config("tkl", loss="lce", negatives=7, term_weights="idf", explicit=True, frozen_embeddings=True,
                          tail_windows="whole", epochs=2, batch_size=8, embeddings="minilm")
    assert (config.kind, config.loss, config.negatives, config.epochs, config.batch_size) == ("tkl", "lce", 7, 2, 8)
    assert config.embeddings == "minilm"
    assert dict(config.model_options) == {"term_weights": "idf", "tail_windows": "whole", "explicit": True,
                                          "train_embeddings": False}
    assert train_config("tk").loss == "margin"
    assert dict(train_config("idcm").model_options) == {}
    assert (train_config("idcm").selector_loss, train_config("idcm", selector_loss="kl").selector_loss) == ("lambda", "kl")


@pytest.mark.parametrize("model", ["tkl", "idcm"])
def test_max_doc_length_reaches_the_tkl_and_idcm_configs(model):
    import numpy as np

    from ckqti.models.idcm import IDCMConfig
    from ckqti.models.tkl import TKLConfig

    options = dict(train_config(model, max_doc_length=np.int64(4000)).model_options)
    assert options["max_doc_length"] == 4000 and type(options["max_doc_length"]) is int  # JSON in the checkpoint
    config = IDCMConfig(**options) if model == "idcm" else TKLConfig(vocab_size=2, **options)
    assert config.max_doc_length == 4000
    assert "max_doc_length" not in train_config(model).model_options  # the model's default (2,000)


def test_ndrm_options_make_their_config():
    config = train_config("ndrm3", latent_gate=0.6, fixed_bm25=True, lr=1e-3, negatives=7, loss="lce")
    assert (config.model, config.lr, config.loss, config.negatives) == ("ndrm3", 1e-3, "lce", 7)
    assert dict(config.model_options) == {"latent_gate": 0.6, "bm25_init": (0.9, 0.4), "explicit_fixed": True}
    default = train_config("ndrm1")
    assert (default.lr, default.loss, default.embeddings, default.init) == (1e-4, "ranknet", "skipgram", "paper")


@pytest.mark.parametrize("model, options, named", [
    ("tk", {"negatives": 4}, "negatives > 1 needs loss lce"),
    ("ndrm3", {"loss": "margin"}, "loss margin and term_weights are for TK, TKL and IDCM"),
    ("ndrm2", {"latent_gate": 0.6}, "latent_gate is for NDRM1 and NDRM3"),
    ("idcm", {"embeddings": "minilm"}, "embeddings is for NDRM, TK and TKL"),
    ("tkl", {"dev_qrels": "dev.tsv"}, "dev_qrels is for NDRM"),
    ("tk", {"selector_loss": "kl"}, "selector_loss is for IDCM"),
    ("tk", {"max_doc_length": 400}, "max_doc_length is for TKL and IDCM (TK's document cap is the SPEC's 200"),
    ("ndrm3", {"max_doc_length": 4000}, "max_doc_length is for TKL and IDCM"),
    ("idcm", {"selector_loss": "hinge"}, "selector_loss must be one of"),
    ("bm25", {}, "model must be one of"),
])
def test_api_train_refuses_options_before_any_work(tmp_path, model, options, named):
    """Python callers see the keyword names; nothing is read (the files do not exist) or written."""
    with pytest.raises(OptionError) as err:
        api.train(model, tmp_path / "c.jsonl", tmp_path / "q.tsv", tmp_path / "r.tsv", tmp_path / "m.pt", **options)
    assert str(err.value).startswith(named)
    assert list(tmp_path.iterdir()) == []


def test_option_error_names_the_cli_flags():
    err = OptionError("dev_qrels is for NDRM (TK/TKL/IDCM carve dev from qrels, dev_fraction)",
                      ("dev_qrels", "qrels", "dev_fraction"))
    assert err.as_flags() == "--dev-qrels is for NDRM (TK/TKL/IDCM carve dev from --qrels, --dev-fraction)"
    assert OptionError("lr is for NDRM (already)", ("lr",)).as_flags() == "--lr is for NDRM (already)"


def test_api_train_refuses_an_output_that_is_not_a_checkpoint(tmp_path):
    """Checked before BM25 or any epoch: a folder, or a file that is not a checkpoint, is never overwritten."""
    from ckqti.errors import InputError

    args = (tmp_path / "c.jsonl", tmp_path / "q.tsv", tmp_path / "r.tsv")
    with pytest.raises(InputError, match="is a directory"):
        api.train("ndrm2", *args, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(InputError, match="not a ckqti checkpoint; training replaces only a checkpoint: remove it or "
                                         "write the checkpoint elsewhere$"):  # a cut-short checkpoint too: the way out
        api.train("tk", *args, notes)
    assert notes.read_text() == "mine" and not (tmp_path / "notes.txt.work").exists()


def test_api_train_refuses_an_output_below_a_file_or_equal_to_its_start_checkpoint(tmp_path):
    """Before any work: a file where --out's folder would be was 'OUT.work: Not a directory' (a path not
    given) once the inputs were read; the checkpoint whose word vectors start the model, given as
    --out, was replaced by the trained one."""
    from ckqti.errors import InputError
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.text import Analyzer
    from ckqti.vocab import Vocabulary

    args = (tmp_path / "c.jsonl", tmp_path / "q.tsv", tmp_path / "r.tsv")  # never read: the checks come first
    (tmp_path / "notes").write_text("mine")
    with pytest.raises(InputError) as err:
        api.train("ndrm2", *args, tmp_path / "notes" / "m.pt")
    assert str(err.value) == (f"{tmp_path / 'notes' / 'm.pt'}: cannot write the checkpoint: {tmp_path / 'notes'} is "
                              "a file, not a directory")
    vocab = Vocabulary.build([["white", "matter"]])
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=8, num_heads=2, ff_dim=8, mlp_hidden=8, num_layers=1)
    start = save_checkpoint(tmp_path / "start.pt", build_ndrm(config, vocab), "ndrm3", config.to_dict(), vocab,
                            Analyzer()).path
    before = start.read_bytes()
    with pytest.raises(InputError) as err:
        api.train("ndrm3", *args, start, embeddings=str(start))
    assert str(err.value) == (f"{start}: is also the embeddings checkpoint this command reads; choose another output "
                              "(writing it would replace that input)")
    assert start.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["notes", "start.pt"]


@pytest.mark.parametrize("options, message", [
    ({"bogus": 1}, "unknown option(s) bogus; the options are batch_size, "),
    ({"epochs": 0}, "epochs must be an integer >= 1, got 0"),
    ({"epochs": "3"}, "epochs must be an integer >= 1, got '3'"),
    ({"batch_size": 2.0}, "batch_size must be an integer >= 1, got 2.0"),
    ({"seed": -1}, "seed must be an integer >= 0, got -1"),
    ({"seed": 2**32}, "seed must be an integer in [0, 4294967295], got 4294967296"),  # gensim's: a traceback after BM25
    ({"lr": -1}, "lr must be a number > 0, got -1"),
    ({"lr": float("nan")}, "lr must be a number > 0, got nan"),
    ({"dev_fraction": 1.0}, "dev_fraction must be a number in (0, 1), got 1.0"),
    ({"latent_gate": "0.5"}, "latent_gate must be a number in (0, 1], got '0.5'"),
    ({"max_doc_length": 0}, "max_doc_length must be an integer >= 1, got 0"),
    ({"max_doc_length": 4000.0}, "max_doc_length must be an integer >= 1, got 4000.0"),
    ({"max_steps": 0}, "max_steps must be an integer >= 1, got 0"),
    ({"loss": "bogus"}, "loss must be one of ('ranknet', 'lce'), got 'bogus'"),
])
def test_api_train_refuses_bad_values_as_option_errors(tmp_path, options, message):
    """Python callers get the refusals the CLI's flag types give, as OptionError, before any work."""
    with pytest.raises(OptionError) as err:
        api.train("ndrm3", tmp_path / "none", tmp_path / "none", tmp_path / "none", tmp_path / "m.pt", **options)
    assert str(err.value).startswith(message)
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt.work").exists()


@pytest.mark.parametrize("model", ["ndrm3", "tk", "idcm"])
def test_max_steps_reaches_every_models_config(model):
    assert train_config(model).max_steps is None and train_config(model, max_steps=3).max_steps == 3


@pytest.mark.parametrize("model", ["ndrm3", "tk", "idcm"])
def test_rel_level_reaches_every_models_config(model):
    assert train_config(model).rel_level == 1 and train_config(model, rel_level=2).rel_level == 2
    with pytest.raises(OptionError, match="rel_level must be an integer >= 1, got 0"):
        train_config(model, rel_level=0)


def test_numpy_integers_are_counts():
    import numpy as np

    config = train_config("tk", epochs=np.int64(2), batch_size=np.int32(4))
    assert (config.epochs, config.batch_size) == (2, 4) and type(config.epochs) is int and type(config.batch_size) is int


def test_api_rerank_refuses_unknown_options(tmp_path):
    with pytest.raises(OptionError, match=r"unknown option\(s\) bogus; the options are adapt_vocabulary, batch_size"):
        api.rerank(tmp_path / "q.tsv", "bm25", "ndrm2", tmp_path / "r.trec", bogus=2)


def test_the_edges_of_the_options_ranges_and_models():
    """Two negatives are already a listwise group (named as the CLI's flags); a latent gate of 1 is in its
    range (0, 1]; NDRM2 has a BM25-like channel of its own to fix."""
    with pytest.raises(OptionError) as err:
        train_config("tk", negatives=2)
    assert err.value.options == ("negatives", "loss") and err.value.as_flags() == "--negatives > 1 needs --loss lce"
    assert train_config("ndrm1", latent_gate=1.0).model_options == {"latent_gate": 1.0}
    with pytest.raises(OptionError, match=r"latent_gate must be a number in \(0, 1\]"):
        train_config("ndrm1", latent_gate=1.01)
    assert dict(train_config("ndrm2", fixed_bm25=True).model_options) == {"bm25_init": (0.9, 0.4), "explicit_fixed": True}
    with pytest.raises(OptionError, match="fixed_bm25 is for NDRM2 and NDRM3"):
        train_config("ndrm1", fixed_bm25=True)
