"""Retrieval: candidate terms, rank fusion and result shaping. Pure functions."""
