"""The embedders and summarisers (and the process-wide LRU map their caches use). Import only model, text and config."""
