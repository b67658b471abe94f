"""jobs.nominated: the last cycle left the job waiting for the jobs it evicted for itself

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        # a plain default, so that SQLite adds the column in place instead of copying the table
        # (a copy would drop the rows that reference jobs)
        batch_op.add_column(sa.Column('nominated', sa.Boolean(), nullable=False,
                                      server_default='0'))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('nominated')
