"""`python -m qinglong` is the `ql` command."""

from __future__ import annotations

from qinglong.cli.main import main

if __name__ == "__main__":
    main()
