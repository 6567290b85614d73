"""The PostgreSQL adapter (psycopg 3, schema `qinglong`): the cluster profile."""

from __future__ import annotations
