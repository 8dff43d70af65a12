"""The embedders, summarisers and memory formation's extractors (and the process-wide LRU map their caches
use). Import only model, text and config."""
