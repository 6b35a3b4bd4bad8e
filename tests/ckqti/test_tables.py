"""format_table, plain and Markdown."""

from __future__ import annotations

from ckqti.tables import format_table


def test_format_table_plain_and_markdown():
    rows = [["bm25", "0.5000"], ["a-longer-name", "1.0000"]]
    assert format_table(["run", "nDCG@10"], rows) == (
        "run            nDCG@10\nbm25            0.5000\na-longer-name   1.0000"
    )
    assert format_table(["run", "nDCG@10"], rows, markdown=True).splitlines() == [
        "| run           | nDCG@10 |",
        "|---------------|--------:|",
        "| bm25          |  0.5000 |",
        "| a-longer-name |  1.0000 |",
    ]
