"""Incremental ingestion: only new or edited documents are embedded; vanished ones are removed."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Document, Passage, Problem, Splitter
from .records import source_file
from .store import Store, embed_text

# Passages embedded, cached and written to Chroma at a time. Against batches of 64, 256 cut what
# ingest adds to the model's own time from 15-19% to 9-13% on the 5,365 ICML abstracts: Chroma's
# upsert costs a quarter less per passage, and embedding pays its per-call costs a quarter as
# often (docs/benchmarks.md). The progress bar moves, and the cache grows, once a batch.
BATCH = 256


@dataclass
class IngestReport:
    """What an ingest did."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    passages: int = 0  # written to the store
    embedded: int = 0  # of those, computed by the model (the rest came from the cache)
    problems: list[Problem] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the index content changed."""
        return bool(self.added or self.updated or self.removed)

    def __str__(self) -> str:
        line = (
            f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.removed} removed ({self.passages} passages "
        )
        if self.embedded == self.passages:
            line += "embedded)"
        else:
            line += f"written, {self.embedded} embedded, the rest from the cache)"
        if self.problems:
            line += f"; {len(self.problems)} file(s) skipped"
        return line


def _metadata(doc: Document, passage_index: int, n: int) -> dict[str, Any]:
    meta = dict(doc.metadata)
    meta.update(
        doc_id=doc.doc_id,
        title=doc.title,
        fingerprint=doc.fingerprint,
        n_passages=n,
        source=doc.source,
        chunk=passage_index,
    )
    return meta


def _covered(source: str, roots: list[Path]) -> bool:
    """True when `source` lies in one of the ingested folders (or is one of the ingested files)."""
    path = Path(source_file(source)).resolve()
    return any(path == r or r in path.parents for r in roots)


def sync(
    store: Store,
    splitter: Splitter,
    docs: list[Document],
    roots: Iterable[str | Path],
    problems: list[Problem] | None = None,
    progress: bool | None = None,
) -> IngestReport:
    """Make the store hold exactly `docs` for the files under `roots`; embed only what changed."""
    report = IngestReport(problems=list(problems or []))
    root_paths = [Path(r).resolve() for r in roots]
    stored = store.documents()
    todo: list[tuple[Document, bool]] = []
    for doc in docs:
        have = stored.get(doc.doc_id)
        if have and have.complete and have.fingerprints == {doc.fingerprint}:
            report.unchanged += 1
        else:
            todo.append((doc, have is not None))
    seen = {d.doc_id for d in docs}
    # A file that failed to parse keeps its old passages: nothing is lost because of a typo.
    # (A record of a JSON Lines file keeps its passages when its line, or the file, failed.)
    failed = {str(Path(p.source).resolve()) for p in report.problems}
    gone = [
        s.doc_id
        for s in stored.values()
        if s.doc_id not in seen
        and _covered(s.source, root_paths)
        and str(Path(s.source).resolve()) not in failed
        and str(Path(source_file(s.source)).resolve()) not in failed
    ]
    if not todo and not gone:
        return report
    store.bump_revision()
    # Documents are split batch by batch, as they are reached, so splitting overlaps with
    # embedding and the bar appears at once (splitting the 5,365 ICML abstracts took 2.5 s); until
    # then the number of passages is estimated from the length of the texts.
    size = sum(_estimated_passages(doc, splitter) for doc, _ in todo)
    bar = _progress_bar(len(todo), size, progress)
    # A large ingest with the offline model embeds in a child process, one batch ahead of the
    # writes; the child starts at the first passage the cache does not hold.
    spawn = getattr(store.embeddings, "process", None) if size >= 2 * BATCH else None
    child = None

    def submit(texts: list[str]) -> Future:
        nonlocal child
        if child is None:
            child = spawn()
        return child.submit(texts)

    batch: list[tuple[Passage, dict[str, Any]]] = []
    pending: list[tuple[Document, bool]] = []
    started: deque[tuple[list, list, Callable[[], Any]]] = deque()

    def start() -> None:
        texts = [embed_text(p) for p, _ in batch]
        started.append((batch[:], pending[:], store.cache.start(texts, spawn and submit)))
        batch.clear()
        pending.clear()

    def finish() -> None:
        items, docs, vectors = started.popleft()
        computed = store.cache.computed
        passages = [p for p, _ in items]
        store.write(passages, vectors(), [m for _, m in items])
        report.embedded += store.cache.computed - computed
        bar.update(len(docs))
        report.passages += len(passages)
        # Old versions go only after the new passages are in: an interrupted ingest leaves
        # both, never neither, and the next run finishes the swap.
        for doc, existed in docs:
            if existed:
                store.delete_doc(doc.doc_id, keep_fingerprint=doc.fingerprint)
                report.updated += 1
            else:
                report.added += 1

    done = False
    try:
        for doc, existed in todo:
            passages = splitter.split(doc)
            batch.extend((p, _metadata(doc, i, len(passages))) for i, p in enumerate(passages))
            pending.append((doc, existed))
            if len(batch) >= BATCH:
                start()
                if len(started) > 1:
                    finish()
        if batch or pending:
            start()
        while started:
            finish()
        done = True
    finally:
        if child is not None:
            child.close(kill=not done)
        bar.close()
    for doc_id in gone:
        store.delete_doc(doc_id)
        report.removed += 1
    return report


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _estimated_passages(doc: Document, splitter: Splitter) -> int:
    # About four characters a token in English; each passage after the first repeats the overlap.
    step = 4 * max(1, splitter.chunk_tokens - splitter.chunk_overlap)
    return max(1, -(-len(doc.text) // step))


def _progress_bar(docs: int, passages: int, progress: bool | None):
    # Small ingests finish before a bar is worth drawing; `progress=True` forces one.
    if progress is False or (progress is None and passages < 200):
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=docs, unit="doc", desc="Indexing", file=sys.stderr, dynamic_ncols=True)
