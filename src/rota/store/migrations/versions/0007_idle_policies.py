"""idle_policies: operators' idle reclamation defaults, per queue and for all

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('idle_policies',
    sa.Column('scope', sa.String(length=63), nullable=False),
    sa.Column('policy', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('scope', name=op.f('pk_idle_policies'))
    )


def downgrade() -> None:
    op.drop_table('idle_policies')
