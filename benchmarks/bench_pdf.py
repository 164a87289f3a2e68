"""PDF reading: fidelity, reading order and speed per library, end-to-end ingest, cited pages.

Typesets two-column "proceedings" with pdflatex from the shared ICML abstracts (3 abstracts a
page, so each abstract's page is known), then for each library measures, against the typeset
text (titles and abstracts): word-level F1 (bags of lowercase words), reading order (the share
of source words that a longest common subsequence of the two word sequences keeps) and pages
per second. Then it times `chatbot ingest` of a 30-page proceedings file end to end (read,
split, embed, index; fresh data directory, empty embedding cache), ingests all the proceedings
and asks, for a sample of abstracts, "What does the paper TITLE propose?": a question is right
when the first citation is that proceedings file and its page (or page range) holds the
abstract. Run from the repository root (needs texlive, see .ci/run):

    nice -n 10 .venv/bin/python benchmarks/bench_pdf.py [--docs 20] [--out FILE]
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import emit  # noqa: E402
from chatbot.values import Citation  # noqa: E402
from tests.typeset import compile_latex, load_abstracts, proceedings_source, words  # noqa: E402

# The shared data folder beside the checkout (never copied in).
ABSTRACTS = ROOT.parent / "shared" / "data" / "icml_2020_2023_abstracts.jsonl"
PER_DOC = 30  # 10 pages of 3 abstracts


def f1(source: list[str], got: list[str]) -> float:
    """Word-level F1 of two bags of words."""
    a, b = Counter(source), Counter(got)
    common = sum((a & b).values())
    if not common:
        return 0.0
    precision, recall = common / sum(b.values()), common / sum(a.values())
    return 2 * precision * recall / (precision + recall)


def order(source: list[str], got: list[str]) -> float:
    """The share of source words kept in order by a longest common subsequence."""
    matcher = difflib.SequenceMatcher(None, source, got, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / max(1, len(source))


def read_ours(path: Path) -> str:
    from chatbot.index.pdf import read_pdf

    return "\n".join(p for page in read_pdf(path).pages for p in page)


def read_pdfium_plain(path: Path) -> str:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        return "\n".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


def read_pypdf(path: Path) -> str:
    from pypdf import PdfReader

    return "\n".join(page.extract_text() or "" for page in PdfReader(path).pages)


def read_pypdf_layout(path: Path) -> str:
    from pypdf import PdfReader

    reader = PdfReader(path)
    return "\n".join(page.extract_text(extraction_mode="layout") or "" for page in reader.pages)


READERS = {
    "pypdfium2 + chatbot.index.pdf layout (chosen)": read_ours,
    "pypdfium2 get_text_range": read_pdfium_plain,
    "pypdf extract_text": read_pypdf,
    "pypdf extract_text layout": read_pypdf_layout,
}


def build(n_docs: int, work: Path) -> list[tuple[Path, list]]:
    """`n_docs` proceedings PDFs of PER_DOC abstracts each, and where each abstract is."""
    records = load_abstracts(ABSTRACTS, n_docs * PER_DOC + 90)
    docs = []
    for d in range(n_docs):
        source, placed = proceedings_source(records[d * PER_DOC : (d + 1) * PER_DOC])
        docs.append((compile_latex(source, work / "tex", f"proceedings-{d:02d}"), placed))
    return docs


def fidelity(docs: list[tuple[Path, list]]) -> dict:
    results = {}
    pages = sum(len(placed) // 3 + (len(placed) % 3 > 0) for _, placed in docs)
    for name, reader in READERS.items():
        scores, orders, seconds = [], [], 0.0
        for path, placed in docs:
            started = time.perf_counter()
            text = reader(path)
            seconds += time.perf_counter() - started
            source = [w for a in placed for w in words(f"{a.title} {a.text}")]
            got = words(text)
            scores.append(f1(source, got))
            orders.append(order(source, got))
        results[name] = {
            "f1_mean": round(sum(scores) / len(scores), 4),
            "f1_min": round(min(scores), 4),
            "order_mean": round(sum(orders) / len(orders), 4),
            "pages_per_s": round(pages / seconds, 1),
        }
    return results


def ingest_30_pages(work: Path) -> dict:
    """Seconds to ingest one 30-page proceedings file with a fresh index and embedding cache."""
    from chatbot import Chatbot

    records = load_abstracts(ABSTRACTS, 90, skip=2000)
    source, _ = proceedings_source(records)
    pdf = compile_latex(source, work / "tex30", "thirty-pages")
    data = work / "data30"
    started, cpu = time.perf_counter(), time.process_time()
    bot = Chatbot(data_dir=data)
    report = bot.ingest([pdf], progress=False)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 2),
        # CPU seconds of this process (all its threads): what the wall time would be on one
        # idle core; the load average says how busy the machine was meanwhile.
        "cpu_seconds": round(time.process_time() - cpu, 2),
        "load_average": round(os.getloadavg()[0], 1),
        "passages": report.passages,
        "target_s": 20,
    }


def _holds(page: str | None, wanted: int) -> bool:
    low, _, high = (page or "0").partition("-")
    return int(low) <= wanted <= int(high or low)


def cited_pages(docs: list[tuple[Path, list]], work: Path, per_doc: int) -> dict:
    """Ask about a sample of abstracts; check the page the answer cites and the top passage's."""
    from chatbot import Chatbot

    folder = work / "papers"
    folder.mkdir()
    for path, _ in docs:
        shutil.copy(path, folder / path.name)
    bot = Chatbot(data_dir=work / "data")
    bot.ingest([folder], progress=False)
    asked = answered = right = exact = top_right = 0
    missed = []
    for path, placed in docs:
        step = max(1, len(placed) // per_doc)
        for a in placed[::step][:per_doc]:
            question = f"What does the paper {a.title} propose?"
            asked += 1
            top = bot.retrieve(question, k=1)[0]
            top_page = Citation(1, top.doc_id, "", top.text, 0.0, top.metadata).page
            top_right += top.doc_id == path.stem and _holds(top_page, a.page)
            answer = bot.ask(question)
            if answer.abstained:
                continue
            answered += 1
            first = answer.citations[0]
            if first.doc_id == path.stem and _holds(first.page, a.page):
                right += 1
                exact += first.page == str(a.page)
            else:
                missed.append({"title": a.title, "page": a.page, "cited": first.page})
    return {
        "asked": asked,
        "abstained": asked - answered,
        "right_page_of_answered": round(right / max(1, answered), 4),
        "single_page_of_answered": round(exact / max(1, answered), 4),
        "top_passage_right_page": round(top_right / asked, 4),
        "missed": missed[:10],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--questions-per-doc", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        docs = build(args.docs, work)
        typeset = time.perf_counter() - started
        result = {
            "machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
            "documents": len(docs),
            "pages": sum(-(-len(placed) // 3) for _, placed in docs),
            "typeset_s": round(typeset, 1),
            "fidelity": fidelity(docs),
            "ingest_30_pages": ingest_30_pages(work),
            "cited_pages": cited_pages(docs, work, args.questions_per_doc),
        }
    emit(result, args.out)


if __name__ == "__main__":
    main()
