"""``ckqti train`` end to end, with Pyserini BM25 candidates (starts Java in a child process: slow)."""

import json

import pytest
from click.testing import CliRunner

from ckqti import api
from ckqti.cli import cli
from ckqti.models.checkpoint import load_checkpoint, load_for_indexing


def write_judged(tmp_path, tiny_scifact):
    """The slice's queries (BEIR JSONL) and qrels (BEIR TSV) as files."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in tiny_scifact["queries"].items()))
    qrels = tmp_path / "qrels.tsv"
    rows = [f"{q}\t{d}\t{g}" for q, judged in tiny_scifact["qrels"].items() for d, g in judged.items()]
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n")
    return queries, qrels


@pytest.mark.slow
def test_cli_trains_on_bm25_candidates_and_resumes(tmp_path, tiny_scifact):
    queries, qrels = write_judged(tmp_path, tiny_scifact)
    out = tmp_path / "m.pt"
    args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", out, "--epochs", "1", "--batch-size", "8", "--dev-fraction", "0.25", "--embeddings", "random"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    ckpt = load_checkpoint(out)
    assert ckpt.id in res.output and ckpt.meta["dev_queries"] == 10 and ckpt.meta["train_queries"] == 30
    assert any((tmp_path / "m.pt.work" / "bm25").glob("segments_*"))
    again = CliRunner().invoke(cli, [str(a) for a in args + ["--epochs", "2", "--resume"]])  # last value wins
    assert again.exit_code == 0, again.output
    assert load_checkpoint(out.with_name("m.pt.work") / "last.pt").meta["epoch"] == 2
    factory, info = load_for_indexing(out)
    assert info["id"] in again.output


@pytest.mark.slow
def test_cli_resumes_tk_training(tmp_path, tiny_scifact):
    """--resume was refused for TK/TKL/IDCM ("TK and TKL train in one go")."""
    queries, qrels = write_judged(tmp_path, tiny_scifact)
    args = ["train", "--model", "tk", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "tk.pt", "--epochs", "1", "--batch-size", "8", "--embeddings", "random"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0 and (tmp_path / "tk.pt.work" / "state.pt").is_file(), res.output
    again = CliRunner().invoke(cli, [str(a) for a in args + ["--epochs", "2", "--resume"]])  # last value wins
    assert again.exit_code == 0, again.output
    assert "resuming from" in again.output and "after epoch 1" in again.output and "epoch 2 of 2 next" in again.output
    assert "epoch 2:" in again.output and "epoch 1:" not in again.output


def test_cli_reports_bad_input_in_one_line(tmp_path, tiny_scifact):
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\t0\td1\t1\n")
    queries = tmp_path / "queries.tsv"
    queries.write_text("q2\tsomething else\n")
    args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code != 0 and "Error" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("model, option, value", [
    ("ndrm3", "--term-weights", "idf"), ("idcm", "--term-weights", "idf"),  # TK and TKL only
    ("idcm", "--teacher", "teacher.json"),  # IDCM distils its own cross-encoder
    ("ndrm2", "--latent-gate", "0.6"), ("tk", "--latent-gate", "0.6"),  # NDRM1 and NDRM3 only
    ("tk", "--tail-windows", "whole"), ("ndrm3", "--tail-windows", "whole"),  # TKL only
    ("ndrm3", "--explicit", None), ("idcm", "--explicit", None),  # TK and TKL only
    ("ndrm1", "--fixed-bm25", None), ("tkl", "--fixed-bm25", None),  # NDRM2 and NDRM3 only
    ("ndrm2", "--frozen-embeddings", None), ("idcm", "--frozen-embeddings", None),  # models with word vectors only
    ("idcm", "--weak-supervision", "titles"), ("idcm", "--embeddings", "minilm"), ("idcm", "--init", "match"),
    # NDRM only (TK/TKL/IDCM used to ignore them silently)
    ("tkl", "--lr", "0.001"), ("idcm", "--dev-qrels", "dev.tsv"),
])
def test_cli_refuses_an_option_the_model_does_not_take(tmp_path, tiny_scifact, model, option, value):
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tgene\n")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\t0\td1\t1\n")
    if option == "--teacher":
        value = tmp_path / value
        value.write_text('{"teacher": "t", "scores": {"q1": {"d1": 1.0, "d2": 0.0}}}')
    if option == "--dev-qrels":
        value = tmp_path / value
        value.write_text("q1\t0\td1\t1\n")
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt", option] + ([] if value is None else [value])
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 2 and option in res.output and "Traceback" not in res.output
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("model", ["tk", "ndrm3"])
def test_cli_refuses_max_doc_length_for_tk_and_ndrm(tmp_path, tiny_scifact, model):
    """TK's 200-token cap and NDRM's 4,000 terms are the SPEC's: a usage error naming the flag, nothing written."""
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", "--max-doc-length", "4000"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 2 and "--max-doc-length is for TKL and IDCM" in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("model", ["ndrm3", "tkl"])
def test_cli_bad_teacher_file_fails_before_bm25_in_one_line(tmp_path, tiny_scifact, model):
    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in tiny_scifact["queries"].items()))
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("".join(f"{q}\t0\t{d}\t{g}\n" for q, judged in tiny_scifact["qrels"].items() for d, g in judged.items()))
    teacher = tmp_path / "teacher.json"
    teacher.write_text("not json\n")
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt", "--teacher", teacher]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code != 0 and "teacher.json" in res.output and "Traceback" not in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "m.pt").exists() and not any((tmp_path / "m.pt.work").glob("bm25/*"))


def ndrm_train_config(monkeypatch, tiny_scifact, out, *options):
    """The TrainConfig ``ckqti train --model ndrm3 OPTIONS`` hands to :func:`ckqti.train.train` (not run)."""
    import ckqti.train

    seen = {}

    def fake_train(corpus, queries, qrels, out, config, **kw):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(ckqti.train, "train", fake_train)
    args = ["train", "--model", "ndrm3", "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", out, *options]
    CliRunner().invoke(cli, [str(a) for a in args])
    return seen["config"]


def test_cli_fixed_bm25_reaches_the_model_config(tmp_path, tiny_scifact, monkeypatch):
    from ckqti.models.ndrm import NDRMConfig

    config = ndrm_train_config(monkeypatch, tiny_scifact, tmp_path / "m.pt", "--latent-gate", "0.6", "--fixed-bm25")
    options = dict(config.model_options)
    assert options == {"latent_gate": 0.6, "bm25_init": (0.9, 0.4), "explicit_fixed": True}
    NDRMConfig(vocab_size=10, **options)  # valid model settings


def test_cli_frozen_embeddings_reach_the_ndrm_config(tmp_path, tiny_scifact, monkeypatch):
    from ckqti.models.ndrm import NDRMConfig

    config = ndrm_train_config(monkeypatch, tiny_scifact, tmp_path / "m.pt", "--frozen-embeddings")
    assert dict(config.model_options) == {"train_embeddings": False}
    assert not NDRMConfig(vocab_size=10, **config.model_options).train_embeddings


def test_cli_latent_gate_reaches_the_model_config(tmp_path, tiny_scifact, monkeypatch):
    config = ndrm_train_config(monkeypatch, tiny_scifact, tmp_path / "m.pt", "--latent-gate", "0.6")
    assert dict(config.model_options) == {"latent_gate": 0.6}
    args = ["train", "--model", "ndrm3", "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", "--latent-gate"]
    for bad in ("0", "1.5"):
        res = CliRunner().invoke(cli, [str(a) for a in args + [bad]])
        assert res.exit_code == 2 and "--latent-gate" in res.output


@pytest.mark.parametrize("model, options, expected", [
    ("tkl", ["--tail-windows", "whole"], {"term_weights": "none", "tail_windows": "whole"}),
    ("tkl", ["--explicit", "--term-weights", "idf"], {"term_weights": "idf", "explicit": True}),
    ("tk", ["--explicit"], {"term_weights": "none", "explicit": True}),
    ("tkl", ["--frozen-embeddings"], {"term_weights": "none", "train_embeddings": False}),
    ("tkl", ["--max-doc-length", "4000"], {"term_weights": "none", "max_doc_length": 4000}),
    ("idcm", ["--max-doc-length", "4000"], {"max_doc_length": 4000}),
])
def test_cli_reranker_options_reach_the_model_config(tmp_path, tiny_scifact, monkeypatch, model, options, expected):
    import ckqti.train.rerankers

    seen = {}

    def fake_train(kind, corpus, queries, qrels, out, config, **kw):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(ckqti.train.rerankers, "train_reranker", fake_train)
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", *options]
    CliRunner().invoke(cli, [str(a) for a in args])
    assert dict(seen["config"].model_options) == expected


def test_cli_embeddings_take_a_named_start_or_a_checkpoint_file(tmp_path, tiny_scifact, monkeypatch):
    (tmp_path / "vectors.pt").write_bytes(b"")  # only its existence is checked here
    config = ndrm_train_config(monkeypatch, tiny_scifact, tmp_path / "m.pt", "--embeddings", tmp_path / "vectors.pt")
    assert config.embeddings == str(tmp_path / "vectors.pt")
    assert ndrm_train_config(monkeypatch, tiny_scifact, tmp_path / "m.pt", "--embeddings", "minilm").embeddings == "minilm"
    args = ["train", "--model", "tkl", "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", "--embeddings"]
    for bad in ("glove", tmp_path / "missing.pt"):
        res = CliRunner().invoke(cli, [str(a) for a in args + [bad]])
        assert res.exit_code == 2 and "neither one of skipgram" in res.output


def fake_training(tmp_path, monkeypatch, model: str, best: float, history: tuple[dict, ...]):
    """``ckqti train --model MODEL`` whose training (``api.train``) returns ``history`` with best dev
    nDCG@10 ``best``: the CLI's result and the checkpoint path it names."""
    from ckqti import api
    from ckqti.train.reranker_config import RerankerTrainResult

    out = tmp_path / "m.pt"
    monkeypatch.setattr(api, "train", lambda *a, **k: RerankerTrainResult(out, f"{model}-abc", best, history, tmp_path))
    given = tmp_path / "given.tsv"
    given.write_text("")
    args = ["train", "--model", model, "--corpus", given, "--queries", given, "--qrels", given, "--out", out]
    return CliRunner().invoke(cli, [str(a) for a in args]), out


def test_cli_says_when_dev_chose_nothing(tmp_path, monkeypatch):
    history = tuple({"stage": 0, "epoch": e, "dev_ndcg10": 0.0} for e in range(3))
    res, _ = fake_training(tmp_path, monkeypatch, "tk", 0.0, history)
    assert res.exit_code == 0 and "dev did not choose this model" in res.stderr


@pytest.mark.parametrize("model, stage", [("tk", ""), ("idcm", " of stage 2")])
def test_cli_names_the_saved_epoch_of_a_reranker(tmp_path, monkeypatch, model, stage):
    history = tuple({"stage": 2, "epoch": e, "dev_ndcg10": d} for e, d in enumerate((0.1, 0.4, 0.3)))
    res, out = fake_training(tmp_path, monkeypatch, model, 0.4, history)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"{model}-abc: best dev nDCG@10 0.4000 at epoch 1 of 2{stage} -> {out}"


def test_cli_says_when_no_epoch_beat_the_model_before_training(tmp_path, monkeypatch):
    """TK's dev nDCG@10 did not move in two steps on SciFact: "best dev nDCG@10 0.5897 at epoch 0 of 1"
    did not say that epoch 0 is the untrained model, kept."""
    history = tuple({"stage": 0, "epoch": e, "dev_ndcg10": d} for e, d in enumerate((0.5, 0.5)))
    res, out = fake_training(tmp_path, monkeypatch, "tk", 0.5, history)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == (f"tk-abc: best dev nDCG@10 0.5000 at epoch 0 of 1 (the model before training: no "
                                  f"epoch beat it) -> {out}")


def training_options(tmp_path, tiny_scifact, monkeypatch, model, *options) -> dict:
    """The keyword arguments ``ckqti train --model MODEL ... OPTIONS`` hands the trainer (which is not run)."""
    import ckqti.train
    from ckqti.train import rerankers

    seen = {}

    def fake(*args, **kw):
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(ckqti.train, "train", fake)
    monkeypatch.setattr(rerankers, "train_reranker", fake)
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", *options]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return seen


@pytest.mark.parametrize("model", ["ndrm2", "tk"])
def test_cli_qrels_format_reaches_training(tmp_path, tiny_scifact, monkeypatch, model):
    """The qrels reader's error asks for --qrels-format, which only ``ckqti eval`` had: Cranfield's
    judgements saved under another name could not train at all."""
    seen = training_options(tmp_path, tiny_scifact, monkeypatch, model, "--qrels-format", "cranfield")
    assert seen["qrels_format"] == "cranfield"


@pytest.mark.parametrize("model", ["ndrm2", "tk"])
def test_cli_queries_format_reaches_training(tmp_path, tiny_scifact, monkeypatch, model):
    """train had --format (the corpus's) and --qrels-format but no way to name the queries' format: a
    queries file under another format's name could not train."""
    seen = training_options(tmp_path, tiny_scifact, monkeypatch, model, "--queries-format", "trec")
    assert seen["queries_format"] == "trec" and seen["fmt"] is None


@pytest.mark.parametrize("model", ["ndrm2", "tk"])
def test_cli_rel_level_reaches_the_training_config(tmp_path, tiny_scifact, monkeypatch, model):
    """``--rel-level``, eval's, decides what training counts relevant too (TREC DL passages: 2)."""
    import ckqti.train
    from ckqti.train import rerankers

    seen = []

    def fake(*args, **kw):
        seen.extend(a.rel_level for a in args if hasattr(a, "rel_level"))
        raise SystemExit(0)

    monkeypatch.setattr(ckqti.train, "train", fake)
    monkeypatch.setattr(rerankers, "train_reranker", fake)
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt"]
    res = CliRunner().invoke(cli, [str(a) for a in args + ["--rel-level", 2]])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    assert seen == [2, 1]
    res = CliRunner().invoke(cli, [str(a) for a in args + ["--rel-level", 0]])
    assert res.exit_code == 2 and "--rel-level" in res.output


def test_cli_too_few_queries_for_dev_name_the_qrels_file_and_dev_qrels(tmp_path, tiny_scifact):
    first, judged = next(iter(tiny_scifact["qrels"].items()))
    qrels = tmp_path / "few.txt"
    qrels.write_text("".join(f"{first} 0 {d} {g}\n" for d, g in judged.items()))
    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in tiny_scifact["queries"].items()))
    args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip().endswith(f"{qrels}: need at least 2 queries with a relevant judgement (grade >= 1) to "
                                       "carve a dev split; 1 of the 1 judged queries have one; or give dev judgements "
                                       "of other queries (--dev-qrels)")


def test_cli_refuses_a_seed_that_skip_gram_cannot_take(tmp_path, tiny_scifact, monkeypatch):
    """--seed 2**32 and above passed, then failed after BM25 with numpy's traceback (skip-gram's
    legacy seeding; torch's past 2**64): one line now, before any work."""
    import ckqti.train.loop as loop

    monkeypatch.setattr(loop, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    queries, qrels = judged_files(tmp_path, tiny_scifact)
    args = ["train", "--model", "ndrm1", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt", "--seed", str(2**32)]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.output.strip().splitlines()[-1] == ("Error: Invalid value for '--seed': 4294967296 is not in the range "
                                                   "0<=x<=4294967295.")
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt.work").exists()


def judged_files(tmp_path, tiny_scifact):
    """The slice's queries and qrels as TSV files."""
    queries, qrels = tmp_path / "queries.tsv", tmp_path / "qrels.tsv"
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in tiny_scifact["queries"].items()))
    qrels.write_text("".join(f"{q}\t0\t{d}\t{g}\n" for q, judged in tiny_scifact["qrels"].items() for d, g in judged.items()))
    return queries, qrels


@pytest.mark.parametrize("model, message", [
    ("ndrm2", "no training query has a term in the corpus vocabulary"),
    ("tk", "no training query has a relevant document and a known term"),
])
def test_cli_training_queries_without_a_known_term_are_one_line_before_bm25(tmp_path, tiny_scifact, model, message,
                                                                             monkeypatch):
    """Judged queries none of whose words the corpus holds (here each in Cyrillic, which the analyzer does not
    read): ``ckqti train`` fails in one line naming the qrels file, before BM25 (Java, minutes on a large corpus,
    ran first and the error came after it) and before any work folder."""
    import ckqti.bm25
    import ckqti.train.loop

    for module in (ckqti.bm25, ckqti.train.loop):
        monkeypatch.setattr(module, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    queries, qrels = judged_files(tmp_path, tiny_scifact)
    queries.write_text("".join(f"{q}\tизмерение проницаемости\n" for q in tiny_scifact["queries"]))
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt", "--embeddings", "random"]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert res.output.splitlines() == [f"Error: {qrels}: {message}"]
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt.work").exists()


@pytest.mark.parametrize("model", ["ndrm3", "tk", "idcm"])
def test_cli_bad_orcas_file_is_index_s_one_line_before_any_work(tmp_path, tiny_scifact, model, monkeypatch):
    """A malformed ORCAS file: the line ``index --orcas`` gives, naming file and line, before BM25 or
    any work folder."""
    import ckqti.bm25
    import ckqti.train.loop

    def no_bm25(*a):
        raise AssertionError("BM25 ran")

    monkeypatch.setattr(ckqti.train.loop, "bm25_candidates", no_bm25)
    monkeypatch.setattr(ckqti.bm25, "bm25_candidates", no_bm25)
    queries, qrels = judged_files(tmp_path, tiny_scifact)
    bad = tmp_path / "bad.tsv"
    bad.write_text("4983\tcell\n\n4983\n")
    indexing = CliRunner().invoke(cli, [str(a) for a in ("index", tiny_scifact["corpus"], "--out", tmp_path / "idx",
                                                         "--model", "ndrm2", "--orcas", bad)])
    args = ["train", "--model", model, "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "m.pt", "--orcas", bad]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 1 and res.output == indexing.output and f"{bad}:3: expected 2 " in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt.work").exists()


def test_cli_trains_with_orcas_as_the_api_does(tmp_path, tiny_scifact, monkeypatch):
    """``ckqti train --orcas`` end to end (NDRM2, one epoch, the slice's candidates for BM25's): the
    checkpoint is the API's, and names the clicks it was trained with."""
    import ckqti.train.loop

    monkeypatch.setattr(ckqti.train.loop, "bm25_candidates", lambda *a: tiny_scifact["candidates"])  # no Java
    queries, qrels = judged_files(tmp_path, tiny_scifact)
    orcas = tmp_path / "orcas.tsv"
    orcas.write_text("".join(f"{d}\t{tiny_scifact['queries'][q]}\n" for q, j in tiny_scifact["qrels"].items() for d in j))
    options = dict(epochs=1, batch_size=8, dev_fraction=0.25, device="cpu")
    api_run = api.train("ndrm2", tiny_scifact["corpus"], queries, qrels, tmp_path / "api.pt", orcas=orcas, **options)
    args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "cli.pt", "--epochs", 1, "--batch-size", 8, "--dev-fraction", 0.25, "--device", "cpu",
            "--orcas", orcas]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    ckpt = load_checkpoint(tmp_path / "cli.pt")
    assert ckpt.id == api_run.model_id and ckpt.id in res.output and ckpt.meta["orcas"] == "orcas.tsv"
    plain = api.train("ndrm2", tiny_scifact["corpus"], queries, qrels, tmp_path / "plain.pt", **options)
    assert plain.model_id != api_run.model_id  # the clicks' statistics are the model's


def test_cli_train_notes_repeated_orcas_lines_as_index_does(tmp_path, tiny_scifact, monkeypatch):
    """``train --orcas`` dropped repeated ``docid<TAB>query`` lines silently where ``index`` and
    ``rerank`` say so: the same note now comes before the first epoch, and is among the result's notes."""
    import ckqti.train.loop

    monkeypatch.setattr(ckqti.train.loop, "bm25_candidates", lambda *a: tiny_scifact["candidates"])  # no Java
    queries, qrels = judged_files(tmp_path, tiny_scifact)
    orcas = tmp_path / "orcas.tsv"
    rows = [f"{d}\t{tiny_scifact['queries'][q]}\n" for q, j in tiny_scifact["qrels"].items() for d in j]
    orcas.write_text("".join(rows + rows[:2]))
    note = f"note: 2 repeated lines of {orcas} dropped (a document's clicked query counts once)\n"
    args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
            "--out", tmp_path / "cli.pt", "--epochs", 1, "--batch-size", 8, "--dev-fraction", 0.25, "--device", "cpu",
            "--orcas", orcas]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith(note) and res.stderr.count("repeated line") == 1, res.stderr
    indexed = CliRunner().invoke(cli, [str(a) for a in ["index", tiny_scifact["corpus"], "--out", tmp_path / "idx",
                                                        "--model", "ndrm2", "--orcas", orcas]])
    assert indexed.exit_code == 0 and indexed.stderr == note, indexed.output


def test_cli_training_options_reach_the_api_s_config(tmp_path, tiny_scifact, monkeypatch):
    """Each general training option of ``ckqti train`` is the TrainConfig the API builds from the same
    keywords, and --dev-qrels goes on to the training (mutants dropping --seed or --negatives on their
    way to the API passed every test)."""
    import ckqti.train
    from ckqti.train.options import train_config

    seen = {}

    def fake_train(corpus, queries, qrels, out, config, **kw):
        seen.update(config=config, **kw)
        raise SystemExit(0)

    monkeypatch.setattr(ckqti.train, "train", fake_train)
    dev = tmp_path / "dev.tsv"
    dev.write_text("q1\t0\td1\t1\n")
    options = dict(epochs=3, patience=2, batch_size=4, lr=0.01, seed=7, dev_fraction=0.3, rel_level=2,
                   weak_supervision="titles", loss="lce", negatives=2, max_steps=5)
    args = ["train", "--model", "ndrm3", "--corpus", tiny_scifact["corpus"], "--queries", tiny_scifact["corpus"],
            "--qrels", tiny_scifact["corpus"], "--out", tmp_path / "m.pt", "--dev-qrels", dev]
    for name, value in options.items():
        args += [f"--{name.replace('_', '-')}", value]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0 and "config" in seen, res.output
    assert seen["config"] == train_config("ndrm3", dev_qrels=str(dev), **options)
    assert seen["config"] != train_config("ndrm3", dev_qrels=str(dev))
    assert str(seen["dev_qrels"]) == str(dev)


def test_cli_quiet_is_the_api_s_progress_false_and_silences_the_cli_s_notes(tmp_path, monkeypatch):
    history = tuple({"stage": 0, "epoch": e, "dev_ndcg10": 0.0} for e in range(3))
    res, out = fake_training(tmp_path, monkeypatch, "tk", 0.0, history)  # dev chose nothing: a note on stderr
    assert res.exit_code == 0 and "dev did not choose this model" in res.stderr
    from ckqti import api
    from ckqti.train.reranker_config import RerankerTrainResult

    given = []
    monkeypatch.setattr(api, "train", lambda *a, **k: given.append(k) or RerankerTrainResult(out, "tk-abc", 0.0, history,
                                                                                             tmp_path))
    args = ["train", "--model", "tk", "--corpus", out, "--queries", out, "--qrels", out, "--out", out]
    res = CliRunner().invoke(cli, [str(a) for a in args])
    quiet = CliRunner().invoke(cli, [str(a) for a in args + ["--quiet"]])
    assert [k["progress"] for k in given] == [True, False]
    assert res.stderr and quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == res.stdout


@pytest.mark.slow
def test_cli_quiet_training_says_nothing_on_stderr(tmp_path, tiny_scifact, monkeypatch):
    """Training's start-up steps, notes, bars and epoch lines (drawn here as on a terminal) are the API's ``progress``:
    ``--quiet`` leaves stderr empty, its result line on stdout as without it."""
    monkeypatch.setattr("ckqti.progress.on_terminal", lambda stream=None: True)
    queries, qrels = write_judged(tmp_path, tiny_scifact)
    runs = []
    for flag in ([], ["-q"]):
        args = ["train", "--model", "ndrm2", "--corpus", tiny_scifact["corpus"], "--queries", queries, "--qrels", qrels,
                "--out", tmp_path / f"m{len(flag)}.pt", "--epochs", "1", "--max-steps", "1", "--batch-size", "8",
                "--dev-fraction", "0.25", "--embeddings", "random", *flag]
        runs.append(CliRunner().invoke(cli, [str(a) for a in args]))
    loud, quiet = runs
    assert loud.exit_code == quiet.exit_code == 0, (loud.output, quiet.output)
    assert "BM25 candidates" in loud.stderr and "epoch 1" in loud.stderr and quiet.stderr == "", quiet.stderr
    assert quiet.stdout.startswith("ndrm2-") and "best dev nDCG@10" in quiet.stdout
