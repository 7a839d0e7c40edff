"""``python -m tidemark``: the tidemark command line."""

from tidemark.cli.main import main

raise SystemExit(main())
