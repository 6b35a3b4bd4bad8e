"""What ``scripts/effectiveness.py`` measures: the collections, the checkpoints and the settings
each is trained with, the table rows, the summary's rows and the NDRM3 experiments.

Why each checkpoint and budget was chosen, and when: ``docs/EFFECTIVENESS_BUDGETS.md``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from scripts.train_default import CONFIG as BUNDLED_CONFIG
from scripts.train_default import OUT as BUNDLED

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WORK = ROOT / "out" / "effectiveness"
FIRST_STAGE_DEPTH = 1000
RERANK_DEPTH = 100
IDCM_DEPTH = RERANK_DEPTH  # was 20 (CPU time) until IDCM_STAGES' budgets; the top 20 gave 0.6645 on SciFact
IDCM_STAGES = {1: (3, None), 2: (1, None), 3: (1, 30)}  # stage -> (epochs, optimizer steps an epoch at most)
IDCM_GPU_STAGES = {1: (20, None), 2: (10, None), 3: (6, None)}  # the ``idcm-gpu`` checkpoint's (patience 3 a stage)
GPU_EPOCHS = 60  # ``tk-gpu`` / ``tkl-gpu``: most epochs (patience 5)
LCE_NEGATIVES = 7  # ``-lce`` checkpoints: BM25 negatives per query in each listwise group
TITLE_TEACHER = "docs/results/teacher_idcm_scifact_titles.json.gz"  # ``tkl-distill-titles``'s (scripts/teacher_scores.py)


@dataclass(frozen=True)
class CollectionSpec:
    """One test collection: files, qrels format and the grade from which binary measures count relevant."""

    name: str
    label: str
    corpus: Path
    queries: Path
    qrels: Path
    qrels_format: str | None = None
    rel_level: int = 1

    @property
    def zero_shot(self) -> bool:
        return self.name != "scifact"


def collections(data: Path = DATA) -> dict[str, CollectionSpec]:
    sf, dl = data / "scifact", data / "trecdl19-passage-subset"
    specs = [
        CollectionSpec("scifact", "SciFact test", sf / "corpus.jsonl", sf / "queries.jsonl", sf / "qrels" / "test.tsv"),
        CollectionSpec("trecdl", "TREC DL 2019 passage subset (zero-shot)", dl / "corpus.jsonl",
                       dl / "queries.jsonl", dl / "qrels" / "test.tsv", rel_level=2),
        CollectionSpec("cranfield", "Cranfield (zero-shot)", data / "cranfield" / "cran.all.1400",
                       data / "cranfield" / "cran.qry", data / "cranfield" / "cranqrel", "cranfield"),
        CollectionSpec("vaswani", "Vaswani (zero-shot)", data / "vaswani" / "doc-text.trec",
                       data / "vaswani" / "query-text.trec", data / "vaswani" / "qrels"),
    ]
    return {s.name: s for s in specs}


ALL = ("scifact", "trecdl", "cranfield", "vaswani")


@dataclass(frozen=True)
class Row:
    """One line of the tables: a model used as ``mode`` (``bm25``, ``fullrank`` or ``rerank``) on ``collections``.

    ``model`` names a checkpoint (:data:`CHECKPOINTS`); ``depth`` is the BM25 candidates reranked
    (the rest of the top 100 keeps BM25's order).
    """

    key: str
    label: str
    model: str
    mode: str
    collections: tuple[str, ...] = ALL
    orcas: bool = False
    depth: int = RERANK_DEPTH
    adapted: bool = False  # fullrank with the latent channel re-weighted for the collection (``ndrm3a-full``)

    def __post_init__(self) -> None:
        if self.mode not in ("bm25", "fullrank", "rerank"):
            raise ValueError(f"mode must be bm25, fullrank or rerank, got {self.mode!r}")
        if not 1 <= self.depth <= RERANK_DEPTH:
            raise ValueError(f"depth must be in [1, {RERANK_DEPTH}], got {self.depth}")
        if self.adapted and self.mode != "fullrank":
            raise ValueError("adapted channel weights are for fullrank rows (they re-weight a learned index)")


CHECKPOINTS = {  # key -> (display name, how it is made)
    "ndrm1": ("NDRM1", "trained here"),
    "ndrm2": ("NDRM2 (untrained)", "untrained"),
    "ndrm2-anserini": ("NDRM2 (untrained, Anserini's k1 0.9, b 0.4)", "untrained"),
    "ndrm2-trained": ("NDRM2 (trained)", "trained here"),
    "ndrm2-anserini-trained": ("NDRM2 (trained from Anserini's k1 0.9, b 0.4)", "trained here"),
    "ndrm3": ("NDRM3", "bundled"),
    "ndrm3-dense": ("NDRM3 dense (sessions 4-9 settings)", "trained here"),
    "ndrm3-bm25": ("NDRM3, explicit channel fixed at Anserini's BM25", "trained here"),
    "ndrm3-frozen": ("NDRM3, frozen MiniLM word vectors", "trained here"),
    "ndrm3-frozen-distill": ("NDRM3, frozen MiniLM word vectors, distilled from IDCM on claims and titles",
                             "trained on a GPU"),  # a lent H200, session 22 (its record's trained_on)
    "ndrm3-wise": ("NDRM3, word vectors interpolated toward their MiniLM start, alpha chosen on dev", "derived"),
    "ndrm3-soup": ("NDRM3, the average of the bundled and the frozen-vector models' weights", "derived"),
    "ndrm3-soup-dev": ("NDRM3, the bundled and frozen-vector models' weights averaged with the bundled share chosen "
                       "on dev", "derived"),
    "tk": ("TK", "trained here"),
    "tkl": ("TKL", "trained here"),
    "tk-idf": ("TK (idf term weights)", "trained here"),
    "tkl-idf": ("TKL (idf term weights)", "trained here"),
    "tkl-idf-lce": ("TKL (idf term weights, listwise)", "trained here"),
    "tkl-idf-titles": ("TKL (idf term weights, title pseudo-queries)", "trained here"),
    "tkl-idf-whole": ("TKL (idf term weights, whole windows)", "trained here"),
    "tkl-idf-explicit": ("TKL (idf term weights, explicit channel)", "trained here"),
    "tkl-idf-explicit-lce": ("TKL (idf term weights, explicit channel, listwise)", "trained here"),
    "tk-idf-explicit-lce": ("TK (idf term weights, explicit channel, listwise)", "trained here"),
    "tkl-idf-explicit-lce-lr3": ("TKL (idf term weights, explicit channel, listwise, encoder lr 1e-3)", "trained here"),
    "tkl-idf-explicit-lce-frozen": ("TKL (idf term weights, explicit channel, listwise, frozen MiniLM word vectors, "
                                    "Transformer lr 1e-3)", "trained here"),
    "tkl-distill-titles": ("TKL (frozen MiniLM word vectors, explicit channel, listwise, distilled from IDCM on claims "
                           "and title pseudo-queries)", "trained here"),
    "tkl-ndrm3-vectors": ("TKL (idf term weights, explicit channel, listwise, the bundled NDRM3's word vectors "
                          "frozen)", "trained here"),
    "idcm": ("IDCM", "trained here"),
    "tk-gpu": ("TK (GPU budget)", "trained on a GPU"),
    "tkl-gpu": ("TKL (GPU budget)", "trained on a GPU"),
    "idcm-gpu": ("IDCM (GPU budget)", "trained on a GPU"),
    "tkl-gpu-lce": ("TKL (GPU budget, listwise)", "trained on a GPU"),
    "idcm-gpu-lce": ("IDCM (GPU budget, listwise)", "trained on a GPU"),
}

#: How words a checkpoint never saw get embedding rows on a new collection, recorded in every run's meta.
#: Since session 16 (:func:`ckqti.embeddings.adapt_embeddings`) a predicted row takes the known rows'
#: median norm; before, a ridge prediction was up to ~10x shorter than a trained row (TK/TKL).
NEW_WORD_ROWS = "predicted, median known norm"

ROWS = (
    Row("bm25", "BM25 (Pyserini)", "bm25", "bm25"),
    Row("ndrm1-full", "NDRM1 fullrank (learned index)", "ndrm1", "fullrank", ("scifact",)),
    Row("ndrm2-full", "NDRM2 untrained fullrank (learned index)", "ndrm2", "fullrank"),
    Row("ndrm2a-full", "NDRM2 untrained, Anserini's k1 and b, fullrank (learned index)", "ndrm2-anserini", "fullrank"),
    Row("ndrm2t-full", "NDRM2 trained fullrank (learned index)", "ndrm2-trained", "fullrank", ("scifact",)),
    Row("ndrm3-full", "NDRM3 fullrank (learned index)", "ndrm3", "fullrank"),
    Row("ndrm3-orcas-full", "NDRM3 + ORCAS-style field fullrank", "ndrm3", "fullrank", ("scifact",), orcas=True),
    Row("ndrm3a-full", "NDRM3 fullrank, latent channel re-weighted for the collection (learned index)", "ndrm3",
        "fullrank", adapted=True),
    Row("ndrm1-rerank", "NDRM1 rerank BM25 top-100", "ndrm1", "rerank"),
    Row("ndrm2-rerank", "NDRM2 untrained rerank BM25 top-100", "ndrm2", "rerank"),
    Row("ndrm2a-rerank", "NDRM2 untrained, Anserini's k1 and b, rerank BM25 top-100", "ndrm2-anserini", "rerank"),
    Row("ndrm2t-rerank", "NDRM2 trained rerank BM25 top-100", "ndrm2-trained", "rerank"),
    Row("ndrm2at-rerank", "NDRM2 trained from Anserini's k1 and b, rerank BM25 top-100", "ndrm2-anserini-trained",
        "rerank"),
    Row("ndrm3-rerank", "NDRM3 rerank BM25 top-100", "ndrm3", "rerank"),
    Row("ndrm3-orcas-rerank", "NDRM3 + ORCAS-style field rerank BM25 top-100", "ndrm3", "rerank", ("scifact",),
        orcas=True),
    Row("ndrm3d-full", "NDRM3 dense (sessions 4-9 settings) fullrank", "ndrm3-dense", "fullrank"),
    Row("ndrm3d-rerank", "NDRM3 dense (sessions 4-9 settings) rerank BM25 top-100", "ndrm3-dense", "rerank"),
    Row("ndrm3b-full", "NDRM3, explicit channel fixed at Anserini's BM25, fullrank (learned index)", "ndrm3-bm25",
        "fullrank"),
    Row("ndrm3b-rerank", "NDRM3, explicit channel fixed at Anserini's BM25, rerank BM25 top-100", "ndrm3-bm25", "rerank"),
    Row("ndrm3f-full", "NDRM3, frozen MiniLM word vectors, fullrank (learned index)", "ndrm3-frozen", "fullrank"),
    Row("ndrm3f-rerank", "NDRM3, frozen MiniLM word vectors, rerank BM25 top-100", "ndrm3-frozen", "rerank"),
    Row("ndrm3fd-full", "NDRM3, frozen MiniLM word vectors, distilled from IDCM, fullrank (learned index)",
        "ndrm3-frozen-distill", "fullrank"),
    Row("ndrm3fd-rerank", "NDRM3, frozen MiniLM word vectors, distilled from IDCM, rerank BM25 top-100",
        "ndrm3-frozen-distill", "rerank"),
    Row("ndrm3w-full", "NDRM3, word vectors interpolated toward their MiniLM start, fullrank (learned index)",
        "ndrm3-wise", "fullrank"),
    Row("ndrm3w-rerank", "NDRM3, word vectors interpolated toward their MiniLM start, rerank BM25 top-100",
        "ndrm3-wise", "rerank"),
    Row("ndrm3s-full", "NDRM3, average of the bundled and frozen-vector models, fullrank (learned index)",
        "ndrm3-soup", "fullrank"),
    Row("ndrm3s-rerank", "NDRM3, average of the bundled and frozen-vector models, rerank BM25 top-100", "ndrm3-soup",
        "rerank"),
    Row("ndrm3sa-full", "NDRM3, bundled and frozen-vector models averaged (share chosen on dev), latent channel "
        "re-weighted for the collection, fullrank (learned index)", "ndrm3-soup-dev", "fullrank", adapted=True),
    Row("tk-rerank", "TK rerank BM25 top-100", "tk", "rerank"),
    Row("tkl-rerank", "TKL rerank BM25 top-100", "tkl", "rerank"),
    Row("tk-idf-rerank", "TK (idf term weights) rerank BM25 top-100", "tk-idf", "rerank"),
    Row("tkl-idf-rerank", "TKL (idf term weights) rerank BM25 top-100", "tkl-idf", "rerank"),
    Row("tkl-idf-lce-rerank", "TKL (idf term weights, listwise) rerank BM25 top-100", "tkl-idf-lce", "rerank"),
    Row("tkl-idf-titles-rerank", "TKL (idf term weights, title pseudo-queries) rerank BM25 top-100", "tkl-idf-titles",
        "rerank"),
    Row("tkl-idf-whole-rerank", "TKL (idf term weights, whole windows) rerank BM25 top-100", "tkl-idf-whole", "rerank"),
    Row("tkl-idf-explicit-rerank", "TKL (idf term weights, explicit channel) rerank BM25 top-100", "tkl-idf-explicit",
        "rerank"),
    Row("tkl-idf-explicit-lce-rerank", "TKL (idf term weights, explicit channel, listwise) rerank BM25 top-100",
        "tkl-idf-explicit-lce", "rerank"),
    Row("tk-idf-explicit-lce-rerank", "TK (idf term weights, explicit channel, listwise) rerank BM25 top-100",
        "tk-idf-explicit-lce", "rerank"),
    Row("tkl-idf-explicit-lce-lr3-rerank",
        "TKL (idf term weights, explicit channel, listwise, encoder lr 1e-3) rerank BM25 top-100",
        "tkl-idf-explicit-lce-lr3", "rerank"),
    Row("tkl-idf-explicit-lce-frozen-rerank",
        "TKL (idf term weights, explicit channel, listwise, frozen MiniLM word vectors) rerank BM25 top-100",
        "tkl-idf-explicit-lce-frozen", "rerank"),
    Row("tkl-distill-titles-rerank",
        "TKL (frozen MiniLM word vectors, explicit channel, listwise, distilled from IDCM on claims and titles) rerank "
        "BM25 top-100", "tkl-distill-titles", "rerank"),
    Row("tkl-ndrm3-vectors-rerank",
        "TKL (idf term weights, explicit channel, listwise, the bundled NDRM3's word vectors frozen) rerank BM25 top-100",
        "tkl-ndrm3-vectors", "rerank"),
    Row("idcm-rerank", f"IDCM rerank BM25 top-{IDCM_DEPTH}" + (" (then BM25 to 100)" if IDCM_DEPTH < RERANK_DEPTH else ""),
        "idcm", "rerank", depth=IDCM_DEPTH),
    Row("tk-gpu-rerank", "TK (GPU budget) rerank BM25 top-100", "tk-gpu", "rerank"),
    Row("tkl-gpu-rerank", "TKL (GPU budget) rerank BM25 top-100", "tkl-gpu", "rerank"),
    Row("idcm-gpu-rerank", "IDCM (GPU budget) rerank BM25 top-100", "idcm-gpu", "rerank"),
    Row("tkl-gpu-lce-rerank", "TKL (GPU budget, listwise) rerank BM25 top-100", "tkl-gpu-lce", "rerank"),
    Row("idcm-gpu-lce-rerank", "IDCM (GPU budget, listwise) rerank BM25 top-100", "idcm-gpu-lce", "rerank"),
)


#: The runs of the summary table (the report's head and the README): BM25, then each model in its
#: paper's form and in the form trained here that dev chose or that came closest to the targets.
SUMMARY_ROWS = ("bm25", "ndrm1-rerank", "ndrm2-full", "ndrm2a-full", "ndrm3-full", "ndrm3-rerank", "ndrm3-orcas-full",
                "ndrm3-orcas-rerank", "ndrm3f-full",
                "tk-rerank", "tk-idf-explicit-lce-rerank", "tkl-rerank", "tkl-idf-explicit-lce-rerank",
                "tkl-idf-explicit-lce-lr3-rerank", "tkl-idf-explicit-lce-frozen-rerank", "idcm-rerank",
                "idcm-gpu-lce-rerank")


def select(rows: Sequence[Row], only: str | None, names: Iterable[str] = ALL) -> list[tuple[Row, str]]:
    """``(row, collection)`` pairs picked by ``--only`` (row keys or patterns, and collection names)."""
    names = tuple(names)
    tokens = [t.strip() for t in (only or "").split(",") if t.strip()]
    wanted_colls = {t for t in tokens if t in names}
    patterns = [t for t in tokens if t not in names]
    unknown = [p for p in patterns if not any(fnmatch.fnmatch(r.key, p) for r in rows)]
    if unknown:
        raise SystemExit(f"--only: no row or collection matches {unknown}; rows: {[r.key for r in rows]}")
    picked = []
    for row in rows:
        if patterns and not any(fnmatch.fnmatch(row.key, p) for p in patterns):
            continue
        picked += [(row, c) for c in row.collections if not wanted_colls or c in wanted_colls]
    return picked


# -- checkpoint settings -------------------------------------------------------------------------


def ndrm_config(model: str):
    """The bundled NDRM3's training settings with another variant; ``ndrm3-dense`` is NDRM3 without
    the latent gate (the model bundled until session 9), ``ndrm3-bm25`` the bundled NDRM3 with its
    explicit channel fixed at Anserini's BM25 (``bm25_init`` and ``explicit_fixed``), ``ndrm3-frozen``
    the bundled NDRM3 with its initial word vectors frozen (``train_embeddings``). NDRM1 keeps the
    paper's dense latent channel, as it was trained before the bundled model was gated."""
    from ckqti.models.specs import ANSERINI_BM25
    from ckqti.train import TrainConfig

    changes = {  # model options over the bundled ones (NDRM3) or the paper's (NDRM2)
        "ndrm3-bm25": {"bm25_init": ANSERINI_BM25, "explicit_fixed": True},  # ckqti train --fixed-bm25
        "ndrm3-frozen": {"train_embeddings": False},  # ckqti train --frozen-embeddings
        "ndrm3-frozen-distill": {"train_embeddings": False},
        "ndrm2-anserini": {"bm25_init": ANSERINI_BM25},  # trained from Anserini's BM25, not the paper's start
    }
    training = {  # training settings over the bundled ones (decided before the run, docs/EFFECTIVENESS_BUDGETS.md)
        "ndrm3-frozen-distill": {"teacher": TITLE_TEACHER, "weak_supervision": "titles", "pseudo_per_epoch": 728,
                                 "epochs": 4},
    }
    variant = model.split("-")[0]  # ndrm3-dense, ndrm3-bm25 -> ndrm3; ndrm2-anserini -> ndrm2
    gated = model == "ndrm3" or (variant == "ndrm3" and model in changes)  # the bundled settings (ndrm3-dense: not)
    options = {**(BUNDLED_CONFIG.get("model_options", {}) if gated else {}), **changes.get(model, {})}
    return TrainConfig(**{**BUNDLED_CONFIG, **training.get(model, {}), "model": variant, "model_options": options})


#: TK/TKL checkpoints made from another one's settings: ``key -> (base key, changed fields)``;
#: ``model_options`` are merged into the base's. Why each, and when it was decided:
#: ``docs/EFFECTIVENESS_BUDGETS.md``.
DERIVED_RERANKERS = {
    # TK's settings with TKL-idf's lesson: up to 10 epochs, patience 3 (decided before any run)
    "tk-idf": ("tk", {"epochs": 10, "patience": 3, "model_options": {"term_weights": "idf"}}),
    # dev rose until epoch 6 and dipped at 1 and 2 first, so patience 5 (2 stopped it at epoch 2)
    "tkl-idf": ("tkl", {"patience": 5, "model_options": {"term_weights": "idf"}}),
    # ~7x the steps an epoch (every title a pseudo-query), so 6 epochs, patience 2 (decided before any run)
    "tkl-idf-titles": ("tkl-idf", {"epochs": 6, "patience": 2, "weak_supervision": "titles"}),
    # without the saturation windows that run past a document's end (same budget)
    "tkl-idf-whole": ("tkl-idf", {"model_options": {"tail_windows": "whole"}}),
    # plus NDRM2's explicit channel, combined as NDRM3's (same budget)
    "tk-idf-explicit": ("tk-idf", {"model_options": {"explicit": True}}),
    "tkl-idf-explicit": ("tkl-idf", {"model_options": {"explicit": True}}),
    # the embeddings and Transformer at NDRM's 1e-3, not the paper's 1e-4 (dev-chosen)
    "tkl-idf-explicit-lce-lr3": ("tkl-idf-explicit-lce", {"lr_encoder": 1e-3}),
    # with MiniLM's word vectors, frozen (decided before the run)
    "tkl-idf-explicit-lce-frozen": ("tkl-idf-explicit-lce-lr3",
                                    {"embeddings": "minilm", "model_options": {"train_embeddings": False}}),
    # plus IDCM's scores of claims and title pseudo-queries (decided before the run)
    "tkl-distill-titles": ("tkl-idf-explicit-lce-frozen", {"teacher": TITLE_TEACHER, "weak_supervision": "titles",
                                                           "pseudo_per_epoch": 2000, "epochs": 6, "patience": 2}),
    # frozen word vectors from the bundled NDRM3 instead of MiniLM's (decided before the run)
    "tkl-ndrm3-vectors": ("tkl-idf-explicit-lce-frozen", {"embeddings": str(BUNDLED.relative_to(ROOT))}),
}


def reranker_config(key: str):
    """Training settings of the TK, TKL or IDCM checkpoint ``key`` (``tk``, ..., ``idcm-gpu``).

    The ``-gpu`` checkpoints keep the CPU ones' settings and raise the budget a lent GPU allows:
    more epochs (:data:`GPU_EPOCHS`, :data:`IDCM_GPU_STAGES`) and validation on every dev claim's
    BM25 top 100, the depth the table reranks. ``-lce`` trains listwise instead of pairwise:
    each step scores a query's relevant document against :data:`LCE_NEGATIVES` BM25 negatives.
    """
    from ckqti.train.reranker_config import RerankerTrainConfig

    if key in DERIVED_RERANKERS:
        base_key, changes = DERIVED_RERANKERS[key]
        base = reranker_config(base_key)
        return replace(base, **{**changes, "model_options": {**base.model_options, **changes.get("model_options", {})}})
    if key.endswith("-lce"):  # IDCM: 8 groups (64 documents, ~460 windows) a step fit a GPU's memory
        base = reranker_config(key.removesuffix("-lce"))
        return replace(base, loss="lce", negatives=LCE_NEGATIVES, batch_size=8 if base.kind == "idcm" else base.batch_size)
    kind = key.removesuffix("-gpu")
    if key == "idcm-gpu":
        return RerankerTrainConfig(kind="idcm", epochs=1, distill_epochs=1, batch_size=16, lr_encoder=3e-5,
                                   patience=3, dev_depth=RERANK_DEPTH, eval_batch_size=128)
    if key.endswith("-gpu"):
        return RerankerTrainConfig(kind=kind, epochs=GPU_EPOCHS, patience=5, dev_depth=RERANK_DEPTH,
                                   embeddings="random", eval_batch_size=128)
    if kind == "idcm":
        return RerankerTrainConfig(kind="idcm", epochs=1, distill_epochs=1, batch_size=8, lr_encoder=3e-5,
                                   dev_depth=20, max_dev_queries=20, eval_batch_size=16)
    epochs = 10 if kind == "tkl" else 3
    return RerankerTrainConfig(kind=kind, epochs=epochs, patience=2, dev_depth=30, embeddings="random")


# -- experiments towards the NDRM3 target -------------------------------------------------------


@dataclass(frozen=True)
class Experiment:
    """NDRM3 trained with ``settings`` changed from the dense NDRM3's (:func:`ndrm_config`); ``key`` names its checkpoint."""

    key: str
    settings: dict
    what: str  # one sentence for the report

    @property
    def row(self) -> Row:
        return Row(f"{self.key}-rerank", f"NDRM3 {self.key} rerank BM25 top-100", self.key, "rerank", ("scifact",))


EXPERIMENTS = {
    "titles": Experiment("ndrm3-experiment", {"weak_supervision": "titles", "pseudo_per_epoch": 728, "epochs": 6,
                                              "patience": 2},
                         "weak supervision: 728 SciFact titles a epoch as pseudo-queries of their own abstracts, next to "
                         "the 728 training claims; the bundled model stopped at 3 epochs without them"),
    "minilm": Experiment("ndrm3-minilm", {"embeddings": "minilm"},
                         "initial term embeddings from all-MiniLM-L6-v2's WordPiece matrix (each word the composition of "
                         "its WordPiece vectors, reduced to 256 dimensions) instead of skip-gram vectors trained on "
                         "SciFact's 5,183 abstracts"),
    "distill": Experiment("ndrm3-distill", {"teacher": "docs/results/teacher_idcm_scifact_train.json.gz",
                                            "distill_docs": 8, "distill_weight": 1.0},
                          "RankNet on the labels plus listwise distillation from IDCM (the GPU-trained listwise "
                          "cross-encoder, `idcm-gpu-lce` settings): each step, 8 of every training claim's BM25 top "
                          "100 drawn at random, the cross-entropy between IDCM's softmax over them and NDRM3's "
                          "(`ckqti.train.ndrm_config.TrainConfig.teacher`; dev claims' teacher scores are never used)"),
    "minilm-6": Experiment("ndrm3-minilm-6", {"embeddings": "minilm", "epochs": 6, "patience": 2},
                           "the `minilm` experiment's initial embeddings with up to 6 epochs instead of 3 (its dev "
                           "nDCG@10 still rose at epoch 3)"),
    "gate-0.6": Experiment("ndrm3-gate-0.6", {"model_options": {"latent_gate": 0.6}},
                           "a gated latent channel (`NDRMConfig.latent_gate` 0.6): a query term's latent score is "
                           "softplus of NDRM1's where the term occurs in the abstract or its cosine with some "
                           "abstract vector reaches 0.6, and 0 elsewhere, so that the learned index stores every pair "
                           "the model scores (about 160 latent postings an abstract with the then bundled dense model's "
                           "vectors; about 560 once trained). Its dev reranking fell short of the dense model's, but retrieving "
                           "dev claims through the learned index it beat it (0.7878 against 0.7791), so it is the bundled "
                           "model since session 10 (`scripts/train_default.py`)"),
    "gate-0.5": Experiment("ndrm3-gate-0.5", {"model_options": {"latent_gate": 0.5}},
                           "the `gate-0.6` experiment with threshold 0.5 (about 280 latent postings an abstract with "
                           "the then bundled dense model's vectors; about 1,270 once trained). Dev claims through its learned index: "
                           "0.7896, within noise of 0.6's at twice the index"),
    "gate-0.05": Experiment("ndrm3-gate-0.05", {"model_options": {"latent_gate": 0.05}},
                            "a diagnostic, not a candidate (nearly every pair opens, so its index would be huge): the "
                            "gate's softplus with almost no gating, to tell what costs the gated models their dev "
                            "reranking, the softplus or the closed pairs. It scored below both gated models (best 0.7835): the "
                            "non-negative latent score, not the pairs the gate closes, is what costs them"),
}
