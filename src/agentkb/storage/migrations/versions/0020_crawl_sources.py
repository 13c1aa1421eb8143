"""The start URLs and options of each knowledge base's URL inserts (`crawl_sources`), which `SELECT
kb_recrawl('<kb>')` crawls again. One row per set of start URLs (`key`: the md5 of the sorted, distinct
URLs joined by newlines; a later insert of the same URLs replaces the options). Filled from the succeeded URL
inserts recorded in `ingest_jobs`, the latest one of each set of URLs. Written to be run again over a
database that has the table already (`IF NOT EXISTS`, `ON CONFLICT DO NOTHING`).

Revision ID: 0020_crawl_sources
Revises: 0019_sql_jobs
"""

from alembic import op

revision = "0020_crawl_sources"
down_revision = "0019_sql_jobs"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """CREATE TABLE IF NOT EXISTS crawl_sources (
            kb_id bigint NOT NULL REFERENCES knowledge_bases (id) ON DELETE CASCADE,
            key text NOT NULL,
            urls jsonb NOT NULL,
            crawl_depth integer,
            page_limit integer,
            filters jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kb_id, key)
        )"""
    )
    op.execute(
        """INSERT INTO crawl_sources (kb_id, key, urls, crawl_depth, page_limit, filters, created_at, updated_at)
        SELECT DISTINCT ON (j.kb_id, s.key) j.kb_id, s.key, j.request -> 'urls',
            CASE WHEN jsonb_typeof(j.request -> 'crawl_depth') = 'number'
                THEN (j.request ->> 'crawl_depth')::integer END,
            CASE WHEN jsonb_typeof(j.request -> 'limit') = 'number' THEN (j.request ->> 'limit')::integer END,
            coalesce(j.request -> 'filters', 'null'::jsonb), j.created_at, j.created_at
        FROM ingest_jobs AS j
        JOIN knowledge_bases AS kb ON kb.id = j.kb_id
        CROSS JOIN LATERAL (
            SELECT md5(string_agg(u, E'\\n' ORDER BY u COLLATE "C")) AS key
            FROM (SELECT DISTINCT jsonb_array_elements_text(j.request -> 'urls') AS u) AS d
        ) AS s
        WHERE j.state = 'succeeded' AND jsonb_typeof(j.request -> 'urls') = 'array'
            AND jsonb_array_length(j.request -> 'urls') > 0
        ORDER BY j.kb_id, s.key, j.created_at DESC
        ON CONFLICT DO NOTHING"""
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS crawl_sources")
