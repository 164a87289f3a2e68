"""The ingest plan from plain values: what is stored against what was read (no Chroma, no model).

`plan` never looks at the disk: the files that still exist are passed in as `present`.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from chatbot.index.embeddings.minilm import MiniLMEmbeddings
from chatbot.index.embeddings.process import EmbeddingProcess
from chatbot.index.store import InProcessEmbedder, StoredDoc
from chatbot.index.sync import BATCH, embedder_for, plan
from chatbot.values import Document

CORPUS = PurePosixPath("/data/corpus")


def _doc(doc_id: str, source: str | PurePosixPath, text: str = "") -> Document:
    return Document(doc_id, doc_id.title(), text or f"The text of {doc_id}.", str(source))


def _stored(*docs: Document, complete: bool = True) -> dict[str, StoredDoc]:
    return {
        d.doc_id: StoredDoc(d.doc_id, frozenset({d.source}), frozenset({d.fingerprint}), complete)
        for d in docs
    }


def _ids(docs: list[Document]) -> list[str]:
    return [d.doc_id for d in docs]


def test_a_new_an_edited_and_an_unchanged_document():
    a, b = _doc("a", CORPUS / "a.md"), _doc("b", CORPUS / "b.md")
    edited_b = _doc("b", CORPUS / "b.md", "The text of b, edited.")
    c = _doc("c", CORPUS / "c.md")
    got = plan(_stored(a, b), [a, edited_b, c], [CORPUS])
    assert _ids(got.added) == ["c"], "a document the store lacks is added"
    assert _ids(got.updated) == ["b"], "an edited document is written again"
    assert got.unchanged == ("a",), "an unchanged document is not embedded again"
    assert got.removed == () and got.moved == () and got.refused == ()
    assert [d.doc_id for d, _ in got.writes] == ["b", "c"], "written in the order read"


def test_a_document_cut_short_by_an_interruption_is_written_again():
    a = _doc("a", CORPUS / "a.md")
    got = plan(_stored(a, complete=False), [a], [CORPUS])
    assert _ids(got.updated) == ["a"] and got.unchanged == ()


def test_a_removed_file_loses_its_document_and_a_file_that_failed_to_parse_keeps_it():
    a, b = _doc("a", CORPUS / "a.md"), _doc("b", CORPUS / "b.md")
    assert plan(_stored(a, b), [a], [CORPUS]).removed == ("b",), "b.md is gone"
    kept = plan(_stored(a, b), [a], [CORPUS], failed={str(CORPUS / "b.md")})
    assert kept.removed == (), "a typo in b.md must not drop its passages"


def test_a_record_whose_line_failed_keeps_its_passages():
    file = CORPUS / "papers.jsonl"
    r1, r2 = _doc("r1", f"{file}#r1"), _doc("r2", f"{file}#r2")
    assert plan(_stored(r1, r2), [r1], [CORPUS]).removed == ("r2",)
    assert plan(_stored(r1, r2), [r1], [CORPUS], failed={f"{file}#r2"}).removed == ()


def test_ingesting_a_same_named_folder_elsewhere_removes_nothing():
    z = _doc("z", "/home/ann/A/notes/z.md")
    y = _doc("y", "/home/ann/B/notes/y.md")
    got = plan(_stored(z), [y], [PurePosixPath("/home/ann/B/notes")])
    assert got.removed == (), "B/notes/ holds no z.md, but A/notes/z.md was not ingested"
    assert _ids(got.added) == ["y"]


def test_a_second_file_claiming_a_stored_id_is_refused_naming_both():
    first = _doc("x", CORPUS / "first.md")
    second = _doc("x", "/data/other/second.md", "Another text under the same id.")
    got = plan(_stored(first), [second], [PurePosixPath("/data/other")], present={first.source})
    assert got.writes == () and got.removed == ()
    (problem,) = got.refused
    assert problem.source == second.source
    assert first.source in problem.message and "--replace" in problem.message, problem.message


def test_replace_moves_the_id_to_the_new_file():
    first = _doc("x", CORPUS / "first.md")
    second = _doc("x", "/data/other/second.md", "Another text under the same id.")
    got = plan(
        _stored(first),
        [second],
        [PurePosixPath("/data/other")],
        present={first.source},
        replace=True,
    )
    assert got.refused == () and _ids(got.updated) == ["x"]


def test_a_renamed_file_takes_its_id_along():
    old = _doc("x", CORPUS / "old-name.md")
    new = _doc("x", CORPUS / "new-name.md")
    # old-name.md is not in `present`: it is gone from the disk.
    got = plan(_stored(old), [new], [CORPUS])
    assert got.refused == () and got.writes == ()
    assert got.unchanged == ("x",) and got.moved == (("x", new.source),)


def test_a_refused_file_keeps_the_document_it_held():
    # b.md held "b"; it now claims "x", which other/x.md still holds: b.md is refused, and so
    # its old document "b" must not be removed as if b.md were gone.
    x, b = _doc("x", "/data/other/x.md"), _doc("b", CORPUS / "b.md")
    b_claims_x = _doc("x", CORPUS / "b.md", "b.md now says it is x.")
    got = plan(_stored(x, b), [b_claims_x], [CORPUS], present={x.source})
    assert [p.source for p in got.refused] == [b.source]
    assert got.removed == () and got.writes == ()


def test_a_relative_source_of_an_older_index_is_kept_then_made_absolute():
    legacy = StoredDoc("z", frozenset({"notes/z.md"}), frozenset({_doc("z", "").fingerprint}), True)
    elsewhere = plan({"z": legacy}, [], [PurePosixPath("/home/ann/notes")])
    assert elsewhere.removed == (), "a relative source's folder is unknown: never removed"
    z = _doc("z", "/home/ann/notes/z.md")
    back = plan({"z": legacy}, [z], [PurePosixPath("/home/ann/notes")])
    assert back.unchanged == ("z",) and back.moved == (("z", z.source),)


def test_a_relative_source_naming_another_file_is_a_collision_named_as_relative():
    legacy = StoredDoc("z", frozenset({"notes/z.md"}), frozenset({"f"}), True)
    other = _doc("z", "/home/ann/drafts/other.md")
    (problem,) = plan({"z": legacy}, [other], [PurePosixPath("/home/ann/drafts")]).refused
    assert "notes/z.md" in problem.message and "folder is unknown" in problem.message


def test_the_child_process_embeds_only_a_large_offline_ingest():
    model = MiniLMEmbeddings()
    big = embedder_for(model, 2 * BATCH)
    try:
        assert isinstance(big, EmbeddingProcess)
        assert big.pid is None, "no process starts before a batch needs embedding"
    finally:
        big.close()
    assert isinstance(embedder_for(model, 2 * BATCH - 1), InProcessEmbedder)
