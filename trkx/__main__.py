"""``python -m trkx`` runs the command-line interface."""

from trkx.cli import main

raise SystemExit(main())
