"""The scheduler service: the loop that creates runs, admits and launches tasks, and the
agent gRPC endpoint every task dials.

Owns turning events into committed state. Reaches tasks only through the executor
interface in ``leoflow.domain.execution`` and leadership through
``leoflow.domain.leadership``. Never imports the API (they meet through the store) nor
``kubernetes_asyncio``.
"""
