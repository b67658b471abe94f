"""Alembic environment: migrations always run on a connection handed over by the store.

``rota.store.engine.migrate`` opens the transaction and passes the connection in
``config.attributes["connection"]``; there is no ``alembic.ini`` and no offline mode.
"""

from alembic import context

from rota.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("rota's migrations run through rota.store.engine.migrate, with a connection")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                  compare_type=True)
context.run_migrations()
