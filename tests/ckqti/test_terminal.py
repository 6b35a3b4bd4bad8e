"""Text from documents, queries and paths printed on a terminal (ckqti.terminal)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from ckqti import api
from ckqti.cli import cli
from ckqti.terminal import counted, decoded_argument, repaired, safe_cut, visible

HOSTILE_TITLE = "evil\x1b]0;PWNED\x07title"
HOSTILE_TEXT = "apple \x1b[2J\x1b[H cleared back\rOVERWRITE \u202eapple\b\b\bXYZ click"


def test_visible_escapes_what_acts_on_a_terminal_and_keeps_text():
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("x\ry\bz\x07\x7f\x9b") == "x\\x0dy\\x08z\\x07\\x7f\\x9b"
    assert visible("\u202eevil\u2066") == "\\u202eevil\\u2066"
    assert visible("caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600\tand\nlines") == "caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600\tand\nlines"
    assert visible("lone \udcff") == "lone \\udcff"
    assert visible("line one\r\nline two\r\rthree\n\r") == "line one\nline two\\x0d\\x0dthree\n\\x0d"  # CRLF: a line break


def test_columns_count_wide_and_full_width_characters_twice_and_marks_not_at_all():
    from ckqti.terminal import columns_of

    assert columns_of("\u7d30\u80de") == 4  # CJK: wide (W)
    assert columns_of("\uff21\uff22\uff11") == 6  # full-width Latin letters and digits (F), as a Japanese text writes them
    assert columns_of("\uff76\uff85") == 2  # half-width katakana (H): one column each
    assert columns_of("cafe\u0301\u200d") == 4  # a combining accent and a zero-width joiner take none


def test_a_safe_cut_keeps_accents_emoji_sequences_and_crlf_whole():
    assert safe_cut("cafe\u0301s", 4) == 3 and safe_cut("cafe\u0301s", 5) == 5
    assert safe_cut("x\U0001f469\u200d\U0001f469y", 3) == 1 and safe_cut("x\U0001f469\u200d\U0001f469y", 4) == 4
    assert safe_cut("ab\r\ncd", 3) == 2 and safe_cut("ab", 9) == 2 and safe_cut("\u0301", 0) == 0


def test_decoded_argument_replaces_bytes_that_are_not_utf8():
    assert decoded_argument("cleared \udcff\udcfe") == "cleared \ufffd\ufffd"
    assert decoded_argument("caf\u00e9") == "caf\u00e9"


def test_search_and_explain_print_no_terminal_controls_from_documents(tmp_path):
    corpus = tmp_path / "c.jsonl"
    docs = [{"_id": "ctrl\x1b[31mid", "title": HOSTILE_TITLE, "text": HOSTILE_TEXT},
            *({"_id": f"plain{i}", "title": "other", "text": f"pears and plums {i}"} for i in range(5))]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    runner = CliRunner()
    refused = runner.invoke(cli, ["index", str(corpus), "--out", str(tmp_path / "idx"), "--model", "ndrm2"])
    assert refused.exit_code == 1 and "\x1b" not in refused.output  # an id holding a control is refused, escaped
    assert refused.output.strip().endswith("c.jsonl:1: docid 'ctrl\\x1b[31mid' contains the invisible character U+001B (control)")
    docs[0]["_id"] = "ctrl-id"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    api.index(corpus, tmp_path / "idx", model="ndrm2", progress=False)
    found = runner.invoke(cli, ["search", "cleared apple", "--index", str(tmp_path / "idx")])
    assert found.exit_code == 0 and "\x1b" not in found.output and "\r" not in found.output
    assert "\\x1b]0;PWNED\\x07" in found.output and "ctrl-id" in found.output
    shown = runner.invoke(cli, ["explain", "cleared apple", "ctrl-id", "--model", "ndrm2", "--index",
                                str(tmp_path / "idx"), "--no-color"])
    assert shown.exit_code == 0, shown.output
    assert not any(c in shown.output for c in "\x1b\r\b\u202e") and "back\\x0dOVERWRITE" in shown.output
    missing = runner.invoke(cli, ["explain", "apple", "gone\x1b[2J", "--model", "ndrm2", "--index", str(tmp_path / "idx")])
    assert missing.exit_code == 1 and "gone\\x1b[2J" in missing.output and "\x1b" not in missing.output
    as_json = runner.invoke(cli, ["search", "cleared \udcff", "--index", str(tmp_path / "idx"), "--json"])
    assert json.loads(as_json.output)["query"] == "cleared \ufffd" and "\\ud" not in as_json.output


def test_repaired_undoes_mojibake_and_keeps_other_text():
    assert repaired("donâ\x80\x99t â\x80\x9cquoted â\x80\x93 okâ\x80\x9d") == "don’t “quoted – ok”"
    assert repaired("life: à¹\x83à¸\x88à¹\x80à¸¢à¹\x87à¸\x99 or JAI YEN") == "life: ใจเย็น or JAI YEN"  # MS MARCO's
    for text in ("plain ascii", "café naïve — “quoted” ใจเย็น 東京", ""):
        assert repaired(text) == text


def test_search_shows_mojibake_repaired_and_json_keeps_the_stored_text(tmp_path):
    corpus = tmp_path / "c.jsonl"
    docs = [{"_id": "m1", "title": "Donâ\x80\x99t panic", "text": "the thai phrase à¹\x83à¸\x88à¹\x80à¸¢à¹\x87à¸\x99 means calm"},
            *({"_id": f"plain{i}", "title": "other", "text": f"pears and plums {i}"} for i in range(5))]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs))
    api.index(corpus, tmp_path / "idx", model="ndrm2", progress=False)
    runner = CliRunner()
    found = runner.invoke(cli, ["search", "thai phrase", "--index", str(tmp_path / "idx")])
    # stdout alone: a cold Numba cache adds a "compiling the search kernels" note to stderr
    assert found.exit_code == 0 and found.stdout.splitlines()[0].endswith("Don’t panic")
    assert "[thai] [phrase] ใจเย็น means calm" in found.stdout and "\\x80" not in found.stdout
    as_json = runner.invoke(cli, ["search", "thai phrase", "--index", str(tmp_path / "idx"), "--json"])
    assert json.loads(as_json.stdout)["hits"][0]["title"] == "Donâ\x80\x99t panic"  # programs get the corpus's text


def test_counted_gives_the_noun_the_number_it_takes():
    """"clicks joined to 1 documents", "none of its 1 queries": a count of one takes the singular."""
    assert [counted(n, "document") for n in (0, 1, 2, 5183)] == ["0 documents", "1 document", "2 documents",
                                                                   "5,183 documents"]
    assert (counted(1, "query", "queries"), counted(3, "query", "queries")) == ("1 query", "3 queries")
