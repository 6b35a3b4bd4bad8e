import copy
import dataclasses
import os

import numpy as np
import pytest
import torch

from ckqti.errors import CkqtiError
from ckqti.models.checkpoint import load_checkpoint, load_for_indexing
from ckqti.train import TrainConfig, train
from ckqti.train.data import load_collection
from ckqti.train.losses import ranknet_loss
from ckqti.train.ndrm_data import prepare_data
from ckqti.train.ndrm_epoch import epoch_examples, train_step
from ckqti.train.ndrm_start import build_model
from ckqti.train.sampling import docs_per_example

from ..conftest import TINY_MODEL
from .conftest import bad_judgements, graded_qrels

CONFIG = TrainConfig(model="ndrm3", epochs=2, batch_size=8, lr=3e-3, embeddings="random", dev_fraction=0.25,
                     dev_depth=30, model_options=TINY_MODEL, progress=False, device="cpu")


def run(tiny, out, **changes):
    config = dataclasses.replace(CONFIG, **changes.pop("config", {}))
    return train(tiny["corpus"], tiny["queries"], tiny["qrels"], out, config, candidates=tiny["candidates"], **changes)


def fixed_loss(model, data, examples, doc_terms: int, loss_fn=ranknet_loss) -> float:
    from ckqti.models.inputs import pad_rows

    per_query = len(examples[0].docs)
    model.eval()
    with torch.no_grad():
        q = pad_rows([data.query_ids[e.qid] for e in examples]).repeat_interleave(per_query, 0)
        d = pad_rows([data.collection.doc(i) for e in examples for i in e.docs], doc_terms)
        scores = model(q, d).view(len(examples), per_query)
        return loss_fn(scores, torch.tensor([e.labels for e in examples])).item()


@pytest.mark.parametrize("changes", [{}, {"negatives": 3, "loss": "lce"}], ids=["published", "negatives-lce"])
def test_a_few_epochs_lower_the_training_loss(tiny_scifact, changes):
    """The published sampling with RankNet, and 3 BM25 negatives (6-document examples) with the listwise loss."""
    from ckqti.train.losses import listwise_loss

    config = dataclasses.replace(CONFIG, lr=1e-2, **changes)
    coll = load_collection(tiny_scifact["corpus"])
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    probe = epoch_examples(data, config, 0)
    assert all(len(e.docs) == docs_per_example(config.negatives) for e in probe) and any(e.labels[0] == 2 for e in probe)
    loss_fn = listwise_loss if config.loss == "lce" else ranknet_loss
    before = fixed_loss(model, data, probe, 120, loss_fn)
    for epoch in range(3):
        model.train()
        examples = epoch_examples(data, config, epoch)
        for start in range(0, len(examples), config.batch_size):
            train_step(model, opt, examples[start : start + config.batch_size], data, 120, torch.device("cpu"), config)
    assert fixed_loss(model, data, probe, 120, loss_fn) < 0.8 * before


def test_training_writes_the_best_epoch_and_a_checkpoint_each_epoch(tmp_path, tiny_scifact):
    result = run(tiny_scifact, tmp_path / "m.pt")
    assert result.epochs_run == 2 and len(result.history) == 2 and not result.stopped_early
    best = max(h["dev_ndcg10"] for h in result.history)
    assert result.best_dev_ndcg10 == best and result.history[result.best_epoch - 1]["dev_ndcg10"] == best
    assert all(h["examples"] == 30 and np.isfinite(h["loss"]) for h in result.history)  # 30 train, 10 dev queries
    ckpt = load_checkpoint(result.out)
    assert ckpt.id == result.model_id and ckpt.meta["epoch"] == result.best_epoch
    assert ckpt.meta["dev_ndcg10"] == best and ckpt.meta["dev_queries"] == 10
    last = load_checkpoint(result.work_dir / "last.pt")
    assert last.meta["epoch"] == 2 and (result.work_dir / "state.pt").is_file()
    factory, info = load_for_indexing(result.out)
    assert info["id"] == result.model_id and not factory(ckpt.vocab).training


def test_max_steps_caps_an_epoch_for_a_quick_trial(tmp_path, tiny_scifact, monkeypatch):
    """`ckqti train` had no way to a short run: one NDRM epoch of SciFact's claims took over 18 minutes on a busy CPU.
    max_steps caps each epoch's optimizer steps; a saved state of the uncapped settings does not resume it."""
    import ckqti.train.ndrm_epoch as ndrm_epoch

    steps = []
    real = ndrm_epoch.train_step
    monkeypatch.setattr(ndrm_epoch, "train_step", lambda *a, **k: (steps.append(len(a[2])), real(*a, **k))[1])
    result = run(tiny_scifact, tmp_path / "m.pt", config={"max_steps": 2})
    assert result.epochs_run == 2 and steps == [8, 8, 8, 8]  # 30 training queries: 4 steps of 8 an epoch uncapped
    steps.clear()
    run(tiny_scifact, tmp_path / "full.pt")
    assert steps == [8, 8, 8, 6] * 2
    with pytest.raises(CkqtiError, match="other settings or data"):
        run(tiny_scifact, tmp_path / "full.pt", config={"max_steps": 2, "epochs": 3}, resume=True)
    with pytest.raises(ValueError, match="max_steps must be None or >= 1"):
        dataclasses.replace(CONFIG, max_steps=0)


def test_resume_reaches_the_same_weights_as_an_uninterrupted_run(tmp_path, tiny_scifact):
    straight = run(tiny_scifact, tmp_path / "a.pt")
    first = run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 1})
    assert first.epochs_run == 1
    resumed = run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 2}, resume=True)
    assert resumed.epochs_run == 2
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in straight.history]
    assert [h["dev_ndcg10"] for h in resumed.history] == [h["dev_ndcg10"] for h in straight.history]
    a = load_checkpoint(straight.work_dir / "last.pt")
    b = load_checkpoint(resumed.work_dir / "last.pt")
    assert a.id == b.id  # same weights, buffers (BatchScale means) and vocabulary


def test_resuming_from_a_damaged_state_is_one_error_naming_it(tmp_path, tiny_scifact):
    """A state.pt cut short (a disk filled mid-save, a copy interrupted): --resume names the file and what to do."""
    first = run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 1})
    state = first.work_dir / "state.pt"
    state.write_bytes(state.read_bytes()[:100])
    with pytest.raises(CkqtiError) as info:
        run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 2}, resume=True)
    assert str(info.value).startswith(f"{state}: cannot read the training state (")
    assert str(info.value).endswith("); rerun without --resume")

def test_a_run_says_whether_it_resumes_starts_over_or_replaces_a_saved_state(tmp_path, tiny_scifact, capsys):
    """``--resume`` printed nothing (a resumed run looked new until its epoch ended), ``--resume`` without a
    state started over silently, and a run without it silently replaced an interrupted run's state."""
    state = tmp_path / "m.pt.work" / "state.pt"
    first = run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 1, "progress": True}, resume=True)
    assert f"note: nothing to resume ({state} does not exist): training from epoch 1\n" in capsys.readouterr().err
    run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 2, "progress": True}, resume=True)
    assert (f"note: resuming from {state} after epoch 1 (best dev nDCG@10 {first.best_dev_ndcg10:.4f} at epoch 1): "
            "epoch 2 of 2 next\n") in capsys.readouterr().err
    run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 2, "progress": True}, resume=True)
    err = capsys.readouterr().err
    assert f"note: resuming from {state} after epoch 2 (best dev nDCG@10 " in err and "): all 2 epochs are done\n" in err
    run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 1, "progress": True})
    assert f"note: {state} holds an earlier run's state: training from epoch 1 replaces it" in capsys.readouterr().err


def test_resuming_a_run_that_stopped_early_says_so(tmp_path):
    """Patience ran out before --epochs: a resumed run trains nothing, and says why."""
    from ckqti.train.ndrm_state import RunState, resume_notes

    state = RunState(epoch=4, best=0.5, best_epoch=1, since_best=3)
    assert resume_notes(True, True, state, tmp_path / "state.pt", dataclasses.replace(CONFIG, epochs=10)) == [
        f"resuming from {tmp_path / 'state.pt'} after epoch 4 (best dev nDCG@10 0.5000 at epoch 1): stopped early: "
        "no better dev nDCG@10 in 3 epochs (--patience)"]


def test_resuming_with_fewer_epochs_or_less_patience_than_the_saved_run_used_says_what_it_keeps(tmp_path):
    """Four epochs saved (the best the third), resumed with --epochs 2: the note said 'all 2 epochs are done' and
    kept epoch 3's model, which a run of 2 epochs never reaches (as the re-rankers' note did, session 44)."""
    from ckqti.train.ndrm_state import RunState, resume_notes

    history = [{"epoch": e, "dev_ndcg10": d} for e, d in enumerate([0.53, 0.60, 0.78, 0.75], start=1)]
    state = RunState(epoch=4, best=0.78, best_epoch=3, since_best=1, history=history)
    path = tmp_path / "state.pt"
    note = resume_notes(True, True, state, path, dataclasses.replace(CONFIG, epochs=2, patience=10))
    assert note == [f"resuming from {path} after epoch 4 (best dev nDCG@10 0.7800 at epoch 3): trained to epoch 4, past "
                    "epoch 2 where --epochs 2 and --patience 10 stop: the best of all 4 is kept (epoch 3: not what a run "
                    "of these settings ends with)"]
    assert resume_notes(True, True, state, path, dataclasses.replace(CONFIG, epochs=4, patience=10))[0].endswith(
        ": all 4 epochs are done")
    assert resume_notes(True, True, state, path, dataclasses.replace(CONFIG, epochs=6, patience=10))[0].endswith(
        ": epoch 5 of 6 next")


def test_resume_refuses_other_settings(tmp_path, tiny_scifact):
    run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 1})
    with pytest.raises(CkqtiError, match="other settings"):
        run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 2, "lr": 1e-3}, resume=True)


def test_resume_refuses_other_data_and_a_lost_best_checkpoint(tmp_path, tiny_scifact):
    """Other judgements or an edited corpus of the same name and size are other data (the state's
    vocabulary then failed to load with a traceback, or other labels trained on silently); a best
    epoch whose checkpoint is gone from --out cannot be reported as written."""
    run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 1})
    qid, judged = next(iter(tiny_scifact["qrels"].items()))
    other_doc = next(d for d in tiny_scifact["docs"] if d not in judged)
    relabelled = {**tiny_scifact["qrels"], qid: {other_doc: 1}}
    with pytest.raises(CkqtiError, match="other settings or data"):
        train(tiny_scifact["corpus"], tiny_scifact["queries"], relabelled, tmp_path / "m.pt",
              dataclasses.replace(CONFIG, epochs=2), candidates=tiny_scifact["candidates"], resume=True)
    edited = tmp_path / "corpus.jsonl"
    edited.write_text(tiny_scifact["corpus"].read_text().replace("cell", "cella", 1))
    with pytest.raises(CkqtiError, match="other settings or data"):
        train(edited, tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "m.pt",
              dataclasses.replace(CONFIG, epochs=2), candidates=tiny_scifact["candidates"], resume=True)
    (tmp_path / "m.pt").unlink()
    with pytest.raises(CkqtiError, match="is no longer at --out"):
        run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 2}, resume=True)


def test_early_stopping_when_dev_stops_improving(tmp_path, tiny_scifact):
    result = run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 6, "patience": 1, "lr": 1e-9, "model": "ndrm2"})
    assert result.stopped_early and result.epochs_run == 2 and result.best_epoch == 1


def test_title_pseudo_queries_join_the_epochs(tmp_path, tiny_scifact):
    result = run(tiny_scifact, tmp_path / "m.pt",
                 config={"epochs": 1, "weak_supervision": "titles", "pseudo_per_epoch": 20, "model": "ndrm2"})
    assert result.history[0]["examples"] == 30 + 20
    assert load_checkpoint(result.out).meta["pseudo_queries"] > 200


def test_config_is_validated():
    with pytest.raises(ValueError):
        TrainConfig(loss="margin")
    with pytest.raises(ValueError):
        TrainConfig(negatives=0)
    for bad in ({"model": "bm25"}, {"epochs": 0}, {"embeddings": "glove"}, {"weak_supervision": "anchors"},
                {"model_options": {"vocab_size": 3}}, {"dev_fraction": 1.0}, {"seed": -1}, {"seed": 2**32}):
        with pytest.raises(ValueError):
            TrainConfig(**bad)  # a seed past numpy's legacy seeding failed in skip-gram training, after BM25


def test_match_init_ranks_like_ndrm2_and_matches_embeddings(tiny_scifact):
    from ckqti.models.inputs import pad_rows
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.train.ndrm_start import match_init

    coll = load_collection(tiny_scifact["corpus"])
    torch.manual_seed(0)
    model = build_ndrm(NDRMConfig(vocab_size=len(coll.vocab), variant="ndrm3", **TINY_MODEL), coll.vocab)
    match_init(model)
    model.eval()
    query = pad_rows([coll.doc(0)[:5]]).expand(12, -1)
    docs = pad_rows([coll.doc(i) for i in range(12)], 120)
    with torch.no_grad():
        ndrm3 = model(query, docs)
        ndrm2 = model.explicit(query, docs)
        assert torch.equal(ndrm3.argsort(), ndrm2.argsort())
        vectors = model.latent.encode_documents(docs).vectors  # [12, L, D]
        term = model.latent.term_vectors(docs[0, :1])  # [1, D]
        assert torch.allclose(vectors[0, 0] @ term[0], torch.tensor(1.0), atol=1e-5)  # same term: cosine 1


def test_head_parameters_get_their_own_learning_rate():
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from ckqti.train.ndrm_start import parameter_groups

    model = build_ndrm(NDRMConfig(vocab_size=10, variant="ndrm3", **TINY_MODEL))
    body, head = parameter_groups(model, 1e-4, 1e-2)
    names = {id(p): n for n, p in model.named_parameters()}
    assert body["lr"] == 1e-4 and head["lr"] == 1e-2
    assert {names[id(p)] for p in head["params"]} >= {"combine.linear.weight", "explicit.length_weight",
                                                       "latent.pooling.mlp.0.weight"}
    assert "latent.embedding.weight" in {names[id(p)] for p in body["params"]}
    assert len(body["params"]) + len(head["params"]) == len(list(model.parameters()))


def write_teacher(path, tiny, qids, score=lambda q, d, rank: -float(rank)):
    import gzip
    import json

    scores = {q: {d: score(q, d, r) for r, d in enumerate(tiny["candidates"][q][:20])} for q in qids}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"teacher": "test", "scores": scores}, f)
    return path


def test_teacher_scores_reach_training_queries_only(tmp_path, tiny_scifact):
    from ckqti.errors import InputError
    from ckqti.train.teacher import read_teacher

    coll = load_collection(tiny_scifact["corpus"])
    qids = list(tiny_scifact["qrels"])
    path = write_teacher(tmp_path / "t.json.gz", tiny_scifact, qids)
    config = dataclasses.replace(CONFIG, teacher=str(path))
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    assert data.teacher and set(data.teacher) <= set(data.train_qids)  # dev claims' scores are dropped
    assert not set(data.teacher) & set(data.dev_qids)
    idx, sc = data.teacher[next(iter(data.teacher))]
    assert len(idx) == len(sc) >= 2 and sc[0] == 0.0 and sc[1] == -1.0  # the file's scores, in its order
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="teacher"):
        read_teacher(tmp_path / "bad.json", coll.index(), tiny_scifact["qrels"])
    only_dev = write_teacher(tmp_path / "dev.json.gz", tiny_scifact, data.dev_qids)
    with pytest.raises(InputError, match="no training query"):
        read_teacher(only_dev, coll.index(), {q: tiny_scifact["qrels"][q] for q in data.train_qids})
    docid = coll.docids[0]
    for body, why in (('{"scores": {"q": {"%s": NaN}}}' % docid, "not a finite number"),
                      ('{"scores": {"q": {"%s": 1e400}}}' % docid, "not a finite number"),
                      ('{"scores": {"q": {"%s": "high"}}}' % docid, "not a finite number"),
                      ('{"scores": {"q": 5}}', "must be an object"),
                      ('[1, 2]', r'expected a JSON object \{"scores": \{qid: \{docid: score\}\}\}'),  # a list, not an object
                      ('{"teacher": "x"}', r'expected a JSON object \{"scores"'),
                      ('{"scores": [1]}', r'expected a JSON object \{"scores"'),
                      ('{"scores": ' + "[" * 100_000 + "]" * 100_000 + "}", r"JSON nested too deeply")):
        (tmp_path / "odd.json").write_text(body)
        with pytest.raises(InputError, match=why):
            read_teacher(tmp_path / "odd.json", coll.index(), {"q": {}})
    gz = tmp_path / "named-plain.json"  # gzip whatever the name says
    gz.write_bytes(path.read_bytes())
    assert read_teacher(gz, coll.index(), tiny_scifact["qrels"]).keys() == read_teacher(path, coll.index(),
                                                                                      tiny_scifact["qrels"]).keys()


def test_a_non_finite_loss_stops_training():
    import torch

    from ckqti.errors import CkqtiError
    from ckqti.train.losses import finite_loss

    assert finite_loss(torch.tensor(0.5), "step 1") == 0.5
    for bad in (float("nan"), float("inf")):
        with pytest.raises(CkqtiError, match="training diverged: the loss is .* at epoch 2, step 3"):
            finite_loss(torch.tensor(bad), "epoch 2, step 3")


def test_a_truncated_gzip_teacher_file_is_named(tmp_path):
    """Its EOFError reached click, which printed only 'Aborted!'."""
    import gzip

    from ckqti.errors import InputError
    from ckqti.train.teacher import read_teacher

    whole = gzip.compress(b'{"scores": {"q": {"d1": 1.0, "d2": 0.5}}}')
    cut = tmp_path / "teacher.json.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(InputError) as err:
        read_teacher(cut, {"d1": 0, "d2": 1}, {"q": {}})
    assert str(err.value).startswith(f"{cut}: corrupt gzip data (")


def test_teacher_files_with_a_bom_are_read_and_scores_past_float32_are_named(tmp_path):
    """A UTF-8 BOM (Windows tools write one) was 'not a teacher scores file'; a score of 1e300 became
    inf in the float32 scores trained on, and an integer of 40 digits was a TypeError traceback."""
    from ckqti.errors import InputError
    from ckqti.train.teacher import read_teacher

    index, qrels = {"d1": 0, "d2": 1}, {"q": {}}
    path = tmp_path / "teacher.json"
    path.write_bytes("\ufeff".encode() + b'{"scores": {"q": {"d1": 1.5, "d2": -2}}}')
    indices, scores = read_teacher(path, index, qrels)["q"]
    assert indices.tolist() == [0, 1] and scores.tolist() == [1.5, -2.0]
    for score in ("1e300", "-1e39", "1" + "0" * 40):
        path.write_text('{"scores": {"q": {"d1": %s, "d2": 0}}}' % score)
        with pytest.raises(InputError, match=r"query 'q', document 'd1': score .* is not a finite number"):
            read_teacher(path, index, qrels)
    path.write_text('{"scores": {"q": {"d1": 3e38, "d2": 1000000000000000000000}}}')  # large, yet float32
    assert read_teacher(path, index, qrels)["q"][1].tolist() == pytest.approx([3e38, 1e21], rel=1e-6)


def test_teacher_scores_of_title_pseudo_queries_reach_training_with_weak_supervision(tmp_path, tiny_scifact):
    coll = load_collection(tiny_scifact["corpus"])
    titles = sorted(q for q in tiny_scifact["candidates"] if q.startswith("title:"))[:5]
    assert len(titles) == 5
    path = write_teacher(tmp_path / "t.json.gz", tiny_scifact, [*tiny_scifact["qrels"], *titles])
    config = dataclasses.replace(CONFIG, teacher=str(path))
    plain = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    assert not set(plain.teacher) & set(titles)  # without weak supervision titles are no queries
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"],
                        dataclasses.replace(config, weak_supervision="titles"), None, tiny_scifact["candidates"])
    assert set(titles) <= set(data.teacher) and set(titles) <= set(data.pseudo_qids)
    assert set(data.teacher) - set(titles) == set(plain.teacher)  # the claims' as before, dev claims' never


def test_distillation_loss_is_least_where_the_student_agrees_with_the_teacher():
    from ckqti.train.losses import distill_loss

    teacher = torch.tensor([[3.0, 1.0, 0.0, -2.0]])
    agree = teacher.clone().requires_grad_(True)
    loss = distill_loss(agree, teacher)
    loss.backward()
    assert torch.allclose(agree.grad, torch.zeros_like(agree.grad), atol=1e-7)  # the KL's minimum
    assert distill_loss(teacher + 5.0, teacher) == pytest.approx(loss.item())  # a constant shift changes nothing
    assert distill_loss(teacher.flip(-1), teacher) > loss + 1.0


def test_distillation_moves_the_student_towards_the_teacher(tiny_scifact, tmp_path):
    """A teacher that prefers BM25's lower ranks: training with it lowers the student's distillation loss on a
    fixed probe of teacher-scored documents; training on the labels alone (weight 0) does not."""
    from ckqti.train.losses import distill_loss
    from ckqti.train.ndrm_epoch import teacher_group

    coll = load_collection(tiny_scifact["corpus"])
    path = write_teacher(tmp_path / "t.json.gz", tiny_scifact, list(tiny_scifact["qrels"]),
                         score=lambda q, d, rank: 0.5 * rank)
    config = dataclasses.replace(CONFIG, teacher=str(path), distill_docs=6, lr=1e-2)
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    examples = epoch_examples(data, config, 0)
    probe = teacher_group(data, examples[:16], 6, np.random.default_rng(5))

    def probe_loss():
        from ckqti.train.ndrm_epoch import _score_groups

        model.eval()
        with torch.no_grad():
            s = _score_groups(model, data, probe[0], probe[1], 6, 120, torch.device("cpu"))
            return distill_loss(s, torch.from_numpy(probe[2])).item()

    before = probe_loss()
    start_state = {k: v.clone() for k, v in model.state_dict().items()}
    after = {}
    for weight in (0.0, 1.0):
        model.load_state_dict(start_state)
        opt = torch.optim.Adam(model.parameters(), lr=config.lr)
        cfg, rng = dataclasses.replace(config, distill_weight=weight), np.random.default_rng(0)
        for _ in range(3):
            model.train()
            for start in range(0, len(examples), cfg.batch_size):
                train_step(model, opt, examples[start: start + cfg.batch_size], data, 120, torch.device("cpu"), cfg, rng)
        after[weight] = probe_loss()
    assert after[1.0] < before and after[1.0] < after[0.0]


def test_judgements_that_cannot_train_are_refused_before_bm25(tiny_scifact):
    """Qrels naming no document of the corpus, qrels without a relevant grade, and dev qrels that
    judge training queries: each an error before any candidate is fetched (no BM25 function here)."""
    from ckqti.errors import InputError

    coll = load_collection(tiny_scifact["corpus"])
    elsewhere = {q: {f"nodoc-{d}": g for d, g in j.items()} for q, j in tiny_scifact["qrels"].items()}
    with pytest.raises(InputError, match="no training query has a relevant document in the corpus"):
        prepare_data(coll, tiny_scifact["queries"], elsewhere, CONFIG)
    zeros = {q: {d: 0 for d in j} for q, j in tiny_scifact["qrels"].items()}
    with pytest.raises(InputError, match=r"grade >= 1\) to carve a dev split; 0 of the"):
        prepare_data(coll, tiny_scifact["queries"], zeros, CONFIG)
    first = next(iter(tiny_scifact["qrels"]))
    with pytest.raises(InputError, match=f"judged in both the training and the dev qrels \\(first: '{first}'\\)"):
        prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], CONFIG, dev_qrels=tiny_scifact["qrels"])


def test_a_run_stopped_between_saving_its_state_and_its_best_checkpoint_resumes(tmp_path, tiny_scifact, monkeypatch):
    """The best epoch went to --out before the state was saved: a kill in between left a state naming
    an older best than --out held, and --resume refused (helper-22). Now the state is saved first and
    the best moved onto --out after; a stop in between is finished by --resume."""
    import ckqti.train.loop as loop

    straight = run(tiny_scifact, tmp_path / "a.pt")
    real = os.replace

    def killed(src, dst):
        if str(src).endswith(".best"):
            raise KeyboardInterrupt  # stopped after the state was written, before the best reached --out
        return real(src, dst)

    monkeypatch.setattr(loop.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 1})
    monkeypatch.setattr(loop.os, "replace", real)
    assert not (tmp_path / "b.pt").exists() and (tmp_path / ".b.pt.best").is_file()
    resumed = run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 2}, resume=True)
    assert [h["dev_ndcg10"] for h in resumed.history] == [h["dev_ndcg10"] for h in straight.history]
    assert load_checkpoint(tmp_path / "b.pt").id == resumed.model_id and not (tmp_path / ".b.pt.best").exists()


@pytest.mark.parametrize("resume", [True, False])
def test_a_best_epoch_written_before_a_kill_and_never_named_is_not_left_beside_out(tmp_path, tiny_scifact, monkeypatch,
                                                                                    resume):
    """A kill after a new best epoch went to ``.<out>.best`` and before the state named it left that file
    (a whole checkpoint) beside --out for good when the run, resumed or started again, had no new best at
    that epoch (here: told to stop before it)."""
    import ckqti.train.loop as loop

    real, calls = loop.save_state, []

    def killed(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # epoch 2 (a new best) is written beside --out, the state is not
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "save_state", killed)
    monkeypatch.setattr(loop, "validate", lambda *a: 0.1 * len(calls) + 0.1)  # each epoch a new best
    with pytest.raises(KeyboardInterrupt):
        run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 2})
    monkeypatch.undo()
    assert (tmp_path / ".b.pt.best").is_file() and load_checkpoint(tmp_path / ".b.pt.best").meta["epoch"] == 2
    done = run(tiny_scifact, tmp_path / "b.pt", config={"epochs": 1}, resume=resume)
    assert load_checkpoint(tmp_path / "b.pt").id == done.model_id and not (tmp_path / ".b.pt.best").exists()


def test_training_reads_the_qrels_format_given_and_notes_judgements_it_cannot_use(tmp_path, tiny_scifact, capsys):
    """Cranfield-coded qrels under another name (space-separated, 3 columns) need their format:
    ``ckqti train`` had no --qrels-format, though the reader's error asked for it. Judgements of
    documents outside the corpus were ignored silently; now a note on stderr counts them."""
    from ckqti.errors import InputError

    qrels = tmp_path / "judgements.txt"
    lines = [f"{q} {d} 1" for q, judged in tiny_scifact["qrels"].items() for d in judged]  # code 1: gain 4
    qrels.write_text("\n".join([*lines, f"{lines[0].split()[0]} absent-doc -1", f"{lines[0].split()[0]} gone 2"]) + "\n")
    with pytest.raises(InputError, match="judgements.txt:1: space-separated 3-column qrels: give the format"):
        train(tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "m.pt", CONFIG,
              candidates=tiny_scifact["candidates"])
    res = train(tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "m.pt",
                dataclasses.replace(CONFIG, epochs=1, progress=True), candidates=tiny_scifact["candidates"],
                qrels_format="cranfield")
    note = f"2 of the {len(lines) + 2} judgements (1 relevant) name a document not in the corpus and are ignored " \
           "(first: 'absent-doc')"
    assert res.notes == (note,) and f"note: {note}\n" in capsys.readouterr().err
    assert load_checkpoint(res.out).meta["train_queries"] + load_checkpoint(res.out).meta["dev_queries"] == 40


def test_judged_queries_without_text_are_refused_naming_the_queries_file(tmp_path, tiny_scifact):
    from ckqti.errors import InputError

    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"{int(q):04d}\t{t}\n" for q, t in tiny_scifact["queries"].items()))
    first = next(iter(tiny_scifact["qrels"]))
    with pytest.raises(InputError, match=f"queries.tsv: 40 of the 40 judged queries have no text in the queries file "
                                         f"\\(first: '{first}'; the queries file has '{int(first):04d}'"):
        train(tiny_scifact["corpus"], queries, tiny_scifact["qrels"], tmp_path / "m.pt", CONFIG,
              candidates=tiny_scifact["candidates"])


def test_training_notes_the_queries_it_skips_for_want_of_a_known_term(tmp_path, tiny_scifact):
    """The analyzer reads ASCII letters and digits only: a query in Cyrillic has no term, and
    training dropped such queries without a word (29 of Vaswani's 84 in a mixed-script test)."""
    queries = dict(tiny_scifact["queries"])
    qids = list(tiny_scifact["qrels"])
    for q in qids[::4]:
        queries[q] = "измерение проницаемости"
    res = train(tiny_scifact["corpus"], queries, tiny_scifact["qrels"], tmp_path / "m.pt",
                dataclasses.replace(CONFIG, epochs=1), candidates=tiny_scifact["candidates"])
    dev = set(load_checkpoint(res.out).meta["dev_qids"])
    lost = [q for q in qids[::4] if q not in dev]
    assert lost and res.notes == (f"{len(lost)} of the {40 - len(dev)} training queries have no term in the "
                                  f"vocabulary and are skipped (first: {sorted(lost, key=qids.index)[0]!r})",)
    assert load_checkpoint(res.out).meta["train_queries"] == 40 - len(dev) - len(lost)


def test_rel_level_decides_the_positives_and_the_dev_queries(tiny_scifact):
    """``ckqti eval --rel-level 2`` counts grade 1 (TREC DL's "related") not relevant, but training
    sampled every document of grade >= 1 as a positive and carved dev from queries judged 1 at best.
    At level 2 a grade-1 document is never a positive (as a non-relevant top-100 candidate it may be
    the published sampling's negative), and a query judged 1 at best is never dev and has no positive."""
    qrels, low = graded_qrels(tiny_scifact)
    coll = load_collection(tiny_scifact["corpus"])
    index = coll.index()
    related = {q: {index[d] for d, g in judged.items() if g == 1} for q, judged in qrels.items()}
    at1 = prepare_data(coll, tiny_scifact["queries"], qrels, CONFIG, None, tiny_scifact["candidates"])
    assert all(related[q] <= at1.relevant[q] for q in qrels)  # level 1: every judged document a positive
    config = dataclasses.replace(CONFIG, rel_level=2)
    data = prepare_data(coll, tiny_scifact["queries"], qrels, config, None, tiny_scifact["candidates"])
    assert all(not data.relevant[q] & related[q] for q in qrels) and all(not data.relevant[q] for q in low)
    assert len(data.dev_qids) == 8 and not set(data.dev_qids) & low  # a quarter of the 32 judged 2
    examples = [ex for epoch in range(10) for ex in epoch_examples(data, config, epoch)]
    positives = [(ex.qid, d) for ex in examples for d, label in zip(ex.docs, ex.labels) if label == 2]
    assert positives and not any(d in related[q] or q in low for q, d in positives)
    assert any(d in related[ex.qid] for ex in examples for d, label in zip(ex.docs, ex.labels) if label == 1)


def test_resume_refuses_another_rel_level():
    from ckqti.train.ndrm_state import fingerprint

    assert fingerprint(CONFIG, {}) != fingerprint(dataclasses.replace(CONFIG, rel_level=2), {})


def test_too_few_queries_for_a_dev_split_name_the_qrels_file_and_dev_qrels(tmp_path, tiny_scifact):
    """The error named no file and no way out: NDRM takes dev judgements of other queries instead."""
    from ckqti.errors import InputError

    (first, judged), (second, other) = list(tiny_scifact["qrels"].items())[:2]
    qrels = tmp_path / "few.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, j in ((first, judged), (second, {d: 0 for d in other}))
                             for d, g in j.items()))
    with pytest.raises(InputError, match=r"^.*few\.txt: need at least 2 queries with a relevant judgement \(grade "
                                         r">= 1\) to carve a dev split; 1 of the 2 judged queries have one; or give "
                                         r"dev judgements of other queries \(--dev-qrels\)$"):
        train(tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "m.pt", CONFIG,
              candidates=tiny_scifact["candidates"])
    graded, _ = graded_qrels(tiny_scifact)
    low = {q: {d: 1 for d in j} for q, j in graded.items()}
    with pytest.raises(InputError, match=r"grade >= 2\) to carve a dev split; 0 of the 40 judged queries have one "
                                         r"\(40 at --rel-level 1\); or give"):
        train(tiny_scifact["corpus"], tiny_scifact["queries"], low, tmp_path / "m.pt",
              dataclasses.replace(CONFIG, rel_level=2), candidates=tiny_scifact["candidates"])



@pytest.mark.parametrize("kind", ["empty", "unknown-docs", "one-query"])
def test_refused_judgements_are_named_and_leave_nothing_at_out(tmp_path, tiny_scifact, kind, monkeypatch):
    """A refused run made OUT's folder and an empty OUT.work before reading its inputs, and judgements
    naming no document of the corpus were refused without naming the qrels file; all before BM25."""
    import ckqti.train.loop as loop
    from ckqti.errors import InputError

    monkeypatch.setattr(loop, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    qrels = tmp_path / "bad.txt"
    qrels.write_text(bad_judgements(tiny_scifact["qrels"], kind))
    with pytest.raises(InputError, match=r"bad\.txt"):
        train(tiny_scifact["corpus"], tiny_scifact["queries"], qrels, tmp_path / "new" / "m.pt", CONFIG)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_dev_qrels_that_cannot_choose_are_named_before_bm25(tmp_path, tiny_scifact, monkeypatch):
    """Dev qrels with no relevant document in the corpus trained every epoch at dev nDCG@10 0; dev qrels
    judging training queries were refused without naming the file."""
    import ckqti.train.loop as loop
    from ckqti.errors import InputError

    monkeypatch.setattr(loop, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    items = list(tiny_scifact["qrels"].items())
    qrels, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, j in items[10:] for d, g in j.items()))
    out = tmp_path / "new" / "m.pt"
    for judged, message in [
        ({q: {d: 0 for d in j} for q, j in items[:10]}, r"no dev query has a relevant document \(grade >= 1\) in the corpus"),
        ({q: {f"nodoc-{d}": g for d, g in j.items()} for q, j in items[:10]}, "no dev query has a relevant document"),
        (dict(items[5:15]), "judged in both the training and the dev qrels"),
    ]:
        dev.write_text("".join(f"{q} 0 {d} {g}\n" for q, j in judged.items() for d, g in j.items()))
        with pytest.raises(InputError, match=message) as err:
            train(tiny_scifact["corpus"], tiny_scifact["queries"], qrels, out, CONFIG, dev_qrels=dev)
        assert str(err.value).startswith(f"{dev}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.txt", "train.txt"]


def test_a_corpus_too_small_for_ndrm_sampling_is_named_before_bm25(tmp_path, tiny_scifact, monkeypatch):
    """A corpus of fewer non-relevant documents than an example draws failed in the first epoch's
    sampling, after BM25, with a ValueError traceback ('cannot draw 2 random documents from 3')."""
    import json

    import ckqti.train.loop as loop
    from ckqti.errors import InputError

    monkeypatch.setattr(loop, "bm25_candidates", lambda *a, **k: pytest.fail("BM25 ran"))
    items = list(tiny_scifact["qrels"].items())
    # a relevant document of each of two queries and one other: a training query has 2 non-relevant ones (a
    # relevant, a BM25 candidate and 2 random documents need 3)
    (q1, j1), (q2, j2) = items[:2]
    d1 = next(iter(j1))
    d2 = next(d for d in j2 if d != d1)
    docs = [d1, d2, next(d for d in tiny_scifact["docs"] if d not in j1 and d not in j2)]
    corpus, qrels = tmp_path / "three.jsonl", tmp_path / "train.txt"
    corpus.write_text("".join(json.dumps({"_id": d, "text": tiny_scifact["docs"][d]}) + "\n" for d in docs))
    qrels.write_text(f"{q1} 0 {d1} 1\n{q2} 0 {d2} 1\n")
    with pytest.raises(InputError, match="the corpus has 3 documents, .* NDRM's sampling draws up to 4 of those") as err:
        train(corpus, tiny_scifact["queries"], qrels, tmp_path / "new" / "m.pt", CONFIG)
    assert str(err.value).startswith(f"{corpus}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["three.jsonl", "train.txt"]


def claims_as_clicks(tiny: dict, path, queries: int) -> None:
    """An ORCAS file of the first ``queries`` training claims, each a click on the documents it cites
    (as scripts/effectiveness_stages.py's ``orcas_pairs`` builds SciFact's ORCAS-style field)."""
    rows = [f"{d}\t{tiny['queries'][q]}\n" for q, judged in list(tiny["qrels"].items())[:queries] for d in judged]
    path.write_text("".join(rows))


def test_training_with_orcas_reads_the_clicks_bm25_the_plain_corpus_and_resume_the_same_file(tmp_path, tiny_scifact,
                                                                                             monkeypatch):
    """``train(orcas=...)``: the documents (and their statistics) carry the clicks, BM25 candidates
    come from the plain corpus, as ``rerank --orcas``'s; a resumed run with other clicks, or none, is
    refused as other settings are (the clicks change the data trained on)."""
    import ckqti.train.loop

    orcas, fewer = tmp_path / "orcas.tsv", tmp_path / "fewer.tsv"
    claims_as_clicks(tiny_scifact, orcas, 20)
    claims_as_clicks(tiny_scifact, fewer, 10)
    asked = []
    monkeypatch.setattr(ckqti.train.loop, "bm25_candidates",
                        lambda corpus, texts, *a: asked.append(corpus) or tiny_scifact["candidates"])  # no Java
    config = dataclasses.replace(CONFIG, epochs=1)
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "m.pt")
    result = train(*args, config, orcas=orcas)
    assert asked == [tiny_scifact["corpus"]]  # the corpus file alone, no clicks
    ckpt = load_checkpoint(result.out)
    plain = load_collection(tiny_scifact["corpus"])
    clicked = load_collection(tiny_scifact["corpus"], orcas=orcas)
    assert clicked.docids == plain.docids and clicked.vocab.total_terms > plain.vocab.total_terms
    assert ckpt.meta["orcas"] == "orcas.tsv" and ckpt.vocab.total_terms == clicked.vocab.total_terms
    moved = tmp_path / "moved.tsv"
    moved.write_bytes(orcas.read_bytes())
    again = dataclasses.replace(config, epochs=2)
    for other in (None, fewer, moved):  # recorded as the corpus is: by path and by what was read
        with pytest.raises(CkqtiError, match="other settings or data"):
            train(*args, again, orcas=other, resume=True)
    assert train(*args, again, orcas=orcas, resume=True).epochs_run == 2


def test_each_epoch_draws_its_own_examples_from_the_top_depth_and_validation_reranks_the_top_dev_depth(tiny_scifact):
    """An epoch's examples are a function of (seed, epoch): another epoch or seed draws others; the
    non-relevant candidate comes from the top ``depth`` even when validation reads deeper
    (``dev_depth``); validation reranks each dev query's top ``dev_depth`` only."""
    from ckqti.evaluate import evaluate
    from ckqti.train.ndrm_epoch import validate

    config = dataclasses.replace(CONFIG, depth=5)  # dev_depth 30: candidates are kept to 30
    coll = load_collection(tiny_scifact["corpus"])
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    first = epoch_examples(data, config, 0)
    assert first == epoch_examples(data, config, 0) != epoch_examples(data, config, 1)
    assert first != epoch_examples(data, dataclasses.replace(config, seed=1), 0)
    examples = first + epoch_examples(data, config, 1)
    assert max(len(data.candidates[e.qid]) for e in examples) > 5
    assert all(d in data.candidates[e.qid][:5] for e in examples for d, label in zip(e.docs, e.labels) if label == 1)
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True)
    top1 = {q: {coll.docids[data.candidates[q][0]]: 1.0} for q in data.dev_qids}  # one document: any model ranks it so
    expected = evaluate(top1, data.dev_qrels, ["nDCG@10"]).mean["nDCG@10"]
    assert validate(model, data, dataclasses.replace(config, dev_depth=1), torch.device("cpu")) == pytest.approx(expected)


@pytest.mark.parametrize("field,value", [("seed", 1), ("depth", 50), ("dev_depth", 20), ("negatives", 2),
                                         ("loss", "lce"), ("lr", 1e-3), ("batch_size", 4), ("dev_fraction", 0.5),
                                         ("weak_supervision", "titles")])
def test_resume_refuses_settings_that_change_the_run(field, value):
    from ckqti.train.ndrm_state import fingerprint

    assert fingerprint(CONFIG, {}) != fingerprint(dataclasses.replace(CONFIG, **{field: value}), {})
    assert fingerprint(CONFIG, {}) == fingerprint(dataclasses.replace(CONFIG, epochs=9, patience=7, progress=True,
                                                                      eval_batch_size=3), {})


def test_the_seed_decides_the_start_and_the_callers_rng_is_left_alone(tmp_path, tiny_scifact):
    """The run seeds its own torch RNG with ``seed`` (the start of training differs between seeds) in a
    fork: the caller's RNG state is the same after training."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    starts = [load_checkpoint(run(tiny_scifact, tmp_path / f"{seed}.pt", config={"epochs": 1, "lr": 1e-12, "seed": seed})
                              .out).state_dict["latent.embedding.weight"] for seed in (1, 2)]
    assert torch.equal(torch.get_rng_state(), before)
    assert not torch.allclose(starts[0], starts[1], atol=1e-4)


def test_a_dev_score_of_zero_is_still_a_best_epoch_and_the_last_epoch_no_early_stop(tmp_path, tiny_scifact):
    """Dev queries whose candidates hold no relevant document score nDCG@10 0 in every epoch: the first
    epoch is still the best and written; patience running out at the last epoch is no early stop."""
    dev_qids = list(tiny_scifact["qrels"])[:5]
    dev = {q: tiny_scifact["qrels"][q] for q in dev_qids}
    train_qrels = {q: j for q, j in tiny_scifact["qrels"].items() if q not in dev}
    candidates = {q: [d for d in c if q not in dev or d not in dev[q]] for q, c in tiny_scifact["candidates"].items()}
    result = train(tiny_scifact["corpus"], tiny_scifact["queries"], train_qrels, tmp_path / "m.pt",
                   dataclasses.replace(CONFIG, epochs=2, patience=1, model="ndrm2"), dev_qrels=dev, candidates=candidates)
    assert [h["dev_ndcg10"] for h in result.history] == [0.0, 0.0]
    assert result.best_epoch == 1 and load_checkpoint(result.out).id == result.model_id
    assert result.epochs_run == 2 and not result.stopped_early


def test_patience_counts_epochs_since_the_last_improvement(tmp_path, tiny_scifact, monkeypatch):
    """Dev nDCG@10 0.3, 0.2, 0.4, 0.35, 0.33 (then 0.5, never reached) with patience 2: an improvement
    restarts the count, so training stops after epoch 5 with epoch 3 written as the best."""
    import ckqti.train.loop as loop

    devs = iter([0.3, 0.2, 0.4, 0.35, 0.33, 0.5])
    monkeypatch.setattr(loop, "run_epoch", lambda *args: {"loss": 0.0, "examples": 0})
    monkeypatch.setattr(loop, "validate", lambda *args: next(devs))
    result = run(tiny_scifact, tmp_path / "m.pt", config={"epochs": 6, "patience": 2, "model": "ndrm2"})
    assert [h["dev_ndcg10"] for h in result.history] == [0.3, 0.2, 0.4, 0.35, 0.33]
    assert (result.best_epoch, result.best_dev_ndcg10, result.stopped_early) == (3, 0.4, True)
    assert load_checkpoint(result.out).meta["epoch"] == 3


def test_the_listwise_loss_skips_examples_without_a_relevant_document(tiny_scifact):
    """``loss="lce"``: an example whose top-100 holds no relevant document adds nothing (TrainConfig), with
    one BM25 negative too, where its labels (1, 0, 0, 0) had a single best document: the non-relevant
    candidate was trained as the relevant one against the random documents."""
    from ckqti.train.sampling import Example

    config = dataclasses.replace(CONFIG, loss="lce")
    coll = load_collection(tiny_scifact["corpus"])
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    qid = data.train_qids[0]
    without = [Example(qid, (3, 4, 5, 6), (1, 0, 0, 0))]
    assert train_step(model, opt, without, data, 120, torch.device("cpu"), config) == 0.0
    assert train_step(model, opt, without * 2, data, 120, torch.device("cpu"), dataclasses.replace(config, negatives=2)) == 0.0
    with_relevant = [Example(qid, (3, 4, 5, 6), (2, 1, 0, 0))]
    assert train_step(model, opt, with_relevant, data, 120, torch.device("cpu"), config) > 0.0


def test_start_up_says_when_bm25_and_skipgram_run(tmp_path, tiny_scifact, monkeypatch, capsys):
    """BM25 candidates and skip-gram vectors take minutes with no bar of their own: a run in a log
    printed nothing until its first epoch (helpers s37b, s37e). Each now says it starts, only with progress."""
    import ckqti.embeddings
    import ckqti.train.loop

    monkeypatch.setattr(ckqti.train.loop, "bm25_candidates", lambda *a, **k: tiny_scifact["candidates"])  # no Java
    monkeypatch.setattr(ckqti.embeddings, "skipgram_embeddings",
                        lambda docs, vocab, config: np.zeros((len(vocab), 2 * config.dim), dtype=np.float32))
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"])
    config = dataclasses.replace(CONFIG, epochs=1, embeddings="skipgram", progress=True)
    train(*args, tmp_path / "m.pt", config)
    err = capsys.readouterr().err
    bm25, skipgram = err.find("BM25 candidates (Pyserini): the top 100 of "), err.find("skip-gram word vectors (gensim")
    assert 0 <= bm25 < skipgram, err
    train(*args, tmp_path / "quiet.pt", dataclasses.replace(config, progress=False))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm2", "ndrm3"])
def test_a_step_encoding_its_documents_by_length_has_the_loss_and_gradients_of_one_padded_batch(tiny_scifact, variant):
    """A training step encodes its documents in groups of similar length (scoring.encode_by_length: a batch
    padded to its longest document had most of its encoder work on padding) and scores them in one call.
    Without dropout its loss, gradients and training statistics (NDRM2's means, NDRM3's BatchNorm) are those of
    the whole batch padded into one forward call, each score at its own document's place."""
    from ckqti.models.inputs import pad_rows

    config = dataclasses.replace(CONFIG, model=variant, model_options={**TINY_MODEL, "dropout": 0.0})
    coll = load_collection(tiny_scifact["corpus"])
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    batch = epoch_examples(data, config, 0)[:12]  # 48 documents: 3 groups
    docs = [d for e in batch for d in e.docs]
    lengths = [min(len(coll.doc(d)), 300) for d in docs]
    assert len(set(lengths)) > 24 and sorted(lengths) != lengths  # grouping reorders the documents
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True).train()
    reference = copy.deepcopy(model)
    query = pad_rows([data.query_ids[e.qid] for e in batch]).repeat_interleave(4, 0)
    whole = reference(query, pad_rows([coll.doc(d) for d in docs], 300),
                      torch.tensor([float(len(coll.doc(d))) for d in docs])).view(len(batch), 4)
    expected = ranknet_loss(whole, torch.tensor([e.labels for e in batch]))
    expected.backward()
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    encode, calls = model.encode_documents, []
    model.encode_documents = lambda ids, lengths=None: (calls.append(ids), encode(ids, lengths))[1]
    loss = train_step(model, opt, batch, data, 300, torch.device("cpu"), config)
    rows = [(ids != 0).sum(1).tolist() for ids in calls]
    assert len(calls) == 3 and sum(rows, []) == sorted(lengths)  # in order of length
    assert [ids.shape[1] for ids in calls] == [max(r) for r in rows]  # each call as wide as its longest document
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    grads = {n: p.grad for n, p in reference.named_parameters() if p.grad is not None}
    assert grads.keys() == {n for n, p in model.named_parameters() if p.grad is not None} and grads
    for name, p in model.named_parameters():
        if name in grads:
            assert torch.allclose(p.grad, grads[name], rtol=1e-4, atol=1e-6), name
    for (name, mine), theirs in zip(model.named_buffers(), reference.buffers()):
        assert torch.allclose(mine.double(), theirs.double()), name


def test_a_step_on_a_gpu_encodes_its_documents_in_one_call_in_their_order(tiny_scifact, monkeypatch):
    """Groups by length pay on the CPU only: on an H200, NDRM3 took 8.4-9.8 steps/s in groups of 16 against
    36-40 in one call (each group is kernel launches; padding costs little there). Any device but the CPU
    encodes the batch at once, in the batch's order, as before the grouping."""
    from ckqti.train import scoring

    assert scoring.encode_group(torch.device("cpu")) == scoring.ENCODE_GROUP
    assert scoring.encode_group(torch.device("cuda")) is None and scoring.encode_group(torch.device("mps")) is None
    config = dataclasses.replace(CONFIG, model="ndrm3", model_options={**TINY_MODEL, "dropout": 0.0})
    coll = load_collection(tiny_scifact["corpus"])
    data = prepare_data(coll, tiny_scifact["queries"], tiny_scifact["qrels"], config, None, tiny_scifact["candidates"])
    batch = epoch_examples(data, config, 0)[:12]
    docs = [d for e in batch for d in e.docs]
    torch.manual_seed(0)
    model = build_model(data, config, torch.device("cpu"), init=True).train()
    monkeypatch.setattr(scoring, "encode_group", lambda device: None)  # as on a GPU
    encode, calls = model.encode_documents, []
    model.encode_documents = lambda ids, lengths=None: (calls.append(ids), encode(ids, lengths))[1]
    train_step(model, torch.optim.Adam(model.parameters(), lr=config.lr), batch, data, 300, torch.device("cpu"), config)
    assert len(calls) == 1 and (calls[0] != 0).sum(1).tolist() == [min(len(coll.doc(d)), 300) for d in docs]


def test_resuming_a_run_with_no_epoch_left_skips_bm25_and_still_checks_the_state(tmp_path, tiny_scifact, monkeypatch,
                                                                                capsys):
    """``--resume`` of a run whose epochs were all done (or whose patience ran out) fetched every query's
    BM25 candidates (most of a minute on SciFact) before saying there was nothing to train; now it skips
    them. Its state is still checked against the settings and data, and a run with an epoch left fetches them."""
    import ckqti.train.loop as loop

    searched = []
    monkeypatch.setattr(loop, "bm25_candidates", lambda *a, **k: searched.append(1) or tiny_scifact["candidates"])
    args = (tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "m.pt")
    first = train(*args, dataclasses.replace(CONFIG, epochs=1))
    assert searched == [1]
    again = train(*args, dataclasses.replace(CONFIG, epochs=1, progress=True), resume=True)
    assert searched == [1] and "): its one epoch is done\n" in capsys.readouterr().err
    assert (again.model_id, again.epochs_run, again.history) == (first.model_id, 1, first.history)
    qid, judged = next(iter(tiny_scifact["qrels"].items()))
    relabelled = {**tiny_scifact["qrels"], qid: {next(d for d in tiny_scifact["docs"] if d not in judged): 1}}
    with pytest.raises(CkqtiError, match="other settings or data"):
        train(*args[:2], relabelled, args[3], dataclasses.replace(CONFIG, epochs=1), resume=True)
    with pytest.raises(CkqtiError, match="other settings or data"):
        train(*args, dataclasses.replace(CONFIG, epochs=1, lr=1e-3), resume=True)
    assert searched == [1]
    assert train(*args, dataclasses.replace(CONFIG, epochs=2), resume=True).epochs_run == 2 and searched == [1, 1]
    from ckqti.train.ndrm_state import RunState, trains_more

    assert not trains_more(RunState(epoch=4, since_best=3), dataclasses.replace(CONFIG, epochs=10, patience=3))
