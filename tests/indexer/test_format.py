"""The manifest (indexer/format.py): what :meth:`Manifest.read` refuses on one line."""

import json
import shutil

import pytest
from click.testing import CliRunner

from ckqti.cli import cli
from ckqti.errors import IndexFormatError
from indexer.format import CHECKSUM_KEY, MANIFEST, Manifest, manifest_digest


def edited(idx, edit) -> None:
    """``idx``'s manifest changed by ``edit`` (a function of its dict) and given the checksum of its new
    content, as a program writing it would: only the reader's own checks stand in the way."""
    body = json.loads((idx / MANIFEST).read_text())
    body.pop(CHECKSUM_KEY)
    edit(body)
    body[CHECKSUM_KEY] = manifest_digest(body)
    (idx / MANIFEST).write_text(json.dumps(body, indent=2, sort_keys=True))


EDITS = {  # each was a traceback (KeyError, TypeError, AttributeError, ValueError) in `search` or `info`, but the
    # shard outside, which a compaction deleted there (tested below)
    "a shard without its docs.arrow": (lambda m: m["shards"][0]["files"].pop("docs.arrow"), "shard-00000 does not list"),
    "a shard without files": (lambda m: m["shards"][0].update(files=None), "shard-00000 does not list"),
    "a shard outside the index": (lambda m: m["shards"][0].update(name="../elsewhere"), "shard name '../elsewhere'"),
    "a shard unnamed": (lambda m: m["shards"][0].update(name=None), "shard name None"),
    "no analyzer": (lambda m: m.update(analyzer=None), "analyzer None is not"),
    "vocabulary size as text": (lambda m: m.update(vocab_size="x"), "vocab_size 'x' is not"),
    "appends as text": (lambda m: m.update(appends="x"), "appends 'x' is not"),
    "an append that is no record": (lambda m: m.update(appends=[{"documents": 1}, "x"]), "appends is not a list of records"),
    "an analyzer without a stemmer": (lambda m: m["analyzer"].pop("stemmer"), "the analyzer has no stemmer"),
    "no quantization width": (lambda m: m["quantization"].pop("bits"), "quantization bits None is not 8"),
    "channels as a number": (lambda m: m.update(channels=-1), "channels -1 is not a list"),
    "build time as text": (lambda m: m["build"].update(seconds="x"), "the build's seconds 'x' is not a number"),
    "collection size as text": (lambda m: m["collection"].update(num_docs="x"), "collection's num_docs 'x' is not"),
    # the reader's own TypeError or KeyError, its words Python's ("Manifest.__init__() missing 1 required positional
    # argument: 'num_docs'", "'int' object is not iterable")
    "no shards": (lambda m: m.pop("shards"), "the manifest lacks the field\\(s\\) 'shards'"),
    "no document count": (lambda m: m.pop("num_docs"), "the manifest lacks the field\\(s\\) 'num_docs'"),
    "a field of another program": (lambda m: m.update(colour="red"), "the manifest has the field\\(s\\) 'colour', which"),
    "shards as a number": (lambda m: m.update(shards=3), "shards is not a list of records"),
    "a shard that is no record": (lambda m: m.update(shards=["shard-00000"]), "shards is not a list of records"),
    "a shard without its name": (lambda m: m["shards"][1].pop("name"), "shard 1 lacks the field\\(s\\) 'name'"),
    "a shard with a field of another program": (lambda m: m["shards"][0].update(colour="red"), "shard 0 has the field"),
}


@pytest.mark.parametrize("name", EDITS)
def test_a_manifest_of_the_wrong_shape_is_one_line_naming_it(tmp_path, scifact_index, name):
    edit, message = EDITS[name]
    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    edited(idx, edit)
    with pytest.raises(IndexFormatError, match=f"^{idx / MANIFEST}: manifest is malformed \\(.*{message}"):
        Manifest.read(idx)
    for command in (["search", "cells", "--index", str(idx)], ["info", "--index", str(idx)]):
        res = CliRunner().invoke(cli, command)
        assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output  # a traceback's exception is its own
        assert res.output.startswith(f"Error: {idx / MANIFEST}: manifest is malformed") and res.output.count("\n") == 1


def test_a_version_of_another_type_is_shown_as_it_is_written(tmp_path, scifact_index):
    """A version "2" (a string) was refused as 'index format version 2 is not supported (this ckqti reads 2)'."""
    idx = tmp_path / "idx"
    shutil.copytree(scifact_index, idx)
    edited(idx, lambda m: m.update(format_version="2"))
    with pytest.raises(IndexFormatError, match=r"index format version '2' is not supported \(this ckqti reads 2\)"):
        Manifest.read(idx)


def test_compaction_never_deletes_a_shard_named_outside_the_index(tmp_path, scifact_index):
    """A manifest naming another index's shard (``../other/shard-00000``, its checksums matching) was
    opened, and compacting it deleted that shard of the other index."""
    idx, other = tmp_path / "idx", tmp_path / "other"
    shutil.copytree(scifact_index, idx)
    shutil.copytree(scifact_index, other)
    edited(idx, lambda m: m["shards"][0].update(name="../other/shard-00000"))
    res = CliRunner().invoke(cli, ["compact", "--index", str(idx)])
    assert res.exit_code == 1 and "shard name '../other/shard-00000' is not a shard folder inside the index" in res.output
    assert (other / "shard-00000" / "postings.arrow").is_file() and Manifest.read(other).num_docs == 600


def test_a_manifest_prints_as_one_line_of_what_the_index_is(scifact_index):
    """``api.index`` returns the manifest: its generated repr held the model's record and every file's checksum."""
    m = Manifest.read(scifact_index)
    text = repr(m)
    assert "\n" not in text and len(text) < 250 and "sha256" not in text and m.shards[0].files["docs.arrow"] not in text
    assert text.startswith(f"Manifest(model={m.model['id']!r}, num_docs={m.num_docs:,}, ")
    assert f"shards={len(m.shards)}" in text and "generation=0" in text
