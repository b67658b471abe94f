"""attempts.max_rss_kib: each ended attempt's peak resident memory in KiB, where its backend
tells it (rota ps -o maxrss); NULL for attempts that ended before, or on an engine that does
not tell

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('max_rss_kib', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.drop_column('max_rss_kib')
