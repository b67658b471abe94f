"""queues.slurm: a queue's batch options (partition, QOS, what its jobs may choose:
rota.core.batchopts); NULL for queues stored before, which have none

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('queues', schema=None) as batch_op:
        batch_op.add_column(sa.Column('slurm', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('queues', schema=None) as batch_op:
        batch_op.drop_column('slurm')
