"""What a question must be before anything runs on it: not empty, with words, at most
:data:`MAX_QUESTION_CHARS` characters. Light to import: the CLI checks a question here
before it sends it to a server, so the error reads the same with a server or without."""

from __future__ import annotations

from structrag.errors import QueryError, StructragError

#: Questions longer than this are refused (the parser's cost grows with length).
MAX_QUESTION_CHARS = 2_000


def check_question(question: str) -> None:
    """Raise :class:`~structrag.errors.QueryError` for a question that cannot be asked:
    empty, without a word (nothing to match: the vector fill alone would answer with
    whatever is nearest), or longer than :data:`MAX_QUESTION_CHARS`."""
    if not question.strip():
        raise QueryError(
            "the question is empty", hint='ask something, e.g. "Where does Marco work?"'
        )
    if not any(c.isalnum() for c in question):
        raise QueryError(
            f"the question has no words: {question.strip()[:80]!r}",
            hint='ask in words, e.g. "Where does Marco work?"',
        )
    if len(question) > MAX_QUESTION_CHARS:
        raise QueryError(
            f"the question has {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}",
            hint="ask a shorter question, or write a query expression for `structrag query`",
        )


def check_search(query: str, error: type[StructragError], example: str) -> None:
    """Raise ``error`` for a search query (memory or knowledge search) that cannot be
    searched: empty, or longer than :data:`MAX_QUESTION_CHARS` (``example``: a query the
    hint suggests)."""
    if not query.strip():
        raise error("the search query is empty", hint=f'search for something, e.g. "{example}"')
    if len(query) > MAX_QUESTION_CHARS:
        raise error(
            f"the search query has {len(query):,} characters; the limit is {MAX_QUESTION_CHARS:,}",
            hint="search for the words that matter (a context window takes a message of "
            "any length and searches its start)",
        )
