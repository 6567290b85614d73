"""SQL fragments both dialects write the same way (``queries/*.sql``; see storage/sqlfile.py)."""
