"""Type stubs of the extension module (re-exported by ``simdex``)."""

import datetime
from os import PathLike
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

Match = Tuple[int, int, Optional[int]]
"""(fingerprint, distance, doc_id) of one stored pair within k of a fingerprint query (a bare
fingerprint has no sketch, so these rows carry no similarity)."""

Outcome = str
"""What a check by document id did: ``"unchanged"`` (one of its near-duplicates is stored under
its own id: a revisit; nothing written), ``"found"`` (near-duplicates of other documents;
nothing written), ``"inserted"`` (a new id: stored), ``"replaced"`` (the id held other
fingerprints, none near: deleted, and the new one stored, in one log record)."""

class DocumentMatch(NamedTuple):
    """A stored document a document call matched: a 4-tuple since it carries the similarity
    (it was (fingerprint, distance, doc_id)); index or name the fields rather than unpack three."""

    fingerprint: int
    distance: int
    doc_id: Optional[int]
    similarity: Optional[float]
    """The resemblance (Jaccard of word 3-shingles) the two sketches estimate; None when the
    index stores no sketches or the stored pair has none."""

class MatchColumns(NamedTuple):
    """A batch's matches as numpy arrays, one entry per match in item order (each item's
    sorted by distance, fingerprint and id; an item without matches has none)."""

    query_index: Any
    """int64: the item's position in the batch."""
    fingerprint: Any
    """uint64: the stored fingerprint."""
    doc_id: Any
    """uint64: its document id."""
    distance: Any
    """uint32: Hamming distance to the item."""

class Error(Exception):
    """Any simdex error; the message is the Rust error's."""

class LockedError(Error):
    """Another writer holds the index's lock: close it, or open the index read-only."""

class CorruptError(Error):
    """A file is damaged or of an unsupported version (``simdex recover`` salvages an index)."""

class RecipeMismatchError(Error):
    """The index's fingerprint recipe differs from the one given."""

class BinaryDocumentError(Error):
    """The document is binary (a NUL byte near its start); nothing was stored."""

class EmptyDocumentError(Error):
    """The document has too few words to be fingerprinted; nothing was stored."""

class Index:
    def __init__(
        self,
        path: Union[str, PathLike[str]],
        k: Optional[int] = None,
        durability: str = "group",
        read_only: bool = False,
        create: bool = True,
        sketches: bool = True,
        log_recovery: str = "strict",
        expire_after: Union[None, str, int, float, "datetime.timedelta"] = None,
        create_in_nonempty: bool = False,
    ) -> None:
        """``k``: the largest query distance of a new index (None: the library's default design); an existing
        index keeps its own (another k raises ValueError, as a negative one does). ``expire_after``: the expiry window of a new index (``"30d"``, seconds, or a timedelta): pairs stored
        longer ago than it (plus its granularity, at most an eighth of it) stop matching; an existing index keeps its
        own (another window raises ValueError). ``create_in_nonempty``: create the index even in a directory that
        holds other files (refused by default with ``simdex.Error``)."""
    @property
    def expire_after(self) -> Optional[int]:
        """The expiry window in seconds, or None when nothing expires."""
    @property
    def sketches(self) -> bool:
        """True when the index stores a 64-byte sketch per document (fixed at creation; ``sketches=True``
        creates one that does): document calls then confirm near-duplicates by sketch."""
    @property
    def k(self) -> int:
        """Largest query distance the index guarantees (fixed at creation)."""
    @property
    def path(self) -> str: ...
    @property
    def recipe(self) -> Optional[str]:
        """Descriptor of the pinned fingerprint recipe, or None before the first document."""
    @property
    def closed(self) -> bool: ...
    def insert(self, fp: int, doc_id: int) -> int:
        """Inserts (fp, doc_id); returns its sequence number. Durable per the index's durability."""
    def insert_many(self, fps: Any, doc_ids: Any = None) -> int:
        """Inserts many pairs: numpy uint64 arrays or sequences of ints. Returns the count."""
    def _insert_many(self, fps: bytes, doc_ids: Optional[bytes] = None) -> int: ...
    def add(self, fp: int, doc_id: int) -> int:
        """Deprecated name of ``insert``."""
    def add_many(self, fps: Any, doc_ids: Any = None) -> int:
        """Deprecated name of ``insert_many``."""
    def add_document(self, data: Union[str, bytes], doc_id: int, html: Optional[bool] = None) -> int:
        """Deprecated name of ``insert_document``."""
    def query(self, fp: int, k: Optional[int] = None) -> List[Match]:
        """Every live pair within k (default: the index's) bits, sorted by distance."""
    def find_or_insert(self, fp: int, doc_id: int, k: Optional[int] = None) -> List[Match]:
        """Atomically: the matches within k if any (nothing inserted), else inserts and returns []."""
    def fingerprint_document(self, data: Union[str, bytes], html: Optional[bool] = None) -> int:
        """The fingerprint of a document with the index's recipe: a str is text, bytes an HTML page."""
    def insert_document(self, data: Union[str, bytes], doc_id: int, html: Optional[bool] = None) -> int:
        """Fingerprints a document with the index's recipe (pinning the default one if none), inserts it; returns the fingerprint."""
    def find_or_insert_document(self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True, verify: Optional[bool] = None) -> Tuple[int, List[DocumentMatch], int]:
        """(fingerprint, matches, words): the matches (``DocumentMatch``, with the sketches' similarity estimate)
        if near-duplicates are stored (nothing inserted), else [] after inserting, judged as
        ``DocumentQuery(k, confirm, min_words=min_words)`` says. In an index with sketches (``sketches``) a stored document within ``k`` is a match only when the
        sketches estimate a resemblance of at least ``DEFAULT_MIN_SIMILARITY`` (``confirm=False``: fingerprints alone; ``verify`` is the deprecated name
        of ``confirm``: it warns, DeprecationWarning). Raises
        EmptyDocumentError for a document with fewer words than the recipe's minimum, or than ``min_words`` when
        given (nothing stored)."""
    def fingerprints_of(self, doc_id: int) -> List[int]:
        """The fingerprints stored under ``doc_id``, sorted (``[]`` when none): read from each segment's id table and the memtable, no side map."""
    def replace(self, fp: int, doc_id: int) -> List[int]:
        """Stores ``(fp, doc_id)`` as what ``doc_id`` holds: every other fingerprint stored under it is deleted in the same
        log record (a crash keeps the old version or the new one, never both or neither). Returns the fingerprints it held before."""
    def find_or_replace(self, fp: int, doc_id: int, k: Optional[int] = None) -> Tuple[Outcome, List[Match], List[int]]:
        """The check of a page fetched under ``doc_id``, atomic: ``(outcome, matches, previous)``. Its matches within ``k``
        (default: the index's); one stored under ``doc_id`` itself: ``"unchanged"``; others: ``"found"``; none: ``(fp, doc_id)``
        is stored, ``"inserted"``, or ``"replaced"`` with ``previous`` the fingerprints the id held (deleted in the same record)."""
    def find_or_replace_document(
        self, data: Union[str, bytes], doc_id: int, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True
    ) -> Tuple[int, Outcome, List[DocumentMatch], List[int]]:
        """The crawler's check of a page fetched under ``doc_id`` (``simdex.doc_id(url)``), judged as ``find_or_insert_document``
        judges (k = 8 confirmed by sketch by default): ``(fingerprint, outcome, matches, previous)``. ``"unchanged"``: a near copy
        is stored under ``doc_id`` (a revisit: its item was produced then); ``"found"``: a near-duplicate of other documents
        (``matches``); ``"inserted"``: a new page, stored; ``"replaced"``: the page changed, stored in place of what ``doc_id``
        held (``previous``), in one log record, so the id keeps one entry. Nothing is written unless stored. Raises
        EmptyDocumentError / BinaryDocumentError as ``find_or_insert_document`` (nothing stored)."""
    def query_many(self, fps: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Union[List[List[Match]], MatchColumns]:
        """``query`` of every fingerprint (numpy integer array or sequence of ints) over one snapshot: per item its
        matches; ``columnar=True``: one ``MatchColumns``. Large batches take the Rust batch path (merge join),
        small ones one probe per item on every core; the GIL is released."""
    def find_or_insert_many(self, fps: Iterable[int], doc_ids: Iterable[int], k: Optional[int] = None, columnar: bool = False) -> Union[List[List[Match]], MatchColumns]:
        """``find_or_insert`` of each (fps[i], doc_ids[i]) in order, exactly as one by one: per item its matches,
        or [] when inserted. An error stops the batch (earlier items stay stored)."""
    def fingerprint_documents(self, docs: Sequence[Union[str, bytes]], html: Optional[bool] = None) -> Any:
        """numpy uint64 array of the documents' fingerprints with the index's recipe, made on every core without
        the GIL. Raises the first refused document's error, its message starting ``document N:``."""
    def find_or_insert_documents(self, docs: Sequence[Union[str, bytes]], doc_ids: Iterable[int], k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True) -> List[Union[Tuple[int, List[DocumentMatch], int], Error]]:
        """``find_or_insert_document`` of each (docs[i], doc_ids[i]) in order, exactly as one by one, the
        documents fingerprinted and sketched on every core first (GIL released): per item (fingerprint, matches,
        words), or the EmptyDocumentError / BinaryDocumentError of a refused document, returned, not raised."""
    def _query_many(self, fps: bytes, k: Optional[int] = None, columnar: bool = False) -> Any: ...
    def _find_or_insert_many(self, fps: bytes, doc_ids: bytes, k: Optional[int] = None, columnar: bool = False) -> Any: ...
    def _fingerprint_documents(self, docs: List[Union[str, bytes]], html: Optional[bool] = None) -> bytes: ...
    def _find_or_insert_documents(self, docs: List[Union[str, bytes]], doc_ids: bytes, k: Optional[int] = None, html: Optional[bool] = None, min_words: Optional[int] = None, confirm: bool = True) -> List[Any]: ...
    def delete(self, fp: int, doc_id: int) -> int: ...
    def sync(self) -> None:
        """Makes every write so far durable (fsync)."""
    def flush(self) -> None: ...
    def compact(self) -> None: ...
    def live_entries(self) -> List[Tuple[int, int]]: ...
    def stats(self) -> Dict[str, Any]: ...
    def close(self) -> None:
        """Syncs and releases the lock; later calls raise ValueError. Idempotent."""
    def __enter__(self) -> "Index": ...
    def __exit__(self, *args: Any) -> bool: ...

class Fingerprinter:
    """Text -> 64-bit simhash with a recipe of its own (presets: "pages", "short_text")."""
    def __init__(self, preset: str = "pages", features: Optional[List[str]] = None, tf: Optional[str] = None, stop_words: Optional[List[str]] = None, fold_digits: Optional[bool] = None, min_words: Optional[int] = None) -> None: ...
    @property
    def recipe(self) -> str: ...
    def fingerprint_text(self, text: str) -> int: ...
    def fingerprint_html(self, html: bytes) -> int: ...

class Segment:
    """A read-only segment file (``simdex build``)."""
    def __init__(self, path: Union[str, PathLike[str]]) -> None: ...
    def query(self, fp: int, k: Optional[int] = None) -> List[Match]:
        """Every entry within k (default: the segment's design's) bits of fp."""
    def __len__(self) -> int: ...

class DocumentQuery:
    """How the document calls judge a document: the library's rule, for every front (Python, Scrapy, the server,
    ``simdex dedup``, ``simdex.spark``), so that none restates a default or a range.

    >>> q = simdex.DocumentQuery()            # what find_or_insert_document does by default
    >>> q.k, q.unconfirmed_k, q.min_similarity
    (8, 3, 0.9)
    >>> simdex.DocumentQuery(confirm=False).k  # fingerprints alone
    3
    >>> simdex.DocumentQuery(k=12).check()
    Traceback (most recent call last):
    ValueError: k = 12: document near-duplicates are found within at most k = 8 bits
    """
    def __init__(self, k: Optional[int] = None, confirm: bool = True, min_similarity: Optional[float] = None, min_words: Optional[int] = None) -> None:
        """``k``: the candidates' distance (None: ``DEFAULT_CONFIRMED_K`` when confirming, ``DEFAULT_UNCONFIRMED_K``
        otherwise; a negative k raises ValueError); ``confirm``: confirm candidates by sketch where the index stores
        sketches; ``min_similarity``: the resemblance a confirmed candidate needs (None: ``DEFAULT_MIN_SIMILARITY``);
        ``min_words``: a document of fewer words is refused (None: none beyond the recipe's)."""
    @property
    def k(self) -> int:
        """The candidates' distance: the one given, else the library's default for ``confirm``."""
    @property
    def unconfirmed_k(self) -> int:
        """The distance within which fingerprints alone decide (a document or a stored candidate without a sketch)."""
    @property
    def confirm(self) -> bool: ...
    @property
    def min_similarity(self) -> float:
        """The resemblance (Jaccard of word shingles, as the sketches estimate it) a confirmed candidate needs."""
    @property
    def min_words(self) -> int: ...
    def check(self) -> None:
        """Raises ValueError (the library's message, the one every front gives) unless the query can be answered:
        k at most ``MAX_K``, a resemblance within 0 and 1."""
    def decision(self, sketches: bool) -> Tuple[int, Optional[float]]:
        """(k, min_similarity) on an index that stores sketches or not: the distance candidates are found within and
        the resemblance sketches confirm them at (None: fingerprints alone decide, within ``unconfirmed_k``)."""

DEFAULT_CONFIRMED_K: int
"""The document calls' candidate distance when sketches confirm them (8)."""
DEFAULT_UNCONFIRMED_K: int
"""The largest distance at which fingerprints alone decide (3)."""
DEFAULT_MIN_SIMILARITY: float
"""The resemblance a confirmed candidate needs by default (0.9)."""
MAX_K: int
"""The largest distance the tables answer (8)."""

def doc_id(name: str) -> int:
    """The 64-bit document id of a name: what ``simdex fingerprint --for-index`` and ``dedup --index`` use."""

# simdex.spark's library calls (python/src/spark.rs, spark_columns.rs, spark_index.rs)

StringColumn = Tuple[bytes, bytes, bytes]
"""An Arrow string column's buffers: (data, i32 offsets, validity bitmap)."""

def read_jsonl_range(path: Union[str, PathLike[str]], name: str, start: int, end: int, strict: bool = False) -> Tuple[bytes, List[StringColumn]]:
    """The JSON-lines records whose lines start in ``[start, end)`` of ``path``: their places (u64s)
    and the columns id, content, text, error."""

def corpus_options(k: Optional[int] = None, confirm: bool = True, threshold: Optional[float] = None) -> Tuple[int, Optional[float]]:
    """(k, threshold) of a corpus dedup as every front decides it (the document calls' one limit and
    message: ValueError past it)."""

def feature_counts(recipe: "CorpusRecipe", data: bytes, offsets: bytes, sizes: bytes, buckets: int = 1) -> List[Tuple[bytes, bytes]]:
    """The IDF pass of one Arrow batch: (features, counts), u64 columns, per bucket of features."""

class FeatureSum:
    """One part of the IDF table summed in a reduce task, as feature_counts' answers stream in."""
    def __init__(self) -> None: ...
    def add(self, features: bytes, counts: bytes) -> None: ...
    def write(self, path: str, part: int, parts: int, documents: int) -> Tuple[int, int]:
        """The part file with the library's weights; (entries, crc), its summary."""

def read_whole_files(paths: List[str], names: List[str], formats: List[str], places: bytes, strict: bool = False) -> Tuple[bytes, List[StringColumn]]:
    """Whole text or HTML files as records: their places (u64s) and the columns id, content, text, error."""

def read_bodies(data: bytes, offsets: bytes, format: str) -> List[StringColumn]:
    """A DataFrame's bodies (an Arrow column's buffers) as the columns content, text, error."""

def write_tsv(path: str, columns: List[Tuple[bytes, bytes]], append: bool = False) -> int:
    """Lines of tab-joined values of Arrow string columns (data, offsets)."""

# simdex.spark dedup's library calls (python/src/spark_dedup.rs)

def scatter_documents(recipe: "CorpusRecipe", split: "BlockJoin", parts: List[int], ords: bytes, id_data: bytes, id_offsets: bytes, content_data: bytes, content_offsets: bytes, text_data: bytes, text_offsets: bytes, has_text: bytes, rule: "CorpusRule", keep: bool = False) -> Tuple[List[int], bytes, bytes, bytes, bytes, bytes, bytes, bytes]:
    """A batch fingerprinted, sketched and packed into its block-split partitions: (partitions, data,
    offsets, status, reason data, reason offsets, fps, sketches)."""

def join_documents(split: "BlockJoin", group: int, data: bytes, rule: "CorpusRule") -> List[bytes]:
    """One partition's exact groups and links (kept or undecided by ``rule``; the group after the
    split's is the band group): [a, b, distance, similarity, verdict, member ords,
    representatives, flags, id data, id offsets]."""

class DedupFound:
    exact_groups: int
    exact_documents: int
    redundant: int
    redundant_fingerprinted: int
    links: int
    beyond_k: int
    second_look_decided: int
    second_look_changed: int
    clusters: int
    clustered: int
    pairs: int
    dropped: bytes

def finish_dedup(la: bytes, lb: bytes, ld: bytes, ls: bytes, lu: bytes, mo: bytes, mr: bytes, mf: bytes, id_data: bytes, id_offsets: bytes, rule: "CorpusRule", sets: Optional[Tuple[bytes, bytes, bytes]] = None, pairs_path: Optional[str] = None, clusters_path: Optional[str] = None) -> DedupFound:
    """The undecided links settled by exact Jaccard (``sets``: ``shingle_sets``' answers,
    concatenated); the driver's union-find over the links and exact groups; the pairs and
    clusters files."""

class CorpusRule:
    """The library's corpus dedup options (k, threshold, band candidates, second look) with the
    sketch recipe of ``recipe``; pickles."""
    def __init__(self, recipe: "CorpusRecipe", k: Optional[int] = None, confirm: bool = True, threshold: Optional[float] = None, band_candidates: Optional[bool] = None, second_look: Optional[bool] = None) -> None: ...
    @property
    def k(self) -> int: ...
    @property
    def threshold(self) -> Optional[float]: ...
    @property
    def band_candidates(self) -> bool: ...

def undecided_documents(la: bytes, lb: bytes, lu: bytes) -> bytes:
    """The ords (sorted u64s) of the documents of the links the second look decides."""

def shingle_sets(recipe: "CorpusRecipe", ords: bytes, text_data: bytes, text_offsets: bytes, has_text: bytes, wanted: bytes) -> Tuple[bytes, bytes, bytes]:
    """The sketch's shingle sets of a batch's ``wanted`` documents: (ords, u32 lengths, u64 shingles)."""

def write_kept(path: str, ords: bytes, id_data: bytes, id_offsets: bytes, text_data: bytes, text_offsets: bytes, has_text: bytes, dropped: bytes) -> int:
    """Appends a batch's kept documents to ``path`` as JSON lines."""

# simdex.spark cluster's library calls (python/src/spark_cluster.rs)

def read_fingerprints(path: str, start: int, end: int, ids: bool = False) -> Tuple[bytes, Optional[Tuple[bytes, bytes]], int, List[Tuple[int, str]]]:
    """The FINGERPRINT[<TAB>ID] lines starting in ``[start, end)`` of ``path``: (fps, (id data, id
    offsets) with ``ids``, bad lines, the first few as (line number, message))."""

class BlockJoin:
    """The library's BlockSplit for ``count`` fingerprints within ``k``; pickles as its arguments."""
    def __init__(self, count: int, k: int, max_candidates_log2: float = 2.0) -> None: ...
    @property
    def groups(self) -> int: ...
    @property
    def tables(self) -> int: ...
    @property
    def summary(self) -> str: ...
    def tables_of(self, group: int) -> List[int]: ...
    def key_bits(self, group: int) -> Tuple[int, int]: ...
    def scatter(self, fps: bytes, parts: List[int]) -> Tuple[List[int], List[bool], bytes, bytes]:
        """A map task's fingerprints cut into partitions: (partition, repeated, data, offsets) per bucket."""
    def join(self, group: int, fps: bytes, repeated: bytes) -> Tuple[bytes, bytes, bytes]:
        """One partition's pairs (a, b) and (group 0) the fingerprints stored more than once."""

def write_pair_run(path: str, a: bytes, b: bytes, repeated: bytes) -> int:
    """A join task's pairs and repeated fingerprints as a sorted run at ``path``; the records written."""

def merge_pair_runs(runs: List[str], pairs_path: Optional[str] = None) -> Tuple[bytes, bytes, int]:
    """The runs merged: pairs written to ``pairs_path``; (vertices, clusters) of their components and the distinct pairs."""

def cluster_members(vertices: bytes, clusters: bytes, fps: bytes) -> Tuple[bytes, bytes]:
    """(positions, clusters) of the members among ``fps``."""

def read_members(path: str, start: int, end: int, vertices: bytes, clusters: bytes) -> Tuple[bytes, bytes, bytes, bytes]:
    """The entries of the lines starting in ``[start, end)`` whose fingerprint is clustered:
    (fps, clusters, id data, id offsets)."""

def write_members(path: str, fps: bytes, clusters: bytes, id_data: bytes, id_offsets: bytes, with_ids: bool) -> int:
    """Cluster members sorted and written as fp<TAB>id<TAB>cluster lines."""

class CorpusRecipe:
    """A fingerprint recipe for a corpus job (options, IDF table, sketcher); pickles as its options and table."""
    def __init__(self, preset: str = "pages") -> None: ...
    @staticmethod
    def _restore(options: str, idf: Optional[bytes], sketches: Tuple[int, int, int]) -> "CorpusRecipe": ...
    @property
    def recipe(self) -> str:
        """The descriptor ``simdex dedup`` prints as ``recipe:``."""
    @property
    def sketch_recipe(self) -> str:
        """The descriptor of the sketches it makes: an index's own recipe for ``IndexReader.recipe()``."""
    @property
    def has_idf(self) -> bool: ...
    @staticmethod
    def _restore_parts(options: str, documents: int, paths: List[str], summaries: List[Tuple[int, int]], sketches: Tuple[int, int, int]) -> "CorpusRecipe": ...
    def with_idf_parts(self, documents: int, paths: List[str], summaries: List[Tuple[int, int]]) -> "CorpusRecipe":
        """This recipe with the IDF table of ``documents`` documents written in parts (FeatureSum.write): the files are mapped."""
    def save_idf(self, path: str) -> bool:
        """Writes the table file (what ``simdex dedup --idf FILE`` reads); False when no table is pinned."""
    def idf_table(self) -> Optional[bytes]:
        """The table's bytes (what ``simdex dedup --idf FILE`` reads)."""

class IndexReader:
    """An index directory opened read-only; pickles as its path."""
    def __init__(self, path: Union[str, PathLike[str]]) -> None: ...
    @property
    def k(self) -> int: ...
    @property
    def sketches(self) -> bool:
        """True when it stores sketches of a recipe the library makes."""
    def recipe(self) -> Optional[CorpusRecipe]:
        """The pinned fingerprint recipe, making sketches of the index's own sketch recipe."""
    def sketching(self, recipe: CorpusRecipe) -> CorpusRecipe:
        """``recipe`` making the index's own sketches (the default for an index without sketches)."""
    def near(self, fps: bytes, k: Optional[int] = None) -> Tuple[bytes, bytes]:
        """(queries, stored): every live stored fingerprint within ``k`` of each of ``fps``, by the
        library's batch check without sketches (the batch-mode merge join for a large batch)."""
    def check_documents(self, out: str, fps: bytes, sketches: bytes, id_data: bytes, id_offsets: bytes, k: Optional[int] = None, confirm: bool = True, threshold: Optional[float] = None) -> int:
        """A batch of documents checked by the library's document rule; appends
        id<TAB>index_doc_id<TAB>fingerprint<TAB>distance<TAB>similarity lines to ``out``."""

def append_new_documents(out: str, fps: bytes, sketches: bytes, id_data: bytes, id_offsets: bytes) -> int:
    """Appends (fingerprint, doc_id(id), sketch) rows to ``out`` for ``insert_files_into_index``."""

def insert_files_into_index(path: Union[str, PathLike[str]], recipe: CorpusRecipe, parts: List[str], sketches: bool) -> int:
    """Inserts the rows of ``parts`` into the index at ``path``, pinning ``recipe``; syncs."""
