"""Authors, venue and year of JSON Lines records: searchable, shown with citations, and read from
the question ("papers by X", "X and colleagues", "in 2021", "at ICLR") to narrow the search.

The dozen records are written here; the collection is real (Chroma, MiniLM embeddings, BM25).
"""

from __future__ import annotations

import json

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.records import Fields
from chatbot.serve.cli import main

RECORDS = [
    (
        "r01",
        "ICML",
        2020,
        ["Amara Okonkwo", "Lukas Brenner"],
        "Sparse attention for long documents",
        "We introduce a sparse attention pattern that lets transformers read documents of a "
        "hundred "
        "thousand tokens. Each token attends to a local window and to a few global summary tokens, "
        "which cuts memory from quadratic to linear in the length.",
    ),
    (
        "r02",
        "ICML",
        2021,
        ["Amara Okonkwo", "Priya Raman"],
        "Calibrated uncertainty for molecules",
        "We study uncertainty estimates of graph neural networks that predict molecular "
        "properties. "
        "A temperature fitted per scaffold makes the predicted intervals cover the true values at "
        "the stated rate on held-out scaffolds.",
    ),
    (
        "r03",
        "ICML",
        2021,
        ["Tomasz Wielgus"],
        "Robust clustering with outliers",
        "Clustering with outliers is made fast by a layered sampling scheme: a coreset that keeps "
        "the points far from every center, so k-means with outliers runs in near-linear time.",
    ),
    (
        "r04",
        "ICML",
        2022,
        ["Helena Marsh", "Tomasz Wielgus"],
        "Offline reinforcement learning",
        "We constrain an offline reinforcement learning policy to the support of the logged data "
        "with a density model of the behaviour policy, which avoids overestimated values of "
        "actions never tried.",
    ),
    (
        "r05",
        "ICLR",
        2022,
        ["Jun Takeda"],
        "Diffusion models for audio",
        "A diffusion model generates speech waveforms directly, denoising in a learned latent "
        "space; it matches autoregressive vocoders in quality while sampling forty times faster.",
    ),
    (
        "r06",
        "ICML",
        2023,
        ["Helena Marsh"],
        "Causal discovery from interventions",
        "We learn causal graphs from a mix of observational and interventional data, choosing the "
        "next intervention to maximise the expected information about the edges.",
    ),
    (
        "r07",
        "ICLR",
        2021,
        ["Samuel Achterberg", "Jun Takeda"],
        "Federated learning with drift",
        "Clients in federated learning see different data; a control variate on each client "
        "corrects the drift of its local updates and speeds up convergence.",
    ),
    (
        "r08",
        "ICML",
        2020,
        ["Ines Duarte"],
        "Privacy accounting for SGD",
        "Differentially private stochastic gradient descent is analysed with a tighter accountant "
        "that composes the privacy loss of subsampled Gaussian noise over many steps.",
    ),
    (
        "r09",
        "ICML",
        2023,
        ["Ines Duarte", "Priya Raman"],
        "Watermarks for language models",
        "A watermark hidden in the choice of tokens lets anyone with the key detect text generated "
        "by a language model, while readers cannot tell it from unmarked text.",
    ),
    (
        "r10",
        "ICLR",
        2023,
        ["Lukas Brenner"],
        "Pruning at initialization",
        "Pruning a network before training keeps its accuracy if the kept weights preserve the "
        "gradient flow; we give a criterion computed from one batch.",
    ),
    (
        "r11",
        "ICML",
        2022,
        ["Wen Li", "Amara Okonkwo"],
        "Tabular foundation models",
        "A transformer pretrained on synthetic tables predicts labels of new tables in one forward "
        "pass, without gradient steps, and beats tuned gradient-boosted trees on small datasets.",
    ),
    (
        "r12",
        "ICML",
        2021,
        ["Priya Raman"],
        "Contrastive learning of sentence embeddings",
        "Sentence embeddings are trained contrastively with dropout as the only augmentation: the "
        "same sentence passed twice is a positive pair.",
    ),
]


@pytest.fixture(scope="module")
def bot(tmp_path_factory) -> Chatbot:
    folder = tmp_path_factory.mktemp("metadata")
    path = folder / "papers.jsonl"
    lines = [
        json.dumps(dict(zip(("id", "venue", "year", "authors", "title", "abstract"), r)))
        for r in RECORDS
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = Settings.load(env_file=None, data_dir=folder / "data", collection="papers")
    bot = Chatbot(settings)
    report = bot.ingest([path], fields=Fields(text="abstract"))
    assert report.added == len(RECORDS), f"every record should be indexed: {report}"
    return bot


def _docs(passages) -> list[str]:
    return list(dict.fromkeys(p.doc_id for p in passages))


def _by(author: str) -> set[str]:
    return {r[0] for r in RECORDS if author in r[3]}


def test_a_question_naming_an_author_and_colleagues_cites_that_authors_paper(bot):
    answer = bot.ask("What did Duarte and colleagues propose?")

    assert not answer.abstained, f"the author's papers answer it: {answer.text}"
    cited = {c.doc_id for c in answer.citations}
    assert cited and cited <= _by("Ines Duarte"), f"only Duarte's papers may be cited: {cited}"


def test_a_question_asking_who_wrote_a_paper_is_answered_when_its_authors_are_listed(bot):
    answer = bot.ask("Who wrote the paper on detecting text generated by a language model?")

    assert not answer.abstained, f"the record lists its authors: {answer.text}"
    assert answer.citations[0].doc_id == "r09", answer.citations
    assert answer.citations[0].metadata["authors"] == "Ines Duarte, Priya Raman"


@pytest.mark.parametrize(
    "question",
    ["What did Ines Duarte et al. write about watermarks?", "Duarte's paper on watermarks"],
)
def test_a_full_name_or_et_al_finds_that_authors_paper_on_the_topic(bot, question):
    docs = _docs(bot.retrieve(question))
    assert docs[0] == "r09", f"Duarte's watermark paper should come first: {docs}"
    assert set(docs) <= _by("Ines Duarte"), f"only Duarte's papers: {docs}"


def test_papers_by_an_author_in_a_year_narrow_the_search(bot):
    assert _docs(bot.retrieve("papers by Okonkwo in 2021")) == ["r02"]
    docs = _docs(bot.retrieve("Which papers by Okonkwo use transformers?"))
    assert set(docs) == _by("Amara Okonkwo"), f"every Okonkwo paper, no other: {docs}"
    assert docs[0] in {"r01", "r11"}, f"a transformer paper of Okonkwo's comes first: {docs}"


def test_a_venue_and_a_year_in_the_question_narrow_the_search(bot):
    iclr = {r[0] for r in RECORDS if r[1] == "ICLR"}
    docs = _docs(bot.retrieve("Which ICLR papers study learning?", k=10))
    assert docs and set(docs) <= iclr, f"only ICLR papers: {docs}"
    docs = _docs(bot.retrieve("What was published since 2023 on language models?", k=10))
    assert docs and {r[2] for r in RECORDS if r[0] in docs} == {2023}, docs
    docs = _docs(bot.retrieve("Papers from 2020 to 2021 about transformers", k=10))
    assert docs and {r[2] for r in RECORDS if r[0] in docs} <= {2020, 2021}, docs


@pytest.mark.parametrize(
    "question, expected",
    [
        # An author the collection does not hold: the topic decides.
        ("What did Zimmermann and colleagues propose about watermarks?", "r09"),
        # Named author, but no paper in that year or at that venue: the author's papers stay.
        ("papers by Wielgus in 2019 on clustering", "r03"),
        ("papers by Wielgus at ICLR on clustering", "r03"),
        # "by" followed by an ordinary word is no author.
        ("How is memory cut by Sparse attention?", "r01"),
    ],
)
def test_a_name_year_or_venue_the_collection_lacks_does_not_filter_everything_away(
    bot, question, expected
):
    docs = _docs(bot.retrieve(question))
    assert docs[0] == expected, f"{question!r} should find {expected} first: {docs}"


def test_authors_are_searchable_by_the_keyword_side(bot):
    index = bot.retriever.keyword_index()
    doc_of = dict(zip(index.ids, index.doc_ids, strict=True))
    found = {doc_of[i] for i, _ in index.search("Takeda", 10)}
    assert found == _by("Jun Takeda"), f"the name alone finds Takeda's papers: {found}"
    passages = bot.retriever.search("Takeda", narrow=False).passages
    assert passages[0].doc_id in _by("Jun Takeda"), "the hybrid ranks them first too"
    assert "Takeda" not in passages[0].text, "the name is not written into the passage text"


def test_citations_carry_authors_year_and_venue(bot):
    answer = bot.ask("How can text generated by a language model be detected?")
    first = answer.citations[0]
    assert first.doc_id == "r09", answer.citations
    assert first.metadata["authors"] == "Ines Duarte, Priya Raman"
    assert first.metadata["year"] == 2023 and first.metadata["venue"] == "ICML"


def test_ask_prints_the_authors_venue_and_year_after_the_title(bot, capsys):
    settings = bot.settings
    code = main(
        [
            "--data-dir",
            str(settings.data_dir),
            "--collection",
            "papers",
            "ask",
            "How can text generated by a language model be detected?",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Watermarks for language models — Ines Duarte, Priya Raman · ICML 2023" in out, out


def test_ask_json_gives_each_citation_its_authors_year_and_venue(bot, capsys):
    settings = bot.settings
    question = "How can text generated by a language model be detected?"
    args = ["--data-dir", str(settings.data_dir), "--collection", "papers", "ask", question]
    assert main([*args, "--json"]) == 0
    cited = json.loads(capsys.readouterr().out)["citations"][0]
    assert cited["doc_id"] == "r09", cited
    got = {k: cited[k] for k in ("authors", "year", "venue")}
    assert got == {"authors": "Ines Duarte, Priya Raman", "year": 2023, "venue": "ICML"}, got


def test_a_source_card_shows_authors_venue_and_year_under_its_title():
    from chatbot.serve.web import view as webview

    base = {"n": 1, "doc_id": "d", "title": "Watermarks <b>", "text": "x", "score": 0.5}
    meta = {"authors": "Ines Duarte, Priya <Raman>", "year": 2023, "venue": "ICML"}
    card = webview.sources_html([{"question": "q", "citations": [{**base, **meta}]}])
    head, rest = card.split("<div class='source-head'>", 1)[1].split("</div>", 1)
    assert "Watermarks &lt;b&gt;" in head, "the title heads the card"
    assert rest.startswith(
        "<div class='meta byline'>Ines Duarte, Priya &lt;Raman&gt; · ICML 2023"
    ), f"the byline follows the title, escaped: {rest[:200]}"
    plain = webview.sources_html([{"question": "q", "citations": [base]}])
    assert "byline" not in plain, "a document without authors, venue or year has no byline"
    only_year = webview.sources_html([{"question": "q", "citations": [{**base, "year": 2021}]}])
    assert "<div class='meta byline'>2021</div>" in only_year, only_year


def test_retrieved_cards_carry_authors_before_the_answer_is_written(bot):
    from chatbot.serve.web import view as webview

    found = bot.retrieve("How can text generated by a language model be detected?")
    turn = {"question": "q", "pending": True, "retrieved": webview.passage_dicts(found)}
    page = webview.sources_html([turn])
    assert "Ines Duarte, Priya Raman · ICML 2023" in page, page[:500]


def test_the_seed_summaries_have_no_facets_and_are_never_narrowed(settings):
    bot = Chatbot(settings)
    assert not bot.retriever.keyword_index().facets.get("authors"), "the summaries name no one"
    for question in ("What did Hopfield and colleagues show?", "Which papers from 2023 by Bach?"):
        assert bot.retriever.narrowing(question) is None, question
        assert not bot.retriever.search(question).narrowed


def test_a_keyword_index_saved_in_the_older_format_is_rebuilt_from_the_store(data_dir, caplog):
    from chatbot.index.bm25 import FORMAT

    folder = data_dir / "bm25" / "summaries"
    meta = json.loads((folder / "ids.json").read_text())
    for key in ("format", "doc_ids", "facets"):  # what an index of the older format lacks
        meta.pop(key, None)
    (folder / "ids.json").write_text(json.dumps(meta))

    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    passages = bot.retrieve("What is a combinatorial auction?")

    assert passages[0].doc_id == "combinatorial-auctions", [p.doc_id for p in passages]
    assert json.loads((folder / "ids.json").read_text())["format"] == FORMAT, "saved anew"
    assert not [r for r in caplog.records if r.levelname == "WARNING"], "a silent rebuild"


def test_a_surname_that_is_a_common_word_needs_et_al_or_colleagues():
    from chatbot.retrieve.facets import Facets, facets

    held = Facets.from_json(facets([("d1", {"authors": "Deepesh Data, Ann Fisher"})]))
    common = {"Data", "Fisher"}.__contains__

    assert held.narrowing("Learning metrics from Data", common) is None
    assert held.narrowing("Estimation by Fisher information", common) is None
    found = held.narrowing("What did Fisher and colleagues show?", common)
    assert found is not None and found.doc_ids == {"d1"}
    assert held.narrowing("Learning metrics from Data") is not None, "a rare word is a name"


def test_the_model_is_shown_who_wrote_each_passage():
    from chatbot.answer.prompts import format_passages
    from chatbot.values import Passage

    meta = {"authors": "Ines Duarte, Priya Raman", "venue": "ICML", "year": 2023}
    block = format_passages([Passage("p", "r09", "Watermarks", "A watermark.", 0.0, meta)])
    assert 'authors="Ines Duarte, Priya Raman" venue="ICML" year="2023"' in block, block
    assert 'title="Watermarks">' in format_passages([Passage("p", "d", "Watermarks", "A.")])


def test_the_user_is_told_how_the_question_narrowed_the_search(bot, capsys):
    answer = bot.ask("What did Okonkwo and colleagues publish in 2021?")
    assert any("Okonkwo" in n for n in answer.narrowed), answer.narrowed
    assert any("2021" in n for n in answer.narrowed), answer.narrowed
    assert answer.to_dict()["narrowed"] == list(answer.narrowed)
    assert not bot.ask("How can generated text be detected?").narrowed

    settings = bot.settings
    args = ["--data-dir", str(settings.data_dir), "--collection", "papers", "ask"]
    assert main([*args, "What did Okonkwo and colleagues publish in 2021?"]) == 0
    out = capsys.readouterr().out
    assert "Searched only:" in out and "Okonkwo" in out.split("Searched only:")[1], out
    assert main([*args, "How can generated text be detected?"]) == 0
    assert "Searched only" not in capsys.readouterr().out


def test_the_sources_panel_says_how_the_question_narrowed_the_search():
    from chatbot.serve.web import view as webview

    turn = {"question": "q", "citations": [], "narrowed": ["authors: Amara <Okonkwo>"]}
    panel = webview.sources_html([turn])
    assert "Searched only: authors: Amara &lt;Okonkwo&gt;" in panel, panel
    assert "Searched only" not in webview.sources_html([{"question": "q", "citations": []}])
