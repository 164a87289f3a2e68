"""Real PDFs from known text: LaTeX (pdflatex from texlive) for papers and proceedings, fpdf2 for
the edge cases (a scan without a text layer, an encrypted file, a decompression bomb).

The tests and benchmarks/bench_pdf.py both build their documents here, so what the benchmark
measures is what the tests check.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

HEADER = "Proceedings of the Workshop on Typeset Test Papers 2025"
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def have_latex() -> bool:
    """True when pdflatex and the packages the papers use are installed."""
    return shutil.which("pdflatex") is not None and shutil.which("kpsewhich") is not None


def escape(text: str) -> str:
    """Plain text as LaTeX source that prints it verbatim."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def words(text: str) -> list[str]:
    """Lowercase words and numbers: what fidelity is measured on, punctuation aside."""
    return re.findall(r"[a-z0-9]+", text.lower())


def label_pages(pdf: Path) -> dict[str, int]:
    """The page of each \\label in a compiled document, as LaTeX itself recorded it (.aux)."""
    aux = pdf.with_suffix(".aux").read_text(errors="replace")
    return {m[1]: int(m[2]) for m in re.finditer(r"\\newlabel\{(\w+)\}\{\{[^}]*\}\{(\d+)\}", aux)}


def compile_latex(source: str, out: Path, name: str) -> Path:
    """Typeset `source` with pdflatex into `out/name.pdf` (run twice: headers need the pages)."""
    out.mkdir(parents=True, exist_ok=True)
    tex = out / f"{name}.tex"
    tex.write_text(source)
    for _ in range(2):
        done = subprocess.run(
            ["pdflatex", "-interaction=batchmode", "-halt-on-error", tex.name],
            cwd=out,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            log = (out / f"{name}.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"pdflatex failed on {tex}:\n{log}")
    return out / f"{name}.pdf"


_PREAMBLE = r"""\documentclass[10pt,twocolumn]{article}
\usepackage[margin=2cm]{geometry}
\usepackage{fancyhdr}
\usepackage[pdftitle={%(title)s},pdfauthor={%(authors)s}]{hyperref}
\pagestyle{fancy}
\fancyhf{}
\fancyhead[L]{\small %(header)s}
\fancyfoot[C]{\thepage}
\renewcommand{\headrulewidth}{0pt}
\begin{document}
"""


# The test paper: every part a real paper has, with the sentences the tests look for.
PAPER_TITLE = "Sparse Lighthouse Attention for Long Documents"
PAPER_AUTHORS = "Ada Lovelace, Alan Turing"
FACT_PAGE = (
    "The lighthouse mechanism reduced the memory footprint of attention by 73 percent on "
    "documents of one million tokens."
)
FACT_FOOTNOTE = "The code was written in the autumn of 2024 by the second author."
FACT_CAPTION = "Figure 1: Throughput of lighthouse attention against dense attention."
REFERENCE = "Vaswani, A. et al. Attention is all you need. In Advances in Neural Information"


_FILLER = (
    "Transformers process sequences with attention, whose cost grows with the square of the "
    "sequence length. Characteristically, implementations materialise intermediate "
    "representations, and the incomprehensibility of their internal bookkeeping makes "
    "optimisation counterintuitive. We nevertheless demonstrate straightforward "
    "improvements that generalise across architectures and hardware configurations. "
)


def paper_source() -> str:
    """LaTeX for a two-column paper: running header, sections, a footnote, a figure with its
    caption, a table, hyphenated words and references."""
    filler = escape(_FILLER) * 3
    body = rf"""
\title{{{PAPER_TITLE}}}
\author{{Ada Lovelace \and Alan Turing}}
\date{{}}
\maketitle
\begin{{abstract}}
We introduce lighthouse attention, a sparse attention pattern for long documents.
{escape(_FILLER)}
\end{{abstract}}
\section{{Introduction}}
{filler}Long documents need long contexts\footnote{{{escape(FACT_FOOTNOTE)}}}. {filler}
\begin{{figure}}[t]
\centering\fbox{{\rule{{0pt}}{{2cm}}\rule{{3cm}}{{0pt}}}}
\caption{{{escape(FACT_CAPTION.split(": ", 1)[1])}}}
\end{{figure}}
{filler}{filler}
\section{{Method}}
{filler}{filler}
\begin{{table}}[h]
\centering
\begin{{tabular}}{{lr}}
Model & Tokens per second \\
\hline
Dense & 1200 \\
Lighthouse & 5400 \\
\end{{tabular}}
\caption{{Speed of the two attention patterns.}}
\end{{table}}
{filler}{filler}{filler}
\section{{Results}}
\clearpage
{escape(FACT_PAGE)}\label{{fact}} {filler}{filler}
\section{{Conclusion}}
{filler}
\begin{{thebibliography}}{{9}}
\bibitem{{v}} {escape(REFERENCE)} Processing Systems, 2017.
\bibitem{{b}} Bahdanau, D., Cho, K. and Bengio, Y. Neural machine translation by jointly
learning to align and translate. In International Conference on Learning Representations, 2015.
\end{{thebibliography}}
\end{{document}}
"""
    head = _PREAMBLE % {"title": PAPER_TITLE, "authors": PAPER_AUTHORS, "header": HEADER}
    return head + body


@dataclass(frozen=True)
class Abstract:
    """An abstract as typeset: its id, title, plain text and the page it is printed on."""

    id: str
    title: str
    text: str
    page: int


def plain(latex: str) -> str:
    """An abstract's LaTeX markup reduced to plain text: math and commands dropped."""
    text = re.sub(r"\$[^$]*\$", " ", latex)
    text = re.sub(r"\\[a-zA-Z]+\*?", " ", text)
    text = re.sub(r"[{}\\~^_$&%#]", " ", text)
    return " ".join(text.split())


def load_abstracts(path: Path, n: int, skip: int = 0) -> list[dict]:
    """`n` records of the abstracts file whose text is plain ASCII once markup is dropped."""
    out = []
    with path.open() as f:
        for line in f:
            rec = json.loads(line)
            text, title = plain(rec["abstract"]), plain(rec["title"])
            if not text.isascii() or not title.isascii() or not 60 <= len(text.split()) <= 260:
                continue
            if skip:
                skip -= 1
                continue
            out.append({**rec, "abstract": text, "title": title})
            if len(out) == n:
                break
    return out


def proceedings_source(records: list[dict], per_page: int = 3) -> tuple[str, list[Abstract]]:
    """LaTeX for two-column proceedings, `per_page` abstracts a page, and where each one is."""
    parts, placed = [], []
    for i, rec in enumerate(records):
        if i and i % per_page == 0:
            parts.append(r"\clearpage")
        parts.append(rf"\section*{{{escape(rec['title'])}}}" + "\n" + escape(rec["abstract"]))
        placed.append(Abstract(rec["id"], rec["title"], rec["abstract"], i // per_page + 1))
    head = _PREAMBLE % {"title": "Proceedings", "authors": "", "header": HEADER}
    return head + "\n\n".join(parts) + "\n\\end{document}\n", placed


def scanned_pdf(path: Path) -> Path:
    """A one-page PDF holding only an image of text: what a scanner makes."""
    from fpdf import FPDF
    from PIL import Image, ImageDraw

    image = Image.new("L", (800, 300), 255)
    ImageDraw.Draw(image).text((20, 20), "A scanned page: only pixels, no text layer.", fill=0)
    pdf = FPDF()
    pdf.add_page()
    pdf.image(image, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


def text_pdf(path: Path, pages: list[str], password: str | None = None) -> Path:
    """A simple PDF with one paragraph a page; encrypted when `password` is given."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    if password:
        pdf.set_encryption(owner_password=password + "-owner", user_password=password)
    pdf.output(str(path))
    return path


def bomb_pdf(path: Path, inflated_mb: int = 600) -> Path:
    """A small valid PDF whose one page's content stream inflates to `inflated_mb` MB."""
    packer = zlib.compressobj(9)
    chunk = b" " * (1 << 20)
    stream = b"".join(packer.compress(chunk) for _ in range(inflated_mb)) + packer.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def report_pdf(path: Path, title: str, pages: list[list[str]]) -> Path:
    """A one-column report without metadata: a large title, a running header, "Page N" footers,
    and the given paragraphs on each page."""
    from fpdf import FPDF

    class Report(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", size=8)
            self.cell(0, 6, "Internal report - do not circulate", align="R")
            self.ln(10)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", size=8)
            self.cell(0, 10, f"Page {self.page_no()}", align="C")

    pdf = Report()
    for n, paragraphs in enumerate(pages):
        pdf.add_page()
        if n == 0:
            pdf.set_font("Helvetica", "B", 22)
            pdf.multi_cell(0, 10, title)
            pdf.ln(4)
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph)
            pdf.ln(4)
    pdf.output(str(path))
    return path
