"""DAG files: reading ``leoflow.yaml`` from disk into validated DagSpecs.

Owns the bounded YAML reader (``yamldoc``) and the loader (``loader``: one file, a
folder, or a document's text, with errors naming the file, line and field path, as
``problems`` words them; a file's bounded read is ``file_text``, the checks of a
validated spec ``dag_checks``).
It is the adapter between the filesystem/PyYAML and the pure ``leoflow.domain``,
which may import neither. Never imports the store, the executors, Kubernetes, the
scheduler or the API; a ``dbt:`` section's project is read by an expander the caller
passes in (``LoadOptions.dbt``), so this package never imports ``leoflow.dbt`` either.
"""
