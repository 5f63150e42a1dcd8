"""Question translators: a natural-language question -> a
:class:`~structrag.query.question.Translation`.

Both implement :class:`~structrag.query.question.Translator`:
:class:`~structrag.translate.offline.SpacyTranslator` reads the question's parse (offline,
the default), :class:`~structrag.translate.llm.LLMTranslator` asks an LLM and falls back to
the offline one.
"""
