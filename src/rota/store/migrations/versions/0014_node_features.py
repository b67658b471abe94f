"""nodes.features: what a node can do (share a GPU, deliver signals, run containers), as its
backend reports it; rows stored before take what a machine running jobs as processes offers,
which its backend's next report corrects

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.add_column(sa.Column('features', sa.JSON(), nullable=False,
                                      server_default='["gpu-sharing", "signals"]'))


def downgrade() -> None:
    with op.batch_alter_table('nodes', schema=None) as batch_op:
        batch_op.drop_column('features')
