"""idempotency_keys, fair_use, users.disabled_at, and an index on jobs (user, state)

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('idempotency_keys',
    sa.Column('user', sa.String(length=63), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('job', sa.Integer(), nullable=False),
    sa.Column('tasks', sa.Integer(), nullable=True),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['job'], ['jobs.id'], name=op.f('fk_idempotency_keys_job_jobs'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user'], ['users.name'],
                            name=op.f('fk_idempotency_keys_user_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('user', 'key', name=op.f('pk_idempotency_keys'))
    )
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.create_index('ix_idempotency_keys_created_at', ['created_at'], unique=False)
    op.create_table('fair_use',
    sa.Column('scope', sa.String(length=16), nullable=False),
    sa.Column('caps', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('scope', name=op.f('pk_fair_use'))
    )
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('disabled_at', sa.Float(precision=53), nullable=True))
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_user_state', ['user', 'state'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_user_state')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('disabled_at')
    op.drop_table('fair_use')
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.drop_index('ix_idempotency_keys_created_at')
    op.drop_table('idempotency_keys')
