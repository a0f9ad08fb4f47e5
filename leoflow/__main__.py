"""``python -m leoflow``: the ``leoflow`` command, as the agent runs ``leoflow ...`` tasks."""

from leoflow.cli import main

raise SystemExit(main())
