"""Explanations: regions, kernels and term contributions, read back from the HTML page (no screenshot).

Real text: SciFact abstracts. One long document plants an abstract's text (its title is the
query) after about 120 terms of other abstracts; a match-initialised TKL (exact matching of the
query's terms, see ``ckqti.train.reranker_tk.match_init``) must put its best region on the
planted text, and the HTML must name exactly the regions the model returned.
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import torch

from ckqti.errors import InputError, QueryError
from ckqti.explain import explain
from ckqti.explain_html import marked_html
from ckqti.explain_terminal import marked_text
from ckqti.models.inputs import TermText, WordPieceText, analyzed_spans
from ckqti.models.minilm import WordPieceTokenizer
from ckqti.models.reranker import build_model, load_reranker, save_reranker
from ckqti.text import Analyzer
from ckqti.train.reranker_tk import match_init
from ckqti.vocab import Vocabulary

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
TINY = dict(embedding_dim=16, num_heads=2, ff_dim=16, num_layers=1)
TINY_BERT = dict(vocab_size=30522, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                 max_position_embeddings=128, dropout=0.0)

OTHER_SETTINGS = {"tkl": dict(saturation_window=20, saturation_stride=2, regions=2, neighbours=1),  # (30, 2, 3, 2)
                  "idcm": dict(window=40, overlap=3, sample_n=3, top_k=1)}  # (50, 7, 4, 3)
STRIDE_SETTINGS = dict(saturation_window=5, saturation_stride=6, regions=3, neighbours=2)  # a stride over the window


class Marks(HTMLParser):
    """Collects region marks, kernel-coloured words, match marks and unread text from a page."""

    def __init__(self):
        super().__init__()
        self.regions, self.words, self.matches, self.unread = [], [], [], ""
        self._open: list[tuple[str, dict, list[str]]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if (tag == "mark" and ("region" in cls or "match" in cls)) or (tag == "span" and ("w" in cls or "unread" in cls)):
            self._open.append((tag, a, []))

    def handle_data(self, data):
        for _, _, buf in self._open:
            buf.append(data)

    def handle_endtag(self, tag):
        if self._open and self._open[-1][0] == tag:
            _, a, buf = self._open.pop()
            cls, text = a["class"].split(), "".join(buf)
            if "region" in cls:
                self.regions.append({**a, "text": text})
            elif "match" in cls:
                self.matches.append({**a, "text": text})
            elif "w" in cls:
                self.words.append({**a, "text": text})
            else:
                self.unread += text


def parse(html: str) -> Marks:
    p = Marks()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    if not DATA.is_dir():
        pytest.skip("../shared/data is not present")
    with open(DATA / "scifact" / "corpus.jsonl") as f:
        docs = [json.loads(line) for line in itertools.islice(f, 60)]
    planted, filler = docs[0], docs[20:30]
    head = "\n".join(d["text"] for d in filler[:1])  # about 120 terms before the planted abstract
    tail = "\n".join(d["text"] for d in filler[1:])
    long_text = head + "\n" + planted["text"] + "\n" + tail
    long_doc = {"_id": "long-1", "title": "", "text": long_text}
    tmp = tmp_path_factory.mktemp("explain")
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in [*docs, long_doc]))
    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in [*docs, long_doc]])
    text = TermText(analyzer, vocab)
    torch.manual_seed(0)
    paths = {}
    for kind in ("tk", "tkl"):
        model = build_model(kind, dict(vocab_size=len(vocab), **TINY))
        match_init(model)
        paths[kind] = save_reranker(tmp / f"{kind}.pt", model, kind, text).path
    for kind in ("tk", "tkl"):
        explicit = build_model(kind, dict(vocab_size=len(vocab), explicit=True, **TINY))
        match_init(explicit)
        explicit.set_collection(vocab)
        with torch.no_grad():  # as if trained: both channels weighted, statistics of some documents
            explicit.combiner.linear.weight.copy_(torch.tensor([[0.4, 1.2]]))
            explicit.combiner.linear.bias.fill_(0.3)
            explicit.combiner.norm.running_mean.copy_(torch.tensor([-500.0, 3.0]))
            explicit.combiner.norm.running_var.copy_(torch.tensor([1e4, 4.0]))
        paths[f"{kind}-explicit"] = save_reranker(tmp / f"{kind}-explicit.pt", explicit, kind, text).path
    tkl = build_model("tkl", dict(vocab_size=len(vocab), **TINY, **OTHER_SETTINGS["tkl"]))
    match_init(tkl)
    paths["tkl-other"] = save_reranker(tmp / "tkl-other.pt", tkl, "tkl", text).path
    tkl = build_model("tkl", dict(vocab_size=len(vocab), **TINY, **STRIDE_SETTINGS))
    match_init(tkl)
    paths["tkl-stride"] = save_reranker(tmp / "tkl-stride.pt", tkl, "tkl", text).path
    for name, options in (("idcm", {}), ("idcm-other", OTHER_SETTINGS["idcm"])):
        idcm = build_model("idcm", dict(bert=TINY_BERT, max_doc_length=600, **options))
        paths[name] = save_reranker(tmp / f"{name}.pt", idcm, "idcm", WordPieceText(WordPieceTokenizer.minilm())).path
    start = len(head) + 1
    return {"corpus": corpus, "paths": paths, "query": planted["title"], "long": long_text, "tmp": tmp,
            "planted_chars": (start, start + len(planted["text"]))}


def test_tkl_html_names_the_model_regions_and_the_best_is_the_planted_text(setup):
    html_path = setup["tmp"] / "tkl.html"
    e = explain(setup["query"], "long-1", setup["paths"]["tkl"], corpus=setup["corpus"], html_out=html_path, device="cpu")
    # the regions are the model's own picks
    rr = load_reranker(setup["paths"]["tkl"], device="cpu")
    with torch.no_grad():
        q = torch.as_tensor(rr.query_ids(setup["query"]))[None]
        d = torch.as_tensor(rr.doc_ids(setup["long"]))[None]
        m = rr.model.explain(q, d)
    assert [r.token_start for r in e.regions] == [int(s) for s in m.region_starts[0] if s >= 0]
    assert e.score == pytest.approx(float(m.score[0]))
    assert len(e.regions) == 3
    # and the HTML names exactly those spans, around exactly that text
    marks = sorted(parse(html_path.read_text()).regions, key=lambda x: int(x["data-rank"]))  # page: text order
    assert [(int(x["data-rank"]), int(x["data-token-start"]), int(x["data-token-end"])) for x in marks] == \
        [(r.rank, r.token_start, r.token_end) for r in e.regions]
    for x, r in zip(marks, e.regions):
        assert x["text"] == e.text[r.char_start: r.char_end] == setup["long"][r.char_start: r.char_end]
        assert float(x["data-score"]) == r.score
    tokens = analyzed_spans(Analyzer(), setup["long"])
    best = e.regions[0]
    assert [t.token for t in tokens[best.token_start: best.token_end]] == Analyzer()(e.region_text(best))
    lo, hi = setup["planted_chars"]
    assert lo <= best.char_start and best.char_end <= hi  # best region inside the planted abstract
    assert all(r.token_end - r.token_start <= 30 for r in e.regions)
    spans = sorted((r.token_start, r.token_end) for r in e.regions)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # no overlap


@pytest.mark.parametrize("kind, own", [("tk", "kernels"), ("tkl", "regions")])
def test_an_explicit_channel_reports_the_parts_of_the_score(setup, kind, own):
    """A TK or TKL combining its own score with NDRM2's explicit one: the parts (kernels or regions,
    explicit, constant) sum to the score, the explicit part is NDRM2's score of the text weighted by
    the combination (TK's kernel cells sum to its own part), and the terminal and HTML reports show
    them; a model without the channel reports none."""
    e = explain(setup["query"], "long-1", setup["paths"][f"{kind}-explicit"], corpus=setup["corpus"], device="cpu")
    rr = load_reranker(setup["paths"][f"{kind}-explicit"], device="cpu")
    with torch.no_grad():
        q = torch.as_tensor(rr.query_ids(setup["query"]))[None]
        d = torch.as_tensor(rr.doc_ids(setup["long"]))[None]
        m = rr.model.explain(q, d)
        ndrm2 = float(rr.model.combiner.explicit(q, d)[0])
    assert ndrm2 > 0 and len(e.regions) == (3 if kind == "tkl" else 0)
    names = [name for name, _ in e.parts]
    assert names == [own, "explicit (NDRM2)", "constant"]
    assert sum(v for _, v in e.parts) == pytest.approx(e.score, rel=1e-5) == pytest.approx(float(m.score[0]), rel=1e-5)
    _, b, _ = rr.model.combiner.combination()
    assert dict(e.parts)["explicit (NDRM2)"] == pytest.approx(b * ndrm2, rel=1e-5)
    if kind == "tk":
        a, _, _ = rr.model.combiner.combination()
        assert a * float(m.kernel_score[0]) == pytest.approx(dict(e.parts)["kernels"], rel=1e-5)
        assert float(m.term_kernel_scores.sum()) == pytest.approx(float(m.kernel_score[0]), rel=1e-4)
        assert float(np.sum(e.kernels.cells)) == pytest.approx(dict(e.parts)["kernels"], rel=1e-4)  # the table's total
    assert f"score = {own}" in e.render_terminal(color=False)
    assert 'id="parts"' in e.to_html() and 'data-part="explicit (NDRM2)"' in e.to_html()
    plain = explain(setup["query"], "long-1", setup["paths"][kind], corpus=setup["corpus"], device="cpu")
    assert plain.parts == () and 'id="parts"' not in plain.to_html()


def test_idcm_html_names_the_selected_windows(setup):
    e = explain(setup["query"], "long-1", setup["paths"]["idcm"], corpus=setup["corpus"], device="cpu")
    rr = load_reranker(setup["paths"]["idcm"], device="cpu")
    with torch.no_grad():
        m = rr.model.explain(torch.as_tensor(rr.query_ids(setup["query"]))[None],
                             torch.as_tensor(rr.doc_ids(setup["long"]))[None])
    expected = sorted((float(c), int(s), int(t)) for c, (s, t) in zip(m.cross_scores[0], m.spans[0]) if s >= 0)[::-1]
    assert [(r.token_start, r.token_end) for r in e.regions] == [(s, t) for _, s, t in expected]
    assert [r.score for r in e.regions] == pytest.approx([c for c, _, _ in expected])  # (approx takes no nesting)
    assert len(e.regions) == rr.model.config.sample_n
    assert sum(r.used for r in e.regions) == rr.model.config.top_k
    marks = sorted(parse(e.to_html()).regions, key=lambda x: int(x["data-rank"]))
    assert [(int(x["data-token-start"]), int(x["data-token-end"])) for x in marks] == \
        [(r.token_start, r.token_end) for r in e.regions]
    for x, r in zip(marks, e.regions):
        assert x["text"] == e.text[r.char_start: r.char_end]
        assert r.token_end - r.token_start == 50 and r.token_end <= e.tokens_read


@pytest.mark.parametrize("model, settings, says", [
    ("tkl", dict(saturation_window=30, saturation_stride=2, regions=3, neighbours=2),
     ["TKL's 3 best saturation windows (30 terms each, non-overlapping)", "each with its 2 neighbours on each side"]),
    ("tkl-other", OTHER_SETTINGS["tkl"],
     ["TKL's 2 best saturation windows (20 terms each", "each with its 1 neighbour on each side"]),
    ("tkl-stride", STRIDE_SETTINGS,
     ["TKL's 3 best saturation windows (5 terms each, non-overlapping)"]),
    ("idcm", dict(window=50, overlap=7, sample_n=4, top_k=3),
     ["(at most 4)", "(50-token centres; it also read 7 tokens on each side)", "best 3 cross-encoder scores make"]),
    ("idcm-other", OTHER_SETTINGS["idcm"],
     ["(at most 3)", "(40-token centres; it also read 3 tokens on each side)", "best 1 cross-encoder score makes"]),
])
def test_region_notes_name_the_models_own_settings(setup, model, settings, says):
    e = explain(setup["query"], "long-1", setup["paths"][model], corpus=setup["corpus"], device="cpu")
    assert e.settings == settings and e.to_dict()["settings"] == settings
    sizes = {r.token_end - r.token_start for r in e.regions}
    if model.startswith("tkl"):
        assert len(e.regions) == settings["regions"] and max(sizes) == settings["saturation_window"]
        for a, b in itertools.combinations(e.regions, 2):  # what the note says
            assert a.token_end <= b.token_start or b.token_end <= a.token_start
    else:
        assert len(e.regions) == settings["sample_n"] and sizes == {settings["window"]}
    terminal, page = e.render_terminal(color=False), e.to_html()
    for phrase in says:
        assert phrase in terminal and phrase in page


def test_overlapping_regions_show_their_text_once(setup):
    """Marks were written one after another: text two marks share was shown twice (no model's regions
    overlap now, but the renderers take any marks)."""
    e = explain(setup["query"], "long-1", setup["paths"]["tkl-stride"], corpus=setup["corpus"], device="cpu")
    e = replace(e, text="one two three four", tokens=(), tokens_read=0)
    terminal = marked_text(e, [(0, 7, "1", "[#1 ", "]"), (4, 13, "2", "[#2 ", "]"), (5, 6, "3", "[#3 ", "]")], False)
    assert terminal == "[#1 one two][#2  three] four"
    page = marked_html(e, [(0, 7, '<mark class="a">'), (4, 13, '<mark class="b">')])
    assert page == '<mark class="a">one two</mark><mark class="b"> three</mark> four'


def test_a_short_document_shows_only_the_regions_tkl_found(setup):
    """A document shorter than a saturation window has one region (every window of it overlaps the
    first pick); TKL marks its other picks invalid, and explain showed them too: regions starting at
    token -1 with score 0. Every region shown is a valid window the model picked, inside the text."""
    from ckqti.explain import explain_text

    rr = load_reranker(setup["paths"]["tkl"], device="cpu")
    c = rr.model.config
    words = setup["long"][setup["planted_chars"][0]:].split()
    for n_words, expected in ((12, 1), (60, None)):  # 7 tokens; 44 (room for 2 regions, not 3)
        text = " ".join(words[:n_words])
        e = explain_text(rr, setup["query"], "short", text)
        n = len(e.tokens)
        with torch.no_grad():
            m = rr.model.explain(torch.as_tensor(rr.query_ids(setup["query"]))[None],
                                 torch.as_tensor(rr.doc_ids(text))[None])
        found = int(m.region_valid[0].sum())
        assert 0 < n < c.regions * c.saturation_window and e.tokens_read == n
        assert len(e.regions) == found == (expected or found) and found < c.regions
        for r in e.regions:
            w = r.token_start // c.saturation_stride
            assert 0 <= r.token_start < r.token_end <= n and r.token_start % c.saturation_stride == 0
            assert bool(m.window_valid[0, w]) and r.score == pytest.approx(float(m.topography[0, w]))
            assert 0 <= r.char_start < r.char_end <= len(text)
        assert [r.rank for r in e.regions] == list(range(1, found + 1))
        assert f"#{found + 1} " not in e.render_terminal(color=False)
        assert len(parse(e.to_html()).regions) == found


def test_tk_colours_each_word_read_by_its_closest_kernel(setup):
    e = explain(setup["query"], "long-1", setup["paths"]["tk"], corpus=setup["corpus"], device="cpu")
    k = e.kernels
    assert e.tokens_read == 200 < len(e.tokens)
    assert len(k.cells) == len(e.query_tokens) and all(len(row) == 11 for row in k.cells)
    assert sum(map(sum, k.cells)) == pytest.approx(e.score, abs=1e-5)
    page = parse(e.to_html())
    assert [int(w["data-kernel"]) for w in page.words] == list(k.doc_kernels)
    assert [w["text"] for w in page.words] == [e.text[t.start: t.end] for t in e.tokens[:200]]
    wanted = set(e.query_tokens)
    for w, t in zip(page.words, e.tokens):
        if t.token in wanted:  # an exact match under match init: cosine 1, the mu = 1 kernel
            assert w["data-mu"] == "1.0"
    assert e.unread_from == e.tokens[200].start  # the unread text begins at the first token past the 200-token cap
    assert page.unread.startswith(e.text[e.tokens[200].start: e.tokens[200].end])


def test_tk_kernels_are_coloured_by_their_mu_alike_on_the_page_and_in_the_terminal(setup, tmp_path):
    """A TK with other kernels than the 11 of TK_MUS (config ``kernel_mus``): the page coloured a
    kernel by its position in the 11-colour palette (mu = 0 orange, mu = -1 light green) while the
    terminal spread the positions over it; both colour by mu, as documented: exact match red, 0 grey,
    opposite meaning blue, and every word as the legend colours its closest kernel."""
    import re

    from ckqti.explain_html import KERNEL_HEX
    from ckqti.explain_terminal import KERNEL_COLOURS

    tk = load_reranker(setup["paths"]["tk"], device="cpu")
    torch.manual_seed(0)
    model = build_model("tk", dict(vocab_size=len(tk.text.vocab), kernel_mus=(1.0, 0.5, 0.0, -0.5, -1.0),
                                   kernel_sigma=0.25, **TINY))
    match_init(model)
    path = save_reranker(tmp_path / "tk5.pt", model, "tk", tk.text).path
    e = explain(setup["query"], "long-1", path, corpus=setup["corpus"], device="cpu")
    page = e.to_html()
    legend = re.findall(r'<span style="background: (#[0-9a-f]+)">(-?\d+\.\d)</span>', page)
    head = re.findall(r"\x1b\[38;5;(\d+)m *(-?\d+\.\d)", e.render_terminal(color=True).splitlines()[5])
    on_page = {mu: KERNEL_HEX.index(hex_) for hex_, mu in legend}
    in_terminal = {mu: KERNEL_COLOURS.index(int(code)) for code, mu in head}
    assert list(on_page) == ["1.0", "0.5", "0.0", "-0.5", "-1.0"] and on_page == in_terminal
    assert on_page["1.0"] == 0 and KERNEL_HEX[on_page["0.0"]] == "#bdbdbd" and on_page["-1.0"] == len(KERNEL_HEX) - 1
    words = parse(page).words
    assert {w["data-mu"] for w in words} >= {"1.0", "0.0"}  # exact matches and unrelated words both coloured
    for w in words:
        assert w["style"] == f"color: {KERNEL_HEX[on_page[w['data-mu']]]}"


def test_ndrm_terms_sum_to_the_score_and_matches_are_marked(setup, tmp_path):
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    analyzer = Analyzer()
    texts = [json.loads(line) for line in setup["corpus"].read_text().splitlines()]
    vocab = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in texts])
    model = build_ndrm(NDRMConfig(vocab_size=len(vocab), variant="ndrm2"), vocab)
    path = tmp_path / "ndrm2.pt"
    save_checkpoint(path, model, "ndrm2", model.config.to_dict(), vocab, analyzer)
    e = explain(setup["query"], "long-1", path, corpus=setup["corpus"], device="cpu")
    assert sum(e.term_scores) == pytest.approx(e.score, rel=1e-5)
    assert e.score == pytest.approx(float(load_reranker(path, device="cpu").score(setup["query"], [setup["long"]])[0]), rel=1e-5)
    page = parse(e.to_html())
    assert e.tokens_read == len(e.tokens) and page.unread == ""  # read to the end: nothing greyed out
    matched = {x["data-term"] for x in page.matches}
    assert matched == {t for t, s in zip(e.query_tokens, e.term_scores) if s > 0}


def test_terms_at_the_gated_models_constant_are_said_to_rank_nothing(setup, tmp_path):
    """The bundled (gated) NDRM3 gives a query term neither in a document nor near its words its combination's
    constant, -0.8660: shown bare, three such terms read as evidence against the document. A note names them and
    the constant, in the terminal, on the page and in the JSON; an ungated model (NDRM2) has none."""
    from retriever.rerank_model import open_reranker

    doc = json.loads(setup["corpus"].read_text().splitlines()[0])
    query = "0-dimensional biomaterials lack inductive properties"
    e = explain(query, doc["_id"], "ndrm3-scifact", corpus=setup["corpus"], device="cpu")
    constant = open_reranker("ndrm3-scifact", "cpu").model.combination()[2]
    assert e.closed_score == pytest.approx(constant) and constant < 0
    at = [t for t, s in zip(e.query_tokens, e.term_scores) if s == pytest.approx(constant, abs=1e-5)]
    assert at and len(at) < len(e.query_tokens)  # some terms are near the document, some not
    note = f"({constant:.4f}: what a term adds to every document that neither holds it nor comes near it ({', '.join(at)})"
    assert note in e.render_terminal(color=False)
    assert note[1:] in e.to_html() and json.loads(json.dumps(e.to_dict()))["closed_score"] == pytest.approx(constant)
    plain = explain(query, doc["_id"], "ndrm2", corpus=setup["corpus"], device="cpu")
    assert plain.closed_score is None and "neither holds it" not in plain.render_terminal(color=False)


def test_an_unknown_query_word_contributes_nothing_to_a_latent_ndrm_as_search_skips_it(setup, tmp_path):
    """A latent model (NDRM3) scores every known query term, matched or not; a word the model never
    saw is skipped, as search and rerank skip it: listed with contribution 0 and named as not read,
    and the contributions still sum to the score, which equals the score without that word."""
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm

    analyzer = Analyzer()
    texts = [json.loads(line) for line in setup["corpus"].read_text().splitlines()]
    vocab = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in texts])
    torch.manual_seed(0)
    config = NDRMConfig(vocab_size=len(vocab), variant="ndrm3", dim=16, num_heads=4, conv_window=5, ff_dim=16,
                        mlp_hidden=16, num_layers=1)
    model = build_ndrm(config, vocab).eval()
    with torch.no_grad():
        model.combine.linear.weight.copy_(torch.tensor([[0.5, 1.0]]))
    path = save_checkpoint(tmp_path / "ndrm3.pt", model, "ndrm3", config.to_dict(), vocab, analyzer).path
    known = setup["query"]
    query = "zzqxv " + known + " qqzzv"  # two words of no document
    e = explain(query, "long-1", path, corpus=setup["corpus"], device="cpu")
    plain = explain(known, "long-1", path, corpus=setup["corpus"], device="cpu")
    assert e.unknown == ("zzqxv", "qqzzv") and e.query_tokens[0] == "zzqxv" and e.query_tokens[-1] == "qqzzv"
    assert e.term_scores[0] == e.term_scores[-1] == 0.0
    assert all(s != 0 for s in e.term_scores[1:-1])  # latent: every known term scores, matched or not
    assert e.term_scores[1:-1] == pytest.approx(plain.term_scores, rel=1e-5)
    assert sum(e.term_scores) == pytest.approx(e.score, rel=1e-5) == pytest.approx(plain.score, rel=1e-5)
    reranked = float(load_reranker(path, device="cpu").score(query, [setup["long"]])[0])
    assert e.score == pytest.approx(reranked, rel=1e-5)
    terminal = e.render_terminal(color=False)
    assert "not in the model's vocabulary (not scored, as search skips them): zzqxv qqzzv" in terminal
    assert "read as its unknown word" not in terminal
    tk = explain(query, "long-1", setup["paths"]["tk"], corpus=setup["corpus"], device="cpu")  # TK reads the word
    assert "not in the model's vocabulary (read as its unknown word): zzqxv qqzzv" in tk.render_terminal(color=False)


def test_a_decomposed_accent_stays_inside_the_mark_of_its_word(setup):
    """``cafe`` + U+0301: the mark (terminal brackets, HTML element) used to close before the
    accent, which then sat on the ``]`` or ``}``."""
    from ckqti.explain import explain_text

    text = "genes of the cafe\u0301 and gene\u0301 regulation"
    for kind in ("tk", "tkl", "idcm"):
        e = explain_text(load_reranker(setup["paths"][kind], device="cpu"), "genes cafe", "d", text)
        plain, page = e.render_terminal(color=False), parse(e.to_html())
        marked = [w["text"] for w in page.words] + [r["text"] for r in page.regions]
        if kind == "tk":
            assert "cafe\u0301" in marked and "gene\u0301" in marked and "gene\u0301{1.0}" in plain
        else:
            assert marked == [text[e.regions[0].char_start:]] and marked[0].endswith("regulation")
        assert not any(c in "\u0301" for c in plain.replace("e\u0301", ""))  # every accent on its letter


def test_an_elided_stretch_is_cut_between_letters_not_between_a_letter_and_its_accent():
    import re

    from ckqti.explain import Explanation

    text = "x" + "u\u0301" * 300 + "y"  # both cuts of the elision (200 characters from each end) fall on an accent
    e = Explanation(kind="ndrm2", model_id="m", query="q", docid="d", text=text, score=0.0, query_tokens=("q",),
                    tokens=(), tokens_read=0, term_scores=(0.0,))
    shown = e.render_terminal(color=False).splitlines()[-1]
    assert "characters ...]" in shown
    assert not re.search("u(?!\u0301)", shown) and not re.search("(?<!u)\u0301", shown)


def test_terminal_colours_only_when_asked(setup):
    e = explain(setup["query"], "long-1", setup["paths"]["tkl"], corpus=setup["corpus"], device="cpu")
    coloured, plain = e.render_terminal(color=True), e.render_terminal(color=False)
    assert "\x1b[" in coloured and "\x1b[" not in plain
    for r in e.regions:
        assert f"#{r.rank} tokens {r.token_start}-{r.token_end}" in plain
        assert " ".join(e.region_text(r).split()) in plain


def test_a_coloured_region_across_a_line_break_is_closed_at_the_end_of_each_line(setup):
    """A region of a long document often spans a paragraph break; its background colour stayed on
    across the break, and a terminal filled the rest of the line (and every line it scrolled in) with it."""
    import re

    from ckqti.explain import explain_text
    from ckqti.explain_terminal import RESET

    e = explain_text(load_reranker(setup["paths"]["tkl"], device="cpu"), "genes regulate", "d",
                     "genes regulate cells\n\ngenes regulate mice")
    assert any("\n" in e.region_text(r) for r in e.regions)
    for line in e.render_terminal(color=True).split("\n"):
        codes = re.findall("\x1b\\[[0-9;]*m", line)
        assert not codes or codes[-1] == RESET, repr(line)


def test_unknown_document_and_source_errors(setup):
    with pytest.raises(InputError):
        explain("q", "no-such-doc", setup["paths"]["tk"], corpus=setup["corpus"])
    with pytest.raises(InputError):
        explain("q", "long-1", setup["paths"]["tk"])  # neither corpus nor index
    folder = Path(setup["corpus"]).parent
    with pytest.raises(InputError, match=f"^{folder}: is a directory, expected a corpus file \\(an index goes to --index\\)"):
        explain("q", "long-1", setup["paths"]["tk"], corpus=folder)
    for kind, query in (("tk", ""), ("tk", "the of and"), ("idcm", "  ")):  # as search refuses them
        with pytest.raises(QueryError, match="has no terms the model reads"):
            explain(query, "long-1", setup["paths"][kind], corpus=setup["corpus"], device="cpu")


def test_explain_reads_the_document_from_an_index(scifact_index, scifact_small, setup):
    first = json.loads(scifact_small.read_text().splitlines()[0])
    e = explain(first["title"], first["_id"], setup["paths"]["tkl"], index=scifact_index, device="cpu")
    assert e.text == first["title"] + "\n" + first["text"]
    assert e.regions and e.regions[0].token_start == 0  # the title is the query: the first window matches it all


def test_cli_explain_prints_the_api_report(setup, tmp_path):
    from click.testing import CliRunner

    from ckqti.cli import cli

    e = explain(setup["query"], "long-1", setup["paths"]["tkl"], corpus=setup["corpus"], device="cpu")
    args = ["explain", setup["query"], "long-1", "--model", str(setup["paths"]["tkl"]), "--corpus", str(setup["corpus"])]
    args += ["--device", "cpu"]  # the API call's: on a GPU machine the CLI's default (CUDA) rounds differently
    res = CliRunner().invoke(cli, [*args, "--no-color", "--html", str(tmp_path / "e.html")])
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip("\n") == e.render_terminal(color=False)
    assert (tmp_path / "e.html").read_text() == e.to_html()
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    assert json.loads(as_json.stdout) == json.loads(json.dumps(e.to_dict()))
    missing = CliRunner().invoke(cli, ["explain", "q", "nope", "--model", str(setup["paths"]["tk"]),
                                       "--corpus", str(setup["corpus"])])
    assert missing.exit_code != 0 and "nope" in missing.output and "Traceback" not in missing.output


def strict_json(text: str):
    """``text`` read as JSON is read by every parser: a bare NaN, Infinity or -Infinity (Python's json.dumps
    writes them, JSON has none) is refused."""
    def refuse(token):
        raise ValueError(f"not JSON: a bare {token}")

    return json.loads(text, parse_constant=refuse)


def test_scores_that_are_not_numbers_are_null_in_the_json_form(setup, tmp_path):
    """A checkpoint whose weights are NaN (ckqti's training stops before saving one, another tool's may not)
    scores NaN: ``to_dict`` and ``explain --json`` give null there, as ``eval --json`` gives a p-value that is not
    a number; they gave Python's bare NaN, which a JSON parser refuses."""
    from click.testing import CliRunner

    from ckqti.cli import cli
    from ckqti.explain import explain_text

    rr = load_reranker(setup["paths"]["tk"], device="cpu")
    with torch.no_grad():
        for p in rr.model.parameters():
            p.fill_(float("nan"))
    broken = save_reranker(tmp_path / "nan.pt", rr.model, "tk", rr.text).path
    e = explain_text(load_reranker(broken, device="cpu"), setup["query"], "long-1", setup["long"])
    assert np.isnan(e.score) and np.isnan(e.kernels.cells).all()
    d = strict_json(json.dumps(e.to_dict()))
    assert d["score"] is None and {x for row in d["kernels"]["cells"] for x in row} == {None}
    assert d["kernels"]["mus"] == list(e.kernels.mus) and d["tokens_read"] == e.tokens_read  # the finite ones as they are
    res = CliRunner().invoke(cli, ["explain", setup["query"], "long-1", "--model", str(broken),
                                   "--corpus", str(setup["corpus"]), "--device", "cpu", "--json"])
    assert res.exit_code == 0, res.output
    assert strict_json(res.stdout) == d


def test_explaining_from_an_index_explains_the_index_score(scifact_index, scifact_small, tmp_path):
    """With --index an NDRM model reads the index's vocabulary and statistics, so the explained
    score is the one search gives (up to quantization), even for words the checkpoint never saw;
    read from the corpus with its own vocabulary, those words are named as unknown."""
    from ckqti import api
    from ckqti.models.checkpoint import save_checkpoint
    from ckqti.models.ndrm import NDRMConfig, build_ndrm
    from retriever.search import Searcher

    docs = [json.loads(line) for line in scifact_small.read_text().splitlines()]
    analyzer = Analyzer()
    narrow = Vocabulary.build([analyzer(d["title"] + "\n" + d["text"]) for d in docs[:5]])  # the model's words
    model = build_ndrm(NDRMConfig(vocab_size=len(narrow), variant="ndrm2", bm25_init=(0.9, 0.4)), narrow)
    path = tmp_path / "ndrm2.pt"
    save_checkpoint(path, model, "ndrm2", model.config.to_dict(), narrow, analyzer)
    index = tmp_path / "idx"
    api.index(scifact_small, index, model=str(path), progress=False)
    query = docs[40]["title"]
    hits = Searcher(index).search(query, 5).hits
    unknown_to_model = [t for t in analyzer(query) if t not in narrow]
    assert unknown_to_model  # the test needs query words the checkpoint lacks
    for h in hits:
        e = explain(query, h.docid, path, index=index, device="cpu")
        assert e.score == pytest.approx(h.score, rel=0.02, abs=0.02) and e.unknown == ()
        assert e.index_score == h.score  # what search gave, reported beside the model's unquantized score
        assert f"(in the index: {h.score:.4f}, from quantized impacts)" in e.render_terminal(color=False)
        assert parse_index_score(e.to_html()) == h.score
    plain = explain(query, hits[0].docid, path, corpus=scifact_small, device="cpu")
    assert set(plain.unknown) == set(unknown_to_model)
    assert plain.index_score is None and 'id="index-score"' not in plain.to_html()  # read from a corpus: no index score
    assert "not in the model's vocabulary" in plain.render_terminal(color=False)
    # the untrained NDRM2 an index was built with is explained by its name
    top = Searcher(scifact_index).search(query, 1).hits[0]
    e = explain(query, top.docid, "ndrm2", index=scifact_index, device="cpu")
    assert e.model_id == "ndrm2-untrained" and e.score == pytest.approx(top.score, rel=0.02, abs=0.02)
    assert e.index_score == top.score
    other = explain(query, hits[0].docid, path, index=scifact_index, device="cpu")  # not the index's model: no index score
    assert other.index_score is None


def parse_index_score(html: str) -> float | None:
    import re

    m = re.search(r'id="index-score" data-score="([^"]+)"', html)
    return float(m.group(1)) if m else None


def test_explaining_from_an_index_reads_its_checksums_once(scifact_index, monkeypatch):
    """The index is opened once for the document and the model's statistics."""
    import retriever.index
    from retriever.search import Searcher

    top = Searcher(scifact_index).search("cancer", 1).hits[0]
    verified = []
    real = retriever.index.verify_files
    monkeypatch.setattr(retriever.index, "verify_files", lambda d, m: (verified.append(d), real(d, m)))
    explain("cancer", top.docid, "ndrm2", index=scifact_index, device="cpu")
    assert verified == [Path(scifact_index)]


def test_explaining_from_an_index_locates_the_document_once(scifact_index, monkeypatch):
    """The document's text and the index's score of it are read from one lookup of its docid (a pass over
    the shards' docids), not one each."""
    from retriever.index import Index
    from retriever.search import Searcher

    top = Searcher(scifact_index).search("cancer", 1).hits[0]
    looked_up = []
    real = Index.locate
    monkeypatch.setattr(Index, "locate", lambda self, docid: (looked_up.append(docid), real(self, docid))[1])
    e = explain("cancer", top.docid, "ndrm2", index=scifact_index, device="cpu")
    assert e.index_score == top.score and looked_up == [top.docid]


def test_orcas_clicks_are_stored_and_explained_as_indexed(scifact_small, tmp_path):
    """The document store keeps the fields indexed before the title (ORCAS clicks), compaction
    carries them, and explain --index reads them: its score is the index's for a query that only
    the clicks match."""
    from ckqti import api
    from indexer.compact import compact_index
    from retriever.index import Index
    from retriever.search import Searcher

    docs = [json.loads(line) for line in scifact_small.read_text().splitlines()[:40]]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    target = docs[7]["_id"]
    (tmp_path / "orcas.tsv").write_text(f"{target}\txylophone quokka\n{target}\tquokka habitat\n")
    index = tmp_path / "idx"
    api.index(corpus, index, model="ndrm2", orcas=tmp_path / "orcas.tsv", shard_size=10, progress=False)
    idx = Index(index)
    assert api.info(index).orcas == str(tmp_path / "orcas.tsv")
    shard, doc = divmod(7, 10)
    assert idx.shards[shard].document(doc)["prefix"] == "xylophone quokka quokka habitat"
    assert idx.shards[0].document(0)["prefix"] == ""
    hit = Searcher(idx).search("xylophone quokka", 1).hits[0]
    assert hit.docid == target
    e = explain("xylophone quokka", target, "ndrm2", index=index, device="cpu")
    assert e.score > 0 and e.score == pytest.approx(hit.score, rel=0.02, abs=0.02)
    compact_index(index, shard_size=100)
    assert Index(index).shards[0].document(7)["prefix"] == "xylophone quokka quokka habitat"


def test_a_document_store_written_before_prefixes_reads_them_empty():
    import pyarrow as pa

    from indexer.shards import document_column

    old = pa.table({"docid": ["a", "b"], "title": ["", ""], "text": ["x", "y"], "length": [1, 1]})
    assert document_column(old, "prefix") == ["", ""] and document_column(old, "text") == ["x", "y"]


def test_a_cut_query_and_an_html_path_under_a_file_are_reported(setup, tmp_path):
    long_query = " ".join(f"gene{i}" for i in range(40))
    e = explain(long_query, "long-1", setup["paths"]["tk"], corpus=setup["corpus"], device="cpu")
    assert len(e.query_tokens) == 30 and e.query_tokens_cut == 10
    assert "the last 10 were not read" in e.render_terminal(color=False)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="afile is a file, not a directory"):
        explain("gene", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=tmp_path / "afile" / "e.html")


def test_the_html_page_replaces_only_an_earlier_page_and_is_written_whole(setup, tmp_path, monkeypatch):
    """--html given the corpus (or a manifest) by mistake used to overwrite it; a failed write emptied
    the old page."""
    corpus_bytes = setup["corpus"].read_bytes()
    with pytest.raises(InputError, match="exists and is not an explanation page"):
        explain("gene", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=setup["corpus"], device="cpu")
    assert setup["corpus"].read_bytes() == corpus_bytes
    page = tmp_path / "p.html"
    explain("gene", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=page, device="cpu")
    first = page.read_bytes()
    explain("gene cells", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=page, device="cpu")
    assert page.read_bytes() != first  # an earlier page is replaced
    explain("gene \udcff", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=page, device="cpu")
    assert b"gene \\udcff" in page.read_bytes()  # undecodable bytes of a query: an escape in the page, not a traceback
    import ckqti.explain as module

    monkeypatch.setattr(module.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    before = page.read_bytes()
    with pytest.raises(OSError):
        explain("gene", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=page, device="cpu")
    assert page.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["p.html"]


def test_the_html_page_may_replace_an_empty_file(setup, tmp_path):
    page = tmp_path / "empty.html"
    page.write_bytes(b"")  # as a shell's `> page.html` leaves it
    explain("gene", "long-1", setup["paths"]["tk"], corpus=setup["corpus"], html_out=page, device="cpu")
    assert b"<title>ckqti explain:" in page.read_bytes()


def test_adapting_idcm_to_a_vocabulary_is_refused(setup):
    """IDCM reads WordPiece: --adapt-vocabulary would do nothing, so rerank says so."""
    from retriever.rerank_model import open_reranker

    with pytest.raises(InputError, match="no vocabulary to adapt"):
        open_reranker(setup["paths"]["idcm"], "cpu", None, setup["corpus"])
    # a caller adapting only word models (scripts/effectiveness.py's zero-shot rows) reads IDCM as trained
    assert open_reranker(setup["paths"]["idcm"], "cpu", None, setup["corpus"], None, ("tk", "tkl")).kind == "idcm"


def test_explaining_from_a_corrupted_index_is_refused(scifact_index, scifact_small, tmp_path):
    """explain --index verifies checksums as search does: a flipped byte in the vocabulary once
    explained a NaN score (its df read as 2**40)."""
    import shutil

    from ckqti.errors import IndexFormatError

    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    vocab = next(idx.glob("vocab*.arrow"))
    data = bytearray(vocab.read_bytes())
    data[len(data) // 2] ^= 1
    vocab.write_bytes(bytes(data))
    first = json.loads(scifact_small.read_text().splitlines()[0])
    with pytest.raises(IndexFormatError, match="checksum mismatch"):
        explain(first["title"], first["_id"], "ndrm2", index=idx, device="cpu")


def test_explain_from_an_index_defaults_to_the_index_model(scifact_index, scifact_small):
    from ckqti import api
    from ckqti.errors import OptionError

    first = json.loads(scifact_small.read_text().splitlines()[0])
    default = api.explain(first["title"], first["_id"], None, index_path=scifact_index, device="cpu")
    named = api.explain(first["title"], first["_id"], "ndrm2", index_path=scifact_index, device="cpu")
    assert default.score == named.score and default.model_id == named.model_id
    with pytest.raises(OptionError, match="model is needed with a corpus"):
        api.explain(first["title"], first["_id"], None, corpus=scifact_small)


def test_the_html_page_shows_control_and_bidi_characters_as_escapes(setup):
    """The terminal report escaped them; the page put a query's or a document's ESC and U+202E
    (which reorders the text after it) into the page raw."""
    query = setup["query"] + " \x1b[2J \u202eevil"
    e = explain(query, "long-1", setup["paths"]["tkl"], corpus=setup["corpus"], device="cpu")
    e = type(e)(**{**e.__dict__, "text": "\u202e" + e.text + "\x07", "docid": "long\x1b-1"})
    page = e.to_html()
    assert not any(c in page for c in "\x1b\u202e\x07")
    assert "\\x1b[2J \\u202eevil" in page and '<code id="docid">long\\x1b-1</code>' in page and "\\x07" in page


def test_the_page_wraps_a_word_longer_than_a_line_inside_the_document_and_the_region_table():
    """The document box kept white space (pre-wrap) but broke lines only there: a URL or another word
    longer than a line (a web page's, TREC DL's passages hold 100-character ones) ran past the box and
    widened the page; the document and the regions' text now break inside such a word."""
    import re

    from ckqti.explain_html import CSS

    rules = {sel.strip(): body for sels, body in re.findall(r"([^{}]+)\{([^}]*)\}", CSS) for sel in sels.split(",")}
    for selector in (".doc", "td.term"):
        assert "overflow-wrap: anywhere" in rules.get(selector, ""), selector


def test_mojibake_is_shown_repaired_in_the_terminal_and_on_the_page(setup):
    """A fifth of the bundled MS MARCO passages hold UTF-8 once read as Windows-1252: ``ckqti
    search`` showed them repaired, ``explain`` showed ``donâ\\x80\\x99t`` and Thai as ``à¹\\x83...``.
    The repair is display only: the explanation keeps the document's own characters."""
    import html
    import re

    from ckqti.explain import explain_text

    fixed = "genes don\u2019t regulate \u0e43\u0e08 caf\u00e9 genes"
    broken = fixed.encode("utf-8").decode("latin-1")  # "donâ\x80\x99t", "à¹\x83à¸\x88", "cafÃ©"
    for kind in ("tk", "tkl", "idcm"):
        e = explain_text(load_reranker(setup["paths"][kind], device="cpu"), "genes regulate", "d", broken)
        assert e.text == broken
        page_text = html.unescape(re.sub("<[^>]+>", "", e.to_html()))  # the words' marks split them on the page
        for shown in (e.render_terminal(color=False), page_text):
            assert "don\u2019t" in shown and "\u0e43\u0e08" in shown and "caf\u00e9" in shown, kind
            assert "\u00e2" not in shown and "\u00c3" not in shown and "\\x80" not in shown, kind


def test_explain_from_a_corpus_with_orcas_explains_what_the_index_built_with_them_holds(clicked_collection):
    """--orcas puts a document's clicks in front of its corpus text as ``ckqti index --orcas`` does,
    and in the collection's statistics: the untrained NDRM2 explains the same text and score from the
    corpus and clicks as from their index (without --orcas a query only the clicks match scored less)."""
    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    stored = explain("cell division", "d1", "ndrm2", index=index, device="cpu")
    clicked = explain("cell division", "d1", "ndrm2", corpus=corpus, orcas=orcas, device="cpu")
    plain = explain("cell division", "d1", "ndrm2", corpus=corpus, device="cpu")
    assert clicked.text == stored.text == "cell division growth of cells\n" + plain.text
    assert clicked.score == pytest.approx(stored.score, rel=1e-6) and clicked.term_scores == pytest.approx(stored.term_scores)
    assert plain.score < clicked.score


def test_cli_explain_notes_repeated_orcas_lines_as_index_does(clicked_collection, tmp_path):
    """``explain --orcas`` dropped a repeated ``docid<TAB>query`` line silently where ``index`` and
    ``rerank`` say so; it now gives their note on stderr (text and --json), and explains the same text."""
    from click.testing import CliRunner

    from ckqti.cli import cli

    corpus, orcas = clicked_collection["corpus"], clicked_collection["orcas"]
    twice = tmp_path / "twice.tsv"
    twice.write_text(orcas.read_text() + "d1\tcell   division\n")
    once = explain("cell division", "d1", "ndrm2", corpus=corpus, orcas=orcas, device="cpu")
    again = explain("cell division", "d1", "ndrm2", corpus=corpus, orcas=twice, device="cpu")
    assert (once.repeated_clicks, again.repeated_clicks) == (0, 1) and again.text == once.text
    note = f"note: 1 repeated line of {twice} dropped (a document's clicked query counts once)\n"
    args = ["explain", "cell division", "d1", "--model", "ndrm2", "--corpus", str(corpus), "--device", "cpu"]
    for extra in ([], ["--json"]):
        res = CliRunner().invoke(cli, [*args, "--orcas", str(twice), *extra])
        assert res.exit_code == 0 and res.stderr == note, res.output
        assert CliRunner().invoke(cli, [*args, "--orcas", str(orcas), *extra]).stderr == ""


def test_explain_orcas_without_a_corpus_or_malformed_is_refused(clicked_collection, tmp_path):
    from ckqti import api

    corpus, orcas, index = clicked_collection["corpus"], clicked_collection["orcas"], clicked_collection["index"]
    with pytest.raises(InputError, match=f"^{orcas}: ORCAS clicks \\(--orcas\\) join the documents of a corpus file"):
        explain("cell", "d1", "ndrm2", index=index, orcas=orcas)
    bad = tmp_path / "bad.tsv"
    bad.write_text("d1\n")
    with pytest.raises(InputError) as indexing:
        api.index(corpus, tmp_path / "idx", model="ndrm2", orcas=bad, progress=False)
    with pytest.raises(InputError) as explaining:
        api.explain("cell", "d1", "ndrm2", corpus, orcas=bad)
    assert str(explaining.value) == str(indexing.value) and str(indexing.value).startswith(f"{bad}:1: expected 2 ")


def test_a_span_of_no_tokens_covers_no_characters():
    """``char_span`` of tokens ``[start, end)``: ``end`` clipped to the tokens there are, and an empty
    range (a region past the last token, or of none) is ``(0, 0)``, not a span running backwards."""
    from ckqti.explain import char_span
    from ckqti.models.inputs import TokenSpan

    tokens = (TokenSpan("alpha", 0, 5), TokenSpan("beta", 6, 10), TokenSpan("gamma", 11, 16))
    assert char_span(tokens, 0, 2) == (0, 10) and char_span(tokens, 1, 9) == (6, 16)
    assert char_span(tokens, 2, 2) == char_span(tokens, 0, 0) == char_span(tokens, 3, 5) == (0, 0)


def test_a_short_or_empty_document_shows_only_the_windows_idcm_read(setup):
    """A document with fewer windows than IDCM's ``sample_n``: a region for each window it has, inside
    the text; an empty one has none (the model reads one padding token, whose pick is marked -1)."""
    from ckqti.explain import explain_text

    rr = load_reranker(setup["paths"]["idcm"], device="cpu")
    text = " ".join(setup["long"][setup["planted_chars"][0]:].split()[:40])
    e = explain_text(rr, setup["query"], "short", text)
    with torch.no_grad():
        m = rr.model.explain(torch.as_tensor(rr.query_ids(setup["query"]))[None], torch.as_tensor(rr.doc_ids(text))[None])
    assert 0 < len(e.regions) == int((m.selected[0] >= 0).sum()) < rr.model.config.sample_n
    for r in e.regions:
        assert 0 <= r.token_start < r.token_end <= len(e.tokens) and 0 <= r.char_start < r.char_end <= len(text)
    assert len(parse(e.to_html()).regions) == len(e.regions)
    empty = explain_text(rr, setup["query"], "empty", "")
    assert empty.regions == () and "#1 " not in empty.render_terminal(color=False)
    assert parse(empty.to_html()).regions == []


@pytest.mark.parametrize("model", ["tkl", "tk", "idcm", "ndrm3"])
def test_a_document_rerank_ranks_last_and_a_query_it_skips_are_said_so(setup, model):
    """``ckqti rerank`` ranks a document of which the model reads no word it knows below every
    document it reads (1 below the lowest score), not by the model's score of it, and skips a query
    without a word the model knows. explain gave that score (TKL and IDCM: 0 for an empty document,
    above the readable document's negative score here) with nothing to say rerank does not rank by it."""
    from ckqti.explain import explain_text
    from retriever.rerank_scoring import rerank_candidates

    bundled = Path(__file__).resolve().parents[2] / "ckqti" / "data" / "models" / "ndrm3-scifact.pt"
    rr = load_reranker(setup["paths"].get(model, bundled), device="cpu")
    query, readable = setup["query"], " ".join(setup["long"].split()[:300])
    unread = "" if model == "idcm" else "the of and zzzqqqx"  # IDCM's WordPiece reads every word
    ranked = dict(rerank_candidates(rr, {"q": query}, {"q": ["a", "b"]}, {"a": readable, "b": unread})["q"])
    e, last = explain_text(rr, query, "a", readable), explain_text(rr, query, "b", unread)
    assert ranked["b"] == ranked["a"] - 1 and last.score != ranked["b"]
    assert not e.ranked_last and e.rerank_skips is None and last.ranked_last
    note = "rerank ranks it below every document"
    assert note in last.render_terminal(color=False) and note in last.to_html() and last.to_dict()["ranked_last"]
    assert note not in e.render_terminal(color=False) and note not in e.to_html()
    if model != "idcm":
        skipped = {}
        assert rerank_candidates(rr, {"q": "zzzqqqx"}, {"q": ["a"]}, {"a": readable}, skipped=skipped) == {}
        oov = explain_text(rr, "zzzqqqx", "a", readable)
        assert oov.rerank_skips == skipped["q"] == "no word the model knows"
        assert "rerank skips this query (no word the model knows)" in oov.render_terminal(color=False)
        assert "rerank skips this query (no word the model knows)" in oov.to_html()


def test_an_empty_no_color_leaves_the_colours_on(setup, monkeypatch):
    """no-color.org: NO_COLOR "present and not an empty string" turns colours off; `NO_COLOR=` (an empty
    value, as a shell's `NO_COLOR= cmd` or an unset-by-emptying sets it) turned them off too."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    e = explain(setup["query"], "long-1", setup["paths"]["tkl"], corpus=setup["corpus"], device="cpu")
    monkeypatch.setattr(sys, "stdout", Terminal())
    for value, coloured in ((None, True), ("", True), ("1", False), ("0", False)):
        if value is None:
            monkeypatch.delenv("NO_COLOR", raising=False)
        else:
            monkeypatch.setenv("NO_COLOR", value)
        assert ("\x1b[" in e.render_terminal()) == coloured, value
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # not a terminal
    monkeypatch.setenv("NO_COLOR", "")
    assert "\x1b[" not in e.render_terminal()
