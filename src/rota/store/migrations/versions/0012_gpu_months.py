"""gpu_months: GPU-seconds of ended attempts per project and calendar month (UTC)

Revision ID: 0012
Revises: 0011
"""

from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('gpu_months',
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.Column('month', sa.String(length=7), nullable=False),
    sa.Column('gpu_seconds', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'],
                            name=op.f('fk_gpu_months_project_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project', 'month', name=op.f('pk_gpu_months'))
    )
    # the attempts that ended before this revision, added up as each one's end adds from now on
    attempts = sa.table('attempts', sa.column('job', sa.Integer),
                        sa.column('bound_at', sa.Float), sa.column('ended_at', sa.Float),
                        sa.column('gpus', sa.JSON), sa.column('placement', sa.JSON))
    jobs = sa.table('jobs', sa.column('id', sa.Integer), sa.column('project', sa.String))
    conn = op.get_bind()
    totals: dict[tuple[str, str], float] = {}
    for row in conn.execute(sa.select(jobs.c.project, attempts.c.bound_at, attempts.c.ended_at,
                                      attempts.c.gpus, attempts.c.placement)
                            .join(jobs, jobs.c.id == attempts.c.job)
                            .where(attempts.c.ended_at.is_not(None))):
        if row.gpus is not None:
            gpus = sum(int(m) for m in row.gpus.values()) / 1000
        else:
            gpus = sum(int(d[1]) for r in row.placement or () for d in r["devices"]) / 1000
        t = row.bound_at
        while gpus > 0 and t < row.ended_at:
            day = datetime.fromtimestamp(t, timezone.utc)
            after = datetime(day.year + day.month // 12, day.month % 12 + 1, 1,
                             tzinfo=timezone.utc).timestamp()
            key = (row.project, f"{day.year:04d}-{day.month:02d}")
            totals[key] = totals.get(key, 0.0) + gpus * (min(after, row.ended_at) - t)
            t = after
    if totals:
        months = sa.table('gpu_months', sa.column('project', sa.String),
                          sa.column('month', sa.String), sa.column('gpu_seconds', sa.Float))
        conn.execute(months.insert(), [{"project": p, "month": m, "gpu_seconds": s}
                                       for (p, m), s in sorted(totals.items())])


def downgrade() -> None:
    op.drop_table('gpu_months')
