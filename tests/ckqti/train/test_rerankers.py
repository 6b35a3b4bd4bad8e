"""Training TK/TKL/IDCM re-rankers: configs, text spans, pairwise learning, checkpoints of every kind.

Data: the 40-claim SciFact slice of ``tests/ckqti/conftest.py`` (lexical candidates, no Java). Models are tiny.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import load_checkpoint
from ckqti.models.inputs import TermText
from ckqti.models.reranker import build_model, load_reranker
from ckqti.text import Analyzer
from ckqti.train.reranker_config import RerankerTrainConfig, RerankerTrainResult
from ckqti.train.reranker_data import PairData
from ckqti.train.reranker_epoch import group_batch, group_loss, train_epoch
from ckqti.train.reranker_sampling import epoch_groups, epoch_triples
from ckqti.train.reranker_tk import match_init
from ckqti.train.rerankers import train_reranker

from .conftest import bad_judgements, graded_qrels

TINY_TK = dict(embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1)
TINY_BERT = dict(vocab_size=30522, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                 max_position_embeddings=128, dropout=0.0)


def quick(kind: str, **kw) -> RerankerTrainConfig:
    base = dict(kind=kind, epochs=2, batch_size=8, max_steps=3, embeddings="random", dev_depth=10,
                max_dev_queries=4, progress=False, model_options=TINY_TK)
    base.update(kw)
    return RerankerTrainConfig(**base)


def test_config_is_validated():
    with pytest.raises(ValueError):
        RerankerTrainConfig(kind="bert")
    with pytest.raises(ValueError):
        RerankerTrainConfig(loss="hinge")
    with pytest.raises(ValueError):
        RerankerTrainConfig(stages=(2, 1))
    with pytest.raises(ValueError):
        RerankerTrainConfig(model_options={"vocab_size": 3})
    with pytest.raises(ValueError):  # several negatives are a listwise group: margin/RankNet are pairwise
        RerankerTrainConfig(loss="margin", negatives=4)
    with pytest.raises(ValueError):
        RerankerTrainConfig(loss="lce", negatives=0)
    for seed in (-1, 2**32):  # past numpy's legacy seeding: a traceback in skip-gram training or TK's start
        with pytest.raises(ValueError, match="seed"):
            RerankerTrainConfig(seed=seed)
    assert RerankerTrainConfig(stages=[1, 3]).stages == (1, 3)


def test_match_init_ranks_by_exact_matches():
    """A match-initialised TK and TKL prefer the document holding the query's terms."""
    torch.manual_seed(0)
    q = torch.tensor([[5, 6, 7]])
    with_terms = torch.tensor([[20, 21, 5, 22, 6, 23, 7, 24] * 5])
    without = torch.tensor([[20, 21, 25, 22, 26, 23, 27, 24] * 5])
    for kind in ("tk", "tkl"):
        model = build_model(kind, dict(vocab_size=40, **TINY_TK)).eval()
        match_init(model)
        s = model(q.repeat(2, 1), torch.cat([with_terms, without]))
        assert s[0] > s[1], kind


def small_pairs(tiny_scifact) -> tuple[PairData, TermText]:
    """The slice as PairData for a TK vocabulary (documents capped at 200 terms)."""
    from ckqti.train.data import load_collection
    from ckqti.train.reranker_data import prepare_pairs

    coll = load_collection(tiny_scifact["corpus"])
    text = TermText(coll.analyzer, coll.vocab)
    rows = [np.asarray(coll.doc(i)[:200], dtype=np.int64) for i in range(len(coll))]
    config = quick("tk")
    data = prepare_pairs(text, coll.docids, rows, tiny_scifact["queries"], tiny_scifact["qrels"],
                         tiny_scifact["candidates"], config, 30)
    return data, text


def test_triples_are_relevant_then_judged_non_relevant(tiny_scifact):
    data, _ = small_pairs(tiny_scifact)
    triples = epoch_triples(data, 100, seed=0, epoch=0)
    assert len(triples) == len({q for q, _, _ in triples}) > 20  # one per usable training query
    for qid, pos, neg in triples:
        assert pos in data.relevant[qid] and neg not in data.relevant[qid]
        assert neg in data.candidates[qid]
    assert triples == epoch_triples(data, 100, seed=0, epoch=0)
    assert triples != epoch_triples(data, 100, seed=0, epoch=1)


def test_groups_hold_a_relevant_document_and_distinct_judged_non_relevant_ones(tiny_scifact):
    data, _ = small_pairs(tiny_scifact)
    groups = epoch_groups(data, 100, seed=0, epoch=0, negatives=5)
    assert len(groups) == len({q for q, _, _ in groups}) > 20
    for qid, pos, negs in groups:
        assert pos in data.relevant[qid] and len(negs) == 5
        assert all(n not in data.relevant[qid] and n in data.candidates[qid] for n in negs)
        available = [d for d in data.candidates[qid] if d not in data.relevant[qid]]
        if len(available) >= 5:
            assert len(set(negs)) == 5  # drawn without replacement when there are enough
    assert groups == epoch_groups(data, 100, seed=0, epoch=0, negatives=5)
    assert groups != epoch_groups(data, 100, seed=0, epoch=1, negatives=5)
    q, d = group_batch(data, groups[:3], torch.device("cpu"))
    assert q.shape[0] == d.shape[0] == 18  # 3 groups of 1 + 5, each query repeated for its group
    assert torch.equal(q[0], q[5]) and not torch.equal(q[5], q[6])
    first = torch.as_tensor(data.docs[groups[0][1]])
    assert torch.equal(d[0, : len(first)], first)  # every group starts with its relevant document


def test_group_loss_is_ranknet_for_a_pair_and_prefers_the_relevant_first():
    pos, neg = torch.tensor([2.0, -1.0]), torch.tensor([0.5, 3.0])
    pairs = torch.stack([pos, neg], dim=1).reshape(-1)  # [p0, n0, p1, n1]
    ranknet = torch.nn.functional.softplus(neg - pos).mean()
    assert torch.allclose(group_loss(pairs, 2), ranknet)
    good, bad = torch.tensor([5.0, 0.0, 0.0]), torch.tensor([0.0, 5.0, 0.0])
    assert group_loss(good, 3) < group_loss(bad, 3)


@pytest.mark.parametrize("loss,negatives", [("margin", 1), ("lce", 3)])
@pytest.mark.parametrize("kind", ["tk", "tkl", "tk-explicit", "tkl-explicit"])
def test_training_loss_goes_down(tiny_scifact, kind, loss, negatives):
    """Repeating one epoch's triples (margin) or groups of 1 relevant + 3 negatives (softmax cross-entropy),
    the loss falls (paper init, so nothing is given away) and every parameter gets a finite gradient
    (``-explicit``: with NDRM2's explicit channel, whose BatchNorm sees a query's documents together)."""
    data, text = small_pairs(tiny_scifact)
    torch.manual_seed(0)
    kind, explicit = kind.removesuffix("-explicit"), kind.endswith("-explicit")
    model = build_model(kind, dict(vocab_size=len(text.vocab), **TINY_TK, **({"explicit": True} if explicit else {})))
    model.set_collection(text.vocab)
    opt = torch.optim.Adam(model.parameter_groups(1e-3, 1e-2))
    config = quick(kind, max_steps=3, loss=loss, negatives=negatives)
    losses = [train_epoch(model, None, model, opt, data, config, 0, torch.device("cpu"))["loss"] for _ in range(6)]
    assert losses[-1] < losses[0]
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    if loss == "lce":
        assert losses[0] < 2 * np.log(1 + negatives)  # a cross-entropy over groups of 4, not a margin loss


def test_train_tk_writes_a_checkpoint_that_reranks(tiny_scifact, tmp_path):
    out = tmp_path / "tk.pt"
    res = train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                         quick("tk"), candidates=tiny_scifact["candidates"])
    assert out.is_file() and res.model_id.startswith("tk-")
    assert [h["epoch"] for h in res.history] == [0, 1, 2]  # validated before training, then each epoch
    assert [h["steps"] for h in res.history] == [0, 3, 3]
    assert 0.0 <= res.best_dev_ndcg10 <= 1.0 and res.epochs_run == 2
    assert res.history[res.best_epoch]["dev_ndcg10"] == res.best_dev_ndcg10
    rr = load_reranker(out, device="cpu")
    assert rr.kind == "tk" and rr.model_id == res.model_id and rr.max_doc_length == 200
    docs = list(tiny_scifact["docs"].values())[:5]
    query = next(iter(tiny_scifact["queries"].values()))
    scores = rr.score(query, docs, batch_size=2)
    with torch.no_grad():  # the same as the model on the padded batch of all five
        q = torch.as_tensor(rr.query_ids(query))[None].expand(5, -1)
        d = torch.nn.utils.rnn.pad_sequence([torch.as_tensor(rr.doc_ids(t)) for t in docs], batch_first=True)
        direct = rr.model(q, d).double().numpy()
    np.testing.assert_allclose(scores, direct, rtol=1e-5, atol=1e-6)


def test_reranker_training_notes_repeated_orcas_lines(tiny_scifact, tmp_path, capsys):
    """TK/TKL/IDCM training with an ORCAS file shows (with ``progress``) and returns the note
    ``ckqti index`` gives on its repeated lines, which it dropped silently."""
    orcas = tmp_path / "orcas.tsv"
    rows = [f"{d}\t{tiny_scifact['queries'][q]}\n" for q, j in tiny_scifact["qrels"].items() for d in j]
    orcas.write_text("".join(rows + rows[:1]))
    res = train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"],
                         tmp_path / "tk.pt", quick("tk", epochs=1, progress=True), candidates=tiny_scifact["candidates"],
                         orcas=orcas)
    note = f"1 repeated line of {orcas} dropped (a document's clicked query counts once)"
    assert res.notes[0] == note and f"note: {note}\n" in capsys.readouterr().err


def test_tkl_trained_with_a_max_doc_length_keeps_it_for_rerank(tiny_scifact, tmp_path):
    """``max_doc_length`` as ``ckqti train --max-doc-length`` gives it reaches the trained TKL, its
    checkpoint's config, and the reranker loaded from it (as trained or adapted to another vocabulary)."""
    from ckqti.models.checkpoint import load_checkpoint
    from ckqti.models.reranker import adapt_reranker
    from ckqti.train.options import train_config

    given = train_config("tkl", max_doc_length=4000, epochs=1, embeddings="random")
    config = replace(quick("tkl", epochs=1), model_options={**TINY_TK, **given.model_options})
    out = tmp_path / "tkl.pt"
    train_reranker("tkl", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out, config,
                   candidates=tiny_scifact["candidates"])
    ckpt = load_checkpoint(out)
    assert ckpt.config["max_doc_length"] == 4000
    long_doc = " ".join(next(iter(tiny_scifact["docs"].values())).split()[:10] * 350)  # 3,500 words, past 2,000
    for rr in (load_reranker(out, device="cpu"), adapt_reranker(ckpt, ckpt.vocab, device="cpu")):
        assert rr.max_doc_length == rr.model.config.max_doc_length == 4000
        assert 2000 < len(rr.doc_ids(long_doc)) <= 4000


def test_idcm_resumed_after_a_finished_stage_ends_with_an_uninterrupted_runs_weights(tiny_scifact, tmp_path):
    """A run stopped after stage 1 and run again reuses stage1.pt; stage 2 started from the torch RNG as
    the model's start left it, not as stage 1 did, so with dropout its weights (and dev scores) differed
    from an uninterrupted run's (its losses; its weights too where the epoch beat the stage's start)."""
    opts = dict(bert={**TINY_BERT, "dropout": 0.1}, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=1, dev_depth=3, max_dev_queries=2, model_options=opts,
                   stages=(1, 2))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    whole = train_reranker("idcm", *args, tmp_path / "whole.pt", config, candidates=tiny_scifact["candidates"])
    train_reranker("idcm", *args, tmp_path / "cut.pt", replace(config, stages=(1,)), candidates=tiny_scifact["candidates"])
    resumed = train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"])
    a, b = load_checkpoint(tmp_path / "whole.pt").state_dict, load_checkpoint(tmp_path / "cut.pt").state_dict
    assert [k for k in a if not torch.equal(a[k], b[k])] == [] and resumed.model_id == whole.model_id
    assert [(h["loss"], h["dev_ndcg10"]) for h in resumed.history] == [(h["loss"], h["dev_ndcg10"]) for h in whole.history]


def test_idcm_reuses_a_finished_stage_when_only_progress_or_eval_batch_size_change(tiny_scifact, tmp_path, capsys):
    """A stage's checkpoint is reused by a later run of the same inputs; the settings that change no weights
    (progress bars, validation's batch size) counted as inputs, so the API's ``progress=False`` after the CLI's
    bars, or another ``eval_batch_size``, trained a finished stage again."""
    opts = dict(bert=TINY_BERT, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=1, dev_depth=3, max_dev_queries=2, model_options=opts,
                   stages=(1,))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "m.pt")
    train_reranker("idcm", *args, config, candidates=tiny_scifact["candidates"])
    stage1 = tmp_path / "m.pt.work" / "stage1.pt"
    written = stage1.stat().st_mtime_ns
    capsys.readouterr()
    train_reranker("idcm", *args, replace(config, stages=(1, 2), progress=not config.progress, eval_batch_size=7),
                   candidates=tiny_scifact["candidates"])
    assert "of other inputs or settings" not in capsys.readouterr().err
    assert stage1.stat().st_mtime_ns == written


class Interrupt(Exception):
    pass


def interrupt_at(monkeypatch, epoch: int, stage: int | None = None) -> None:
    """Make ``train_epoch`` raise :class:`Interrupt` when it starts ``epoch`` (0-based) of ``stage`` (any stage: None)."""
    import ckqti.train.reranker_stage as stage_mod

    real, calls = stage_mod.train_epoch, {"stage": 0, "last": -1}

    def train_epoch(score, loss_fn, model, optimizer, data, config, e, device):
        calls["stage"] += e <= calls["last"]  # the epochs start again: the next stage
        calls["last"] = e
        if e == epoch and stage in (None, config.stages[calls["stage"]]):
            raise Interrupt()
        return real(score, loss_fn, model, optimizer, data, config, e, device)

    monkeypatch.setattr(stage_mod, "train_epoch", train_epoch)


def epochs_trained(monkeypatch) -> list[int]:
    """The (0-based) epochs ``train_epoch`` is called for from now on, in order."""
    import ckqti.train.reranker_stage as stage_mod

    real, epochs = stage_mod.train_epoch, []

    def train_epoch(score, loss_fn, model, optimizer, data, config, e, device):
        epochs.append(e)
        return real(score, loss_fn, model, optimizer, data, config, e, device)

    monkeypatch.setattr(stage_mod, "train_epoch", train_epoch)
    return epochs


def same_weights(a, b) -> bool:
    a, b = load_checkpoint(a).state_dict, load_checkpoint(b).state_dict
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("kind", ["tk", "tkl"])
def test_tk_and_tkl_resumed_after_an_interrupted_epoch_end_with_an_uninterrupted_runs_weights(
        tiny_scifact, tmp_path, monkeypatch, kind):
    """TK and TKL trained in one go: a run stopped in its third epoch started over (``resume`` was refused).
    Each epoch's end is saved in the work folder; ``resume`` continues after it with the RNG as it was, so
    dropout and sampling are an uninterrupted run's."""
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    config = quick(kind, epochs=4, patience=10, lr_rest=1e-1, max_steps=4)
    whole = train_reranker(kind, *args, tmp_path / "whole.pt", config, candidates=tiny_scifact["candidates"])
    assert whole.epochs_run == 4 and whole.best_epoch > 2  # an epoch after the interruption is the best
    interrupt_at(monkeypatch, 2)
    with pytest.raises(Interrupt):
        train_reranker(kind, *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"])
    monkeypatch.undo()
    assert (tmp_path / "cut.pt.work" / "state.pt").is_file()
    trained = epochs_trained(monkeypatch)
    resumed = train_reranker(kind, *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert trained == [2, 3]  # the interrupted epoch and the one after it
    assert same_weights(tmp_path / "whole.pt", tmp_path / "cut.pt") and resumed.model_id == whole.model_id
    assert [(h["epoch"], h["loss"], h["dev_ndcg10"]) for h in resumed.history] == [
        (h["epoch"], h["loss"], h["dev_ndcg10"]) for h in whole.history]
    assert resumed.best_epoch == whole.best_epoch


def test_a_resumed_run_may_train_more_epochs_but_not_with_other_settings(tiny_scifact, tmp_path, capsys, monkeypatch):
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    config = quick("tk", epochs=3, patience=10, lr_rest=1e-1, max_steps=4, progress=True)
    whole = train_reranker("tk", *args, tmp_path / "whole.pt", config, candidates=tiny_scifact["candidates"])
    train_reranker("tk", *args, tmp_path / "cut.pt", replace(config, epochs=2), candidates=tiny_scifact["candidates"])
    capsys.readouterr()
    trained = epochs_trained(monkeypatch)
    more = train_reranker("tk", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    err = capsys.readouterr().err
    assert trained == [2] and whole.best_epoch == 3
    assert f"resuming from {tmp_path / 'cut.pt.work' / 'state.pt'} after epoch 2" in err and "epoch 3 of 3 next" in err
    assert more.model_id == whole.model_id and same_weights(tmp_path / "whole.pt", tmp_path / "cut.pt")
    again = train_reranker("tk", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert "all 3 epochs are done" in capsys.readouterr().err and again.model_id == whole.model_id and trained == [2]
    with pytest.raises(CkqtiError, match="other settings or data; rerun without --resume"):
        train_reranker("tk", *args, tmp_path / "cut.pt", replace(config, lr_rest=1e-3),
                       candidates=tiny_scifact["candidates"], resume=True)
    fresh = train_reranker("tk", *args, tmp_path / "cut.pt", replace(config, seed=5), candidates=tiny_scifact["candidates"])
    assert "holds an earlier run's state: training from epoch 1 replaces it" in capsys.readouterr().err
    assert fresh.epochs_run == 3 and [h["epoch"] for h in fresh.history] == [0, 1, 2, 3]
    (tmp_path / "cut.pt.work" / "state.pt").unlink()
    train_reranker("tk", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert "nothing to resume" in capsys.readouterr().err


def test_idcm_resumed_within_a_stage_ends_with_an_uninterrupted_runs_weights(tiny_scifact, tmp_path, monkeypatch):
    opts = dict(bert={**TINY_BERT, "dropout": 0.1}, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=2, patience=5, dev_depth=3, max_dev_queries=2,
                   model_options=opts, stages=(1, 2))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    whole = train_reranker("idcm", *args, tmp_path / "whole.pt", config, candidates=tiny_scifact["candidates"])
    interrupt_at(monkeypatch, 1, stage=2)
    with pytest.raises(Interrupt):
        train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"])
    monkeypatch.undo()
    work = tmp_path / "cut.pt.work"
    assert (work / "stage1.pt").is_file() and not (work / "stage1.state.pt").exists() and (work / "stage2.state.pt").is_file()
    trained = epochs_trained(monkeypatch)
    resumed = train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert trained == [1]  # stage 1 reused, stage 2's second epoch
    assert same_weights(tmp_path / "whole.pt", tmp_path / "cut.pt") and resumed.model_id == whole.model_id
    assert [(h["loss"], h["dev_ndcg10"]) for h in resumed.history] == [(h["loss"], h["dev_ndcg10"]) for h in whole.history]
    assert not (work / "stage2.state.pt").exists()


def test_idcm_resumed_in_stage_2_with_more_epochs_trains_stage_2_on_the_new_stage_1(tiny_scifact, tmp_path, monkeypatch):
    """More epochs retrain stage 1 (its checkpoint is of other settings), but stage 2's saved epochs, begun
    from the old stage 1, were resumed on top of it: the model mixed two runs (not an uninterrupted one's)."""
    opts = dict(bert={**TINY_BERT, "dropout": 0.1}, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=3, patience=5, dev_depth=10, max_dev_queries=4,
                   lr_encoder=1e-2, lr_rest=1e-1, model_options=opts, stages=(1, 2))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    whole = train_reranker("idcm", *args, tmp_path / "whole.pt", config, candidates=tiny_scifact["candidates"])
    stage1 = [h for h in whole.history if h["stage"] == 1]
    assert max(stage1, key=lambda h: h["dev_ndcg10"])["epoch"] == 3  # a third stage-1 epoch changes stage 1
    interrupt_at(monkeypatch, 1, stage=2)
    with pytest.raises(Interrupt):
        train_reranker("idcm", *args, tmp_path / "cut.pt", replace(config, epochs=2), candidates=tiny_scifact["candidates"])
    monkeypatch.undo()
    assert (tmp_path / "cut.pt.work" / "stage2.state.pt").is_file()
    resumed = train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert same_weights(tmp_path / "whole.pt", tmp_path / "cut.pt") and resumed.model_id == whole.model_id
    assert [(h["loss"], h["dev_ndcg10"]) for h in resumed.history] == [(h["loss"], h["dev_ndcg10"]) for h in whole.history]


def test_idcm_stopped_between_a_stages_checkpoint_and_removing_its_state_removes_it_when_resumed(
        tiny_scifact, tmp_path, monkeypatch):
    """The stage's checkpoint supersedes its epochs' state, but a run stopped between writing the one and removing
    the other left the state for good: a resumed run reused the checkpoint and never removed it (for MiniLM,
    model, Adam's moments and the best weights: about 4 times the model's 90 MB)."""
    import ckqti.train.reranker_idcm as idcm_mod

    opts = dict(bert=TINY_BERT, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=1, dev_depth=3, max_dev_queries=2, model_options=opts,
                   stages=(1, 2))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    real = idcm_mod.save_reranker

    def save_then_stop(path, *a, **kw):
        real(path, *a, **kw)
        raise Interrupt()

    monkeypatch.setattr(idcm_mod, "save_reranker", save_then_stop)
    with pytest.raises(Interrupt):
        train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"])
    monkeypatch.undo()
    work = tmp_path / "cut.pt.work"
    assert (work / "stage1.pt").is_file() and (work / "stage1.state.pt").is_file()
    train_reranker("idcm", *args, tmp_path / "cut.pt", config, candidates=tiny_scifact["candidates"], resume=True)
    assert sorted(p.name for p in work.iterdir()) == ["stage1.pt", "stage2.pt"]


def test_idcm_three_stages_and_wordpiece_checkpoint(tiny_scifact, tmp_path, capsys):
    """All three IDCM stages run on a tiny random BERT; the checkpoint carries its WordPiece vocabulary."""
    from ckqti.models.minilm import WordPieceTokenizer

    opts = dict(bert=TINY_BERT, max_doc_length=200, sample_n=3, top_k=2)
    config = quick("idcm", batch_size=2, max_steps=2, epochs=1, dev_depth=3, max_dev_queries=2, model_options=opts)
    out = tmp_path / "idcm.pt"
    res = train_reranker("idcm", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                         config, candidates=tiny_scifact["candidates"])
    assert [(h["stage"], h["epoch"]) for h in res.history] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert res.epochs_run == 1 and res.history[4 + res.best_epoch]["dev_ndcg10"] == res.best_dev_ndcg10
    assert all((res.work_dir / f"stage{s}.pt").is_file() for s in (1, 2, 3))
    rr = load_reranker(out, device="cpu")
    text = "Vitamin D deficiency and tuberculosis risk in adults"
    assert list(rr.query_ids(text)) == WordPieceTokenizer.minilm().encode(text, 30)
    # a rerun finds every stage done and only rewrites the final checkpoint with the same weights
    res2 = train_reranker("idcm", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                          config, candidates=tiny_scifact["candidates"])
    assert res2.model_id == res.model_id
    # stages of other settings or data are not reused (they were, whatever the corpus, epochs or seed)
    qid, judged = next(iter(tiny_scifact["qrels"].items()))
    other = next(d for d in tiny_scifact["docs"] if d not in judged)
    relabelled = {**tiny_scifact["qrels"], qid: {other: 1}}
    for changed, progress in (({"config": replace(config, seed=5)}, False), ({"qrels": relabelled}, True)):
        args = {"config": config, "qrels": tiny_scifact["qrels"], **changed}
        args["config"] = replace(args["config"], progress=progress)  # the note is said with progress only
        before = (res.work_dir / "stage1.pt").stat().st_mtime_ns
        capsys.readouterr()
        train_reranker("idcm", tiny_scifact["corpus"], tiny_scifact["queries"], args["qrels"], out, args["config"],
                       candidates=tiny_scifact["candidates"])
        assert capsys.readouterr().err.count("are of other inputs or settings: training stage 1 on") == int(progress)
        assert (res.work_dir / "stage1.pt").stat().st_mtime_ns != before  # trained again, not reused
    # a setting only stage 3 reads retrains the selector alone: the cross-encoder's stages are reused
    train_reranker("idcm", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out, config,
                   candidates=tiny_scifact["candidates"])
    before = {s: (res.work_dir / f"stage{s}.pt").stat().st_mtime_ns for s in (1, 2, 3)}
    capsys.readouterr()
    res3 = train_reranker("idcm", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                          replace(config, selector_loss="kl", progress=True), candidates=tiny_scifact["candidates"])
    assert capsys.readouterr().err.count("training stage 3 on") == 1
    after = {s: (res.work_dir / f"stage{s}.pt").stat().st_mtime_ns for s in (1, 2, 3)}
    assert after[1] == before[1] and after[2] == before[2] and after[3] != before[3]
    assert [h["stage"] for h in res3.history] == [1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("kind, explicit", [("tk", False), ("tkl", False), ("tk", True), ("tkl", True)])
def test_idf_weights_follow_the_collection_in_training_and_zero_shot(tiny_scifact, tmp_path, kind, explicit):
    """TK or TKL with idf term weights (and with the explicit channel, whose NDRM2 has an idf of its own)
    takes the training vocabulary's idf when trained, keeps it in its checkpoint, and takes the new
    collection's when adapted to another vocabulary."""
    from ckqti.models.checkpoint import load_checkpoint
    from ckqti.models.inputs import collection_vocabulary
    from ckqti.models.reranker import adapt_reranker

    options = {**quick(kind).model_options, "term_weights": "idf", "max_doc_length": 200}
    config = quick(kind, model_options={**options, "explicit": True} if explicit else options)
    out = tmp_path / f"{kind}.pt"
    train_reranker(kind, tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out, config,
                   candidates=tiny_scifact["candidates"])
    rr = load_reranker(out, device="cpu")
    ckpt = load_checkpoint(out)
    assert rr.model.config.term_weights == "idf"
    assert torch.allclose(rr.model.idf, torch.as_tensor(ckpt.vocab.idf(), dtype=torch.float32))
    new_vocab = collection_vocabulary(["tumor zebrafish", "quasar telescope", "gene cell", "gene"], Analyzer())
    adapted = adapt_reranker(ckpt, new_vocab, device="cpu")
    assert torch.allclose(adapted.model.idf, torch.as_tensor(new_vocab.idf(), dtype=torch.float32))
    if explicit:
        trained = rr.model.combiner.explicit
        assert torch.allclose(trained.idf, torch.as_tensor(ckpt.vocab.idf(), dtype=torch.float32))
        ndrm2 = adapted.model.combiner.explicit
        assert torch.allclose(ndrm2.idf, torch.as_tensor(new_vocab.idf(), dtype=torch.float32))
        for name in ("tf_scale", "length_scale"):  # the training statistics (if any were seen) are kept
            old, new = getattr(trained, name), getattr(ndrm2, name)
            assert (float(new.total), float(new.count)) == (float(old.total), float(old.count))
    s = adapted.score("zebrafish", ["quasar telescope", "zebrafish tumor"])
    assert s[1] > s[0]


def write_teacher(path, data: PairData, qids, score) -> None:
    """A teacher file scoring each of ``qids``' first 12 candidates with ``score(qid, doc index)``."""
    import gzip
    import json

    scores = {q: {data.docids[d]: float(score(q, d)) for d in data.candidates[q][:12]} for q in qids}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"teacher": "test", "scores": scores}, f)


def test_teacher_config_is_validated():
    with pytest.raises(ValueError):
        RerankerTrainConfig(kind="idcm", teacher="t.json")  # IDCM distils its own cross-encoder
    with pytest.raises(ValueError):
        RerankerTrainConfig(distill_docs=0)
    with pytest.raises(ValueError):
        RerankerTrainConfig(distill_weight=-1.0)


def test_teacher_scores_of_dev_queries_never_reach_training(tiny_scifact, tmp_path):
    from ckqti.train.data import load_collection
    from ckqti.train.reranker_data import load_teacher, prepare_pairs
    from ckqti.train.reranker_epoch import teacher_batch

    plain, _ = small_pairs(tiny_scifact)
    path = tmp_path / "teacher.json.gz"
    write_teacher(path, plain, [*plain.train_qids, *plain.dev_qids], lambda q, d: d % 7)
    coll = load_collection(tiny_scifact["corpus"])
    rows = [np.asarray(coll.doc(i)[:200], dtype=np.int64) for i in range(len(coll))]
    config = quick("tk", teacher=str(path))
    data = prepare_pairs(TermText(coll.analyzer, coll.vocab), coll.docids, rows, tiny_scifact["queries"],
                         tiny_scifact["qrels"], tiny_scifact["candidates"], config, 30,
                         load_teacher(config, coll.docids, tiny_scifact["qrels"]))
    assert set(plain.train_qids) <= set(data.teacher) and not set(data.teacher) & set(data.dev_qids)
    q, d, t = teacher_batch(data, [plain.train_qids[0], plain.dev_qids[0], plain.train_qids[1]], 5,
                            np.random.default_rng(0), torch.device("cpu"))
    assert t.shape == (2, 5) and q.shape[0] == d.shape[0] == 10  # the dev query is skipped
    idx, sc = data.teacher[plain.train_qids[0]]
    assert (sc == idx % 7).all() and torch.equal(q[0], q[4]) and not torch.equal(q[4], q[5])
    for i in range(5):  # the first query's rows are documents the teacher scored for it
        assert any(torch.equal(d[i, : len(data.docs[j])], torch.as_tensor(data.docs[j])) for j in idx.tolist())


def test_distillation_pulls_the_student_towards_the_teacher(tiny_scifact, tmp_path):
    """Trained with the teacher's loss, a TK agrees better with a teacher that ranks against exact
    matches than the same TK trained without it (same seeds, same pairwise steps)."""
    from ckqti.train.losses import distill_loss
    from ckqti.train.reranker_epoch import teacher_batch
    from ckqti.train.teacher import read_teacher

    data, text = small_pairs(tiny_scifact)
    path = tmp_path / "teacher.json.gz"

    def against_matches(q: str, d: int) -> float:
        return -0.5 * np.isin(data.docs[d], data.queries[q][data.queries[q] > 1]).sum()

    write_teacher(path, data, data.train_qids, against_matches)
    index = {d: i for i, d in enumerate(data.docids)}
    with_teacher = replace(data, teacher=read_teacher(path, index, {q: {} for q in data.train_qids}))
    cpu = torch.device("cpu")
    probe = teacher_batch(with_teacher, with_teacher.train_qids, 12, np.random.default_rng(0), cpu)

    def trained(d: PairData, weight: float) -> float:
        torch.manual_seed(0)
        model = build_model("tk", dict(vocab_size=len(text.vocab), **TINY_TK))
        opt = torch.optim.Adam(model.parameter_groups(1e-3, 1e-2))
        config = quick("tk", max_steps=3, distill_weight=weight)
        for _ in range(6):
            train_epoch(model, None, model, opt, d, config, 0, cpu)
        with torch.no_grad():
            return float(distill_loss(model(probe[0], probe[1]).view(probe[2].shape), probe[2]))

    taught, untaught = trained(with_teacher, 5.0), trained(with_teacher, 0.0)
    assert taught < untaught - 0.05, (taught, untaught)


def test_weak_supervision_config_is_validated():
    with pytest.raises(ValueError):
        RerankerTrainConfig(kind="idcm", weak_supervision="titles")  # WordPiece text: TK and TKL only
    with pytest.raises(ValueError):
        RerankerTrainConfig(weak_supervision="abstracts")
    with pytest.raises(ValueError):
        RerankerTrainConfig(weak_supervision="titles", pseudo_per_epoch=0)


def titled_pairs(tiny_scifact) -> tuple[PairData, dict[str, dict[str, int]]]:
    from ckqti.train.data import load_collection
    from ckqti.train.pseudo import title_pseudo_queries
    from ckqti.train.reranker_data import prepare_pairs

    coll = load_collection(tiny_scifact["corpus"])
    p_queries, p_qrels = title_pseudo_queries(coll.docids, coll.titles, coll.analyzer)
    rows = [np.asarray(coll.doc(i)[:200], dtype=np.int64) for i in range(len(coll))]
    data = prepare_pairs(TermText(coll.analyzer, coll.vocab), coll.docids, rows, {**tiny_scifact["queries"], **p_queries},
                         tiny_scifact["qrels"], tiny_scifact["candidates"], quick("tk"), 30, None, p_qrels)
    return data, p_qrels


def test_title_pseudo_queries_train_their_own_document_and_never_reach_dev(tiny_scifact):
    plain, _ = small_pairs(tiny_scifact)
    data, p_qrels = titled_pairs(tiny_scifact)
    assert data.train_qids == plain.train_qids and data.dev_qids == plain.dev_qids  # the split ignores pseudo-queries
    assert len(data.pseudo_qids) > 100 and set(data.pseudo_qids) <= set(p_qrels)
    assert not set(data.pseudo_qids) & (set(data.dev_qids) | set(data.train_qids))
    triples = epoch_triples(data, 100, seed=0, epoch=0, pseudo_per_epoch=25)
    real = [t for t in triples if not t[0].startswith("title:")]
    pseudo = [t for t in triples if t[0].startswith("title:")]
    assert sorted(real) == sorted(epoch_triples(plain, 100, seed=0, epoch=0))  # judged queries sampled as before
    assert 20 <= len(pseudo) <= 25 and len({q for q, _, _ in pseudo}) == len(pseudo)
    for qid, pos, neg in pseudo:  # the title's own document against one of its BM25 candidates
        assert data.docids[pos] == qid.removeprefix("title:") and neg != pos and neg in data.candidates[qid]
    assert triples == epoch_triples(data, 100, seed=0, epoch=0, pseudo_per_epoch=25)
    other = {q for q, *_ in epoch_triples(data, 100, seed=0, epoch=1, pseudo_per_epoch=25) if q.startswith("title:")}
    assert other != {q for q, *_ in pseudo}  # another epoch draws other titles
    everything = epoch_groups(data, 100, seed=0, epoch=0, negatives=3)
    assert sum(q.startswith("title:") for q, *_ in everything) > 100  # None: every usable title each epoch


def test_teacher_scores_of_title_pseudo_queries_are_distilled(tiny_scifact, tmp_path):
    """A teacher file scoring claims and titles: the titles' scores reach training with weak
    supervision, never without it, and dev claims' never."""
    from ckqti.train.reranker_data import load_teacher
    from ckqti.train.reranker_epoch import teacher_batch

    data, p_qrels = titled_pairs(tiny_scifact)
    titles = data.pseudo_qids[:5]
    path = tmp_path / "teacher.json.gz"
    write_teacher(path, data, [*data.train_qids, *data.dev_qids, *titles], lambda q, d: d % 5)
    plain = quick("tk", teacher=str(path))
    assert not any(q.startswith("title:") for q in load_teacher(plain, data.docids, tiny_scifact["qrels"]))
    taught = load_teacher(replace(plain, weak_supervision="titles"), data.docids, tiny_scifact["qrels"], p_qrels)
    assert set(titles) <= set(taught) and set(data.train_qids) <= set(taught)
    assert not set(taught) & set(data.dev_qids)
    batch = teacher_batch(replace(data, teacher=taught), titles, 4, np.random.default_rng(0), torch.device("cpu"))
    assert batch is not None and batch[2].shape == (5, 4)


def test_train_tkl_with_title_pseudo_queries(tiny_scifact, tmp_path):
    """Candidates given for the claims and titles, so no BM25 (Java) runs; the pseudo-queries add steps."""
    runs = {}
    for weak in (None, "titles"):
        out = tmp_path / f"tkl-{weak}.pt"
        config = quick("tkl", epochs=1, max_steps=None, weak_supervision=weak, pseudo_per_epoch=40)
        runs[weak] = train_reranker("tkl", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                                    config, candidates=tiny_scifact["candidates"])
        assert out.is_file()
    steps = {w: r.history[-1]["steps"] for w, r in runs.items()}
    assert steps["titles"] == steps[None] + 5  # 40 more triples, 8 a step
    assert load_reranker(tmp_path / "tkl-titles.pt").kind == "tkl"


def test_train_result_names_the_saved_epoch_of_the_last_stage(tmp_path):
    """The first epoch of the best score (training keeps only a strictly better one), in the last stage."""
    rows = [(1, 0, 0.2), (1, 1, 0.9), (2, 0, 0.3), (2, 1, 0.5), (2, 2, 0.5), (2, 3, 0.4)]
    history = tuple({"stage": s, "epoch": e, "dev_ndcg10": d} for s, e, d in rows)
    res = RerankerTrainResult(tmp_path / "m.pt", "idcm-x", 0.5, history, tmp_path)
    assert (res.best_epoch, res.epochs_run) == (1, 3)
    untrained = RerankerTrainResult(tmp_path / "m.pt", "tk-x", 0.4, history[:1], tmp_path)
    assert (untrained.best_epoch, untrained.epochs_run) == (0, 0)


def test_tk_keeps_an_existing_checkpoint_until_an_epoch_improves(tiny_scifact, tmp_path, monkeypatch):
    """The untrained start is no longer written at once: a rerun interrupted before its first better
    epoch left --out holding an untrained model in place of the trained one."""
    import ckqti.train.reranker_stage as stage_mod

    out = tmp_path / "tk.pt"
    train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out, quick("tk"),
                   candidates=tiny_scifact["candidates"])
    before = out.read_bytes()

    class Interrupt(Exception):
        pass

    def interrupted(*args, **kwargs):
        raise Interrupt()

    monkeypatch.setattr(stage_mod, "train_epoch", interrupted)
    with pytest.raises(Interrupt):
        train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                       quick("tk", seed=3), candidates=tiny_scifact["candidates"])
    assert out.read_bytes() == before
    monkeypatch.undo()
    res = train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], out,
                         quick("tk", lr_encoder=1e-30, lr_rest=1e-30, seed=3), candidates=tiny_scifact["candidates"])
    assert res.best_epoch == 0 and load_reranker(out, device="cpu").model_id == res.model_id  # the start, at the end


def test_train_reranker_reads_the_qrels_format_given_and_notes_judgements_it_cannot_use(tiny_scifact, tmp_path, capsys):
    """As NDRM's training: --qrels-format reaches TK's reader, and judgements of documents outside
    the corpus (here a TREC DL-style qrels with a negative grade) are counted in a note, not dropped silently."""
    qrels = tmp_path / "judgements.txt"
    lines = [f"{q} {d} {g}" for q, judged in tiny_scifact["qrels"].items() for d, g in judged.items()]
    qrels.write_text("\n".join([*lines, f"{lines[0].split()[0]} elsewhere -2"]) + "\n")
    with pytest.raises(CkqtiError, match="space-separated 3-column qrels: give the format"):
        train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "tk.pt", quick("tk"),
                       candidates=tiny_scifact["candidates"])
    res = train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "tk.pt",
                         quick("tk", epochs=1, progress=True), candidates=tiny_scifact["candidates"], qrels_format="beir")
    note = f"1 of the {len(lines) + 1} judgements (0 relevant) name a document not in the corpus and are ignored " \
           "(first: 'elsewhere')"
    assert res.notes == (note,) and f"note: {note}\n" in capsys.readouterr().err


def test_train_reranker_notes_the_queries_it_skips_for_want_of_a_known_term(tiny_scifact, tmp_path):
    from ckqti.train.data import split_dev

    queries = dict(tiny_scifact["queries"])
    qids = list(tiny_scifact["qrels"])
    for q in qids:
        queries[q] = "измерение проницаемости"
    queries[qids[0]] = tiny_scifact["queries"][qids[0]]
    queries[qids[1]] = tiny_scifact["queries"][qids[1]]
    config = quick("tk", epochs=1)
    res = train_reranker("tk", tiny_scifact["corpus"], queries, tiny_scifact["qrels"], tmp_path / "tk.pt", config,
                         candidates=tiny_scifact["candidates"])
    judged = list(split_dev(tiny_scifact["qrels"], config.dev_fraction, config.seed)[0])
    lost = [q for q in judged if q not in qids[:2]]
    assert res.notes == (f"{len(lost)} of the {len(judged)} training queries have no term in the vocabulary and are "
                         f"skipped (first: {lost[0]!r})",)


def test_rel_level_decides_the_positives_and_the_queries_trained_on(tiny_scifact):
    """At ``rel_level=2`` (``ckqti train --rel-level 2``, as eval counts TREC DL) a grade-1 document is
    never a positive (a BM25 negative it may be: it is not relevant), and a query judged 1 at best is
    neither trained on nor dev; at level 1 both count, as before."""
    from ckqti.train.data import load_collection
    from ckqti.train.reranker_data import prepare_pairs

    qrels, low = graded_qrels(tiny_scifact)
    coll = load_collection(tiny_scifact["corpus"])
    rows = [np.asarray(coll.doc(i)[:200], dtype=np.int64) for i in range(len(coll))]
    index = coll.index()
    related = {q: {index[d] for d, g in judged.items() if g == 1} for q, judged in qrels.items()}

    def pairs(level):
        return prepare_pairs(TermText(coll.analyzer, coll.vocab), coll.docids, rows, tiny_scifact["queries"], qrels,
                             tiny_scifact["candidates"], quick("tk", rel_level=level, max_dev_queries=None), 30)

    assert low & set(pairs(1).train_qids) and all(related[q] <= pairs(1).relevant[q] for q in qrels)
    data = pairs(2)
    assert not low & (set(data.train_qids) | set(data.dev_qids)) and len(data.dev_qids) == 3  # 10% of the 32
    triples = [t for epoch in range(10) for t in epoch_triples(data, 100, seed=0, epoch=epoch)]
    groups = epoch_groups(data, 100, seed=0, epoch=0, negatives=5)
    assert triples and not any(pos in related[q] for q, pos, _ in [*triples, *groups])
    assert any(neg in related[q] for q, _, neg in triples)


def test_too_few_queries_for_a_dev_split_name_the_qrels_file_before_any_work(tiny_scifact, tmp_path):
    """TK, TKL and IDCM carve dev from --qrels only: the error names the file and says so, before the
    corpus is read (no corpus here)."""
    from ckqti.errors import InputError

    first, judged = next(iter(tiny_scifact["qrels"].items()))
    qrels = tmp_path / "few.txt"
    qrels.write_text("".join(f"{first} 0 {d} {g}\n" for d, g in judged.items()))
    with pytest.raises(InputError, match=r"^.*few\.txt: need at least 2 queries with a relevant judgement \(grade "
                                         r">= 1\) to carve a dev split; 1 of the 1 judged queries have one; TK, TKL and "
                                         r"IDCM carve dev from these judgements only \(NDRM also takes --dev-qrels\)$"):
        train_reranker("tk", tmp_path / "no-corpus.jsonl", tiny_scifact["queries"], qrels, tmp_path / "tk.pt",
                       quick("tk"))


@pytest.mark.parametrize("kind", ["empty", "unknown-docs", "one-query"])
def test_refused_judgements_are_named_and_leave_nothing_at_out(tiny_scifact, tmp_path, kind, monkeypatch):
    """As NDRM's: a refused run left OUT's folder and an empty OUT.work, and judgements naming no
    document of the corpus were refused after BM25 (Java) had run, without naming the qrels file."""
    import ckqti.bm25
    from ckqti.errors import InputError

    monkeypatch.setattr(ckqti.bm25, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    qrels = tmp_path / "bad.txt"
    qrels.write_text(bad_judgements(tiny_scifact["qrels"], kind))
    with pytest.raises(InputError, match=r"bad\.txt"):
        train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "new" / "tk.pt",
                       quick("tk"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


@pytest.mark.parametrize("kind", ["tk", "idcm"])
def test_documents_trained_on_with_orcas_are_the_index_s_stored_text(clicked_collection, kind):
    """``ckqti train --orcas``: the documents a model trains on are read as ``ckqti index --orcas``
    stores them (clicks, URL, title, text), IDCM's as text, TK/TKL's and NDRM's (one collection
    reader) as its analyzed terms; without --orcas training never saw the clicks."""
    from ckqti.train.data import load_clicks
    from ckqti.train.reranker_data import build_text
    from retriever.index import Index

    corpus, orcas = clicked_collection["corpus"], clicked_collection["orcas"]
    idx = Index(clicked_collection["index"])
    _, docids, texts, coll = build_text(kind, corpus, quick(kind), None, orcas)
    _, loaded_ids, loaded_texts, loaded = build_text(kind, corpus, quick(kind), None, load_clicks(orcas))  # train's
    assert (loaded_ids, loaded_texts) == (docids, texts)
    assert coll is None or (loaded.vocab.terms, loaded.tokens.tolist()) == (coll.vocab.terms, coll.tokens.tolist())
    stored = [idx.shards[idx.locate(d)[0]].indexed_text(idx.locate(d)[1]) for d in docids]
    assert stored[0].startswith("cell division growth of cells\n")  # d1's clicks lead its stored text
    if kind == "idcm":
        assert texts == stored
    else:
        analyzer = Analyzer()
        assert [[coll.vocab.terms[t] for t in coll.doc(i)] for i in range(len(coll))] == [analyzer(t) for t in stored]
        assert coll.vocab.df[coll.vocab.ids(["division"])[0]] == 1  # the statistics count the clicks too


def test_a_stage_keeps_its_first_best_epoch_and_stops_when_patience_runs_out(monkeypatch):
    """Dev nDCG@10 of 0.5 before training, then 0.6, 0.6, 0.55 (patience 2), then 0.9 never reached:
    the stage stops after epoch 3 and ends with epoch 1's weights (an equal score is no improvement)."""
    import ckqti.train.reranker_stage as stage_mod

    model = torch.nn.Linear(1, 1)
    devs = iter([0.5, 0.6, 0.6, 0.55, 0.9])

    def epoch(score, loss_fn, model, optimizer, data, config, epoch, device):
        model.weight.data.fill_(epoch + 1.0)  # the weights say which epoch trained them
        return {"loss": 0.0, "steps": 1}

    monkeypatch.setattr(stage_mod, "train_epoch", epoch)
    monkeypatch.setattr(stage_mod, "validate", lambda *args: next(devs))
    bests = []
    result = stage_mod.fit_stage(1, model, None, model, None, None, quick("tk", patience=2), 4, torch.device("cpu"),
                                     on_best=lambda dev, history: bests.append(dev))
    assert [h["dev_ndcg10"] for h in result.history] == [0.5, 0.6, 0.6, 0.55] and result.best == 0.6
    assert model.weight.item() == 1.0 and bests == [0.5, 0.6]


@pytest.mark.parametrize("stage, label", [(0, ""), (3, "stage 3 ")])
def test_a_stage_names_itself_only_when_the_model_has_stages(monkeypatch, capsys, stage, label):
    """TK and TKL train in one stage, numbered 0: their lines read "stage 0 before training", "stage 0 epoch 1"."""
    import ckqti.train.reranker_stage as stage_mod

    model = torch.nn.Linear(1, 1)
    devs = iter([0.5, 0.25])
    monkeypatch.setattr(stage_mod, "train_epoch", lambda *args: {"loss": 0.125, "steps": 1})
    monkeypatch.setattr(stage_mod, "validate", lambda *args: next(devs))
    stage_mod.fit_stage(stage, model, None, model, None, None, quick("tk", progress=True), 1, torch.device("cpu"))
    assert capsys.readouterr().out == (f"{label}before training: dev nDCG@10 0.5000\n"
                                       f"{label}epoch 1: loss 0.1250, dev nDCG@10 0.2500\n")


def test_validation_reranks_the_top_dev_depth_candidates():
    from ckqti.train.reranker_validation import rerank_scores

    docs = [np.array([2, 3]), np.array([4]), np.array([5, 6, 7]), np.array([8])]
    data = PairData(["a", "b", "c", "d"], docs, {"q": np.array([2])}, {"q": frozenset({0})}, {"q": [2, 0, 3, 1]},
                    [], ["q"], {"q": {"a": 1}})
    run = rerank_scores(lambda q, d: d.sum(1).float(), data, ["q"], 3, 2, torch.device("cpu"))
    assert run == {"q": {"c": 18.0, "a": 5.0, "d": 8.0}}


def test_start_up_says_when_bm25_runs(tiny_scifact, tmp_path, monkeypatch, capsys):
    """As NDRM's training: BM25's candidates took minutes without a line (helper s37e saw a TK trial
    print nothing for 4 minutes in a log)."""
    import ckqti.bm25

    monkeypatch.setattr(ckqti.bm25, "bm25_candidates", lambda *a, **k: tiny_scifact["candidates"])  # no Java
    train_reranker("tk", tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "tk.pt",
                   quick("tk", epochs=1, progress=True))
    assert "BM25 candidates (Pyserini): the top 100 of " in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["tk", "tkl"])
def test_tk_and_tkl_validation_encodes_each_candidate_once_and_scores_as_pair_by_pair(tiny_scifact, kind):
    """Validation reranked each dev query's candidates pair by pair, encoding a document again for every
    query that ranks it (most of a SciFact TK epoch); TK and TKL now encode each distinct candidate once,
    as a rerank does, and score as before (queries of one length at a time: no TKL region pick flips)."""
    from ckqti.train.reranker_validation import rerank_scores, validate

    data, text = small_pairs(tiny_scifact)
    qids = [*data.train_qids, *data.dev_qids]
    data = replace(data, dev_qids=qids, dev_qrels={q: {data.docids[d]: 1 for d in data.relevant[q]} for q in qids})
    torch.manual_seed(0)
    model = build_model(kind, dict(vocab_size=len(text.vocab), **TINY_TK)).eval()
    encoded: list[int] = []
    encode = model.encode_document
    model.encode_document = lambda ids: (encoded.append(ids.shape[0]), encode(ids))[1]
    depth, cpu = 20, torch.device("cpu")
    run = rerank_scores(model, data, qids, depth, 8, cpu)
    distinct = {d for q in qids for d in data.candidates[q][:depth]}
    pairs = sum(len(data.candidates[q][:depth]) for q in qids)
    assert sum(encoded) == len(distinct) < pairs  # each candidate once, though queries share them
    pair_by_pair = rerank_scores(lambda q, d: model(q, d), data, qids, depth, 8, cpu)
    assert run.keys() == pair_by_pair.keys() and all(run[q].keys() == pair_by_pair[q].keys() for q in qids)
    np.testing.assert_allclose([run[q][d] for q in qids for d in run[q]],
                               [pair_by_pair[q][d] for q in qids for d in run[q]], rtol=1e-5, atol=1e-6)
    config = quick(kind, dev_depth=depth)
    assert abs(validate(model, model, data, config, cpu) - validate(lambda q, d: model(q, d), model, data, config, cpu)) <= 1e-6


def synthetic_pairs(n_queries: int = 2, n_docs: int = 6) -> PairData:
    """Queries ``q0..`` of two known terms each; document 0 relevant to all, every document a candidate."""
    docs = [np.arange(2, 2 + d + 1, dtype=np.int64) for d in range(n_docs)]  # lengths 1..n_docs
    qids = [f"q{i}" for i in range(n_queries)]
    queries = {q: np.array([2 + i, 3 + i], dtype=np.int64) for i, q in enumerate(qids)}
    return PairData([f"d{d}" for d in range(n_docs)], docs, queries, {q: frozenset({0}) for q in qids},
                    {q: list(range(n_docs)) for q in qids}, qids, [], {})


def test_ranknet_and_margin_losses_fall_as_the_relevant_document_scores_higher():
    from ckqti.train.reranker_epoch import pair_loss

    pos, neg = torch.tensor([2.0, -1.0]), torch.tensor([0.5, 3.0])
    ranknet = pair_loss(pos, neg, quick("tk", loss="ranknet"))
    assert torch.allclose(ranknet, torch.log1p(torch.exp(neg - pos)).mean())
    for loss in ("ranknet", "margin"):
        config = quick("tk", loss=loss)
        assert pair_loss(pos + 1, neg, config) < pair_loss(pos, neg, config) < pair_loss(pos, neg + 1, config)


def test_a_triple_batch_pairs_each_query_with_its_positive_and_its_negative():
    from ckqti.train.reranker_epoch import triple_batch

    data = synthetic_pairs(3)
    batch = [("q0", 0, 4), ("q1", 0, 2), ("q2", 0, 5)]
    q, d = triple_batch(data, batch, torch.device("cpu"))
    assert q.shape == (6, 2) and d.shape[0] == 6
    for row, (qid, doc) in enumerate([(qid, p) for qid, p, _ in batch] + [(qid, n) for qid, _, n in batch]):
        assert q[row].tolist() == data.queries[qid].tolist()
        assert d[row, : len(data.docs[doc])].tolist() == data.docs[doc].tolist()


def test_a_group_of_as_many_negatives_as_the_query_has_holds_each_once():
    data = synthetic_pairs(1, n_docs=4)  # negatives 1, 2, 3
    for epoch in range(10):
        [(_, pos, negs)] = epoch_groups(data, 100, seed=0, epoch=epoch, negatives=3)
        assert pos == 0 and sorted(negs) == [1, 2, 3]


def test_a_teacher_batch_draws_distinct_documents_when_the_teacher_scored_enough():
    from ckqti.train.reranker_epoch import teacher_batch

    data = replace(synthetic_pairs(1), teacher={"q0": (np.arange(6), np.arange(6, dtype=np.float32))})
    for seed in range(5):
        _, d, t = teacher_batch(data, ["q0"], 6, np.random.default_rng(seed), torch.device("cpu"))
        assert sorted(t[0].tolist()) == list(range(6))  # each of the six scored documents once
        assert sorted(len(row[row != 0]) for row in d) == list(range(1, 7))


def test_repeated_stages_are_refused():
    with pytest.raises(ValueError, match="stages"):
        RerankerTrainConfig(stages=(1, 1))
    with pytest.raises(ValueError, match="stages"):
        RerankerTrainConfig(stages=(1, 3, 3))


def test_candidates_are_kept_to_the_deeper_of_training_and_dev_depth_and_unknown_queries_are_not_trained(tiny_scifact):
    from ckqti.train.data import load_collection
    from ckqti.train.reranker_data import prepare_pairs

    coll = load_collection(tiny_scifact["corpus"])
    rows = [np.asarray(coll.doc(i)[:200], dtype=np.int64) for i in range(len(coll))]
    text = TermText(coll.analyzer, coll.vocab)
    for depth, dev_depth in ((3, 8), (8, 3)):
        data = prepare_pairs(text, coll.docids, rows, tiny_scifact["queries"], tiny_scifact["qrels"],
                             tiny_scifact["candidates"], quick("tk", depth=depth, dev_depth=dev_depth), 30)
        assert max(len(c) for c in data.candidates.values()) == 8
    qids = list(tiny_scifact["qrels"])
    unknown = {**tiny_scifact["queries"], **{q: "zzqxv qqzzx" for q in qids[2:]}}  # words of no document: id 1
    data = prepare_pairs(text, coll.docids, rows, unknown, tiny_scifact["qrels"], tiny_scifact["candidates"],
                         quick("tk", max_dev_queries=None), 30)
    assert all((data.queries[q] == 1).all() for q in qids[2:])
    assert data.train_qids and set(data.train_qids) <= set(qids[:2])
