"""PDFs in, pages out: a real two-column LaTeX paper, and the files a user should be told about.

The paper is typeset once per session by pdflatex (texlive, installed by .ci/run); the edge
cases are made with fpdf2 or by hand. Everything runs through the real reader, Chroma and the
offline embeddings.
"""

from __future__ import annotations

import json
import shutil
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.pdf import NO_TEXT, read_pdf
from tests import typeset
from tests.helpers import local_server, run_cli

pytestmark = pytest.mark.skipif(
    not typeset.have_latex(),
    reason="pdflatex is not installed: `apt-get install texlive-latex-base texlive-latex-extra`",
)


@pytest.fixture(scope="session")
def paper(tmp_path_factory) -> Path:
    """The two-column test paper, typeset once."""
    return typeset.compile_latex(
        typeset.paper_source(), tmp_path_factory.mktemp("latex"), "lighthouse"
    )


@pytest.fixture(scope="session")
def paper_index(paper, tmp_path_factory) -> tuple[Path, Path]:
    """A data directory holding the paper's index, and the folder the paper was ingested from."""
    folder = tmp_path_factory.mktemp("papers")
    shutil.copy(paper, folder / "lighthouse.pdf")
    data = tmp_path_factory.mktemp("pdf-index")
    report = Chatbot(Settings.load(env_file=None, data_dir=data)).ingest([folder])
    assert report.added == 1 and not report.problems, f"the paper should be indexed: {report}"
    return data, folder


def _text(paper: Path) -> str:
    return "\n".join(p for page in read_pdf(paper).pages for p in page)


def test_title_and_authors_come_from_the_file(paper):
    read = read_pdf(paper)
    assert read.title == typeset.PAPER_TITLE, "the title should come from the PDF's metadata"
    assert read.authors == typeset.PAPER_AUTHORS


def test_text_is_clean_of_running_lines_hyphens_and_ligatures(paper):
    text = _text(paper)
    assert typeset.HEADER not in text, "the running header is left out of every page"
    pages = read_pdf(paper).pages
    assert all(not p.strip().isdigit() for page in pages for p in page), "page numbers go"
    assert "configurations" in text and "\ufb01" not in text, "the fi ligature becomes 'fi'"
    assert "bookkeeping" in text and "bookkeep-" not in text, "a word split at a line end is joined"
    assert "Characteristically" in text


def test_reading_order_follows_the_columns(paper):
    text = _text(paper)
    order = [
        text.find(typeset.PAPER_TITLE),
        text.find("We introduce lighthouse attention"),
        text.find("1 Introduction"),
        text.find("2 Method"),
        text.find(typeset.FACT_PAGE),
        text.find("References"),
    ]
    assert -1 not in order, f"every part of the paper should be found: {order}"
    assert order == sorted(order), f"title, abstract, sections and references in order: {order}"
    for part in (typeset.FACT_FOOTNOTE, typeset.FACT_CAPTION, "Lighthouse 5400"):
        assert part in text, f"footnotes, captions and tables are kept: {part!r} is missing"
    first_page = "\n".join(read_pdf(paper).pages[0])
    assert first_page.rstrip().endswith(typeset.FACT_FOOTNOTE), (
        "a footnote ends its page instead of cutting the column's last sentence from the next"
    )


def test_a_cited_passage_names_its_page_and_section(paper, paper_index):
    data, _ = paper_index
    expected = typeset.label_pages(paper)["fact"]
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    answer = bot.ask("By how much did the lighthouse mechanism reduce the memory footprint?")
    first = answer.citations[0]
    assert "73 percent" in first.quote, f"the fact should be quoted: {first.quote!r}"
    assert first.page == str(expected), f"LaTeX put the fact on page {expected}, not {first.page}"
    assert first.to_dict()["page"] == str(expected)
    assert first.section == "3 Results", f"the section heading should be kept: {first.section}"


def test_references_are_kept_but_marked(paper_index):
    data, _ = paper_index
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    passages = bot.retrieve("Attention is all you need Vaswani", k=3)
    refs = [p for p in passages if "Vaswani" in p.text]
    assert refs, "the reference list is searchable"
    assert refs[0].metadata.get("section") == "References", refs[0].metadata


def test_cli_shows_the_page(paper, paper_index):
    data, _ = paper_index
    page = typeset.label_pages(paper)["fact"]
    question = "By how much did the lighthouse mechanism reduce the memory footprint?"
    shown = run_cli(data, "ask", question)
    assert shown.returncode == 0, shown.stderr
    assert f"(lighthouse, p. {page}," in shown.stdout.split("Sources:")[1], shown.stdout
    as_json = json.loads(run_cli(data, "ask", question, "--json").stdout)
    assert as_json["citations"][0]["page"] == str(page)


def test_reingest_is_incremental(paper, tmp_path):
    folder, data = tmp_path / "papers", tmp_path / "data"
    folder.mkdir()
    shutil.copy(paper, folder / "lighthouse.pdf")
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    assert bot.ingest([folder]).added == 1
    again = bot.ingest([folder])
    assert (again.unchanged, again.passages) == (1, 0), f"nothing is embedded again: {again}"
    typeset.text_pdf(folder / "lighthouse.pdf", ["A new version about sparse lighthouses."])
    changed = bot.ingest([folder])
    assert changed.updated == 1, f"the edited PDF replaces its passages: {changed}"
    texts = " ".join(p.text for p in bot.retrieve("lighthouse", k=5))
    assert "new version" in texts and "73 percent" not in texts, "only the new text is left"
    (folder / "lighthouse.pdf").unlink()
    typeset.text_pdf(folder / "other.pdf", ["Another paper, so that the index is not empty."])
    gone = bot.ingest([folder])
    assert gone.removed == 1 and gone.added == 1, f"a removed file's document goes: {gone}"


@pytest.fixture(scope="session")
def bad_pdfs(tmp_path_factory, paper) -> dict[str, tuple[Path, str]]:
    """Each kind of PDF that is refused, with a piece of the reason the user should see."""
    folder = tmp_path_factory.mktemp("bad")
    good = typeset.text_pdf(folder / "good.pdf", ["A short good paper about lighthouses."])
    truncated = folder / "truncated.pdf"
    truncated.write_bytes(paper.read_bytes()[: paper.stat().st_size // 2])
    not_pdf = folder / "page.pdf"
    not_pdf.write_text("<!doctype html><html><body>Not found</body></html>")
    long = typeset.text_pdf(folder / "long.pdf", [f"Page {i} of a long report." for i in range(6)])
    return {
        "scan": (typeset.scanned_pdf(folder / "scan.pdf"), NO_TEXT),
        "encrypted": (typeset.text_pdf(folder / "locked.pdf", ["Secret"], "pw"), "is encrypted"),
        "truncated": (truncated, "is truncated"),
        "not a pdf": (not_pdf, "is not a PDF"),
        "bomb": (typeset.bomb_pdf(folder / "bomb.pdf"), "decompression bomb"),
        "too many pages": (long, "over the 5-page limit"),
        "good": (good, ""),
    }


def test_bad_pdfs_are_refused_with_their_reason_and_the_rest_indexed(bad_pdfs, tmp_path):
    folder = next(iter(bad_pdfs.values()))[0].parent
    result = run_cli(tmp_path / "data", "ingest", str(folder), CHATBOT_MAX_PDF_PAGES="5")
    assert result.returncode == 1, "a refused file makes the command fail"
    assert "1 added" in result.stdout, f"the good paper is indexed: {result.stdout}"
    lines = result.stderr.splitlines()
    for kind, (path, reason) in bad_pdfs.items():
        if not reason:
            continue
        said = [line for line in lines if path.name in line]
        assert said and reason in said[0], f"the {kind} PDF should be named with {reason!r}: {said}"
        assert "Traceback" not in result.stderr


def test_a_pdf_over_the_size_limit_is_refused(paper, tmp_path):
    big = tmp_path / "big.pdf"
    big.write_bytes(paper.read_bytes() + b"%" + b" " * (1 << 20) + b"\n%%EOF\n")
    result = run_cli(tmp_path / "data", "ingest", str(big), CHATBOT_MAX_FILE_MB="1")
    assert result.returncode == 1
    assert "over the 1 MB limit" in result.stderr, result.stderr


def test_links_and_arxiv_pages_are_fetched_and_indexed(tmp_path):
    pdf = typeset.text_pdf(tmp_path / "short.pdf", ["A short paper on lighthouses."]).read_bytes()
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            if self.path in ("/files/lighthouse.pdf", "/pdf/2401.01234v2"):
                body, kind, code = pdf, "application/pdf", 200
            elif self.path == "/files/page.pdf":
                body, kind, code = b"<html>login</html>", "text/html", 200
            else:
                body, kind, code = b"missing", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    with local_server(Handler) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        result = run_cli(
            tmp_path / "data",
            "ingest",
            f"{base}/files/lighthouse.pdf",
            "https://arxiv.org/abs/2401.01234v2",
            f"{base}/files/page.pdf",
            f"{base}/files/gone.pdf",
            CHATBOT_ARXIV_URL=base,
        )
    assert "/pdf/2401.01234v2" in asked, f"the arXiv page is fetched as its PDF: {asked}"
    assert "2 added" in result.stdout, f"both PDFs are indexed: {result.stdout} {result.stderr}"
    assert "is not a PDF (the server sent text/html)" in result.stderr, result.stderr
    assert "answered 404" in result.stderr, result.stderr
    assert result.returncode == 1
    kept = sorted(p.name for p in (tmp_path / "data" / "papers").iterdir())
    assert kept == ["arxiv-2401.01234v2.pdf", "lighthouse.pdf"], f"only PDFs are kept: {kept}"


def test_a_quote_on_one_side_of_a_page_break_names_that_page():
    from chatbot.values import Citation

    meta = {"page": 4, "page_end": 5, "page_break": 100}
    text = "x" * 200
    assert Citation(1, "d", "t", text, 1.0, meta, spans=((10, 60),)).page == "4"
    assert Citation(1, "d", "t", text, 1.0, meta, spans=((120, 180),)).page == "5"
    assert Citation(1, "d", "t", text, 1.0, meta, spans=((90, 150),)).page == "4-5"
    assert Citation(1, "d", "t", text, 1.0, meta).page == "4-5", "no quote: the passage's pages"
    assert Citation(1, "d", "t", text, 1.0, {}).page is None, "a document without pages has none"


def test_the_openai_compatible_api_cites_the_page(paper, paper_index):
    from openai import OpenAI

    from chatbot.serve.openai_api import routes as api
    from tests.helpers import free_port

    data, _ = paper_index
    page = str(typeset.label_pages(paper)["fact"])
    running = api.serve(
        Chatbot(Settings.load(env_file=None, data_dir=data)), port=free_port(), block=False
    )
    try:
        reply = OpenAI(
            base_url=running.url, api_key="unused", max_retries=0
        ).chat.completions.create(
            model="icml-chatbot",
            messages=[
                {"role": "user", "content": "By how much did lighthouse attention cut memory?"}
            ],
        )
    finally:
        running.close()
    cited = reply.model_extra["citations"][0]
    assert cited["page"] == page, f"the structured citation carries the page: {cited}"
    assert f"p. {page}" in reply.choices[0].message.content, "and so do the footnotes"


def test_a_reference_list_gives_way_to_the_body_that_matches_nearly_as_well():
    from chatbot.retrieve.hybrid import demote_references
    from chatbot.values import Passage

    body = Passage("b", "d", "t", "Attention for long documents.", metadata={"section": "1 Intro"})
    refs = Passage("r", "d", "t", "Attention is all you need.", metadata={"section": "References"})
    scores = demote_references({"b": 0.8, "r": 0.9}, {"b": body, "r": refs})
    assert scores["b"] > scores["r"], (
        f"the body comes first when it matches nearly as well: {scores}"
    )
    alone = demote_references({"r": 0.9, "x": 0.2}, {"r": refs})
    assert alone["r"] > alone["x"], "a reference that alone matches still comes first"


def test_a_one_column_report_reads_in_order_with_its_title_and_without_running_lines(tmp_path):
    topics = [
        "harbour lights",
        "coastal fog",
        "keeper rotas",
        "lens cleaning",
        "storm logs",
        "gulls",
    ]
    pages = [
        [
            f"Paragraph {p}.{i} of the report is about {topics.pop()} this quarter. " * 3
            for i in (1, 2)
        ]
        for p in (1, 2, 3)
    ]
    pdf = typeset.report_pdf(tmp_path / "report.pdf", "Quarterly Findings on Lighthouses", pages)
    read = read_pdf(pdf)
    assert read.title == "Quarterly Findings on Lighthouses", "without metadata: the largest text"
    text = "\n".join(p for page in read.pages for p in page)
    assert "Internal report" not in text and "Page 2" not in text, "header and footers are dropped"
    found = [text.find(f"Paragraph {p}.{i} ") for p in (1, 2, 3) for i in (1, 2)]
    assert -1 not in found and found == sorted(found), f"paragraphs in order: {found}"
    assert [len(page) for page in read.pages][1:] == [2, 2], "each page keeps its two paragraphs"


def test_uploaded_files_are_kept_under_safe_names_and_only_uploads_can_be_deleted(tmp_path):
    picked = tmp_path / "picked"
    picked.mkdir()
    good = typeset.text_pdf(picked / "good.pdf", ["Lighthouse keepers log the fog every hour."])
    scan = typeset.scanned_pdf(picked / "scan.pdf")
    other = typeset.text_pdf(tmp_path / "elsewhere.pdf", ["A paper ingested from its folder."])
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data"))
    bot.ingest([other])
    report, kept = bot.add_files([good, scan], names=["../../My paper (v2).pdf", "scan.pdf"])
    assert [k.name for k in kept] == ["My-paper-v2.pdf"], f"a safe name, in uploads/: {kept}"
    assert kept[0].parent == bot.uploads_dir and kept[0].exists()
    assert not (bot.uploads_dir / "scan.pdf").exists(), "a refused upload is not kept"
    assert [p.message for p in report.problems] == [NO_TEXT]
    assert bot.delete_upload("elsewhere") is False, "a document not uploaded is not deleted"
    assert bot.delete_upload("my-paper-v2") is True
    assert not kept[0].exists(), "the uploaded file goes with its document"
    assert sorted(d.doc_id for d in bot.documents()) == ["elsewhere"]
    served = bot.pdf_files()
    assert bot.uploads_dir.resolve() in served and other.resolve() in served
