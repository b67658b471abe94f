"""jobs.depends, and job arrays: array_id, array_index, array_limit

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('depends', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('array_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('array_index', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('array_limit', sa.Integer(), nullable=True))
        batch_op.create_index('ix_jobs_array_id', ['array_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_array_id')
        batch_op.drop_column('array_limit')
        batch_op.drop_column('array_index')
        batch_op.drop_column('array_id')
        batch_op.drop_column('depends')
