"""The NLP layer on spaCy: the pipeline, parts of speech, lemmas, and text prepared for
parsing. The extractor (:mod:`structrag.extract.spacy_extractor`) and the offline question
translator (:mod:`structrag.translate.offline`) both use it; nothing in the query core
imports spaCy."""
