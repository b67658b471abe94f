"""attempts (each attempt's history), and on jobs: held, lost_streak, eligible_at,
last_checkpoint_at

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('attempts',
    sa.Column('job', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('bound_at', sa.Float(precision=53), nullable=False),
    sa.Column('launched_at', sa.Float(precision=53), nullable=True),
    sa.Column('ended_at', sa.Float(precision=53), nullable=True),
    sa.Column('placement', sa.JSON(), nullable=True),
    sa.Column('end', sa.String(length=16), nullable=True),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False, server_default=''),
    sa.Column('last_checkpoint_at', sa.Float(precision=53), nullable=True),
    sa.ForeignKeyConstraint(['job'], ['jobs.id'], name=op.f('fk_attempts_job_jobs'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job', 'attempt', name=op.f('pk_attempts'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('held', sa.Text(), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('lost_streak', sa.Integer(), nullable=False,
                                      server_default='0'))
        batch_op.add_column(sa.Column('eligible_at', sa.Float(precision=53), nullable=True))
        batch_op.add_column(sa.Column('last_checkpoint_at', sa.Float(precision=53),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('last_checkpoint_at')
        batch_op.drop_column('eligible_at')
        batch_op.drop_column('lost_streak')
        batch_op.drop_column('held')
    op.drop_table('attempts')
