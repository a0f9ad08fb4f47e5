"""The agent gRPC protocol: generated protobuf/grpc code (``leoflow/``) and its short names.

Generated from ``proto/`` by ``make proto``; never edited by hand. Imports protobuf and
grpc only: never pydantic, yaml, SQLAlchemy, FastAPI, ``kubernetes_asyncio`` or any other
leoflow package, so that the agent can import it cheaply.
"""
