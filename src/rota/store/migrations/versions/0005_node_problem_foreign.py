"""nodes.problem (the backend's reason nothing may start there) and nodes.foreign (what work
outside rota holds there)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('problem', sa.Text(), nullable=False, server_default=''))
        batch_op.add_column(sa.Column('foreign', sa.JSON(), nullable=False,
                                      server_default='[]'))


def downgrade() -> None:
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.drop_column('foreign')
        batch_op.drop_column('problem')
