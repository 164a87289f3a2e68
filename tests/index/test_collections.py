"""Collections of JSON Lines records: fields, metadata, filters, bad lines, incremental re-ingest.

The records are real ICML abstracts read from ../shared/data; the test indexes their titles as
text (a short text keeps the embedding cost of a few hundred records to seconds).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.records import Fields
from chatbot.retrieve.filters import parse_where
from chatbot.serve.cli import main
from tests.conftest import SHARED
from tests.helpers import records_by_year

ABSTRACTS = SHARED / "data" / "icml_2020_2023_abstracts.jsonl"
PER_YEAR = 60
FIELDS = Fields(id="id", title="", text="title")


def _records() -> list[dict]:
    """The first PER_YEAR records of each year, so that year filters have something to choose."""
    if not ABSTRACTS.is_file():
        pytest.skip(f"{ABSTRACTS} is not there (the shared data folder is needed)")
    by_year = records_by_year(ABSTRACTS, PER_YEAR)
    return [r for year in sorted(by_year) for r in by_year[year]]


def _write(path: Path, records: list[dict], extra_lines: list[str] = ()) -> Path:
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return _records()


@pytest.fixture(scope="module")
def collection(tmp_path_factory, records):
    """A data directory with the records ingested into the collection 'abstracts'."""
    folder = tmp_path_factory.mktemp("collection")
    path = _write(folder / "abstracts.jsonl", records)
    bot = Chatbot(Settings.load(env_file=None, data_dir=folder / "data", collection="abstracts"))
    report = bot.ingest([path], fields=FIELDS)
    assert report.added == len(records), f"every record should become a document: {report}"
    return bot, path


def test_other_fields_become_passage_metadata(collection, records):
    bot, _ = collection
    first = records[0]
    got = bot.store.collection.get(where={"doc_id": first["id"]}, include=["metadatas"])
    meta = got["metadatas"][0]
    assert meta["year"] == first["year"] and isinstance(meta["year"], int), meta
    assert meta["venue"] == "ICML", meta
    assert meta["authors"] == ", ".join(first["authors"]), "an author list is kept as one string"
    assert meta["abstract"] == first["abstract"], "fields other than id/title/text are kept"


def test_where_filters_retrieval_and_answers(collection):
    bot, _ = collection
    passages = bot.retrieve("reinforcement learning", k=8, where={"year": 2022})
    assert passages, "the filter should leave 2022 papers to find"
    assert {p.metadata["year"] for p in passages} == {2022}, [p.metadata for p in passages]
    both = {"$and": [{"year": {"$gte": 2021}}, {"venue": "ICML"}]}
    assert all(p.metadata["year"] >= 2021 for p in bot.retrieve("graph neural networks", 8, both))
    answer = bot.ask("Which papers are about reinforcement learning?", where={"year": 2021})
    assert all(c.metadata["year"] == 2021 for c in answer.citations), answer.citations


def test_where_option_is_parsed_like_a_user_writes_it():
    assert parse_where(["year=2023"]) == {"year": 2023}
    assert parse_where(["year>=2022", "venue=ICML"]) == {
        "$and": [{"year": {"$gte": 2022}}, {"venue": "ICML"}]
    }
    assert parse_where(["score=0.5"]) == {"score": 0.5}
    assert parse_where(None) is None


def test_cli_where_restricts_the_sources(collection, capsys):
    bot, _ = collection
    args = ["--data-dir", str(bot.settings.data_dir), "--collection", "abstracts"]
    code = main([*args, "retrieve", "optimization", "--where", "year=2020", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and rows, "retrieve should print passages"
    assert {r["metadata"]["year"] for r in rows} == {2020}
    assert main([*args, "ask", "optimization", "--where", "year"]) == 1
    assert "KEY=VALUE" in capsys.readouterr().err, "a malformed --where should say how to write it"


def test_reingest_unchanged_embeds_nothing(collection, records):
    bot, path = collection
    report = bot.ingest([path], fields=FIELDS)
    assert (report.unchanged, report.passages, report.changed) == (len(records), 0, False), report


def test_bad_lines_are_reported_and_the_rest_ingested(tmp_path, records, capsys):
    good = records[:5]
    path = _write(
        tmp_path / "mixed.jsonl",
        good,
        ['{"id": "broken", "title": ', '{"title": "no id"}', '["not", "an", "object"]'],
    )
    options = ["--title-field", "", "--text-field", "title", "--quiet"]
    code = main(
        ["--data-dir", str(tmp_path / "d"), "--collection", "mixed", "ingest", str(path), *options]
    )
    out = capsys.readouterr()
    assert code == 1, "a partly bad file should exit non-zero"
    assert "5 added" in out.out, out.out
    for line in (6, 7, 8):
        assert f"line {line}" in out.err, f"line {line} should be named:\n{out.err}"


def test_removed_and_edited_records_follow_the_file(tmp_path, records):
    path = _write(tmp_path / "a.jsonl", records[:30])
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "d", collection="shrink"))
    assert bot.ingest([path], fields=FIELDS).added == 30
    edited = dict(records[1], title=records[1]["title"] + " Revisited")
    _write(path, [records[0], edited, *records[2:25]])
    report = bot.ingest([path], fields=FIELDS)
    assert (report.removed, report.updated, report.unchanged) == (5, 1, 24), report
    gone = records[29]["id"]
    assert not bot.store.collection.get(where={"doc_id": gone})["ids"], "removed record remains"
    # A line that breaks keeps that record's passages: nothing is lost because of a typo.
    _write(path, records[:24], [json.dumps({"id": records[24]["id"], "title": ""})])
    report = bot.ingest([path], fields=FIELDS)
    assert report.removed == 0 and len(report.problems) == 1, report
    assert bot.store.collection.get(where={"doc_id": records[24]["id"]})["ids"]


def test_collections_live_side_by_side(data_dir, records, tmp_path):
    path = _write(tmp_path / "few.jsonl", records[:10])
    summaries = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    before = summaries.store.count()
    other = Chatbot(Settings.load(env_file=None, data_dir=data_dir, collection="abstracts"))
    assert other.ingest([path], fields=FIELDS).added == 10
    assert Chatbot(Settings.load(env_file=None, data_dir=data_dir)).store.count() == before
    answer = summaries.ask("Which theory links Transformers to modern Hopfield networks?")
    assert answer.citations[0].doc_id == "transformers-associative-memory", answer.citations


def test_an_abstract_matching_more_of_the_question_ranks_above_one_repeating_one_word():
    from chatbot.index.bm25 import KeywordIndex

    texts = {
        "repeats": "Graph transformers read a graph node by node: each node attends to the whole "
        "graph, and a graph of graphs is read as one graph.",
        "matches": "We fit one temperature per scaffold, so that molecular property predictions "
        "carry calibrated uncertainty intervals on held-out scaffolds.",
        "attention": "Sparse attention lets transformers read long documents with linear memory.",
        "audio": "A diffusion model generates speech waveforms faster than autoregressive "
        "vocoders.",
        "federated": "Federated clients correct the drift of their local updates with control "
        "variates.",
        "clustering": "Clustering with outliers runs in near-linear time on a coreset of the "
        "points.",
    }
    question = "Which graph model gives calibrated uncertainty?"
    fields = {"text": list(texts.values())}
    index = KeywordIndex.build(list(texts), fields, "r")
    ranked = [pid for pid, _ in index.search(question, 3)]
    assert ranked[0] == "matches", (
        f"two of the question's words beat one word said five times: {ranked}"
    )
    # bm25s' own parameters let the fifth "graph" count nearly as much as the first: the case
    # the keyword index's K1 and B decide.
    loose = KeywordIndex.build(list(texts), fields, "r", k1=1.5, b=0.75)
    assert loose.search(question, 3)[0][0] == "repeats", "the case this test guards is gone"
