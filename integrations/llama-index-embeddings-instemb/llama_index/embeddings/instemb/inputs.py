"""What an embedding call accepts as text, refused with a message that says what to do.

``str(query)`` used to turn None into the query "None" and bytes into "b'...'"; an empty query
gave a vector although the retriever, the CLI and the server refuse one; a lone surrogate (text
decoded with ``errors="surrogateescape"``, or a broken JSON escape) reached the tokenizer, which
raised a bare ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from instemb_rag.errors import InstEmbError

EMPTY_QUERY = "The query is empty: give the text to search for."


def check_texts(texts: Sequence[object], kind: str) -> None:
    """Every text is a str of valid Unicode; a query also holds more than whitespace."""
    for position, text in enumerate(texts):
        if not isinstance(text, str):
            hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
            raise InstEmbError(f"The {kind} #{position} is {type(text).__name__}, not a string{hint}.")
        if kind == "query" and not text.strip():
            raise InstEmbError(EMPTY_QUERY if len(texts) == 1 else f"{EMPTY_QUERY} (query #{position})")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise InstEmbError(
                f"The {kind} #{position} is not valid Unicode: it holds a lone surrogate "
                f"({text[error.start]!r}) at character {error.start}, as text decoded with "
                "errors='surrogateescape' or a broken JSON escape does. Decode the source with "
                "errors='replace' (or clean the text) before embedding it."
            ) from None
