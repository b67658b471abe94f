"""datasets, dataset_caches, dataset_quotas: datasets jobs read, what each node's cache holds,
and per project the most bytes of its datasets the caches may hold (rota.core.datasets)

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'datasets',
        sa.Column('name', sa.String(length=63), nullable=False),
        sa.Column('project', sa.String(length=63), nullable=False),
        sa.Column('user', sa.String(length=63), nullable=False),
        sa.Column('source', sa.Text(), nullable=False),
        sa.Column('version', sa.String(length=63), nullable=False),
        sa.Column('size_bytes', sa.BigInteger(), nullable=True),
        sa.Column('created_at', sa.Float(precision=53), nullable=False),
        sa.ForeignKeyConstraint(['project'], ['projects.name'],
                                name=op.f('fk_datasets_project_projects')),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_datasets')))
    op.create_table(
        'dataset_caches',
        sa.Column('node', sa.String(length=253), nullable=False),
        sa.Column('dataset', sa.String(length=63), nullable=False),
        sa.Column('version', sa.String(length=63), nullable=False),
        sa.Column('bytes', sa.BigInteger(), nullable=False),
        sa.Column('last_used', sa.Float(precision=53), nullable=False),
        sa.PrimaryKeyConstraint('node', 'dataset', 'version', name=op.f('pk_dataset_caches')))
    op.create_table(
        'dataset_quotas',
        sa.Column('project', sa.String(length=63), nullable=False),
        sa.Column('cache_bytes', sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(['project'], ['projects.name'],
                                name=op.f('fk_dataset_quotas_project_projects'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('project', name=op.f('pk_dataset_quotas')))


def downgrade() -> None:
    op.drop_table('dataset_quotas')
    op.drop_table('dataset_caches')
    op.drop_table('datasets')
