"""brain inside other frameworks: adapters that speak a framework's interfaces over brain's store
(:mod:`brain.shells.xaibo`: Xaibo's memory protocols)."""
