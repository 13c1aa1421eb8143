"""MindsDB's SQL, pure parts: knowledge-base SELECTs (`kbquery`), catalog answers (`catalog`), and external data
sources — connection engines (`datasources`) and read-only SELECT pushdown (`pushdown`)."""
