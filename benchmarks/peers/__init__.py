"""Peer schedulers for the admission benchmark (APScheduler 4, procrastinate), each run as
its own process: ``python -m benchmarks.peers.<name> setup|run ...``."""
