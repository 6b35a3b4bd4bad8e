"""What the training options mean for each model: which apply, which combine, and the training
config they make (:func:`train_config`, behind :func:`ckqti.api.train` and ``ckqti train``).

Light to import (no torch): the configs are built lazily, after every check has passed, so a
refused combination costs nothing and writes nothing.
"""

from __future__ import annotations

import math

from ckqti.errors import OptionError, is_real, option_count

NDRM_MODELS = ("ndrm1", "ndrm2", "ndrm3")
RERANKER_MODELS = ("tk", "tkl", "idcm")
MODELS = NDRM_MODELS + RERANKER_MODELS
MODEL_INITS = ("paper", "match")  # every model's start: as published, or from exact matching (each model's match_init)
WEAK_SUPERVISION = ("titles",)  # documents' titles as pseudo-queries for their own documents


def train_config(
    model: str,
    *,
    resume: bool = False,
    dev_qrels: object = None,
    epochs: int = 10,
    patience: int = 3,
    max_steps: int | None = None,
    batch_size: int = 32,
    lr: float | None = None,
    seed: int = 0,
    dev_fraction: float = 0.1,
    rel_level: int = 1,
    device: str | None = None,
    weak_supervision: str | None = None,
    embeddings: str | None = None,
    init: str | None = None,
    loss: str | None = None,
    negatives: int = 1,
    term_weights: str = "none",
    tail_windows: str | None = None,
    max_doc_length: int | None = None,
    explicit: bool = False,
    teacher: str | None = None,
    distill_docs: int = 8,
    distill_weight: float = 1.0,
    latent_gate: float | None = None,
    fixed_bm25: bool = False,
    frozen_embeddings: bool = False,
    selector_loss: str | None = None,
    progress: bool = True,
):
    """The :class:`~ckqti.train.ndrm_config.TrainConfig` (NDRM) or
    :class:`~ckqti.train.reranker_config.RerankerTrainConfig` (TK, TKL, IDCM) of ``ckqti train``'s
    options, after checking that each applies to ``model`` (``resume`` and ``dev_qrels`` are
    checked only: they are arguments of the NDRM training call).

    Options left at None take the model's default: ``lr`` 1e-4 (NDRM; TK/TKL/IDCM train with
    the SPEC's two rates), ``loss`` RankNet (NDRM) or margin (TK/TKL/IDCM), ``embeddings``
    skip-gram, ``init`` paper (NDRM) or match (TK/TKL), ``selector_loss`` lambda (IDCM's stage 3).
    ``max_steps`` (every model; None: every training query) caps an epoch's optimizer steps, for a
    quick trial. ``rel_level`` (every model) is the grade from which a judged document is relevant, as
    ``ckqti eval --rel-level`` counts it (TREC DL passages: 2). ``max_doc_length`` (TKL, IDCM;
    None: their 2,000) is the document tokens the model reads, kept in its checkpoint's config. ``progress``
    (every model; ``ckqti train --quiet``: False) shows progress bars, start-up steps, notes and a line per epoch on
    stderr.

    Raises:
        OptionError: an option the model does not take, or options that do not combine.
    """
    if model not in MODELS:
        raise OptionError(f"model must be one of {', '.join(MODELS)}, got {model!r}", ("model",))
    check_numbers(epochs=epochs, patience=patience, batch_size=batch_size, seed=seed, negatives=negatives,
                  distill_docs=distill_docs, rel_level=rel_level, lr=lr, dev_fraction=dev_fraction,
                  distill_weight=distill_weight, latent_gate=latent_gate)
    epochs, patience, batch_size, seed, negatives, distill_docs, rel_level = (  # numpy's integers are not JSON's
        int(v) for v in (epochs, patience, batch_size, seed, negatives, distill_docs, rel_level))  # (checkpoint meta)
    if max_doc_length is not None:
        max_doc_length = option_count(max_doc_length, "max_doc_length")
    if max_steps is not None:
        max_steps = int(option_count(max_steps, "max_steps"))
    refuse_other_models_options(model, tail_windows, explicit, fixed_bm25, frozen_embeddings, max_doc_length)
    if selector_loss is not None and model != "idcm":
        raise OptionError("selector_loss is for IDCM (its stage 3 distils the window selector)", ("selector_loss",))
    common = dict(epochs=epochs, patience=patience, max_steps=max_steps, batch_size=batch_size, seed=seed,
                  dev_fraction=dev_fraction,
                  rel_level=rel_level, device=device, teacher=teacher, distill_docs=distill_docs,
                  distill_weight=distill_weight, negatives=negatives, weak_supervision=weak_supervision,
                  progress=bool(progress))
    if model in RERANKER_MODELS:
        refuse_ndrm_only_options(lr, dev_qrels)
        loss = loss or "margin"
        if negatives > 1 and loss != "lce":
            raise OptionError("negatives > 1 needs loss lce", ("negatives", "loss"))
        if latent_gate is not None:
            raise OptionError("latent_gate is for NDRM1 and NDRM3", ("latent_gate",))
        if model == "idcm":
            refuse_idcm_options(term_weights, teacher, weak_supervision, embeddings, init)
        from ckqti.train.reranker_config import RerankerTrainConfig

        model_options = reranker_model_options(model, term_weights, tail_windows, explicit, frozen_embeddings,
                                               max_doc_length)
        starts = {k: v for k, v in (("embeddings", embeddings), ("init", init), ("selector_loss", selector_loss))
                  if v is not None}
        return checked(RerankerTrainConfig, kind=model, loss=loss, model_options=model_options, **starts, **common)
    if loss == "margin" or term_weights != "none":
        raise OptionError("loss margin and term_weights are for TK, TKL and IDCM (NDRM trains with RankNet or lce)",
                          ("loss", "term_weights"))
    if latent_gate is not None and model == "ndrm2":
        raise OptionError("latent_gate is for NDRM1 and NDRM3 (NDRM2 has no latent channel)", ("latent_gate",))
    from ckqti.train.ndrm_config import TrainConfig

    return checked(TrainConfig, model=model, lr=1e-4 if lr is None else lr, embeddings=embeddings or "skipgram",
                       init=init or "paper", loss=loss or "ranknet",
                       model_options=ndrm_model_options(latent_gate, fixed_bm25, frozen_embeddings), **common)


def checked(config_type, **fields):
    """``config_type(**fields)``, its own refusals (a value not among a choice's) as :class:`OptionError`."""
    try:
        return config_type(**fields)
    except ValueError as e:
        raise OptionError(str(e)) from None


MAX_SEED = 2**32 - 1  # numpy's legacy seeding (gensim's skip-gram) takes no larger seed


def check_seed(seed: int) -> None:
    """A training config's seed: numpy's legacy seeding (gensim's skip-gram, TK's start) takes
    ``[0, MAX_SEED]``; past it the run failed with a traceback after BM25."""
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")

COUNTS = {"epochs": 1, "patience": 1, "batch_size": 1, "negatives": 1, "distill_docs": 1, "rel_level": 1,  # least value
          "seed": 0}
REALS = {  # the range of each real-valued option (None: the default)
    "lr": ("> 0", lambda v: v > 0),
    "dev_fraction": ("in (0, 1)", lambda v: 0 < v < 1),
    "distill_weight": (">= 0", lambda v: v >= 0),
    "latent_gate": ("in (0, 1]", lambda v: 0 < v <= 1),
}


def check_numbers(**values) -> None:
    """The numeric options' types and ranges, as the CLI's flag types check them there (Python
    callers get the same refusals as :class:`OptionError`)."""
    for name, value in values.items():
        if name in COUNTS:
            option_count(value, name, COUNTS[name])
            if name == "seed" and value > MAX_SEED:  # a traceback after BM25 (skip-gram, TK's start), or torch's
                raise OptionError(f"seed must be an integer in [0, {MAX_SEED}], got {value!r}", (name,))
            continue
        if value is None:
            continue
        bound, ok = REALS[name]
        if not is_real(value) or not math.isfinite(value) or not ok(value):
            raise OptionError(f"{name} must be a number {bound}, got {value!r}", (name,))


def reranker_model_options(model: str, term_weights: str, tail_windows: str | None, explicit: bool,
                           frozen_embeddings: bool, max_doc_length: int | None = None) -> dict:
    """TKConfig / TKLConfig / IDCMConfig fields the options set."""
    options = {} if model == "idcm" else {"term_weights": term_weights}
    if tail_windows is not None:
        options["tail_windows"] = tail_windows
    if max_doc_length is not None:
        options["max_doc_length"] = max_doc_length
    if explicit:
        options["explicit"] = True
    if frozen_embeddings:
        options["train_embeddings"] = False
    return options


def ndrm_model_options(latent_gate: float | None, fixed_bm25: bool, frozen_embeddings: bool) -> dict:
    """NDRMConfig fields the options set."""
    from ckqti.models.specs import ANSERINI_BM25

    options = {} if latent_gate is None else {"latent_gate": latent_gate}
    if fixed_bm25:
        options.update(bm25_init=ANSERINI_BM25, explicit_fixed=True)
    if frozen_embeddings:
        options["train_embeddings"] = False
    return options


def refuse_ndrm_only_options(lr: float | None, dev_qrels: object) -> None:
    """TK/TKL/IDCM training has no single learning rate or separate dev judgements."""
    if lr is not None:
        raise OptionError("lr is for NDRM (TK/TKL/IDCM train with the SPEC's two rates: 1e-4 for embeddings "
                          "and Transformer or cross-encoder, 1e-3 for the rest)", ("lr",))
    if dev_qrels is not None:
        raise OptionError("dev_qrels is for NDRM (TK/TKL/IDCM carve dev from qrels, dev_fraction)",
                          ("dev_qrels", "qrels", "dev_fraction"))


def refuse_other_models_options(model: str, tail_windows: str | None, explicit: bool, fixed_bm25: bool,
                                frozen_embeddings: bool, max_doc_length: int | None = None) -> None:
    """Options that belong to one or two models."""
    if max_doc_length is not None and model not in ("tkl", "idcm"):
        raise OptionError("max_doc_length is for TKL and IDCM (TK's document cap is the SPEC's 200 tokens, part of "
                          "the model; NDRM reads the SPEC's 4,000 terms, as an index build does)", ("max_doc_length",))
    if frozen_embeddings and model in ("ndrm2", "idcm"):
        raise OptionError("frozen_embeddings is for NDRM1, NDRM3, TK and TKL (the models with word vectors)",
                          ("frozen_embeddings",))
    if tail_windows is not None and model != "tkl":
        raise OptionError("tail_windows is for TKL", ("tail_windows",))
    if fixed_bm25 and model not in ("ndrm2", "ndrm3"):
        raise OptionError("fixed_bm25 is for NDRM2 and NDRM3 (the models with a BM25-like channel of their own)",
                          ("fixed_bm25",))
    if explicit and model not in ("tk", "tkl"):
        raise OptionError("explicit is for TK and TKL (NDRM3 already combines NDRM1 with NDRM2's channel)",
                          ("explicit",))


def refuse_idcm_options(term_weights: str, teacher: str | None, weak_supervision: str | None, embeddings: str | None,
                        init: str | None) -> None:
    """IDCM starts from all-MiniLM-L6-v2 and distils its own cross-encoder: the word-model options do not apply."""
    if term_weights != "none":
        raise OptionError("term_weights is for TK and TKL", ("term_weights",))
    if teacher:
        raise OptionError("teacher is for NDRM, TK and TKL (IDCM distils its own cross-encoder)", ("teacher",))
    for option, value in (("weak_supervision", weak_supervision), ("embeddings", embeddings), ("init", init)):
        if value is not None:
            raise OptionError(f"{option} is for NDRM, TK and TKL (IDCM starts from all-MiniLM-L6-v2)", (option,))
