"""Heads on disk: the files, which head a run uses, and agents' profiles."""
