"""The scheduler: coordinators (one bounded cycle each) and the lifecycle that paces them."""

from __future__ import annotations
