"""jobs.failures: requeues that spend the restart budget (every requeue but a preemption's)

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('failures', sa.Integer(), nullable=False,
                                      server_default='0'))
    # jobs stored before this revision: every requeue that did not follow a preemption
    jobs = sa.table('jobs', sa.column('id', sa.Integer), sa.column('attempts', sa.Integer),
                    sa.column('failures', sa.Integer))
    events = sa.table('job_events', sa.column('job', sa.Integer), sa.column('kind', sa.String),
                      sa.column('data', sa.JSON))
    preempted = (sa.select(sa.func.count()).select_from(events)
                 .where(events.c.job == jobs.c.id, events.c.kind == 'state',
                        events.c.data['from'].as_string() == 'preempting',
                        events.c.data['to'].as_string() == 'pending')
                 .scalar_subquery())
    op.execute(jobs.update().where(jobs.c.attempts > 0)
               .values(failures=jobs.c.attempts - preempted))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('failures')
