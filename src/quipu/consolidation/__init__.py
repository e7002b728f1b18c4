"""Consolidation: the compiled memory index of each scope (CONSOL-1..3, CONSOL-5) and the
jobs that keep it current."""
