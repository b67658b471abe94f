"""Alembic migrations of the store; run by ``rota.store.engine.migrate`` when a store opens."""
