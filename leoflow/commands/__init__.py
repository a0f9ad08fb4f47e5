"""The entry floor: the ``leoflow`` command, one module per command group.

Owns argument parsing and what each command prints. Every command imports what
it runs lazily, inside its function, so ``leoflow run`` never pays for FastAPI,
kubernetes_asyncio or Alembic. Builds processes only through ``leoflow.runtime``;
nothing below the entry floor may import this package.
"""
