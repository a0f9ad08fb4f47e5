"""``python -m leoflow``: the ``leoflow`` command, as the agent runs ``leoflow ...`` tasks."""

from leoflow.commands.main import main

raise SystemExit(main())
