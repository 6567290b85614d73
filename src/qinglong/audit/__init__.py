"""The audit: recompute what triggers should have fired, independently of the scheduler."""
