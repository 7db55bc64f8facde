"""The catalog's full-text index: SQLite FTS5 over the chunk texts, ranked by FTS5's bm25().

The lexical side of hybrid search (fusion.py) lives in the catalog database itself, as an
external-content FTS5 table over ``chunks.text`` kept in step by triggers. A chunk's insert or
delete therefore updates the full-text index inside the same transaction as its vector, so
incremental indexing, deletes, ``kill -9`` and generations hold for it exactly as they hold for
the vectors, whichever path wrote the chunk (local, Ray driver) and whichever vector store reads
the catalog (FAISS, Qdrant).

Versioned in the catalog's ``meta`` table (``fulltext_version``). Catalogs written before it
have none: ``add_fulltext`` (the next ``instemb-rag index`` run) builds it in one transaction
from the chunks already stored, so a folder is either fully indexed or not at all, and search
refuses ``--hybrid`` on it with the command to run (``missing_fulltext_message``).

The MATCH expression is built from user text by ``match_expression``: words only (``\\w+``),
each quoted, stopwords and instruction boilerplate ("focus on", "find passages") dropped,
OR-ed: FTS5 syntax in a query (quotes, ``*``, ``NEAR``, ``-``, ``:``) is never interpreted.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence

from .errors import IndexFolderError

__all__ = [
    "FULLTEXT_VERSION",
    "TOKENIZER",
    "add_fulltext",
    "fulltext_version",
    "has_fulltext",
    "indexed_terms",
    "lexical_scores",
    "lexical_search",
    "match_expression",
    "memory_fulltext",
    "missing_fulltext_message",
]

FULLTEXT_VERSION = 1  # bump when the table, tokenizer or triggers change: the next index run rebuilds
TOKENIZER = "porter unicode61 remove_diacritics 2"  # stems English, folds case and accents
MAX_MATCH_TERMS = 64  # a pasted page as the query still makes a bounded MATCH

_CREATE = (
    f"CREATE VIRTUAL TABLE chunks_fts USING fts5(text, content='chunks', content_rowid='id', tokenize='{TOKENIZER}')",
    "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
    "INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN "
    "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); END",
    "CREATE TRIGGER chunks_fts_update AFTER UPDATE OF id, text ON chunks BEGIN "
    "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text); END",
)
_DROP = (
    "DROP TRIGGER IF EXISTS chunks_fts_insert",
    "DROP TRIGGER IF EXISTS chunks_fts_delete",
    "DROP TRIGGER IF EXISTS chunks_fts_update",
    "DROP TABLE IF EXISTS chunks_fts",
)

# Function words, and the words instructions are made of rather than what they ask about: left
# in, "Focus on the passage that explains ..." would match every chunk holding "passage".
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t d ll m re ve""".split()
)
INSTRUCTION_WORDS = frozenset(
    """find retrieve return search look looking get give show fetch locate identify select rank want need
    focus focusing focused emphasis emphasise emphasize prioritise prioritize prefer care interested
    interest please tell explain explains explaining describe describes describing discuss discusses
    discussing mention mentions mentioning cover covers covering address addresses talk talks
    passage passages document documents text texts paragraph paragraphs article articles abstract
    abstracts study studies paper papers result results answer answers question questions query queries
    relevant relevance information info content something anything one ones part section
    given following regarding related relating concerning whether like
    """.split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


# ---------------------------------------------------------------------------------------- schema
def fulltext_version(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT value FROM meta WHERE key = 'fulltext_version'").fetchone()
    return int(row[0]) if row else None


def has_fulltext(db: sqlite3.Connection) -> bool:
    return fulltext_version(db) == FULLTEXT_VERSION


def add_fulltext(db: sqlite3.Connection) -> bool:
    """Create (or re-create, when its version is older) the full-text index from the stored
    chunks. Call inside the caller's write transaction: together with the version mark it is
    one atomic change. Returns whether anything was built."""
    if has_fulltext(db):
        return False
    for statement in _DROP:
        db.execute(statement)
    try:
        db.execute(_CREATE[0])
    except sqlite3.OperationalError as error:  # an SQLite built without FTS5
        raise IndexFolderError(
            f"This Python's SQLite ({sqlite3.sqlite_version}) cannot build the full-text index that hybrid "
            f"search reads ({error}). Use a Python whose sqlite3 module has FTS5 (CPython's own builds do)."
        ) from error
    for statement in _CREATE[1:]:
        db.execute(statement)
    db.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")  # FTS5 reads the content table
    db.execute("INSERT OR REPLACE INTO meta VALUES ('fulltext_version', ?)", (str(FULLTEXT_VERSION),))
    return True


def missing_fulltext_message(db: sqlite3.Connection, index_dir) -> str:
    """What to run when --hybrid is asked of an index built before the full-text index."""
    row = db.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()
    root = row[0] if row else "PATH"
    return (
        f"The index in {index_dir} has no full-text index (it was built before hybrid search, or by an older "
        f"version). Run `instemb-rag index {root} --index-dir {index_dir}` once: it adds the full-text index "
        "over the chunks already stored (nothing is re-embedded). Until then search without --hybrid."
    )


def indexed_terms(db: sqlite3.Connection) -> set[tuple[str, int]]:
    """Every (term, chunk id) the full-text index holds (FTS5's own vocabulary table): two
    indexes of the same chunks hold the same set, whatever order the chunks came in."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_fts_terms USING fts5vocab(main, chunks_fts, instance)")
    return {(term, int(doc)) for term, doc in db.execute("SELECT term, doc FROM temp.chunks_fts_terms")}


# ---------------------------------------------------------------------------------------- queries
def content_words(text: str | None, drop: frozenset[str] = STOPWORDS) -> list[str]:
    """The words of ``text`` in order, lower-cased, without ``drop``, each once."""
    seen: dict[str, None] = {}
    for word in _WORD.findall((text or "").lower()):
        word = word.strip("_")
        if word and word not in drop:
            seen.setdefault(word, None)
    return list(seen)


def match_expression(query: str, instruction: str | None = None, instruction_words: str = "content") -> str | None:
    """A safe FTS5 MATCH expression: the query's and the instruction's words, each quoted, OR-ed.

    ``instruction_words``: ``content`` (the default: the instruction's words less stopwords and
    instruction boilerplate), ``all`` (its words less stopwords only) or ``none`` (the query
    alone). None when no word is left (a query of punctuation): the lexical side finds nothing.
    """
    words = content_words(query)
    if instruction_words == "content":
        words += content_words(instruction, STOPWORDS | INSTRUCTION_WORDS)
    elif instruction_words == "all":
        words += content_words(instruction)
    elif instruction_words != "none":
        raise ValueError(f"instruction_words must be content, all or none, not {instruction_words!r}")
    terms = list(dict.fromkeys(words))[:MAX_MATCH_TERMS]
    return " OR ".join(f'"{term}"' for term in terms) or None  # \w+ never holds a quote


def lexical_search(
    db: sqlite3.Connection, match: str | None, depth: int, sources: Sequence[str] | None = None
) -> list[tuple[int, float]]:
    """The ``depth`` best chunks for ``match`` by FTS5's bm25() (negated: higher is better),
    among ``sources`` when given."""
    if match is None or depth < 1 or (sources is not None and not sources):
        return []
    if sources is None:
        rows = db.execute(
            "SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, depth),
        )
    else:
        rows = db.execute(
            "SELECT chunks_fts.rowid, -bm25(chunks_fts) FROM chunks_fts JOIN chunks ON chunks.id = chunks_fts.rowid "
            "WHERE chunks_fts MATCH ? AND chunks.path IN (SELECT value FROM json_each(?)) ORDER BY rank LIMIT ?",
            (match, json.dumps(list(sources)), depth),
        )
    return [(int(chunk_id), float(score)) for chunk_id, score in rows]


def lexical_scores(db: sqlite3.Connection, match: str | None, ids: Sequence[int]) -> dict[int, float]:
    """bm25 (negated) of each of ``ids`` that matches; a chunk missing from the answer matched no term."""
    if match is None or not ids:
        return {}
    # Every match's score in one pass, kept for ``ids``: FTS5 computes bm25() for each match to
    # rank them anyway (lexical_search costs the same), while a `rowid IN (...)` constraint makes
    # it run the whole MATCH once per id (8 ms against 0.3 ms a query on 150 chunks;
    # benchmarks/bench_hybrid.py measures the fused query).
    wanted = {int(chunk_id) for chunk_id in ids}
    rows = db.execute("SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?", (match,))
    return {int(chunk_id): float(score) for chunk_id, score in rows if int(chunk_id) in wanted}


def memory_fulltext(texts: Sequence[str], ids: Sequence[int] | None = None) -> sqlite3.Connection:
    """An in-memory database holding ``texts`` (as chunks ``ids``, default 1..N in order) under the
    same table, tokenizer and ranking as an index folder's catalog: what the evaluation's lexical
    side reads, and what a catalog's full-text index is checked against."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY, path TEXT NOT NULL, text TEXT NOT NULL)")
    add_fulltext(db)
    ids = range(1, len(texts) + 1) if ids is None else ids
    db.executemany("INSERT INTO chunks VALUES (?, '', ?)", [(int(i), text) for i, text in zip(ids, texts)])
    db.commit()
    return db
