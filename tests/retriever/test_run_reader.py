"""Reading TREC run files: errors naming file and line, and the fast paths (a block at a time, in columns, a query
at a time) reading what the line-by-line reader reads."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ckqti.errors import InputError
from indexer.readers.formats import open_binary
from retriever.run_reader import read_run


def read_error(tmp_path, text: str) -> InputError:
    path = tmp_path / "bad.run"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_run(path)
    return info.value


@pytest.mark.parametrize(
    "text, line, words",
    [
        ("q Q0 d 1 1.0 t\nq Q0 e 2 0.5\n", 2, "expected 6 run columns"),
        ("q Q0 d 1 1.0 t\n\nq Q0 e 2 high t\n", 3, "bad score 'high' (column 5"),
        ("q Q0 d one 1.0 t\n", 1, "bad rank 'one' (column 4"),
        ("q Q0 d 1 nan t\n", 1, "not finite"),
        ("q Q0 d 1 -inf t\n", 1, "not finite"),
        ("q Q0 d 1 1_0 t\n", 1, "bad score"),  # Python's float reads 10, trec_eval 1
        ("q Q0 d 1_0 1.0 t\n", 1, "bad rank"),
        ("q Q0 d 1 \u0661.5 t\n", 1, "bad score"),  # an Arabic-Indic digit, which float() reads as 1
        ("q Q0 d 1 1.0 t\nr Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", 3, "twice (first at line 1)"),
        ("r Q0 d 1 1.0 t\nq Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n", 3, "twice (first at line 2)"),  # query r's d is another
        ("q Q0 d 1 1.0 my tag\n", 1, "expected 6 run columns (qid Q0 docid rank score tag), found 7"),
        # trec_eval (C strings) judged "d\0x" as "d"; a second file's byte-order mark after cat hid a query
        ("q Q0 d\x00x 1 1.0 t\n", 1, "docid 'd\\x00x' contains the invisible character U+0000"),
        ("q Q0 d 1 1.0 t\n\ufeffr Q0 d 1 1.0 t\n", 2, "query id '\\ufeffr' contains the invisible character U+FEFF"),
    ],
)
def test_read_run_errors_name_file_and_line(tmp_path, text, line, words):
    err = read_error(tmp_path, text)
    assert str(err).startswith(f"{tmp_path / 'bad.run'}:{line}: ")
    assert words in str(err)


def test_read_run_reads_every_decimal_trec_eval_reads(tmp_path):
    path = tmp_path / "ok.run"
    path.write_text("q Q0 a 1 3 t\nq Q0 b 2 2.5 t\nq Q0 c 3 .5 t\nq Q0 d 4 -1.5E-3 t\nq Q0 e 5 +7. t\n")
    assert read_run(path) == {"q": {"a": 3.0, "b": 2.5, "c": 0.5, "d": -0.0015, "e": 7.0}}


def test_read_run_empty(tmp_path):
    assert "no results" in str(read_error(tmp_path, "\n"))


VALID_RUNS = {
    "plain": "q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 -1e-3 t\nq2 Q0 d1 1 +.5E+2 t\n",
    "crlf, blank lines, tabs": "\r\nq1\tQ0\td1\t1\t2.5\tt\r\n\r\nq1 Q0 d2 2 5. t\r\n",
    "byte-order mark": "\ufeffq1 Q0 d1 1 1 t\n",
    "a query in two places": "q1 Q0 a 1 3 t\nq2 Q0 a 1 2 t\nq1 Q0 b 2 1 t\n",
    "non-ASCII ids, no final line feed": "q\u00e9 Q0 \u65e5\u672c 1 1.0 t\nq\u00e9 Q0 \U0001F600 2 0.5 t",
    "one line, no final line feed": "q Q0 d 1 1.0 t",
    "a byte-order mark, a first line longer than a block": "\ufeffq Q0 " + "d" * 80 + " 1 1.5 t\nq Q0 e 2 0.5 t\n",
    "long": "".join(f"q{i % 7} Q0 d{i}\u00e9 {i} {i / 3!r} t\n" for i in range(400)),
}


@pytest.mark.parametrize("name", list(VALID_RUNS))
@pytest.mark.parametrize("block", [64, 1 << 16])
def test_a_well_formed_run_is_read_a_block_at_a_time_as_line_by_line(tmp_path, monkeypatch, name, block):
    """The fast path reads what the line-by-line reader reads, block boundaries anywhere (a multi-byte
    character split between two reads included), plain and gzip; it does not fall back for these."""
    import retriever.run_reader as run_reader

    monkeypatch.setattr(run_reader, "READ_BLOCK", block)
    for path in (tmp_path / "r.trec", tmp_path / "r.trec.gz"):
        data = VALID_RUNS[name].encode("utf-8")
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        fast = run_reader._read_well_formed(path)
        assert fast is not None
        assert fast == run_reader._read_line_by_line(path) and list(fast) == list(run_reader._read_line_by_line(path))
        assert [list(d) for d in fast.values()] == [list(d) for d in run_reader._read_line_by_line(path).values()]


@pytest.mark.parametrize("text", [
    "q Q0 d 1 1.0 t\nq Q0 d 2 0.5 t\n",  # a docid twice
    "q Q0 d 1 1_0 t\n",  # float reads 10, trec_eval does not
    "q Q0 d \u0661 1.0 t\n",  # an Arabic-Indic digit as the rank
    "q Q0 d 1 nan t\n", "q Q0 d 1 1e999 t\n", "q Q0 d 1 1.0\n", "q Q0 d x 1.0 t\n", "",
    "q Q0 d 1 1.0 t\rq Q0 e 2 0.5 t\r",  # carriage returns alone
    "q Q0 d 1 1.0 t\n\xff\n",
    "q Q0 d\x00x 1 1.0 t\n", "q\u200b Q0 d 1 1.0 t\n",  # an invisible character in an id
])
def test_what_the_line_by_line_reader_refuses_is_left_to_it(tmp_path, text):
    """Every file the line-by-line reader refuses (or reads only because it reads line by line) makes
    the fast path step aside, so the error names the line as before."""
    import retriever.run_reader as run_reader

    path = tmp_path / "r.trec"
    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text else text.encode("latin-1"))
    assert run_reader._read_well_formed(path) is None
    with pytest.raises(InputError):
        read_run(path)


@pytest.mark.parametrize("block", [64, 1 << 16])
def test_a_line_over_a_block_is_left_to_the_line_by_line_reader(tmp_path, monkeypatch, block):
    """Past its first, a line longer than a block is not gathered by the fast path (a file with few line
    feeds would be read whole into memory): the line-by-line reader reads it."""
    import retriever.run_reader as run_reader

    monkeypatch.setattr(run_reader, "READ_BLOCK", block)
    path = tmp_path / "r.trec"
    path.write_text(f"q Q0 d 1 1.0 t\nq Q0 {'e' * 2 * block} 2 0.5 t\n")
    assert run_reader._read_well_formed(path) is None
    assert read_run(path) == {"q": {"d": 1.0, "e" * 2 * block: 0.5}}



@pytest.mark.parametrize("name", [*VALID_RUNS, "columns", "a line over a block"])
def test_read_run_queries_holds_the_queries_kept(tmp_path, name):
    """read_run_queries holds the rankings of the queries kept, as read_run reads them, and names every query
    of the file in order, on each of its paths: in columns (a block of 1 MB or more), a block of rows at a
    time, and line by line (a line longer than a block)."""
    import retriever.run_reader as run_reader

    text = {"columns": "".join(f"q{i % 7} Q0 d{i} {i} {i / 3!r} t\n" for i in range(40_000)),
            "a line over a block": f"q1 Q0 d 1 1.0 t\nq2 Q0 {'e' * 2 * run_reader.READ_BLOCK} 2 0.5 t\n"
                                   "q1 Q0 f 3 0.1 t\n",
            }.get(name) or VALID_RUNS[name]
    path = tmp_path / "r.trec"
    path.write_bytes(text.encode("utf-8"))
    assert (name == "columns") == (len(text) >= run_reader.ARROW_MIN)
    whole = read_run(path)
    for keep in (set(), {"q1"}, {"q1", "q\u00e9", "q3", "q"}, set(whole)):
        run, qids = run_reader.read_run_queries(path, keep)
        assert run == {q: docs for q, docs in whole.items() if q in keep} and qids == list(whole)
        assert [list(d) for d in run.values()] == [list(whole[q]) for q in run]
    assert run_reader.read_run_queries(path) == (whole, list(whole))

class _CountingReads:
    """A binary file that counts the bytes read from it (decompressed, for gzip)."""

    def __init__(self, stream):
        self.stream, self.read_bytes = stream, 0

    def read(self, size=-1):
        data = self.stream.read(size)
        self.read_bytes += len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()


@pytest.mark.parametrize("suffix", [".trec", ".trec.gz"])
def test_iter_run_queries_gives_a_grouped_run_a_query_at_a_time(tmp_path, monkeypatch, suffix):
    """A run grouped by query is given a query at a time, each once the block after its lines has been read: the
    first long before the file is read through, and every ranking as read_run_queries holds it (the queries kept,
    in file order; a query spanning blocks joined), plain and gzip. A query whose lines come back after another's
    (concatenated runs) or a docid repeated across blocks raises NotGrouped, and so does a file read_run
    complains of (read_run_queries then reads it whole and names what is wrong)."""
    import retriever.run_reader as run_reader

    monkeypatch.setattr(run_reader, "READ_BLOCK", 1 << 12)
    monkeypatch.setattr(run_reader, "ARROW_BLOCK", 1 << 14)  # blocks of ~16 KB, ~500 lines (of a 120 KB run)
    lines = [f"q{q} Q0 d{d} {d + 1} {(d * 7) % 13 / 3!r} t\n" for q in range(60) for d in range(40 + q)]
    path = tmp_path / f"r{suffix}"

    def write(text: str) -> None:
        data = text.encode("utf-8")
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)

    opened: list[_CountingReads] = []
    monkeypatch.setattr(run_reader, "open_binary",
                        lambda p: opened.append(_CountingReads(open_binary(p))) or opened[-1])
    write("".join(lines))
    size = len("".join(lines))
    for keep in (None, {f"q{q}" for q in range(0, 60, 7)}):
        at = []  # bytes read when each query is given
        given = [(qid, docs, at.append(opened[-1].read_bytes)) for qid, docs in run_reader.iter_run_queries(path, keep)]
        assert at[0] < size / 4 and at == sorted(at), (at[0], size)
        assert [(qid, docs) for qid, docs, _ in given] == list(run_reader.read_run_queries(path, keep)[0].items())
    long_query = [f"z Q0 d{d} 1 1.5 t\n" for d in range(1000)]  # ~40 KB: over blocks
    for bad in ("".join(lines[1500:] + lines[:1500]), "".join(lines + [lines[1500].replace("q", "r")] + lines[:3]),
                "".join(lines + long_query + long_query[:1]), "".join(lines) + "q1 Q0 x\n"):
        write(bad)
        with pytest.raises(run_reader.NotGrouped):
            list(run_reader.iter_run_queries(path))



def test_iter_run_queries_at_block_edges_and_rows_reads_what_read_run_queries_reads(tmp_path, monkeypatch):
    """A query whose last line ends a block is held until the next block shows it does not go on, then given
    (each query once), and coming back later is NotGrouped; a run led by a byte-order mark, and blocks that
    Arrow leaves to rows (a docid not ASCII), are given a query at a time as read_run_queries holds them; an
    empty run and a docid repeated within a block are NotGrouped (read_run_queries names what is wrong)."""
    import retriever.run_reader as run_reader

    monkeypatch.setattr(run_reader, "READ_BLOCK", 1 << 12)
    monkeypatch.setattr(run_reader, "ARROW_BLOCK", 1 << 14)
    monkeypatch.setattr(run_reader, "ARROW_MIN", 1 << 12)  # a 16 KB block is read in columns when plain
    path = tmp_path / "r.trec"

    def given(text: str) -> list:
        path.write_bytes(text.encode("utf-8"))
        return list(run_reader.iter_run_queries(path))

    # 64-byte lines, 256 a query: each 16 KB block is one whole query
    lines = {q: [f"q{q:02d} Q0 {'d' * 41}{d:04d} {d + 1:04d} 1.5 t\n" for d in range(256)] for q in range(4)}
    aligned = "".join(line for q in lines for line in lines[q])
    assert {len(line) for q in lines for line in lines[q]} == {64}
    for text in (aligned, "\ufeff" + aligned, aligned.replace("dd0", "dé0")):
        assert given(text) == list(run_reader.read_run_queries(path)[0].items())
        assert [qid for qid, _ in given(text)] == ["q00", "q01", "q02", "q03"]
    for bad in (aligned + lines[0][0].replace("0000", "9999"), "", "\n\n", "q Q0 d1 1 1.0 t\nq Q0 d1 2 0.5 t\n"):
        with pytest.raises(run_reader.NotGrouped):
            given(bad)


def test_a_well_formed_run_is_read_once(tmp_path, monkeypatch):
    """read_run takes the fast path's result: a well-formed run is not read again line by line."""
    import retriever.run_reader as run_reader

    def line_by_line(path):
        raise AssertionError("read line by line")

    monkeypatch.setattr(run_reader, "_read_line_by_line", line_by_line)
    path = tmp_path / "r.trec"
    path.write_text(VALID_RUNS["long"])
    assert read_run(path) == run_reader._read_well_formed(path) and len(read_run(path)) == 7


def _gzip_damaged(kind: str) -> bytes:
    data = gzip.compress("".join(f"q Q0 d{i} {i + 1} 1.0 t\n" for i in range(5000)).encode())
    if kind == "truncated":
        return data[:len(data) // 2]
    if kind == "bad header":  # the gzip magic, then no deflate method
        return data[:2] + b"garbage" * 10
    return data[:10] + b"\xff" * 40  # a deflate block of an invalid type


@pytest.mark.parametrize("kind", ["truncated", "bad header", "bad deflate data"])
def test_a_damaged_gzip_run_is_an_input_error_naming_the_file(tmp_path, kind):
    """Whatever gzip raises in the fast path (EOFError, BadGzipFile, zlib.error) leaves the file to the
    line-by-line reader, whose error names the file: never a traceback."""
    path = tmp_path / "r.trec.gz"
    path.write_bytes(_gzip_damaged(kind))
    with pytest.raises(InputError, match=re.escape(str(path)) + ":[0-9]+: corrupt gzip data"):
        read_run(path)


AWKWARD_SCORES = [
    "-0", "+0", "-0.", "+.0", "00", ".5", "5.", "+7.", "-.5e-3", "1E5", "1e+0000000000000000000001", "1e-320", "-1e-320",
    "4.9406564584124654e-324", "2.4703282292062327e-324", "2.4703282292062328e-324", "2.2250738585072011e-308",
    "1.7976931348623157e308", "1.7976931348623158e308", "0e99999999999999999999", "1e-99999999999999999999",
    "9007199254740993", "9007199254740992.5000000000000000001", "0.1000000000000000055511151231257827021181583404541015625",
    "0.1000000000000000055511151231257827021181583404541015624", "1" + "0" * 400 + "e-400", "0." + "0" * 400 + "1e400",
    "123456789012345678901234567890e-30", "9" * 300, "0." + "9" * 800, "0.30000000000000004", "1.2403492132387708",
]


def _random_score(rng) -> str:
    if rng.random() < 0.3:
        return repr(rng.uniform(-1e3, 1e3) * 10.0 ** rng.randint(-330, 300))
    whole, part = (rng.choices("0123456789", k=rng.randint(0, n)) for n in (25, 40))
    text = "".join(whole) + rng.choice([".", "", "."]) + "".join(part)
    text = text if any(c.isdigit() for c in text) else "0"
    if rng.random() < 0.4:
        sign = rng.choice(["-", "", "+"])  # below 1e300 (65 digits at most before the exponent)
        text += rng.choice("eE") + sign + str(rng.randint(0, 400 if sign == "-" else 234))
    return rng.choice(["", "", "+", "-"]) + text


def _random_run(rng, lines: int) -> list[str]:
    """Lines of a plain run: queries of a few to many lines, some query coming back later, awkward scores."""
    out, qids = [], [f"q{i}" for i in range(rng.randint(1, 9))]
    while len(out) < lines:
        qid, docs = rng.choice(qids), rng.randint(1, 60)
        used = {line.split()[2] for line in out if line.split()[0] == qid}
        fresh = [d for d in (f"d{rng.randint(0, 10**6)}-{k}" for k in range(docs)) if d not in used]
        out += [f"{qid} {rng.choice(['Q0', '0'])} {doc} {rank} {_random_score(rng)} {rng.choice(['t', 'run.1'])}"
                for rank, doc in enumerate(fresh, 1)]
    return out


def _same_as_line_by_line(run_reader, path):
    """read_run's result or error for ``path`` is the line-by-line reader's, floats bit for bit, keys in order."""
    try:
        want = run_reader._read_line_by_line(path)
    except InputError as err:
        with pytest.raises(InputError) as got:
            read_run(path)
        assert str(got.value) == str(err)
        return
    got = read_run(path)
    assert list(got) == list(want)
    assert [[(d, repr(s)) for d, s in docs.items()] for docs in got.values()] == \
           [[(d, repr(s)) for d, s in docs.items()] for docs in want.values()]


def _spy_columns(run_reader, monkeypatch) -> list:
    """Read in columns from the smallest block, gathering 1.5 KB (a line of 1 KB is read whole); what each
    _add_columns call returned."""
    monkeypatch.setattr(run_reader, "READ_BLOCK", 1024)
    monkeypatch.setattr(run_reader, "ARROW_BLOCK", 1536)
    monkeypatch.setattr(run_reader, "ARROW_MIN", 0)
    calls, add_columns = [], run_reader._add_columns
    monkeypatch.setattr(run_reader, "_add_columns", lambda *args: calls.append(add_columns(*args)) or calls[-1])
    return calls


@pytest.mark.parametrize("seed", range(6))
def test_a_plain_run_is_read_in_columns_as_line_by_line(tmp_path, monkeypatch, seed):
    """Plain runs (random queries, one coming back later, awkward scores, no final line feed) are read in
    columns, every block, with the line-by-line reader's floats bit for bit, plain and gzip."""
    import random

    import retriever.run_reader as run_reader

    rng = random.Random(seed)
    lines = _random_run(rng, 300)
    lines += [f"qa Q0 a{i} {i} {score} t" for i, score in enumerate(AWKWARD_SCORES)]
    calls = _spy_columns(run_reader, monkeypatch)
    for path in (tmp_path / "r.trec", tmp_path / "r.trec.gz"):
        data = ("\n".join(lines) + rng.choice(["\n", ""])).encode()
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        calls.clear()
        _same_as_line_by_line(run_reader, path)
        assert len(calls) > 5 and None not in calls  # every block in columns


def _column_is(k: int, text: str):
    return lambda cols: " ".join(cols[:k] + [text] + cols[k + 1:])


def _score_is(score: str):
    return _column_is(4, score)


# One change to a line of a plain run: ``{}`` is the line's columns, space-separated, as strings.
MUTATIONS = [
    lambda c: "  ".join(c), lambda c: " " + " ".join(c), lambda c: " ".join(c) + " ", lambda c: " ".join(c) + "\n",
    lambda c: "\n" + " ".join(c), lambda c: "\t".join(c), lambda c: " ".join(c) + "\r", lambda c: " ".join(c[:5]),
    lambda c: " ".join(c + ["x"]), lambda c: " ".join(c[:2] + [c[2] + "\t1"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\x0b1"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\x1c1"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\x00"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\x85x"] + c[3:]),
    lambda c: " ".join(c[:2] + [c[2] + "\u00e9"] + c[3:]), lambda c: " ".join(c[:2] + [c[2] + "\u3000x"] + c[3:]),
    lambda c: " ".join(c[:3] + ["+" + c[3]] + c[4:]), lambda c: " ".join(c[:3] + ["-" + c[3]] + c[4:]),
    lambda c: " ".join(c[:3] + [c[3] + ".0"] + c[4:]), lambda c: " ".join(c[:3] + ["x"] + c[4:]),
    lambda c: " ".join(c[:3] + ["1_0"] + c[4:]), lambda c: " ".join(c[:3] + ["\u0661"] + c[4:]),
    *[_score_is(score) for score in ["1_0", "nan", "-inf", "Infinity", "1e999", "-1e400", "9" * 400, "1.2.3", "0x1p3",
                                     "1e", "e5", ".", "+", "1d5", "\u0661.5", "1,5", "1e5.0", "0b1", "1j", "\uff11"]],
    *[_column_is(k, "") for k in range(6)],  # a column gone, its spaces not
    lambda c: '"' + " ".join(c) + '"', lambda c: " ".join(c[:2] + ['"' + c[2] + '"'] + c[3:]),
]


@pytest.mark.parametrize("seed", range(4))
def test_a_subtly_changed_run_reads_or_fails_as_line_by_line(tmp_path, monkeypatch, seed):
    """Each change to one line of a plain run (extra or other whitespace, a column more or less, a signed
    or bad rank, scores float reads and trec_eval does not, a docid twice) leaves read_run's result or
    InputError the line-by-line reader's, wherever the line lies."""
    import random

    import retriever.run_reader as run_reader

    rng = random.Random(seed)
    calls = _spy_columns(run_reader, monkeypatch)
    path = tmp_path / "r.trec"
    for number, mutate in enumerate(MUTATIONS + ["twice"]):
        lines = _random_run(rng, 60)
        at = rng.randrange(len(lines))
        if mutate == "twice":
            cols = lines[at].split()
            lines.insert(rng.randint(at + 1, len(lines)), f"{cols[0]} Q0 {cols[2]} 99 1.5 t")
        else:
            lines[at] = mutate(lines[at].split())
        path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
        calls.clear()
        _same_as_line_by_line(run_reader, path)
        assert calls, number


def test_reading_a_run_in_columns_imports_no_pandas(tmp_path):
    """A run of more than ARROW_MIN bytes is read in columns, without pandas (0.3 s of a process)."""
    path = tmp_path / "r.run"
    path.write_text("".join(f"q{i // 1000} Q0 d{i} {i % 1000 + 1} {1 / (i + 1)!r} t\n" for i in range(40_000)))
    code = ("import sys; import retriever.run_reader as run_reader; calls = []; add = run_reader._add_columns; "
            "run_reader._add_columns = lambda *a: calls.append(add(*a)) or calls[-1]; "
            f"run = run_reader.read_run({str(path)!r}); "
            "print(len(run), len(calls), None in calls, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.split() == ["40", "1", "False", "False"]
