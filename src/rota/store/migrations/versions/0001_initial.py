"""Initial schema: projects, users, tokens, queues, flavors, nodes, jobs, events, usage

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """One function per group of tables, called in the order they were first created: a
    revision already applied must keep its meaning, so these are its statements as first
    written, in the same order."""
    _cluster()
    _projects_and_queues()
    _users_and_tokens()
    _jobs()
    _memberships_and_usage()
    _job_events()


def _cluster() -> None:
    """The cluster as backends report it and operators configure it: flavours and nodes."""
    op.create_table('flavors',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('models', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_flavors'))
    )
    op.create_table('nodes',
    sa.Column('name', sa.String(length=253), nullable=False),
    sa.Column('resource_group', sa.String(length=63), nullable=False),
    sa.Column('cpu_milli', sa.Integer(), nullable=False),
    sa.Column('memory_mib', sa.Integer(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('devices', sa.JSON(), nullable=False),
    sa.Column('schedulable', sa.Boolean(), nullable=False),
    sa.Column('backend', sa.String(length=63), nullable=False),
    sa.Column('last_seen', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_nodes'))
    )


def _projects_and_queues() -> None:
    """What jobs are charged to and submitted to."""
    op.create_table('projects',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('weight', sa.Float(precision=53), nullable=False),
    sa.Column('created_at', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_projects'))
    )
    op.create_table('queues',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('cohort', sa.String(length=63), nullable=True),
    sa.Column('quotas', sa.JSON(), nullable=False),
    sa.Column('preemption', sa.JSON(), nullable=False),
    sa.Column('resource_groups', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_queues'))
    )


def _users_and_tokens() -> None:
    """Who submits, and the API tokens they authenticate with."""
    op.create_table('users',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('created_at', sa.Float(precision=53), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_users'))
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('user', sa.String(length=63), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('display', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.Float(precision=53), nullable=False),
    sa.Column('revoked_at', sa.Float(precision=53), nullable=True),
    sa.ForeignKeyConstraint(['user'], ['users.name'], name=op.f('fk_api_tokens_user_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index('uq_api_tokens_user_name', ['user', 'name'], unique=True)


def _jobs() -> None:
    """The jobs themselves, with the indexes listing and scheduling read them by."""
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.Column('user', sa.String(length=63), nullable=False),
    sa.Column('queue', sa.String(length=63), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('replicas', sa.Integer(), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('placement', sa.JSON(), nullable=True),
    sa.Column('flavor', sa.String(length=63), nullable=True),
    sa.Column('submit_time', sa.Float(precision=53), nullable=False),
    sa.Column('started_at', sa.Float(precision=53), nullable=True),
    sa.Column('finished_at', sa.Float(precision=53), nullable=True),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('wait_reasons', sa.JSON(), nullable=True),
    sa.Column('estimated_start', sa.Float(precision=53), nullable=True),
    sa.Column('preempt_deadline', sa.Float(precision=53), nullable=True),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('backend_handle', sa.JSON(), nullable=True),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'], name=op.f('fk_jobs_project_projects')),
    sa.ForeignKeyConstraint(['user'], ['users.name'], name=op.f('fk_jobs_user_users')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_project_state', ['project', 'state'], unique=False)
        batch_op.create_index('ix_jobs_queue', ['queue'], unique=False)
        batch_op.create_index('ix_jobs_state', ['state'], unique=False)
        batch_op.create_index('ix_jobs_user', ['user'], unique=False)


def _memberships_and_usage() -> None:
    """Rows keyed by project: who belongs to it, and its decayed usage."""
    op.create_table('memberships',
    sa.Column('user', sa.String(length=63), nullable=False),
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'], name=op.f('fk_memberships_project_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user'], ['users.name'], name=op.f('fk_memberships_user_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('user', 'project', name=op.f('pk_memberships'))
    )
    op.create_table('usage',
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.Column('gpu_seconds', sa.Float(precision=53), nullable=False),
    sa.Column('as_of', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'], name=op.f('fk_usage_project_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project', name=op.f('pk_usage'))
    )


def _job_events() -> None:
    """Each job's history, one row per change."""
    op.create_table('job_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('job', sa.Integer(), nullable=False),
    sa.Column('time', sa.Float(precision=53), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['job'], ['jobs.id'], name=op.f('fk_job_events_job_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_events')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('job_events', schema=None) as batch_op:
        batch_op.create_index('ix_job_events_job_id', ['job', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('job_events', schema=None) as batch_op:
        batch_op.drop_index('ix_job_events_job_id')

    op.drop_table('job_events')
    op.drop_table('usage')
    op.drop_table('memberships')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_user')
        batch_op.drop_index('ix_jobs_state')
        batch_op.drop_index('ix_jobs_queue')
        batch_op.drop_index('ix_jobs_project_state')

    op.drop_table('jobs')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index('uq_api_tokens_user_name')

    op.drop_table('api_tokens')
    op.drop_table('users')
    op.drop_table('queues')
    op.drop_table('projects')
    op.drop_table('nodes')
    op.drop_table('flavors')
