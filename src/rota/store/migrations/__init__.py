"""Alembic migrations of the store; run by ``rota.store.engine.migrate`` when a store opens.

- ``env``: Alembic's environment: migrations always run on the connection the store hands over
  (no ``alembic.ini``, no offline mode), against ``rota.store.schema``'s metadata;
- ``versions``: the migration scripts, one per schema revision, oldest first.

``script.py.mako`` is the template a new migration script starts from.
"""
