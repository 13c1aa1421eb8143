// The MindsDB JavaScript SDK walk-through (databases, projects, knowledge bases and agents through
// SQL.runQuery), as MindsDB's JavaScript docs teach it, against the server at argv[2].
// Prints one JSON object: what each step answered. The Python test asserts on it.
import MindsDBModule from "mindsdb-js-sdk";

const MindsDB = MindsDBModule.default ?? MindsDBModule;
const [, , host, sqliteFile] = process.argv;
const out = {};

async function sql(name, query) {
  const result = await MindsDB.SQL.runQuery(query);
  out[name] = { type: result.type, columns: result.columnNames, rows: result.rows, error: result.error_message ?? null };
  return result;
}

await MindsDB.connect({ host });

out.projects = (await MindsDB.Projects.getAllProjects()).map((p) => p.name);
const db = await MindsDB.Databases.createDatabase("js_shop", "sqlite", { db_file: sqliteFile });
out.created_database = { name: db.name, type: db.type, engine: db.engine };
out.databases = (await MindsDB.Databases.getAllDatabases()).map((d) => ({ name: d.name, type: d.type, engine: d.engine }));
const found = await MindsDB.Databases.getDatabase("js_shop");
out.got_database = found ? { name: found.name, type: found.type, engine: found.engine } : null;
await sql("data_databases", "SHOW FULL DATABASES WHERE type = 'data'");
await sql("select_source", "SELECT id, name FROM js_shop.products ORDER BY id");

await sql("create_kb", "CREATE KNOWLEDGE_BASE mindsdb.js_kb USING metadata_columns = ['category'], content_columns = ['body'], id_column = 'id'");
await sql("insert_kb", "INSERT INTO mindsdb.js_kb (id, body, category) VALUES " +
  "(1, 'Reset the router by holding its button for ten seconds.', 'network'), " +
  "(2, 'Invoices are emailed on the first working day of each month.', 'billing')");
await sql("search_kb", "SELECT id, chunk_content, category, relevance FROM mindsdb.js_kb WHERE content = 'how do I restart the router?' LIMIT 1");
await sql("filter_kb", "SELECT id FROM mindsdb.js_kb WHERE content = 'money' AND category = 'billing'");
await sql("show_kbs", "SHOW KNOWLEDGE_BASES");

await sql("create_agent", "CREATE AGENT mindsdb.js_agent USING data = {'knowledge_bases': ['mindsdb.js_kb']}, " +
  "prompt_template = 'mindsdb.js_kb holds the product manual.'");
await sql("ask_agent", "SELECT answer FROM mindsdb.js_agent WHERE question = 'How do I reset the router?'");
await sql("show_agents", "SHOW AGENTS");

await sql("drop_agent", "DROP AGENT mindsdb.js_agent");
await sql("drop_kb", "DROP KNOWLEDGE_BASE mindsdb.js_kb");
await MindsDB.Databases.deleteDatabase("js_shop");
out.databases_after = (await MindsDB.Databases.getAllDatabases()).map((d) => d.name);

console.log(JSON.stringify(out));
