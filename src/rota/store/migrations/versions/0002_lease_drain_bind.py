"""Leases, node drain with a reason, queues bound to projects, usage billed-until per job

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('leases',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('holder', sa.String(length=255), nullable=False),
    sa.Column('acquired_at', sa.Float(precision=53), nullable=False),
    sa.Column('expires_at', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_leases'))
    )
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('drain', sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column('reason', sa.Text(), nullable=False, server_default=''))
    with op.batch_alter_table('queues', schema=None) as batch_op:
        batch_op.add_column(sa.Column('projects', sa.JSON(), nullable=True))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('billed_until', sa.Float(precision=53), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('billed_until')
    with op.batch_alter_table('queues', schema=None) as batch_op:
        batch_op.drop_column('projects')
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.drop_column('reason')
        batch_op.drop_column('drain')
    op.drop_table('leases')
