"""The scripts' shared argument types and ``run`` wrapper, and the scripts' refusals of bad values.

A count is an integer >= 1, a number is finite, a list names known items, an input exists and an
output can be written: anything else stops a script at parsing with argparse's usage error (exit
status 2), before any work. ckqti's own errors and the operating system's become one line on
stderr and exit status 1 (``run``), not a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti.errors import CkqtiError, InputError
from scripts.args import (
    HelpFormatter,
    comma_list,
    command_line,
    error_message,
    existing_dir,
    existing_file,
    file_or_names,
    fraction,
    int_range,
    names_from,
    nonnegative_int,
    output_dir,
    output_file,
    positive_float,
    positive_floats,
    positive_int,
    positive_ints,
    run,
    torch_device,
    usable_devices,
)

REPO = Path(__file__).resolve().parents[2]


def refused(parse, text: str, match: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=match):
        parse(text)


# -- the argument types ------------------------------------------------------------------------


def test_positive_int_refuses_zero_negatives_and_words():
    assert positive_int("3") == 3
    for bad in ("0", "-1", "2.5", "many", ""):
        refused(positive_int, bad, "integer >= 1")


def test_nonnegative_int_takes_zero():
    assert nonnegative_int("0") == 0 and nonnegative_int("7") == 7
    for bad in ("-1", "1.0", "x"):
        refused(nonnegative_int, bad, "integer >= 0")


def test_int_range_takes_its_bounds_only():
    parse = int_range(1, 1000)
    assert parse("1") == 1 and parse("1000") == 1000
    for bad in ("0", "-1", "1001", "ten"):
        refused(parse, bad, r"integer from 1 to 1000, got")


def test_positive_float_is_finite_and_above_zero():
    assert positive_float("0.5") == 0.5 and positive_float("1e3") == 1000.0
    for bad in ("0", "-1", "nan", "inf", "-inf", "x", ""):
        refused(positive_float, bad, r"finite number > 0")


def test_fraction_lies_in_zero_one():
    assert fraction("1") == 1.0 and fraction("0.8") == 0.8
    for bad in ("0", "-1", "2", "1.0001", "nan", "inf", "half"):
        refused(fraction, bad, r"number in \(0, 1\]")


def test_lists_take_each_item_with_its_type():
    assert positive_ints("1, 4,16") == [1, 4, 16]
    assert positive_floats("0.0625,16") == [0.0625, 16.0]
    refused(positive_ints, "0", r"^expected an integer >= 1, got 0$")  # one item: its own message
    refused(positive_ints, "1,-5", r"integer >= 1, got -5 \(in '1,-5'\)")
    refused(positive_ints, "abc", "integer >= 1, got 'abc'")
    refused(positive_floats, "1,nan", "finite number > 0")
    for bad in ("", "1,,2", ","):
        refused(positive_ints, bad, "comma-separated list")
    maybe = comma_list(fraction, allow_empty=True)
    assert maybe("") == [] and maybe("0.8,1") == [0.8, 1.0]
    refused(maybe, "0.8,2", r"\(0, 1\]")


def test_names_are_matched_in_any_case_and_unknown_ones_refused():
    parse = names_from(("TK", "TKL", "NDRM3"))
    assert parse("tk, NDRM3") == ["TK", "NDRM3"]
    for bad in ("tk,bogus", "", ","):
        refused(parse, bad, "expected names from TK, TKL, NDRM3")
    maybe = names_from(("bm25s", "pisa"), allow_empty=True)
    assert maybe("") == [] and maybe("PISA") == ["pisa"]
    refused(maybe, "bogus", "expected names from bm25s, pisa")


def test_inputs_must_exist_as_files_or_folders(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    assert existing_file(str(f)) == f and existing_dir(str(tmp_path)) == tmp_path
    refused(existing_file, str(tmp_path / "none.pt"), "no such file")
    refused(existing_file, str(tmp_path), "is a directory")
    refused(existing_dir, str(tmp_path / "none"), "no such directory")
    refused(existing_dir, str(f), "is a file")
    model = file_or_names(("ndrm2", "ndrm2-anserini"))
    assert model("ndrm2") == "ndrm2" and model(str(f)) == str(f)
    refused(model, "bogus", "expected ndrm2, ndrm2-anserini or an existing file, got 'bogus'")


def test_outputs_are_checked_without_creating_anything(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert output_file(str(tmp_path / "new" / "deeper" / "out.json")) == tmp_path / "new" / "deeper" / "out.json"
    assert output_dir(str(tmp_path / "new" / "dir")) == tmp_path / "new" / "dir"
    assert output_file(str(blocker)) == blocker  # an existing file is written over
    assert not (tmp_path / "new").exists()
    refused(output_file, str(blocker / "out.json"), f"{blocker} is not a directory")  # its parent is a regular file
    refused(output_file, str(blocker / "sub" / "out.json"), f"{blocker} is not a directory")
    refused(output_file, str(tmp_path), "is a directory, not a file to write")
    for parse in (output_file, output_dir, existing_file, existing_dir):
        refused(parse, "", "expected a path")
    refused(output_dir, str(blocker), "is a file, not a directory")
    refused(output_dir, str(blocker / "sub"), "is not a directory")


def test_devices_are_torch_devices_this_machine_has():
    import torch

    assert torch_device("cpu") == "cpu"
    refused(torch_device, "gpu", "not a torch device")
    refused(torch_device, "", "expected a torch device")
    if not torch.cuda.is_available():
        refused(torch_device, "cuda", "CUDA is not available")
        ap = argparse.ArgumentParser(prog="bench")
        assert usable_devices(ap, ["cpu", "cuda"]) == [torch.device("cpu")]  # cuda left out where absent
        with pytest.raises(SystemExit) as stop:
            usable_devices(ap, ["cuda"])  # nothing left: a usage error, not an empty table
        assert stop.value.code == 2


def test_help_shows_defaults_but_not_twice():
    ap = argparse.ArgumentParser(formatter_class=HelpFormatter)
    ap.add_argument("--batch", type=positive_int, default=16, help="documents per batch")
    ap.add_argument("--titles", type=nonnegative_int, default=0, help="titles")
    ap.add_argument("--threads", default=None, help="threads (default: torch's)")
    ap.add_argument("--flag", action="store_true", help="a flag")
    text = " ".join(ap.format_help().split())
    assert "documents per batch (default: 16)" in text and "titles (default: 0)" in text
    assert "threads (default: torch's) " in text + " " and "(default: None)" not in text
    assert "a flag (default" not in text


# -- run ---------------------------------------------------------------------------------------


def test_command_line_is_quoted_so_it_runs_again(monkeypatch):
    argv = ["--out", "my report.json", "--name", "it's", "--grid", ""]
    line = command_line("x.py", argv)
    assert shlex.split(line) == ["python", "scripts/x.py", *argv]
    monkeypatch.setattr(sys, "argv", ["x.py", "--k", "a b"])
    assert shlex.split(command_line("x.py")) == ["python", "scripts/x.py", "--k", "a b"]
    assert command_line("x.py", []) == "python scripts/x.py"  # no options: not this process's


def test_run_returns_mains_status():
    assert run(lambda: None) == 0
    assert run(lambda: 3) == 3


def test_run_turns_ckqti_and_os_errors_into_one_line(tmp_path, capsys):
    def ckqti_error():
        raise InputError("malformed line\nsecond part", tmp_path / "q.tsv", 3)

    assert run(ckqti_error, prog="x.py") == 1
    assert capsys.readouterr().err == f"x.py: error: {tmp_path / 'q.tsv'}:3: malformed line second part\n"

    def missing():
        (tmp_path / "none.json").read_text()

    assert run(missing, prog="x.py") == 1
    assert capsys.readouterr().err == f"x.py: error: {tmp_path / 'none.json'}: No such file or directory\n"
    blocker = tmp_path / "file"
    blocker.write_text("x")

    def below_a_file():
        (blocker / "out").mkdir(parents=True)

    assert run(below_a_file, prog="x.py") == 1
    err = capsys.readouterr().err
    assert err.startswith(f"x.py: error: {blocker / 'out'}: ") and err.count("\n") == 1


def test_run_keeps_the_traceback_of_a_bug():
    def bug():
        raise ValueError("a bug, not the user's error")

    with pytest.raises(ValueError):
        run(bug)
    with pytest.raises(KeyError):
        run(lambda: {}["x"])


def test_error_message_of_an_os_error_without_a_file():
    assert error_message(OSError(28, "No space left on device")) == "No space left on device"
    assert error_message(CkqtiError("bad", "f.tsv")) == "f.tsv: bad"


# -- the scripts refuse bad values at parsing --------------------------------------------------


@pytest.fixture(scope="module")
def blocker(tmp_path_factory) -> Path:
    """A regular file: a path below it cannot be written."""
    path = tmp_path_factory.mktemp("args") / "file"
    path.write_text("x")
    return path


CASES = [  # script, arguments, what the error names ({file}: a regular file; {blocked}: a path below it)
    ("bench_rerank", ["--batch", "-2"], "--batch: expected an integer >= 1, got -2"),
    ("bench_rerank", ["--batch", "0"], "--batch"),
    ("bench_rerank", ["--seconds", "0"], "--seconds: expected a finite number > 0"),
    ("bench_rerank", ["--threads", "-1"], "--threads"),
    ("bench_rerank", ["--devices", "gpu"], "--devices: expected names from cpu, cuda, got 'gpu'"),
    ("bench_rerank", ["--tk", "/nonexistent.pt"], "--tk: /nonexistent.pt: no such file"),
    ("bench_rerank", ["--out", "{blocked}"], "--out"),
    ("bench_serve", ["--max-seconds", "-1"], "--max-seconds"),
    ("bench_serve", ["-k", "0"], "-k/--k: expected an integer from 1 to 1000"),
    ("bench_serve", ["-k", "1001"], "-k/--k: expected an integer from 1 to 1000"),
    ("bench_serve", ["--workers", "0"], "--workers"),
    ("bench_serve", ["--levels", "0"], "--levels"),
    ("bench_serve", ["--index", "/nonexistent"], "--index: /nonexistent: no such directory"),
    ("bench_serve", ["--queries", "/nonexistent.tsv"], "--queries"),
    ("bench_serve", ["--out", "{blocked}"], "--out"),
    ("region_positions", ["--tkl", "{file}", "--natural-queries", "-3"], "--natural-queries"),
    ("region_positions", ["--tkl", "{file}", "--long-cap", "0"], "--long-cap"),
    ("region_positions", ["--tkl", "{file}", "--model", "X=/nonexistent.pt"], "/nonexistent.pt: no such file"),
    ("long_documents", ["--long-cap", "-5"], "--long-cap"),
    ("long_documents", ["--device", "gpu"], "--device: device 'gpu' is not a torch device"),
    ("long_documents", ["--collections", "bogus"], "--collections: expected names from scifact, trecdl"),
    ("long_documents", ["--merge", "/nonexistent.json"], "--merge"),
    ("long_documents", ["--ndrm3", "/nonexistent.pt"], "--ndrm3"),
    ("long_documents", ["--out", "{file}"], "--out"),
    ("bench_one_query", ["--repeats", "0"], "--repeats: expected an integer >= 1, got 0"),
    ("bench_one_query", ["--engines", "lucene"], "--engines: expected names from ckqti, ckqti-numba, bm25s, pyserini"),
    ("bench_one_query", ["--corpora", "msmarco"], "--corpora: expected names from sample, scifact"),
    ("bench_one_query", ["--index", "/nonexistent"], "--index: /nonexistent: no such directory"),
    ("bench_one_query", ["--corpora", "sample,scifact", "--index", "."], "--index: one corpus only"),
    ("bench_one_query", ["--query", " "], "--query: expected a query"),
    ("bench_one_query", ["--out", "{blocked}"], "--out"),
    ("bench_search", ["--budgets", "0"], "--budgets"),
    ("bench_search", ["--slacks", "2"], r"--slacks: expected a number in (0, 1]"),
    ("bench_search", ["--slacks", "nan"], "--slacks"),
    ("bench_search", ["--zipf", "nan"], "--zipf"),
    ("bench_search", ["--peers", "bogus"], "--peers: expected names from bm25s, pisa, lucene"),
    ("channel_sweep", ["--index", "/nonexistent"], "--index"),
    ("channel_sweep", ["--index", ".", "--grid", "0"], "--grid"),
    ("latent_storage", ["--batch-size", "0"], "--batch-size"),
    ("bench_index", ["--shard-size", "0"], "--shard-size"),
    ("bench_index", ["--threads", "0"], "--threads"),
    ("bench_index", ["--corpus", "/nonexistent"], "--corpus"),
    ("bench_memory", ["--timeout", "nan"], "--timeout"),
    ("bench_memory", ["--threads", "0"], "--threads"),
    ("bench_memory", ["--device", "gpu"], "--device"),
    ("bench_memory", ["--lengths", "-5"], "--lengths"),
    ("bench_memory", ["--lengths", ""], "--lengths"),
    ("bench_memory", ["--lengths", "abc"], "--lengths"),
    ("bench_memory", ["--max-attention-gib", "0"], "--max-attention-gib"),
    ("bench_memory", ["--out", "{blocked}"], "--out"),
    ("bench_train", ["--devices", "gpu"], "--devices"),
    ("bm25_length_norm", ["--collections", "bogus"], "--collections"),
    ("bm25_length_norm", ["--collections", ""], "--collections"),
    ("impact_fidelity", ["--model", "bogus"], "--model"),
    ("impact_fidelity", ["--data", "/nonexistent"], "--data"),
    ("impact_fidelity", ["--out", "{blocked}"], "--out"),
    ("plot_tradeoff", ["--results", "/nonexistent.json"], "--results"),
    ("teacher_scores", ["--checkpoint", "bogus"], "--checkpoint: invalid choice: 'bogus'"),
    ("teacher_scores", ["--titles", "-1", "--out", "t.json.gz"], "--titles"),
    ("train_default", ["--device", "gpu"], "--device"),
]


@pytest.mark.parametrize(("script", "argv", "names"), CASES, ids=[f"{c[0]} {' '.join(c[1])}" for c in CASES])
def test_scripts_refuse_bad_values_at_parsing(script, argv, names, blocker, capsys):
    module = importlib.import_module(f"scripts.{script}")
    argv = [a.format(file=blocker, blocked=blocker / "out.json") for a in argv]
    with pytest.raises(SystemExit) as stop:
        module.parse_args(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and "Traceback" not in err
    [line] = [ln for ln in err.splitlines() if "error:" in ln]
    assert line == err.splitlines()[-1] and names in line


def run_script(script: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / f"{script}.py"), *argv], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_a_script_run_as_a_command_gives_usage_and_status_2():
    done = run_script("bench_memory", "--lengths", "0")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: bench_memory.py ") and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == "bench_memory.py: error: argument --lengths: expected an integer >= 1, got 0"


def test_a_script_run_as_a_command_gives_one_line_and_status_1_for_a_bad_file(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("not json")
    done = run_script("plot_tradeoff", "--results", str(bad), "--out", str(tmp_path / "p.png"))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"plot_tradeoff.py: error: {bad}: not JSON: --results takes scripts/effectiveness.py's report\n"
    bad.write_text("{}")
    done = run_script("plot_tradeoff", "--results", str(bad), "--out", str(tmp_path / "p.png"))
    assert done.returncode == 1 and done.stderr.startswith("plot_tradeoff.py: error: ") and done.stderr.count("\n") == 1
    assert not (tmp_path / "p.png").exists()


# -- checks before the work --------------------------------------------------------------------


@pytest.fixture(scope="module")
def ndrm2_index(tmp_path_factory) -> Path:
    """An NDRM2 index (channel 'idf' only) of the bundled sample's first 40 documents."""
    from ckqti import api

    root = tmp_path_factory.mktemp("ndrm2")
    corpus = root / "corpus.jsonl"
    with open(REPO / "ckqti" / "data" / "sample" / "corpus.jsonl") as f:
        corpus.write_text("".join(line for _, line in zip(range(40), f)))
    api.index(corpus, root / "index", model="ndrm2", progress=False)
    return root / "index"


def test_channel_sweep_needs_a_latent_channel(ndrm2_index):
    from ckqti.errors import IndexFormatError
    from scripts.channel_sweep import latent_index

    with pytest.raises(IndexFormatError, match="needs an index with a latent 'one' channel.*NDRM3.*\\['idf'\\]"):
        latent_index(ndrm2_index)


def test_impact_fidelity_refuses_an_index_of_another_corpus(ndrm2_index, data_dir):
    from scripts.impact_fidelity import check_index

    with pytest.raises(InputError, match="built from another corpus"):
        check_index(ndrm2_index, "ndrm2", data_dir / "scifact" / "corpus.jsonl")
    assert check_index(ndrm2_index, "ndrm2", ndrm2_index.parent / "corpus.jsonl").num_docs == 40


def test_impact_fidelity_refuses_an_index_of_part_of_the_corpus_or_of_another_model(ndrm2_index, tmp_path):
    """An index lacking some of the corpus's documents would be measured against exhaustive scoring of
    all of them (a lower overlap that is not the index's); one of another model against another model."""
    from ckqti.errors import IndexFormatError
    from scripts.impact_fidelity import check_index

    corpus = tmp_path / "corpus.jsonl"
    with open(REPO / "ckqti" / "data" / "sample" / "corpus.jsonl") as f:
        corpus.write_text("".join(line for _, line in zip(range(50), f)))
    with pytest.raises(InputError, match="built from another corpus"):
        check_index(ndrm2_index, "ndrm2", corpus)
    with pytest.raises(IndexFormatError, match="built with"):
        check_index(ndrm2_index, "ndrm2-anserini", ndrm2_index.parent / "corpus.jsonl")


def test_merge_files_are_checked_before_the_work(tmp_path):
    from dataclasses import asdict

    from scripts.long_documents import LongDocConfig, read_earlier

    config = LongDocConfig()
    path = tmp_path / "long_documents.json"
    for text, match in (("not json", "not JSON"), ("{}", "config, models and results expected")):
        path.write_text(text)
        with pytest.raises(InputError, match=match):
            read_earlier(path, config, ["scifact"])
    rows = {"queries": [], "ranks": {"BM25": []}, "mean_rank": {}, "found": {}, "p_retrieved": {}}
    earlier = {"config": json.loads(json.dumps(asdict(config))), "models": {}, "results": {"trecdl": rows}}
    path.write_text(json.dumps(earlier))
    assert read_earlier(path, config, ["scifact", "trecdl"]) == earlier
    with pytest.raises(InputError, match="ranked trecdl too"):
        read_earlier(path, config, ["scifact"])
    with pytest.raises(InputError, match="other settings"):
        read_earlier(path, LongDocConfig(queries=3), ["trecdl"])


def test_effectiveness_reports_are_checked(tmp_path):
    from scripts.plot_tradeoff import read_report

    path = tmp_path / "e.json"
    for text in ("{}", "[1]", '{"collections": {"scifact": {"ndrm3-full": {"ttest_vs_bm25": 3}}}}'):
        path.write_text(text)
        with pytest.raises(InputError):
            read_report(path)
    good = {"collections": {"scifact": {"bm25": {}, "ndrm3-full": {"ttest_vs_bm25": {"nDCG@10": {"delta": 0.1, "p": 0.01}}}}}}
    path.write_text(json.dumps(good))
    assert read_report(path) == good


def test_bench_index_table_says_whether_a_ray_index_is_the_same():
    from scripts.bench_index import same

    assert [same({"same_as_single": v}) for v in (True, False, None)] == ["yes", "NO", "n/a"]
    assert same({}) == "n/a"


def test_bench_index_checkpoints_are_made_absolute(tmp_path, monkeypatch):
    """The builds run in children started from the repository root: a checkpoint given relative to
    the caller's folder must still be found there."""
    from scripts.bench_index import parse_args

    (tmp_path / "m.pt").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    assert parse_args(["--models", "ndrm2,m.pt"]).models == ["ndrm2", str(tmp_path / "m.pt")]


def test_effectiveness_work_folder_is_checked_at_parsing(blocker):
    done = run_script("effectiveness", "--work", str(blocker))
    assert done.returncode == 2 and "--work" in done.stderr and "is a file, not a directory" in done.stderr


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Tiny TK and TKL checkpoints (random weights, a vocabulary of a few words)."""
    import torch

    from ckqti.models.inputs import TermText
    from ckqti.models.reranker import build_model, save_reranker
    from ckqti.text import Analyzer
    from ckqti.vocab import Vocabulary

    root = tmp_path_factory.mktemp("checkpoints")
    analyzer = Analyzer()
    vocab = Vocabulary.build([analyzer("protein folding in yeast cells"), analyzer("yeast cells divide")])
    torch.manual_seed(0)
    tiny = dict(vocab_size=len(vocab), embedding_dim=8, num_heads=2, ff_dim=8, num_layers=1)
    return {kind: save_reranker(root / f"{kind}.pt", build_model(kind, tiny), kind, TermText(analyzer, vocab)).path
            for kind in ("tk", "tkl")}


@pytest.mark.parametrize(("script", "option"), [("region_positions", "--tkl"), ("long_documents", "--tkl"),
                                                ("long_documents", "--tk"), ("region_positions", "--model")])
def test_a_checkpoint_of_another_kind_is_refused_at_parsing(script, option, tiny_checkpoints, capsys):
    """A TK checkpoint given as TKL used to run under TKL's name: region_positions.py reported no
    region ever on the planted text (TK has no regions), long_documents.py TK's ranks as TKL's."""
    module = importlib.import_module(f"scripts.{script}")
    wrong = tiny_checkpoints["tkl" if option == "--tk" else "tk"]
    argv = [option, f"X={wrong}" if option == "--model" else str(wrong)]
    with pytest.raises(SystemExit) as stop:
        module.parse_args(argv)
    assert stop.value.code == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert ": error: " in line and str(wrong) in line and "checkpoint of kind T" in line


def test_a_checkpoint_of_the_right_kind_is_taken(tiny_checkpoints, blocker):
    from scripts import long_documents, region_positions

    _, paths, checkpoints = region_positions.parse_args(["--tkl", str(tiny_checkpoints["tkl"])])
    assert paths["TKL"] == str(tiny_checkpoints["tkl"]) and checkpoints["TKL"].path == tiny_checkpoints["tkl"].resolve()
    _, paths, checkpoints = long_documents.parse_args(["--tk", str(tiny_checkpoints["tk"]),
                                                       "--model", f"any={tiny_checkpoints['tkl']}"])
    assert (paths["TK"], paths["any"]) == (str(tiny_checkpoints["tk"]), str(tiny_checkpoints["tkl"]))
    assert {name: c.kind for name, c in checkpoints.items()} == {"TK": "tk", "any": "tkl"}
    with pytest.raises(SystemExit) as stop:  # not a checkpoint at all: a usage error too
        region_positions.parse_args(["--tkl", str(blocker)])
    assert stop.value.code == 2
    with pytest.raises(SystemExit) as stop:  # and as a --model of any kind
        long_documents.parse_args(["--model", f"any={blocker}"])
    assert stop.value.code == 2


@pytest.mark.parametrize("script", ["long_documents", "region_positions"])
def test_each_checkpoint_is_loaded_once_for_its_kind_and_every_collection(script, tiny_checkpoints, monkeypatch):
    """Checking a checkpoint's kind loaded it, and each collection's rerankers loaded it again."""
    import ckqti.models.checkpoint
    from scripts.long_documents import Source, load_rerankers

    loaded = []
    real = ckqti.models.checkpoint.load_checkpoint
    monkeypatch.setattr(ckqti.models.checkpoint, "load_checkpoint", lambda p: (loaded.append(Path(p)), real(p))[1])
    args, _, checkpoints = importlib.import_module(f"scripts.{script}").parse_args(["--tkl", str(tiny_checkpoints["tkl"])])
    docs = {"a": "protein folding in yeast cells", "b": "yeast cells divide"}
    for name in ("one", "two"):  # the collections of a run
        rerankers = load_rerankers(checkpoints, Source(name, docs, {}, {}, {}), args.long_cap, "cpu")
        assert rerankers["TKL"].kind == "tkl" and rerankers["TKL"].max_doc_length == args.long_cap
    assert loaded == [tiny_checkpoints["tkl"]]
