"""`chatbot eval`: the metrics a user checks on the dev questions and on a gold-ids file."""

from __future__ import annotations

import json

import pytest

from chatbot.cli import main
from chatbot.errors import QuestionError
from chatbot.evaluate import evaluate, load_questions

from .conftest import SHARED

DEV = SHARED / "eval" / "dev_seed.jsonl"


@pytest.fixture(scope="module")
def dev_report(bot):
    if not DEV.is_file():
        pytest.skip(f"{DEV} is not there (the shared eval folder is needed)")
    return evaluate(bot, load_questions(DEV))


def test_dev_questions_find_and_cite_their_sources(dev_report):
    m = dev_report.metrics
    assert m["recall@5"] == 1.0, f"every gold summary should be in the top 5: {m}"
    assert m["mrr"] >= 0.9, m
    assert m["answers citing a right document"] == 1.0, "each answer should cite a gold summary"
    assert m["abstention recall"] == 1.0, "the bot should abstain on every unanswerable question"
    assert m["abstention precision"] == 1.0, "the bot should not abstain on answerable questions"
    assert not dev_report.warnings, (
        f"every gold phrase should be in a summary: {dev_report.warnings}"
    )


def test_latency_and_per_question_results_are_reported(dev_report):
    m = dev_report.metrics
    assert 0 < m["latency median (s)"] <= m["latency p95 (s)"], m
    by_id = {r.id: r for r in dev_report.results}
    assert by_id["d02"].gold_docs == ["transformers-associative-memory"]
    assert by_id["u01"].abstained and not by_id["u01"].gold_docs


def test_gold_ids_score_retrieval_and_flag_unknown_ids(bot, tmp_path):
    questions = tmp_path / "ids.jsonl"
    rows = [
        {
            "id": "g1",
            "type": "single",
            "question": "Which theory links Transformers to modern Hopfield networks?",
            "gold_ids": ["transformers-associative-memory"],
        },
        {
            "id": "g2",
            "type": "single",
            "question": "Why is building a perfectly sparse decision tree hard?",
            "gold_ids": ["sparse-decision-trees", "no-such-summary"],
        },
    ]
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = evaluate(bot, load_questions(questions))
    assert report.metrics["recall@10"] == pytest.approx(0.75), "1 of 1 and 1 of 2 gold ids found"
    assert report.results[0].rank == 1, report.results[0]
    assert any("no-such-summary" in w for w in report.warnings), report.warnings


def test_cli_prints_a_table_and_writes_json(settings, tmp_path, capsys):
    if not DEV.is_file():
        pytest.skip(f"{DEV} is not there")
    out = tmp_path / "dev.json"
    code = main(["--data-dir", str(settings.data_dir), "eval", str(DEV), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    for label in ("recall@1", "recall@5", "recall@10", "mrr", "citation accuracy"):
        assert label in printed, f"{label!r} missing from the table:\n{printed}"
    data = json.loads(out.read_text())
    assert data["metrics"]["abstention recall"] == 1.0
    assert len(data["questions"]) == 17 and data["questions"][0]["id"] == "d01"


@pytest.mark.slow
def test_eval_on_a_fresh_data_dir_builds_the_index_before_scoring(tmp_path, capsys):
    # The first thing a new user may run: the summaries are not ingested yet.
    if not DEV.is_file():
        pytest.skip(f"{DEV} is not there")
    out = tmp_path / "dev.json"
    code = main(["--data-dir", str(tmp_path / "fresh"), "eval", str(DEV), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0
    assert "is in no document" not in captured.err + captured.out
    metrics = json.loads(out.read_text())["metrics"]
    assert metrics["scored for retrieval"] == 14 and metrics["recall@5"] == 1.0


def test_a_malformed_question_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "question": "ok?"}\n{"id": "b", "type": "single"}\n')
    with pytest.raises(QuestionError, match="line 2"):
        load_questions(path)
