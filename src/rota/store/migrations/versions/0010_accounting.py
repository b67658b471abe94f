"""attempts.gpus, idle_spans, prices, budgets

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('gpus', sa.JSON(), nullable=True))
        batch_op.create_index('ix_attempts_ended_at', ['ended_at'], unique=False)
    op.create_table('idle_spans',
    sa.Column('job', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('since', sa.Float(precision=53), nullable=False),
    sa.Column('until', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['job'], ['jobs.id'], name=op.f('fk_idle_spans_job_jobs'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job', 'attempt', 'since', name=op.f('pk_idle_spans'))
    )
    op.create_table('prices',
    sa.Column('model', sa.String(length=255), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('gpu_hour', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('model', name=op.f('pk_prices'))
    )
    op.create_table('budgets',
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.Column('soft_gpu_hours', sa.Float(precision=53), nullable=True),
    sa.Column('hard_gpu_hours', sa.Float(precision=53), nullable=True),
    sa.Column('warned', sa.String(length=7), server_default='', nullable=False),
    sa.Column('set_at', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'],
                            name=op.f('fk_budgets_project_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project', name=op.f('pk_budgets'))
    )


def downgrade() -> None:
    op.drop_table('budgets')
    op.drop_table('prices')
    op.drop_table('idle_spans')
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.drop_index('ix_attempts_ended_at')
        batch_op.drop_column('gpus')
