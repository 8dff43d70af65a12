"""Pure rules over documents and vectors: ranking, the relevance floor, the memory rules, filters, chunking,
turn search.

Nothing here opens a store."""
