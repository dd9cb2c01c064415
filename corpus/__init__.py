"""Findings: the record, the store on disk, their standalone scripts, and replay."""
