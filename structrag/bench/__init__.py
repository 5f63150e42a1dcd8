"""The benchmark harness (``structrag bench``): evidence recall against baselines, speed,
size and scaling on LoCoMo-format data, and a report with plots.

* :mod:`structrag.bench.locomo`: LoCoMo questions and their evidence message ids;
* :mod:`structrag.bench.systems`: the structured system (``Index.ask``) and the BM25,
  BM25 + embedding fill, dense and hybrid baselines, all packed by the same context
  builder;
* :mod:`structrag.bench.recall`: the per-question JSONL, scoring and rescoring;
* :mod:`structrag.bench.loo`: held-out recall, leaving one conversation out (settings
  chosen on the others);
* :mod:`structrag.bench.synth`: synthetic corpora replicated from real conversations;
* :mod:`structrag.bench.perf`: ingest throughput, latency, size on disk, peak memory;
* :mod:`structrag.bench.report`: markdown tables and PNG plots.

LoCoMo is not shipped: get it from github.com/snap-research/locomo (CC BY-NC 4.0).
"""
