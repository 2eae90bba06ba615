"""What trinity keeps on disk: key-value tables (caches, memo) and the run log."""
