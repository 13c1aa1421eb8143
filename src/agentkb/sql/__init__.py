"""External SQL data sources: connection engines (`datasources`) and read-only SELECT pushdown (`pushdown`)."""
