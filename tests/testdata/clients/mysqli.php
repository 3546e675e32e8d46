<?php
// Drives sluice with PHP mysqli (Debian's php-mysql, mysqlnd) for the client
// matrix: text queries with query(), binary prepared statements with
// prepare()/bind_param()/execute()/get_result(). Connection details come
// from SLUICE_HOST, SLUICE_PORT, SLUICE_USER, SLUICE_PASSWORD and SLUICE_DB.
// Runs the matrix workload (see tests/matrix_test.go) and prints one JSON
// line with what it saw.
$table = 'matrix_mysqli';
const DT = '2026-11-29 10:11:12';
$rows = [
    [1, "h\u{e9}llo \u{4e16}\u{754c}", 10],
    [2, 'null n', null],
    [3, "four bytes \u{1f642}", 30],
];
$out = ['client' => 'mysqli', 'ok' => false, 'errors' => 0, 'read_server_ids' => [],
    'tx_server_id' => 0, 'write_server_id' => 0, 'details' => ''];
$notes = []; // errors
$info = [];  // slow steps and replication waits, for the log

function fail(string $step, string $err): void {
    global $out, $notes;
    $out['errors']++;
    $notes[] = "$step: $err";
}

function step(string $name, callable $fn): void {
    global $info;
    $start = microtime(true);
    try {
        $fn();
    } catch (Throwable $e) {
        fail($name, get_class($e) . ': ' . $e->getCode() . ' ' . $e->getMessage());
    }
    if (microtime(true) - $start > 1) {
        $info[] = sprintf('%s took %.1fs', $name, microtime(true) - $start);
    }
}

// $got holds [id, txt, n, dt] rows as read back, in any PHP scalar types.
function check_rows(string $where, array $got): void {
    global $rows;
    $norm = array_map(fn($r) => [(int)$r[0], (string)$r[1], $r[2] === null ? null : (int)$r[2], (string)$r[3]], $got);
    $want = array_map(fn($r) => [$r[0], $r[1], $r[2], DT], $rows);
    if ($norm !== $want) {
        fail($where, 'rows ' . json_encode($norm, JSON_UNESCAPED_UNICODE) . ', want ' . json_encode($want, JSON_UNESCAPED_UNICODE));
    }
}

function main(): void {
    global $table, $rows, $out;
    mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
    try {
        $db = mysqli_init();
        $db->options(MYSQLI_OPT_CONNECT_TIMEOUT, 10);
        $db->real_connect(getenv('SLUICE_HOST') ?: '127.0.0.1', getenv('SLUICE_USER') ?: 'app',
            (string)getenv('SLUICE_PASSWORD'), getenv('SLUICE_DB') ?: 'sluice_test', (int)(getenv('SLUICE_PORT') ?: 6033));
        $db->set_charset('utf8mb4');
    } catch (Throwable $e) {
        fail('connect', get_class($e) . ': ' . $e->getCode() . ' ' . $e->getMessage());
        return;
    }
    step('create table', function () use ($db, $table) {
        $db->query("DROP TABLE IF EXISTS $table");
        $db->query("CREATE TABLE $table (id INT PRIMARY KEY, sid INT, " .
            "txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME)");
    });
    step('prepared insert', function () use ($db, $table, $rows) {
        $st = $db->prepare("INSERT INTO $table (id, sid, txt, n, dt) VALUES (?, @@server_id, ?, ?, ?)");
        $id = 0;
        $txt = '';
        $n = null;
        $dt = DT;
        $st->bind_param('isis', $id, $txt, $n, $dt);
        foreach ($rows as [$id, $txt, $n]) {
            $st->execute();
        }
        $st->close();
    });
    step('hinted read of the write', function () use ($db, $table, &$out) {
        $st = $db->prepare("/* sluice:master */ SELECT sid FROM $table WHERE id = ?");
        $id = 1;
        $st->bind_param('i', $id);
        $st->execute();
        $out['write_server_id'] = (int)$st->get_result()->fetch_row()[0];
        $st->close();
    });
    // One statement handle used inside and then outside a transaction: it
    // has to run on whichever backend the statement is routed to.
    $plus = null;
    $arg = 0;
    step('prepare a shared read', function () use ($db, &$plus, &$arg) {
        $plus = $db->prepare('SELECT @@server_id, ? + 1');
        $plus->bind_param('i', $arg);
    });
    step('transaction', function () use ($db, $table, &$out, &$plus, &$arg) {
        $db->begin_transaction();
        try {
            $out['tx_server_id'] = (int)$db->query('SELECT @@server_id')->fetch_row()[0];
            if ($plus) {
                $arg = 1;
                $plus->execute();
                [$sid, $two] = $plus->get_result()->fetch_row();
                if ((int)$sid !== $out['tx_server_id'] || (int)$two !== 2) {
                    fail('parameterised read in the transaction', "server $sid, $two; want {$out['tx_server_id']}, 2");
                }
            }
            $st = $db->prepare("SELECT id, txt, n, dt FROM $table WHERE id >= ? ORDER BY id");
            $from = 1;
            $st->bind_param('i', $from);
            $st->execute();
            check_rows('transaction read', $st->get_result()->fetch_all(MYSQLI_NUM));
            $st->close();
        } finally {
            $db->commit();
        }
    });
    step('reads', function () use ($db, &$out, &$plus, &$arg) {
        for ($i = 0; $i < 4; $i++) {
            $out['read_server_ids'][] = (int)$db->query('SELECT @@server_id')->fetch_row()[0];
        }
        if (!$plus) {
            fail('parameterised read', 'no prepared statement');
            return;
        }
        $arg = 41;
        $plus->execute();
        [$sid, $v] = $plus->get_result()->fetch_row();
        $plus->close();
        $out['read_server_ids'][] = (int)$sid;
        if ((int)$v !== 42) {
            fail('parameterised read', "got $v, want 42");
        }
    });
    step('multi-row read', function () use ($db, $table, $rows, &$out) {
        // Outside a transaction the rows come from a replica: poll until
        // replication has brought the table and the rows there.
        $from = 1;
        $st = null;
        $deadline = microtime(true) + 15;
        $polls = 0;
        while (true) {
            $polls++;
            try {
                if (!$st) { // the table is checked at prepare time
                    $st = $db->prepare("SELECT @@server_id, id, txt, n, dt FROM $table WHERE id >= ? ORDER BY id");
                    $st->bind_param('i', $from);
                }
                $st->execute();
                $got = $st->get_result()->fetch_all(MYSQLI_NUM);
            } catch (mysqli_sql_exception $e) {
                if ($e->getCode() !== 1146 || microtime(true) > $deadline) { // no such table (yet)
                    throw $e;
                }
                $got = [];
            }
            if ($got) {
                $out['read_server_ids'][] = (int)$got[0][0];
            }
            if (count($got) === count($rows) || microtime(true) > $deadline) {
                break;
            }
            usleep(50000);
        }
        $st->close();
        if ($polls > 1) {
            $GLOBALS['info'][] = "rows on the replica after $polls reads";
        }
        check_rows('multi-row read', array_map(fn($r) => array_slice($r, 1), $got));
    });
    step('drop table', fn() => $db->query("DROP TABLE IF EXISTS $table"));
    try {
        $db->close();
    } catch (Throwable $e) {
    }
}

try {
    main();
} catch (Throwable $e) {
    fail('unexpected', get_class($e) . ': ' . $e->getMessage());
}
$out['ok'] = $out['errors'] === 0;
$out['details'] = implode('; ', array_merge($notes ?: ['binary prepared statements (prepare/bind_param/get_result), text queries'], $info));
echo json_encode($out, JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
