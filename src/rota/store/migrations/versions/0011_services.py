"""services, service_models

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('services',
    sa.Column('name', sa.String(length=63), nullable=False),
    sa.Column('project', sa.String(length=63), nullable=False),
    sa.Column('queue', sa.String(length=63), nullable=False),
    sa.Column('user', sa.String(length=63), nullable=False),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('template', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.Float(precision=53), nullable=False),
    sa.ForeignKeyConstraint(['project'], ['projects.name'],
                            name=op.f('fk_services_project_projects')),
    sa.ForeignKeyConstraint(['user'], ['users.name'], name=op.f('fk_services_user_users')),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_services'))
    )
    op.create_table('service_models',
    sa.Column('model', sa.String(length=255), nullable=False),
    sa.Column('service', sa.String(length=63), nullable=False),
    sa.ForeignKeyConstraint(['service'], ['services.name'],
                            name=op.f('fk_service_models_service_services'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model', name=op.f('pk_service_models'))
    )


def downgrade() -> None:
    op.drop_table('service_models')
    op.drop_table('services')
