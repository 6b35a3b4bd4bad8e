"""The inference paths keep their tensors on the model's device, checked on a CPU.

CI has no GPU, and a tensor made on the CPU (``torch.tensor``, ``zeros``, ``arange`` without
``device=``, ``from_numpy``) meeting a model's tensor, or ``.numpy()`` of a model's output without
``.cpu()``, fails only on CUDA. :class:`HostTensors` simulates two devices on one CPU: tensors made
without a device, by ``from_numpy`` or ``.cpu()`` are "host" tensors (an attribute marks them),
while parameters, buffers and tensors made with ``device=`` or moved by ``.to()`` are the model's.
An operation mixing a host tensor (not a 0-dim one: CUDA takes those) with a model tensor, indexing
a host tensor by a model tensor, or ``.numpy()`` of a model tensor is recorded with the line of
ckqti code that made it. Torch does not show a mode ``from_numpy`` (nor so ``pad_rows``, the id
batches): the check swaps in a ``torch.from_numpy`` that marks its tensors, without which a batch never
moved to the model's device went unseen. Inference models are built before the check starts; the
training checks build theirs inside it (``nn.Parameter`` is the model's side wherever it is made).
"""

from __future__ import annotations

import traceback
from collections import Counter

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ckqti.explain import explain_text
from ckqti.models.inputs import TermText, WordPieceText
from ckqti.models.ndrm import NDRMConfig, build_ndrm
from ckqti.models.reranker import QTI_QUERY_TERMS, Reranker, build_model
from ckqti.text import Analyzer
from ckqti.train.ndrm_start import match_init
from ckqti.vocab import Vocabulary
from indexer.impacts import ImpactConfig, ImpactScorer

from .ckqti.conftest import TINY_MODEL, tiny_scifact  # noqa: F401 (a fixture: the training slice)
from .ckqti.train.test_loop import write_teacher

MAKERS = {"tensor", "as_tensor", "asarray", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand",
          "randn", "randint", "randperm", "from_numpy"}
ANY_DEVICE = {"copy_", "__setitem__", "to", "tolist", "item", "__get__", "__set__", "__repr__", "__format__"}
CPU = torch.device("cpu")
DOCS = ["gene expression in tumor cells and tumor growth " * 4, "tumor tumor growth", "rain tomorrow in the cells",
        "sunny days and tumor", ""]


def on_host(t: torch.Tensor) -> bool:
    return getattr(t, "_host", False)


def set_host(out, host: bool = True) -> None:
    for t in tree_flatten(out)[0]:
        if isinstance(t, torch.Tensor):
            t._host = host


class HostTensors(TorchFunctionMode):
    """Records ``(what, "file:line")`` of each device mix-up in ``found`` (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.found: Counter = Counter()
        self._from_numpy = torch.from_numpy

    def __enter__(self):
        def from_numpy(array):  # torch does not show from_numpy to a mode: its tensors are marked here
            out = self._from_numpy(array)
            set_host(out)
            return out

        torch.from_numpy = from_numpy
        return super().__enter__()

    def __exit__(self, *exc):
        torch.from_numpy = self._from_numpy
        return super().__exit__(*exc)

    def note(self, what: str) -> None:
        frames = traceback.extract_stack()[:-2]  # less this method and __torch_function__
        where = next((f"{f.filename}:{f.lineno}" for f in reversed(frames) if "/torch/" not in f.filename), "?")
        self.found[(what, where)] += 1

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        model_side = [t for t in tensors if not on_host(t)]
        if name == "numpy" and model_side:
            self.note(".numpy() of a model tensor")
        elif name == "__getitem__" and tensors and on_host(tensors[0]) and model_side:
            self.note("a host tensor indexed by a model tensor")
        elif name not in ANY_DEVICE | MAKERS and model_side and any(on_host(t) and t.dim() > 0 for t in tensors):
            self.note(f"host and model tensors in {name}")
        out = func(*args, **kwargs)
        if name in MAKERS:
            source = args[0] if args and isinstance(args[0], torch.Tensor) else None
            if kwargs.get("device") is None and (source is None or on_host(source)):
                set_host(out)
        elif name == "to":
            other = next((a for a in args[1:] if isinstance(a, torch.Tensor)), None)
            device = kwargs.get("device") or next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
            if device is not None or other is not None:  # a move: a tensor of its own, on the model's side
                out = out.clone() if out is args[0] else out
                set_host(out, other is not None and on_host(other))
            elif on_host(args[0]):
                set_host(out)
        elif name == "cpu" or (tensors and not model_side):
            set_host(out)
        return out


@pytest.fixture(scope="module")
def rerankers() -> dict[str, Reranker]:
    from ckqti.models.idcm import IDCM, IDCMConfig
    from ckqti.models.minilm import BertConfig, WordPieceTokenizer

    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(d) for d in DOCS])
    text = TermText(analyzer, vocab)
    torch.manual_seed(0)
    out = {}
    for variant, gate in (("ndrm1", None), ("ndrm2", None), ("ndrm3", None), ("ndrm3-gated", 0.2)):
        model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant=variant[:5], latent_gate=gate, **TINY_MODEL), vocab)
        match_init(model)  # NDRM3: a positive exact-match weight, whose impacts can be stored
        out[variant] = Reranker(variant[:5], model.to(CPU).eval(), text, variant, QTI_QUERY_TERMS, 120, CPU)
    for kind in ("tk", "tkl"):
        model = build_model(kind, dict(vocab_size=len(vocab), embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1))
        model.set_collection(vocab)
        out[kind] = Reranker(kind, model.to(CPU).eval(), text, kind, 30, 200, CPU)
    tok = WordPieceTokenizer.minilm()
    bert = BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                      max_position_embeddings=128, dropout=0.0)
    idcm = IDCMConfig(bert=bert, window=10, overlap=2, max_doc_length=120, max_query_length=8, sample_n=3, top_k=2,
                      cls_id=tok.cls_id, sep_id=tok.sep_id)
    out["idcm"] = Reranker("idcm", IDCM(idcm).to(CPU).eval(), WordPieceText(tok), "idcm", 8, 120, CPU)
    return out


def test_the_check_finds_a_cpu_tensor_meeting_a_model_tensor_and_numpy_without_cpu():
    weight = torch.nn.Linear(3, 1).weight  # [1, 3]
    with HostTensors() as check:
        weight + torch.zeros(1, 3)  # made without device=
        weight + torch.from_numpy(np.ones((1, 3), np.float32))  # not moved (torch shows no mode from_numpy)
        weight.detach().numpy()  # no .cpu()
        weight + torch.zeros(1, 3, device=weight.device) + torch.tensor(2.0)  # on its device; a 0-dim CPU tensor
        weight.detach().cpu().numpy()
        (weight + torch.from_numpy(np.ones((1, 3), np.float32)).to(weight.device)).tolist()
    assert sorted(what for what, _ in check.found) == [".numpy() of a model tensor"] + ["host and model tensors in add"] * 2
    assert all(where.startswith(__file__) for _, where in check.found)


@pytest.mark.parametrize("name", ["ndrm1", "ndrm2", "ndrm3", "ndrm3-gated", "tk", "tkl", "idcm"])
def test_scoring_and_explaining_stay_on_the_models_device(rerankers, name):
    rr = rerankers[name]
    with HostTensors() as check:
        rr.score("tumor growth cells", DOCS)
        explain_text(rr, "tumor growth", "d0", DOCS[0])
        if name.startswith("ndrm"):
            rows, lengths = rr.doc_rows(DOCS[:3])
            rr.term_table([np.array([2, 3])] * 3, rows, lengths)
    assert not check.found, check.found


@pytest.mark.parametrize("name", ["ndrm1", "ndrm2", "ndrm3", "ndrm3-gated"])
@pytest.mark.parametrize("batched", [True, False])
def test_impacts_stay_on_the_models_device(rerankers, name, batched):
    rr = rerankers[name]
    docs = [rr.text.ids(d) for d in DOCS]
    scorer = ImpactScorer(rr.model, rr.text.vocab.df, ImpactConfig(batched=batched, offset_sample=4, neighbours=3))
    with HostTensors() as check:
        scorer.fit_offsets(docs, len(rr.text.vocab))
        scorer.score_batch(docs)
    assert not check.found, check.found


@pytest.mark.parametrize("variant", ["ndrm1", "ndrm2", "ndrm3"])
def test_ndrm_training_stays_on_the_models_device(tiny_scifact, tmp_path, monkeypatch, variant):  # noqa: F811
    """``ckqti train`` of each NDRM (model built inside the check): steps with the teacher's loss (NDRM3 with
    three BM25 negatives and the listwise loss), validation and saving; the documents encoded in groups by
    length as on the CPU, then in one call as on a GPU (``scoring.encode_group``)."""
    from ckqti.train import TrainConfig, scoring, train

    teacher = write_teacher(tmp_path / "t.json.gz", tiny_scifact, list(tiny_scifact["qrels"]))
    extra = {"negatives": 3, "loss": "lce"} if variant == "ndrm3" else {}
    config = TrainConfig(model=variant, epochs=1, batch_size=8, max_steps=2, embeddings="random", dev_fraction=0.25,
                         dev_depth=10, model_options=TINY_MODEL, progress=False, device="cpu", teacher=str(teacher),
                         distill_docs=6, **extra)
    for group in ("cpu", "gpu"):
        if group == "gpu":
            monkeypatch.setattr(scoring, "encode_group", lambda device: None)
        with HostTensors() as check:
            train(tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / group / "m.pt",
                  config, candidates=tiny_scifact["candidates"])
        assert not check.found, (group, check.found)


@pytest.mark.parametrize("kind", ["tk", "tkl", "idcm"])
def test_reranker_training_stays_on_the_models_device(tiny_scifact, tmp_path, kind):  # noqa: F811
    """``ckqti train`` of TK (listwise, three negatives, the teacher's loss), TKL (pairwise, the teacher's
    loss) and IDCM's three stages on a tiny random BERT, validation and saving included."""
    from ckqti.train.reranker_config import RerankerTrainConfig
    from ckqti.train.rerankers import train_reranker

    if kind == "idcm":
        bert = dict(vocab_size=30522, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                    max_position_embeddings=128, dropout=0.0)
        extra = dict(model_options=dict(bert=bert, max_doc_length=200, sample_n=3, top_k=2))
    else:
        teacher = write_teacher(tmp_path / "t.json.gz", tiny_scifact, list(tiny_scifact["qrels"]))
        extra = dict(model_options=dict(embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1), teacher=str(teacher),
                     distill_weight=1.0, **({"loss": "lce", "negatives": 3} if kind == "tk" else {}))
    config = RerankerTrainConfig(kind=kind, epochs=1, batch_size=4, max_steps=2, embeddings="random", dev_depth=5,
                                 max_dev_queries=3, progress=False, device="cpu", **extra)
    with HostTensors() as check:
        train_reranker(kind, tiny_scifact["corpus"], tiny_scifact["queries"], tiny_scifact["qrels"], tmp_path / "m.pt",
                       config, candidates=tiny_scifact["candidates"])
    assert not check.found, check.found


@pytest.mark.parametrize("saved_on", ["cpu", "gpu", "gpu-earlier"])
def test_training_states_on_the_cpu_never_touch_cuda_where_it_is_present(tmp_path, monkeypatch, saved_on):
    """``--device cpu`` on a machine with CUDA: saving and resuming a training state (NDRM's and a re-ranker
    stage's) read and set the CPU's RNG only, also resuming a state a GPU run saved. They called
    ``torch.cuda.get_rng_state_all()`` whenever CUDA was present, which starts a context on every GPU of the
    machine at each save and fails where the GPUs are busy (exclusive mode, another job's)."""
    from ckqti.train.ndrm_state import RunState, load_state, save_state
    from ckqti.train.stage_state import StageProgress, StageState

    def refused(name: str):
        def touched(*args, **kwargs):
            raise AssertionError(f"torch.cuda.{name} called")
        return touched  # one function a name: torch's compiler, which Adam imports, refuses one under two names

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(model.parameters())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all", "init"):
        monkeypatch.setattr(torch.cuda, name, refused(name))
    progress = StageProgress(1, 0.5, 0, [{"epoch": 0, "dev_ndcg10": 0.0}], model.state_dict())
    stage = StageState(tmp_path / "stage.pt", "fp", resume=True)
    save_state(tmp_path / "state.pt", model, opt, RunState(), "fp")
    stage.save(model, opt, progress)
    if saved_on != "cpu":  # as a CUDA run saved them: its device's generator, or (earlier versions) every device's
        cuda = torch.zeros(16, dtype=torch.uint8)
        for path in (tmp_path / "state.pt", tmp_path / "stage.pt"):
            payload = torch.load(path, weights_only=True)
            torch.save({**payload, "cuda_rng": cuda if saved_on == "gpu" else [cuda] * 2}, path)
    assert load_state(tmp_path / "state.pt", model, opt, "fp") == RunState()
    assert stage.restore(model, opt).epoch == 1


def test_training_states_keep_the_generator_of_the_models_cuda_device(monkeypatch):
    """A model on ``cuda:1`` saves and sets that device's generator only (simulated: a model whose parameters
    say ``cuda:1``, torch.cuda's RNG calls recorded). Of a state earlier versions saved, a list by device
    index, the model's device's is taken; one saved where fewer devices were seen sets none (it raised
    IndexError in ``set_rng_state_all`` on a machine seeing fewer GPUs than the saving one)."""
    from types import SimpleNamespace

    from ckqti.train.stage_state import restore_rng, rng_state

    calls = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device: calls.append(("get", device)) or "state")
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: calls.append(("set", state, device)))
    monkeypatch.setattr(torch, "set_rng_state", lambda state: None)
    on_gpu = SimpleNamespace(parameters=lambda: iter([SimpleNamespace(device=torch.device("cuda", 1))]))
    on_cpu = torch.nn.Linear(1, 1)
    gpu1 = torch.device("cuda", 1)
    assert rng_state(on_gpu)["cuda_rng"] == "state" and rng_state(on_cpu)["cuda_rng"] is None
    assert calls == [("get", gpu1)]
    calls.clear()
    for cuda in ("saved", ["of cuda:0", "of cuda:1"], ["of cuda:0"], [], None):
        restore_rng({"torch_rng": None, "cuda_rng": cuda}, on_gpu)
        restore_rng({"torch_rng": None, "cuda_rng": cuda}, on_cpu)
    assert calls == [("set", "saved", gpu1), ("set", "of cuda:1", gpu1)]
