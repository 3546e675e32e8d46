"""Drives sluice with PyMySQL (Debian's python3-pymysql) for the client matrix.

Connection details come from SLUICE_HOST, SLUICE_PORT, SLUICE_USER,
SLUICE_PASSWORD and SLUICE_DB. Runs the matrix workload (see
tests/matrix_test.go) and prints one JSON line with what it saw. PyMySQL
substitutes parameters on the client side; there is no binary protocol.
(The file is not named pymysql.py: it would shadow the module it imports.)
"""

import datetime
import json
import os
import sys
import time

try:
    import pymysql
except ImportError as e:  # reported in the JSON line like any other failure
    pymysql, IMPORT_ERROR = None, e

CLIENT = "pymysql"
TABLE = "matrix_pymysql"
DT = datetime.datetime(2026, 11, 29, 10, 11, 12)
ROWS = [
    (1, "h\u00e9llo \u4e16\u754c", 10),
    (2, "null n", None),
    (3, "four bytes \U0001f642", 30),
]

out = {
    "client": CLIENT,
    "ok": False,
    "errors": 0,
    "read_server_ids": [],
    "tx_server_id": 0,
    "write_server_id": 0,
    "details": "",
}
notes = []  # errors
info = []  # slow steps and replication waits, for the log


def fail(step, err):
    out["errors"] += 1
    notes.append("%s: %s" % (step, err))


def step(name, fn):
    start = time.time()
    try:
        fn()
    except Exception as e:  # counted, never fatal
        fail(name, "%s: %s" % (type(e).__name__, e))
    if time.time() - start > 1:
        info.append("%s took %.1fs" % (name, time.time() - start))


def check_rows(where, rows):
    """rows are (id, txt, n, dt) tuples as read back."""
    got = [(int(r[0]), r[1], None if r[2] is None else int(r[2]), r[3]) for r in rows]
    want = [(i, txt, n, DT) for (i, txt, n) in ROWS]
    if got != want:
        fail(where, "rows %r, want %r" % (got, want))


def main():
    if pymysql is None:
        fail("import pymysql", IMPORT_ERROR)
        return
    try:
        db = pymysql.connect(
            host=os.environ.get("SLUICE_HOST", "127.0.0.1"),
            port=int(os.environ.get("SLUICE_PORT", "6033")),
            user=os.environ.get("SLUICE_USER", "app"),
            password=os.environ.get("SLUICE_PASSWORD", ""),
            database=os.environ.get("SLUICE_DB", "sluice_test"),
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=10,
            read_timeout=30,
            write_timeout=30,
        )
    except Exception as e:
        fail("connect", "%s: %s" % (type(e).__name__, e))
        return
    cur = db.cursor()

    def one(sql, args=None):
        cur.execute(sql, args)
        return cur.fetchone()

    def setup():
        cur.execute("DROP TABLE IF EXISTS " + TABLE)
        cur.execute(
            "CREATE TABLE " + TABLE + " (id INT PRIMARY KEY, sid INT, "
            "txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME)"
        )

    def insert():
        sql = "INSERT INTO " + TABLE + " (id, sid, txt, n, dt) VALUES (%s, @@server_id, %s, %s, %s)"
        for (i, txt, n) in ROWS:
            cur.execute(sql, (i, txt, n, DT))

    def write_id():
        out["write_server_id"] = int(one("/* sluice:master */ SELECT sid FROM " + TABLE + " WHERE id = %s", (1,))[0])

    def transaction():
        db.begin()
        try:
            out["tx_server_id"] = int(one("SELECT @@server_id")[0])
            sid, plus = one("SELECT @@server_id, %s + 1", (1,))
            if int(sid) != out["tx_server_id"] or int(plus) != 2:
                fail("parameterised read in the transaction", "server %r, %r; want %r, 2" % (sid, plus, out["tx_server_id"]))
            cur.execute("SELECT id, txt, n, dt FROM " + TABLE + " WHERE id >= %s ORDER BY id", (1,))
            check_rows("transaction read", cur.fetchall())
        finally:
            db.commit()

    def reads():
        for _ in range(4):
            out["read_server_ids"].append(int(one("SELECT @@server_id")[0]))
        sid, plus = one("SELECT @@server_id, %s + 1", (41,))
        out["read_server_ids"].append(int(sid))
        if int(plus) != 42:
            fail("parameterised read", "got %r, want 42" % (plus,))

    def multirow():
        # Outside a transaction the rows come from a replica: poll until
        # replication has brought the table and the rows there.
        deadline = time.time() + 15
        polls = 0
        while True:
            polls += 1
            try:
                cur.execute("SELECT @@server_id, id, txt, n, dt FROM " + TABLE + " WHERE id >= %s ORDER BY id", (1,))
                rows = cur.fetchall()
            except pymysql.err.ProgrammingError as e:
                if e.args[0] != 1146 or time.time() > deadline:  # no such table (yet)
                    raise
                rows = ()
            if rows:
                out["read_server_ids"].append(int(rows[0][0]))
            if len(rows) == len(ROWS) or time.time() > deadline:
                break
            time.sleep(0.05)
        if polls > 1:
            info.append("rows on the replica after %d reads" % polls)
        check_rows("multi-row read", [r[1:] for r in rows])

    step("create table", setup)
    step("prepared insert", insert)
    step("hinted read of the write", write_id)
    step("transaction", transaction)
    step("reads", reads)
    step("multi-row read", multirow)
    step("drop table", lambda: cur.execute("DROP TABLE IF EXISTS " + TABLE))
    try:
        db.close()
    except Exception:
        pass


try:
    main()
except Exception as e:
    fail("unexpected", "%s: %s" % (type(e).__name__, e))
out["ok"] = out["errors"] == 0
out["details"] = "; ".join((notes or ["client-side parameters (no binary protocol)"]) + info)
sys.stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
