"""The corpus: the 20 seed summaries, verbatim, with front matter; and how files are read."""

from __future__ import annotations

import re

import pytest
import yaml

from chatbot.index.documents import Splitter, load_documents, read_document
from tests.conftest import CORPUS, SHARED, needs_shared

SEED = SHARED / "seeds" / "000_7c5b070356fd949a.txt"


def seed_paragraphs() -> list[str]:
    lines = SEED.read_text(encoding="utf-8").split("\n")
    return [p.strip() for p in "\n".join(lines[1:]).split("\n\n") if p.strip()]


def high_confidence() -> dict[int, tuple[str, str]]:
    rows = {}
    for line in (SHARED / "data" / "seed_papers.md").read_text().splitlines():
        m = re.match(r"\| (\d+) \| .*? \| (.*?) \| icml2025-\d+ \| (\S+) \| high \|", line)
        if m:
            rows[int(m.group(1))] = (m.group(2), m.group(3))
    return rows


@needs_shared("seeds", SEED.name)
@needs_shared("data", "seed_papers.md")
def test_corpus_holds_each_seed_summary_word_for_word_with_front_matter():
    files = sorted(CORPUS.glob("*.md"))
    paragraphs = seed_paragraphs()
    assert len(files) == len(paragraphs) == 20
    high = high_confidence()
    ids = set()
    for n, (path, paragraph) in enumerate(zip(files, paragraphs, strict=True), 1):
        doc = read_document(path)
        # The source runs an opening heading ("Introduction", the title) into the first
        # sentence; here it has a Markdown line of its own, so it is never quoted as prose.
        text = re.sub(r"\A#{1,2} (.+)\n\n", r"\1 ", doc.text)
        assert text == paragraph, f"{path.name} does not hold summary {n} word for word"
        front = yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])
        assert front["id"] == doc.doc_id and re.fullmatch(r"[a-z0-9-]+", doc.doc_id)
        assert front["title"].strip(), f"{path.name} has no title"
        if n in high:
            assert (front.get("paper"), front.get("url")) == high[n], f"{path.name}: paper/url"
        else:
            assert "paper" not in front, f"{path.name}: summary {n} is not a high-confidence match"
        ids.add(doc.doc_id)
    assert len(ids) == 20, "ids must be unique"


def test_summaries_with_a_headline_use_it_as_title():
    doc = read_document(CORPUS / "10-ensemble-illusion.md")
    assert doc.title.startswith("The Ensemble Illusion: Why Deep Ensembles Might Just Be")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe\x00bad bytes", "not UTF-8"),
        (b"   \n\n", "empty"),
        (b"---\nid: x\ntitle: never closed\n\nbody", "never closed"),
        (b"---\nid: [unclosed\n---\nbody", "not valid YAML"),
        (b"---\n- a list\n---\nbody", "key: value"),
        (b"---\nid: only-front-matter\n---\n", "empty"),
    ],
)
def test_bad_files_are_reported_by_name_and_reason(tmp_path, content, problem):
    (tmp_path / "good.md").write_text("---\nid: good\ntitle: Good\n---\nSome text.", "utf-8")
    (tmp_path / "bad.md").write_bytes(content)
    docs, problems = load_documents([tmp_path])
    assert [d.doc_id for d in docs] == ["good"], "the good file is still read"
    assert len(problems) == 1 and problems[0].source.endswith("bad.md")
    assert problem in problems[0].message


def test_two_files_with_one_id_report_the_second_and_name_the_first(tmp_path):
    (tmp_path / "a.md").write_text("---\nid: same\n---\nFirst.", "utf-8")
    (tmp_path / "b.md").write_text("---\nid: same\n---\nSecond.", "utf-8")
    docs, problems = load_documents([tmp_path])
    assert [d.text for d in docs] == ["First."]
    assert "a.md" in problems[0].message and problems[0].source.endswith("b.md")


def test_plain_text_files_get_an_id_and_title_from_their_name(tmp_path):
    (tmp_path / "My Notes_on-OT.txt").write_text("Optimal transport moves mass.", "utf-8")
    (doc,), _ = load_documents([tmp_path])
    assert doc.doc_id == "my-notes-on-ot" and doc.title == "My notes on ot"


def test_splitter_makes_token_bounded_overlapping_passages_with_content_ids():
    from chatbot.text.tokens import count_tokens

    doc = read_document(CORPUS / "06-generative-social-choice.md")
    long = doc.__class__(doc.doc_id, doc.title, " ".join([doc.text] * 4), doc.source, {})
    passages = Splitter(chunk_tokens=120, chunk_overlap=20).split(long)
    assert len(passages) > 3
    assert all(count_tokens(p.text) <= 120 for p in passages)
    assert len({p.passage_id for p in passages}) == len(passages)
    again = Splitter(chunk_tokens=120, chunk_overlap=20).split(long)
    assert [p.passage_id for p in again] == [p.passage_id for p in passages], "ids are stable"


def test_cl100k_counts_tokens_offline():
    from chatbot.text.tokens import count_tokens

    assert count_tokens("hello world") == 2
