"""MindsDB's JOBS: scheduled SQL statements (`sql_jobs`), their runs (`sql_job_runs`, MindsDB's
`jobs_history`) and the values of `LAST` each job keeps per condition (`sql_job_last`). A run keeps its
job's project and name as text, so the history outlives a dropped job, as MindsDB's does.

Revision ID: 0019_sql_jobs
Revises: 0018_api_key_scopes
"""

from alembic import op

revision = "0019_sql_jobs"
down_revision = "0018_api_key_scopes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS sql_jobs (
            id bigserial PRIMARY KEY,
            project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
            name text NOT NULL,
            query text NOT NULL,
            if_query text,
            start_at timestamptz NOT NULL,
            end_at timestamptz,
            schedule_str text,
            next_run_at timestamptz,
            run_projects text[],
            created_by text,
            running_run_id bigint,
            running_worker text,
            heartbeat_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (project_id, name)
        )
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS sql_jobs_next_run_at ON sql_jobs (next_run_at)")
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS sql_job_runs (
            id bigserial PRIMARY KEY,
            job_id bigint REFERENCES sql_jobs (id) ON DELETE SET NULL,
            project_name text NOT NULL,
            job_name text NOT NULL,
            tick_at timestamptz NOT NULL,
            run_start timestamptz NOT NULL DEFAULT now(),
            run_end timestamptz,
            state text NOT NULL DEFAULT 'running',
            error text,
            query text,
            ingest_job_ids text[] NOT NULL DEFAULT '{}',
            worker text
        )
        """
    )
    op.execute("CREATE INDEX IF NOT EXISTS sql_job_runs_job ON sql_job_runs (job_id, id)")
    op.execute("CREATE INDEX IF NOT EXISTS sql_job_runs_name ON sql_job_runs (project_name, job_name, id)")
    op.execute(
        """
        CREATE TABLE IF NOT EXISTS sql_job_last (
            job_id bigint NOT NULL REFERENCES sql_jobs (id) ON DELETE CASCADE,
            key text NOT NULL,
            value jsonb NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (job_id, key)
        )
        """
    )


def downgrade() -> None:
    op.drop_table("sql_job_last")
    op.drop_table("sql_job_runs")
    op.drop_table("sql_jobs")
