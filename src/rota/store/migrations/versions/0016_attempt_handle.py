"""attempts.handle: each attempt's backend handle, kept after the attempt ends so that its logs
can be read (rota logs --attempt N); NULL for attempts launched before, whose logs only the
job's current handle reached

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('handle', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.drop_column('handle')
