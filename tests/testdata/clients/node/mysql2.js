'use strict';
// Drives sluice with Node's mysql2 (pinned in package.json) for the client
// matrix: every parameterised statement goes through execute(), the binary
// prepared-statement protocol; plain query() for the rest. Connection
// details come from SLUICE_HOST, SLUICE_PORT, SLUICE_USER, SLUICE_PASSWORD
// and SLUICE_DB. Runs the matrix workload (see tests/matrix_test.go) and
// prints one JSON line with what it saw.

const TABLE = 'matrix_mysql2';
const DT = '2026-11-29 10:11:12';
const DT_VALUE = new Date(Date.UTC(2026, 10, 29, 10, 11, 12)); // bound as a binary DATETIME
const ROWS = [
  [1, 'h\u00e9llo \u4e16\u754c', 10],
  [2, 'null n', null],
  [3, 'four bytes \u{1f642}', 30],
];

const out = {
  client: 'mysql2',
  ok: false,
  errors: 0,
  read_server_ids: [],
  tx_server_id: 0,
  write_server_id: 0,
  details: '',
};
const notes = []; // errors
const info = []; // slow steps and replication waits, for the log

function fail(step, err) {
  out.errors++;
  notes.push(`${step}: ${err}`);
}

async function step(name, fn) {
  const start = Date.now();
  try {
    await fn();
  } catch (e) {
    fail(name, `${e.code || e.name}${e.errno ? ' ' + e.errno : ''}: ${e.message}`);
  }
  if (Date.now() - start > 1000) {
    info.push(`${name} took ${((Date.now() - start) / 1000).toFixed(1)}s`);
  }
}

// got holds [id, txt, n, dt] rows as read back.
function checkRows(where, got) {
  const norm = got.map((r) => [Number(r[0]), String(r[1]), r[2] === null ? null : Number(r[2]), String(r[3])]);
  const want = ROWS.map((r) => [r[0], r[1], r[2], DT]);
  if (JSON.stringify(norm) !== JSON.stringify(want)) {
    fail(where, `rows ${JSON.stringify(norm)}, want ${JSON.stringify(want)}`);
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  let mysql;
  try {
    mysql = require('mysql2/promise');
  } catch (e) {
    fail('require mysql2', e.message);
    return;
  }
  let db;
  try {
    db = await mysql.createConnection({
      host: process.env.SLUICE_HOST || '127.0.0.1',
      port: Number(process.env.SLUICE_PORT || 6033),
      user: process.env.SLUICE_USER || 'app',
      password: process.env.SLUICE_PASSWORD || '',
      database: process.env.SLUICE_DB || 'sluice_test',
      charset: 'utf8mb4',
      timezone: 'Z',
      dateStrings: true,
      connectTimeout: 10000,
    });
  } catch (e) {
    fail('connect', `${e.code || e.name}: ${e.message}`);
    return;
  }
  await step('create table', async () => {
    await db.query(`DROP TABLE IF EXISTS ${TABLE}`);
    await db.query(`CREATE TABLE ${TABLE} (id INT PRIMARY KEY, sid INT, ` +
      'txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME)');
  });
  await step('prepared insert', async () => {
    for (const [id, txt, n] of ROWS) {
      await db.execute(`INSERT INTO ${TABLE} (id, sid, txt, n, dt) VALUES (?, @@server_id, ?, ?, ?)`, [id, txt, n, DT_VALUE]);
    }
  });
  await step('hinted read of the write', async () => {
    const [rows] = await db.execute(`/* sluice:master */ SELECT sid FROM ${TABLE} WHERE id = ?`, [1]);
    out.write_server_id = Number(rows[0].sid);
  });
  await step('transaction', async () => {
    await db.beginTransaction();
    try {
      const [r] = await db.query({ sql: 'SELECT @@server_id', rowsAsArray: true });
      out.tx_server_id = Number(r[0][0]);
      // execute() keeps one prepared statement per SQL text on the
      // connection: this one is reused outside the transaction below.
      const [p] = await db.execute({ sql: 'SELECT @@server_id, ? + 1', rowsAsArray: true }, [1]);
      if (Number(p[0][0]) !== out.tx_server_id || Number(p[0][1]) !== 2) {
        fail('parameterised read in the transaction', `server ${p[0][0]}, ${p[0][1]}; want ${out.tx_server_id}, 2`);
      }
      const [rows] = await db.execute({ sql: `SELECT id, txt, n, dt FROM ${TABLE} WHERE id >= ? ORDER BY id`, rowsAsArray: true }, [1]);
      checkRows('transaction read', rows);
    } finally {
      await db.commit();
    }
  });
  await step('reads', async () => {
    for (let i = 0; i < 4; i++) {
      const [r] = await db.query({ sql: 'SELECT @@server_id', rowsAsArray: true });
      out.read_server_ids.push(Number(r[0][0]));
    }
    const [r] = await db.execute({ sql: 'SELECT @@server_id, ? + 1', rowsAsArray: true }, [41]);
    out.read_server_ids.push(Number(r[0][0]));
    if (Number(r[0][1]) !== 42) {
      fail('parameterised read', `got ${r[0][1]}, want 42`);
    }
  });
  await step('multi-row read', async () => {
    // Outside a transaction the rows come from a replica: poll until
    // replication has brought the table and the rows there.
    const deadline = Date.now() + 15000;
    let got;
    let polls = 0;
    for (;;) {
      polls++;
      try {
        [got] = await db.execute({ sql: `SELECT @@server_id, id, txt, n, dt FROM ${TABLE} WHERE id >= ? ORDER BY id`, rowsAsArray: true }, [1]);
      } catch (e) {
        if (e.errno !== 1146 || Date.now() > deadline) { // no such table (yet)
          throw e;
        }
        got = [];
      }
      if (got.length) {
        out.read_server_ids.push(Number(got[0][0]));
      }
      if (got.length === ROWS.length || Date.now() > deadline) {
        break;
      }
      await sleep(50);
    }
    if (polls > 1) {
      info.push(`rows on the replica after ${polls} reads`);
    }
    checkRows('multi-row read', got.map((r) => r.slice(1)));
  });
  await step('drop table', () => db.query(`DROP TABLE IF EXISTS ${TABLE}`));
  try {
    await db.end();
  } catch (e) {
    // ignored: the workload is done
  }
}

main()
  .catch((e) => fail('unexpected', e && e.stack ? e.stack : String(e)))
  .finally(() => {
    out.ok = out.errors === 0;
    out.details = (notes.length ? notes : ['binary prepared statements through execute()']).concat(info).join('; ');
    process.stdout.write(JSON.stringify(out) + '\n');
  });
