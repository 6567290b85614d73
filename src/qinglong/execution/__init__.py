"""Execution: the local executor that runs admitted Runs as child processes."""

from __future__ import annotations
