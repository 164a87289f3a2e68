"""Incremental ingestion: only new or edited documents are embedded; vanished ones are removed."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Splitter
from .records import source_file
from .store import Store, StoredDoc, embed_text
from .types import Document, Passage, Problem

# Passages embedded, cached and written to Chroma at a time. Against batches of 64, 256 cut what
# ingest adds to the model's own time from 15-19% to 9-13% on the 5,365 ICML abstracts: Chroma's
# upsert costs a quarter less per passage, and embedding pays its per-call costs a quarter as
# often (docs/benchmarks.md). The progress bar moves, and the cache grows, once a batch.
BATCH = 256
# The first batch is smaller: the bar then moves within seconds of the start, even while the
# embedding process loads its model or when a single long file makes up the whole ingest.
FIRST_BATCH = 32


@dataclass
class IngestReport:
    """What an ingest did."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    relocated: int = 0  # unchanged, but found at another path: the path is updated
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
        if self.relocated:
            line += f"; {self.relocated} source path(s) updated"
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
    file = Path(source_file(source))
    if not file.is_absolute():
        # An older index's relative path: resolving it here would name another folder's file.
        return False
    path = file.resolve()
    return any(path == r or r in path.parents for r in roots)


def _same_source(stored: str, source: str) -> bool:
    """True when a stored source names the file `source`; a relative one must end its path."""
    if stored == source or Path(source_file(stored)).is_absolute():
        return stored == source
    tail = tuple(part for part in Path(stored).parts if part not in (".", ".."))
    return bool(tail) and Path(source).parts[-len(tail) :] == tail


def _claimed(stored: str, loaded: set[str], failed: set[str]) -> bool:
    """True while the file (or record) behind a stored source may still hold its document."""
    file = source_file(stored)
    if not Path(file).is_absolute():
        return True  # its folder is unknown: it cannot be shown to be gone
    if stored in failed or file in failed:
        return True  # it failed to parse this time and keeps its passages
    if file in loaded:
        return False  # read in this ingest, and no longer holds this id
    return Path(file).exists()


def sources(stored: dict[str, StoredDoc]) -> dict[str, int]:
    """How many documents come from each folder (or JSON Lines file), sorted by path."""
    counts: dict[str, int] = {}
    for doc in stored.values():
        file = Path(source_file(doc.source))
        if not file.is_absolute():
            where = f"{file.parent} (relative to an unknown folder: ingest it again to fix)"
        else:
            where = str(file if doc.source != str(file) else file.parent)
        counts[where] = counts.get(where, 0) + 1
    return dict(sorted(counts.items()))


def _describe(stored: str) -> str:
    if Path(source_file(stored)).is_absolute():
        return stored
    return f"{stored} (a relative path from an older index; its folder is unknown)"


@dataclass
class _Plan:
    """What an ingest has to do."""

    todo: list[tuple[Document, bool]] = field(default_factory=list)  # (document, existed)
    gone: list[str] = field(default_factory=list)  # ids whose file or record is gone
    moved: list[tuple[str, str]] = field(default_factory=list)  # unchanged: (id, new source)


def _plan(
    stored: dict[str, StoredDoc],
    docs: list[Document],
    roots: list[Path],
    report: IngestReport,
    replace: bool,
) -> _Plan:
    """Sort `docs` into unchanged, to write, moved and refused; find the documents gone."""
    plan = _Plan()
    loaded = {source_file(d.source) for d in docs}
    # A file that failed to parse keeps its old passages: nothing is lost because of a typo.
    # (A record of a JSON Lines file keeps its passages when its line, or the file, failed.)
    failed = {str(Path(p.source).resolve()) for p in report.problems}
    seen: set[str] = set()
    for doc in docs:
        have = stored.get(doc.doc_id)
        others = [s for s in have.sources if not _same_source(s, doc.source)] if have else []
        rivals = [s for s in others if _claimed(s, loaded, failed)]
        if rivals and not replace:
            # Two files claiming one id: neither is changed, and the user decides.
            report.problems.append(Problem(doc.source, _conflict(doc.doc_id, rivals[0])))
            failed.add(doc.source)
            continue
        seen.add(doc.doc_id)
        if have and have.complete and have.fingerprints == {doc.fingerprint}:
            report.unchanged += 1
            if have.sources != {doc.source}:
                plan.moved.append((doc.doc_id, doc.source))
        else:
            plan.todo.append((doc, have is not None))

    def lost(s: str) -> bool:
        return _covered(s, roots) and s not in failed and source_file(s) not in failed

    plan.gone = [
        d.doc_id for d in stored.values() if d.doc_id not in seen and all(map(lost, d.sources))
    ]
    return plan


def _conflict(doc_id: str, rival: str) -> str:
    return (
        f"id {doc_id!r} is already used by {_describe(rival)}; give this document its own id "
        "(front matter 'id:', or the record's id field), or ingest it with --replace to move "
        "the id to it"
    )


def sync(
    store: Store,
    splitter: Splitter,
    docs: list[Document],
    roots: Iterable[str | Path],
    problems: list[Problem] | None = None,
    progress: bool | None = None,
    replace: bool = False,
) -> IngestReport:
    """Make the store hold exactly `docs` for the files under `roots`; embed only what changed.

    A document whose id another file already holds in the store is refused (a Problem naming
    both), unless `replace` moves the id to it.
    """
    report = IngestReport(problems=list(problems or []))
    root_paths = [Path(r).resolve() for r in roots]
    plan = _plan(store.documents(), docs, root_paths, report, replace)
    for doc_id, source in plan.moved:
        store.set_source(doc_id, source)
        report.relocated += 1
    if plan.todo or plan.gone:
        store.bump_revision()
        _write(store, splitter, plan.todo, report, progress)
    for doc_id in plan.gone:
        store.delete_doc(doc_id)
        report.removed += 1
    return report


def _write(
    store: Store,
    splitter: Splitter,
    todo: list[tuple[Document, bool]],
    report: IngestReport,
    progress: bool | None,
) -> None:
    """Split, embed and write `todo`, replacing the older versions of those that existed."""
    # Documents are split block by block, as they are reached, so splitting overlaps with
    # embedding and the bar appears at once (splitting the 5,365 ICML abstracts took 2.5 s); until
    # then the number of passages is estimated from the length of the texts.
    estimates = [_estimated_passages(doc, splitter) for doc, _ in todo]
    bar = _progress_bar(len(todo), estimates, progress)
    # A large ingest with the offline model embeds in a child process, one batch ahead of the
    # writes; the child starts at the first passage the cache does not hold.
    spawn = getattr(store.embeddings, "process", None) if sum(estimates) >= 2 * BATCH else None
    writer = _Writer(store, report, bar, spawn)
    done = False
    try:
        for (doc, existed), estimate in zip(todo, estimates, strict=True):
            n = 0
            for passages, last in _with_last(splitter.blocks(doc)):
                # The count goes on the last block's passages: until they are written, a long
                # document cut short by an interruption is not whole and is written again.
                total = n + len(passages) if last else 0
                writer.add([(p, _metadata(doc, n + i, total)) for i, p in enumerate(passages)])
                n += len(passages)
            writer.done(doc, existed)
            bar.split(estimate, n)
        writer.flush()
        done = True
    finally:
        writer.close(done)
        bar.close()


def _with_last(items: Iterator[list[Passage]]) -> Iterator[tuple[list[Passage], bool]]:
    """Each item with whether it is the last one."""
    previous = next(items, None)
    for item in items:
        yield previous, False
        previous = item
    if previous is not None:
        yield previous, True


class _Writer:
    """Embeds a batch while the previous one is written; old versions go once the new are in."""

    def __init__(self, store: Store, report: IngestReport, bar: _Bar, spawn) -> None:
        self.store, self.report, self.bar, self.spawn = store, report, bar, spawn
        self.child = None
        self.size = FIRST_BATCH
        self.batch: list[tuple[Passage, dict[str, Any]]] = []
        self.pending: list[tuple[Document, bool]] = []
        self.started: deque[tuple[list, list, Callable[[], Any]]] = deque()

    def _submit(self, texts: list[str]) -> Future:
        if self.child is None:
            self.child = self.spawn()
        return self.child.submit(texts)

    def add(self, items: list[tuple[Passage, dict[str, Any]]]) -> None:
        """Queue passages with their metadata; a full batch starts embedding."""
        self.batch.extend(items)
        while len(self.batch) >= self.size:
            self._start(self.size)
            self.size = BATCH
            if len(self.started) > 1:
                self._finish()

    def done(self, doc: Document, existed: bool) -> None:
        """Every passage of `doc` is queued: its old version goes once they are written."""
        self.pending.append((doc, existed))

    def flush(self) -> None:
        """Embed and write whatever is queued."""
        if self.batch or self.pending:
            self._start()
        while self.started:
            self._finish()

    def close(self, done: bool) -> None:
        """Stop the embedding process (at once, when the ingest did not finish)."""
        if self.child is not None:
            self.child.close(kill=not done)

    def _start(self, size: int | None = None) -> None:
        # Documents whose last passage is queued go with this batch: they are complete once
        # it is written (a document's passages are queued before it is marked done).
        n = len(self.batch) if size is None else size
        batch, self.batch = self.batch[:n], self.batch[n:]
        texts = [embed_text(p) for p, _ in batch]
        submit = self.spawn and self._submit
        self.started.append((batch, self.pending, self.store.cache.start(texts, submit)))
        self.pending = []

    def _finish(self) -> None:
        items, docs, vectors = self.started.popleft()
        store, report = self.store, self.report
        computed = store.cache.computed
        passages = [p for p, _ in items]
        store.write(passages, vectors(), [m for _, m in items])
        report.embedded += store.cache.computed - computed
        self.bar.update(len(docs), len(passages))
        report.passages += len(passages)
        # Old versions go only after the new passages are in: an interrupted ingest leaves
        # both, never neither, and the next run finishes the swap.
        for doc, existed in docs:
            if existed:
                store.delete_doc(doc.doc_id, keep_fingerprint=doc.fingerprint)
                report.updated += 1
            else:
                report.added += 1


class _Bar:
    """The progress bar: documents done, or passages written when a document is long."""

    def __init__(self, bar, by_passage: bool) -> None:
        self.bar, self.by_passage = bar, by_passage

    def update(self, docs: int, passages: int) -> None:
        if self.bar is not None:
            self.bar.update(passages if self.by_passage else docs)

    def split(self, estimate: int, actual: int) -> None:
        """A document is split: its estimated passages give way to the real count."""
        if self.bar is not None and self.by_passage and actual != estimate:
            self.bar.total += actual - estimate
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _estimated_passages(doc: Document, splitter: Splitter) -> int:
    # About four characters a token in English; each passage after the first repeats the overlap.
    step = 4 * max(1, splitter.chunk_tokens - splitter.chunk_overlap)
    return max(1, -(-len(doc.text) // step))


def _progress_bar(docs: int, estimates: list[int], progress: bool | None) -> _Bar:
    # Small ingests finish before a bar is worth drawing; `progress=True` forces one.
    passages = sum(estimates)
    if progress is False or (progress is None and passages < 200):
        return _Bar(None, False)
    from tqdm import tqdm

    # A document longer than a batch would hold the bar still for as long as it takes: then
    # the bar counts passages, and moves with every batch written.
    by_passage = max(estimates, default=0) > BATCH
    total, unit = (passages, "passage") if by_passage else (docs, "doc")
    bar = tqdm(total=total, unit=unit, desc="Indexing", file=sys.stderr, dynamic_ncols=True)
    return _Bar(bar, by_passage)
