"""Incremental ingestion: only new or edited documents are embedded; vanished ones are removed.

`plan` compares what the store holds with what was read, without touching the disk or the
store; `sync` looks at the disk once, makes the plan, and applies it batch by batch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from tqdm import tqdm

from chatbot.index.documents import Splitter
from chatbot.index.embeddings.minilm import MiniLMEmbeddings
from chatbot.index.embeddings.process import EmbeddingProcess
from chatbot.index.records import source_file
from chatbot.index.store import Embedder, InProcessEmbedder, Store, StoredDoc, embed_text
from chatbot.values import Document, Passage, Problem

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
    # The text of every passage this ingest wrote: their sentences are embedded next.
    written: list[str] = field(default_factory=list, repr=False)

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
            # A problem is a file, a record of a JSON Lines file or a link: each is named above.
            line += f"; {len(self.problems)} skipped"
        return line


def _metadata(doc: Document, passage: Passage, passage_index: int, n: int) -> dict[str, Any]:
    # The passage's own metadata: the document's, with its page and section where it has them.
    meta = dict(passage.metadata)
    meta.update(
        doc_id=doc.doc_id,
        title=doc.title,
        fingerprint=doc.fingerprint,
        n_passages=n,
        source=doc.source,
        chunk=passage_index,
    )
    return meta


def _covered(source: str, roots: Sequence[PurePath]) -> bool:
    """True when `source` lies in one of the ingested folders (or is one of the ingested files)."""
    # Stored sources are resolved when read (corpus.read_document), so they compare as written.
    file = PurePath(source_file(source))
    if not file.is_absolute():
        # An older index's relative path: resolving it here would name another folder's file.
        return False
    return any(file == r or r in file.parents for r in roots)


def _same_source(stored: str, source: str) -> bool:
    """True when a stored source names the file `source`; a relative one must end its path."""
    if stored == source or PurePath(source_file(stored)).is_absolute():
        return stored == source
    tail = tuple(part for part in PurePath(stored).parts if part not in (".", ".."))
    return bool(tail) and PurePath(source).parts[-len(tail) :] == tail


def _claimed(stored: str, loaded: set[str], failed: set[str], present: Collection[str]) -> bool:
    """True while the file (or record) behind a stored source may still hold its document."""
    file = source_file(stored)
    if not PurePath(file).is_absolute():
        return True  # its folder is unknown: it cannot be shown to be gone
    if stored in failed or file in failed:
        return True  # it failed to parse this time and keeps its passages
    if file in loaded:
        return False  # read in this ingest, and no longer holds this id
    return file in present


def sources(stored: dict[str, StoredDoc]) -> dict[str, int]:
    """How many documents come from each folder (or JSON Lines file), sorted by path."""
    return source_counts(doc.source for doc in stored.values())


def source_counts(sources: Iterable[str]) -> dict[str, int]:
    """How many of `sources` (one per document) come from each folder or JSON Lines file."""
    counts: dict[str, int] = {}
    for source in sources:
        file = Path(source_file(source))
        if not file.is_absolute():
            where = f"{file.parent} (relative to an unknown folder: ingest it again to fix)"
        else:
            where = str(file if source != str(file) else file.parent)
        counts[where] = counts.get(where, 0) + 1
    return dict(sorted(counts.items()))


def uncovered(counts: dict[str, int], roots: Sequence[str | Path]) -> dict[str, int]:
    """The folders (or files) of `source_counts` that `roots` do not cover."""
    resolved = [PurePath(os.path.realpath(r)) for r in roots]
    return {k: n for k, n in counts.items() if not _covered(k, resolved)}


def left_out(stored: dict[str, StoredDoc], roots: Sequence[str | Path]) -> dict[str, int]:
    """The folders (or files) of stored documents that `roots` do not cover, with their counts.

    A rebuild from `roots` alone would drop these documents.
    """
    resolved = [PurePath(os.path.realpath(r)) for r in roots]
    dropped = {k: v for k, v in stored.items() if not _covered(v.source, resolved)}
    return sources(dropped)


def _describe(stored: str) -> str:
    if PurePath(source_file(stored)).is_absolute():
        return stored
    return f"{stored} (a relative path from an older index; its folder is unknown)"


def _conflict(doc_id: str, rival: str) -> str:
    return (
        f"id {doc_id!r} is already used by {_describe(rival)}; give this document its own id "
        "(front matter 'id:', or the record's id field), or ingest it with --replace to move "
        "the id to it"
    )


@dataclass(frozen=True)
class Plan:
    """What an ingest has to do, from comparing the store with what was read."""

    # (document, whether an older version of it is stored), in the order read.
    writes: tuple[tuple[Document, bool], ...] = ()
    unchanged: tuple[str, ...] = ()  # ids stored whole with the same fingerprint
    removed: tuple[str, ...] = ()  # ids whose file or record is gone from the ingested folders
    moved: tuple[tuple[str, str], ...] = ()  # unchanged, found at another source: (id, source)
    refused: tuple[Problem, ...] = ()  # documents claiming an id that another file holds

    @property
    def added(self) -> list[Document]:
        """Documents the store does not hold."""
        return [doc for doc, existed in self.writes if not existed]

    @property
    def updated(self) -> list[Document]:
        """Documents the store holds another (or an incomplete) version of."""
        return [doc for doc, existed in self.writes if existed]


def plan(
    stored: Mapping[str, StoredDoc],
    docs: Sequence[Document],
    roots: Sequence[PurePath],
    *,
    failed: Collection[str] = (),
    present: Collection[str] = (),
    replace: bool = False,
) -> Plan:
    """Compare what is stored with what was read; touches neither the disk nor the store.

    `roots` are the ingested folders and files, `failed` the files (or records) that failed to
    parse this time, `present` the stored files that still exist: absolute, resolved paths.
    A document whose id another file holds is refused, unless `replace` moves the id to it.
    """
    loaded = {source_file(d.source) for d in docs}
    # A file that failed to parse keeps its old passages: nothing is lost because of a typo.
    # (A record of a JSON Lines file keeps its passages when its line, or the file, failed.)
    failed = set(failed)
    writes, unchanged, moved, refused, seen = [], [], [], [], set()
    for doc in docs:
        have = stored.get(doc.doc_id)
        others = [s for s in have.sources if not _same_source(s, doc.source)] if have else []
        rivals = [s for s in others if _claimed(s, loaded, failed, present)]
        if rivals and not replace:
            # Two files claiming one id: neither is changed, and the user decides.
            refused.append(Problem(doc.source, _conflict(doc.doc_id, rivals[0])))
            failed.add(doc.source)
            continue
        seen.add(doc.doc_id)
        if have and have.complete and have.fingerprints == {doc.fingerprint}:
            unchanged.append(doc.doc_id)
            if have.sources != {doc.source}:
                moved.append((doc.doc_id, doc.source))
        else:
            writes.append((doc, have is not None))

    def lost(s: str) -> bool:
        return _covered(s, roots) and s not in failed and source_file(s) not in failed

    removed = [
        d.doc_id for d in stored.values() if d.doc_id not in seen and all(map(lost, d.sources))
    ]
    return Plan(tuple(writes), tuple(unchanged), tuple(removed), tuple(moved), tuple(refused))


def _present(stored: Mapping[str, StoredDoc], docs: Sequence[Document]) -> set[str]:
    """The stored files that may hold an id read again and still exist on disk."""
    ids = {doc.doc_id for doc in docs}
    files = {source_file(s) for i in ids if i in stored for s in stored[i].sources}
    return {f for f in files if Path(f).is_absolute() and Path(f).exists()}


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
    stored = store.documents()
    todo = plan(
        stored,
        docs,
        [Path(os.path.realpath(r)) for r in roots],
        # realpath, unlike Path.resolve, does not raise on a symlink loop (named as a problem).
        failed={os.path.realpath(p.source) for p in report.problems},
        present=_present(stored, docs),
        replace=replace,
    )
    report.problems += todo.refused
    report.unchanged = len(todo.unchanged)
    for doc_id, source in todo.moved:
        store.set_source(doc_id, source)
        report.relocated += 1
    if todo.writes or todo.removed:
        store.bump_revision()
        _write(store, splitter, todo.writes, report, progress)
    for doc_id in todo.removed:
        store.delete_doc(doc_id)
        report.removed += 1
    return report


def embedder_for(embeddings: Embeddings, passages: int) -> Embedder:
    """Where an ingest of about `passages` passages embeds them; the one place that decides.

    A large ingest with the offline model embeds in a child process, one batch ahead of the
    writes: Chroma's upsert and splitting hold the GIL, so in one process they would add 9-13%
    to the model's own time (docs/benchmarks.md). A small one is not worth starting a process.
    """
    if passages >= 2 * BATCH and isinstance(embeddings, MiniLMEmbeddings):
        return EmbeddingProcess(embeddings.model_dir, embeddings.threads)
    return InProcessEmbedder(embeddings)


@dataclass
class _Batch:
    """Passages to embed and write together, and the documents whole once they are written."""

    items: list[tuple[Passage, dict[str, Any]]]
    docs: list[tuple[Document, bool]]  # (document, whether an older version is stored)


def _write(
    store: Store,
    splitter: Splitter,
    writes: Sequence[tuple[Document, bool]],
    report: IngestReport,
    progress: bool | None,
) -> None:
    """Split, embed and write `writes`, replacing the older versions of those that existed."""
    # Documents are split block by block, as they are reached, so splitting overlaps with
    # embedding and the bar appears at once (splitting the 5,365 ICML abstracts took 2.5 s); until
    # then the number of passages is estimated from the length of the texts.
    estimates = [_estimated_passages(doc, splitter) for doc, _ in writes]
    bar = _Progress.start(len(writes), estimates, progress)
    embedder = embedder_for(store.embeddings, sum(estimates))
    finished = False
    try:
        # Batch k+1 is embedding (in the child process, when there is one) while k is written.
        ahead: tuple[_Batch, Callable[[], np.ndarray]] | None = None
        for batch in _batches(splitter, writes, estimates, bar):
            texts = [embed_text(p) for p, _ in batch.items]
            started = batch, store.cache.start(texts, embedder)
            if ahead is not None:
                _store(store, *ahead, report, bar)
            ahead = started
        if ahead is not None:
            _store(store, *ahead, report, bar)
        finished = True
    finally:
        embedder.close(kill=not finished)
        bar.close()


def _batches(
    splitter: Splitter,
    writes: Sequence[tuple[Document, bool]],
    estimates: list[int],
    bar: _Progress,
) -> Iterator[_Batch]:
    """The passages of `writes` in batches (the first one smaller), split as they are reached."""
    size, items, docs = FIRST_BATCH, [], []
    for (doc, existed), estimate in zip(writes, estimates, strict=True):
        n = 0
        for passages, last in _with_last(splitter.blocks(doc)):
            # The count goes on the last block's passages: until they are written, a long
            # document cut short by an interruption is not whole and is written again.
            total = n + len(passages) if last else 0
            items += [(p, _metadata(doc, p, n + i, total)) for i, p in enumerate(passages)]
            n += len(passages)
            while len(items) >= size:
                # A document goes with the batch after its last passage was queued: then it
                # is whole once that batch is written.
                yield _Batch(items[:size], docs)
                items, docs, size = items[size:], [], BATCH
        docs.append((doc, existed))
        bar.split(estimate, n)
    if items or docs:
        yield _Batch(items, docs)


def _store(
    store: Store,
    batch: _Batch,
    vectors: Callable[[], np.ndarray],
    report: IngestReport,
    bar: _Progress,
) -> None:
    """Write a batch, then delete the older versions of the documents it makes whole."""
    computed = store.cache.computed
    passages = [p for p, _ in batch.items]
    store.write(passages, vectors(), [m for _, m in batch.items])
    report.embedded += store.cache.computed - computed
    bar.written(len(batch.docs), len(passages))
    report.passages += len(passages)
    report.written.extend(p.text for p in passages)
    # Old versions go only after the new passages are in: an interrupted ingest leaves
    # both, never neither, and the next run finishes the swap.
    for doc, existed in batch.docs:
        if existed:
            store.delete_doc(doc.doc_id, keep_fingerprint=doc.fingerprint)
            report.updated += 1
        else:
            report.added += 1


def _with_last(items: Iterator[list[Passage]]) -> Iterator[tuple[list[Passage], bool]]:
    """Each item with whether it is the last one."""
    previous = next(items, None)
    for item in items:
        yield previous, False
        previous = item
    if previous is not None:
        yield previous, True


def _estimated_passages(doc: Document, splitter: Splitter) -> int:
    # About four characters a token in English; each passage after the first repeats the overlap.
    step = 4 * max(1, splitter.chunk_tokens - splitter.chunk_overlap)
    return max(1, -(-len(doc.text) // step))


@dataclass
class _Progress:
    """The progress bar: documents done, or passages written when a document is long."""

    bar: tqdm
    by_passage: bool

    @classmethod
    def start(cls, docs: int, estimates: list[int], progress: bool | None) -> _Progress:
        """A bar for `docs` documents of about `estimates` passages each (hidden when small)."""
        # Small ingests finish before a bar is worth drawing; `progress=True` forces one.
        passages = sum(estimates)
        hidden = progress is False or (progress is None and passages < 200)
        # A document longer than a batch would hold the bar still for as long as it takes:
        # then the bar counts passages, and moves with every batch written.
        by_passage = max(estimates, default=0) > BATCH
        total, unit = (passages, "passage") if by_passage else (docs, "doc")
        bar = tqdm(
            total=total,
            unit=unit,
            desc="Indexing",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=hidden,
        )
        return cls(bar, by_passage)

    def written(self, docs: int, passages: int) -> None:
        """A batch is written."""
        self.bar.update(passages if self.by_passage else docs)

    def split(self, estimate: int, actual: int) -> None:
        """A document is split: its estimated passages give way to the real count."""
        if self.by_passage and actual != estimate:
            self.bar.total += actual - estimate
            self.bar.refresh()

    def close(self) -> None:
        """Finish the bar's line."""
        self.bar.close()
