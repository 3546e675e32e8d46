<?php
// Drives sluice with PHP PDO (Debian's php-mysql, mysqlnd) for the client
// matrix. usage: php pdo.php emulated|native
//   emulated: PDO::ATTR_EMULATE_PREPARES on, parameters substituted by PDO;
//   native:   off, every prepare()/query() is a binary prepared statement.
// Connection details come from SLUICE_HOST, SLUICE_PORT, SLUICE_USER,
// SLUICE_PASSWORD and SLUICE_DB. Runs the matrix workload (see
// tests/matrix_test.go) and prints one JSON line with what it saw.
$mode = $argv[1] ?? 'emulated';
$client = "pdo_$mode";
$table = "matrix_pdo_$mode";
const DT = '2026-11-29 10:11:12';
$rows = [
    [1, "h\u{e9}llo \u{4e16}\u{754c}", 10],
    [2, 'null n', null],
    [3, "four bytes \u{1f642}", 30],
];
$out = ['client' => $client, 'ok' => false, 'errors' => 0, 'read_server_ids' => [],
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
        fail($name, get_class($e) . ': ' . $e->getMessage());
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
    global $mode, $table, $rows, $out;
    if ($mode !== 'emulated' && $mode !== 'native') {
        fail('usage', "mode $mode, want emulated or native");
        return;
    }
    $host = getenv('SLUICE_HOST') ?: '127.0.0.1';
    $port = getenv('SLUICE_PORT') ?: '6033';
    $db = getenv('SLUICE_DB') ?: 'sluice_test';
    try {
        $pdo = new PDO("mysql:host=$host;port=$port;dbname=$db;charset=utf8mb4",
            getenv('SLUICE_USER') ?: 'app', (string)getenv('SLUICE_PASSWORD'), [
                PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
                PDO::ATTR_EMULATE_PREPARES => $mode === 'emulated',
                PDO::ATTR_TIMEOUT => 10,
            ]);
    } catch (Throwable $e) {
        fail('connect', get_class($e) . ': ' . $e->getMessage());
        return;
    }
    step('create table', function () use ($pdo, $table) {
        $pdo->exec("DROP TABLE IF EXISTS $table");
        $pdo->exec("CREATE TABLE $table (id INT PRIMARY KEY, sid INT, " .
            "txt VARCHAR(64) CHARACTER SET utf8mb4, n INT NULL, dt DATETIME)");
    });
    step('prepared insert', function () use ($pdo, $table, $rows) {
        $st = $pdo->prepare("INSERT INTO $table (id, sid, txt, n, dt) VALUES (?, @@server_id, ?, ?, ?)");
        foreach ($rows as [$id, $txt, $n]) {
            $st->bindValue(1, $id, PDO::PARAM_INT);
            $st->bindValue(2, $txt, PDO::PARAM_STR);
            $st->bindValue(3, $n, $n === null ? PDO::PARAM_NULL : PDO::PARAM_INT);
            $st->bindValue(4, DT, PDO::PARAM_STR);
            $st->execute();
        }
        $st->closeCursor();
    });
    step('hinted read of the write', function () use ($pdo, $table, &$out) {
        $st = $pdo->prepare("/* sluice:master */ SELECT sid FROM $table WHERE id = ?");
        $st->execute([1]);
        $out['write_server_id'] = (int)$st->fetchColumn();
        $st->closeCursor();
    });
    // One statement handle used outside, inside and again outside a
    // transaction: with native prepares it has to run on whichever backend
    // the statement is routed to.
    $plus = null;
    step('prepare a shared read', function () use ($pdo, &$plus) {
        $plus = $pdo->prepare('SELECT @@server_id, ? + 1');
    });
    step('transaction', function () use ($pdo, $table, &$out, &$plus) {
        $pdo->beginTransaction();
        try {
            $out['tx_server_id'] = (int)$pdo->query('SELECT @@server_id')->fetchColumn();
            if ($plus) {
                $plus->execute([1]);
                [$sid, $two] = $plus->fetch(PDO::FETCH_NUM);
                $plus->closeCursor();
                if ((int)$sid !== $out['tx_server_id'] || (int)$two !== 2) {
                    fail('parameterised read in the transaction', "server $sid, $two; want {$out['tx_server_id']}, 2");
                }
            }
            $st = $pdo->prepare("SELECT id, txt, n, dt FROM $table WHERE id >= ? ORDER BY id");
            $st->execute([1]);
            check_rows('transaction read', $st->fetchAll(PDO::FETCH_NUM));
        } finally {
            $pdo->commit();
        }
    });
    step('reads', function () use ($pdo, &$out, &$plus) {
        for ($i = 0; $i < 4; $i++) {
            $out['read_server_ids'][] = (int)$pdo->query('SELECT @@server_id')->fetchColumn();
        }
        $st = $plus ?: $pdo->prepare('SELECT @@server_id, ? + 1');
        $st->execute([41]);
        [$sid, $v] = $st->fetch(PDO::FETCH_NUM);
        $st->closeCursor();
        $out['read_server_ids'][] = (int)$sid;
        if ((int)$v !== 42) {
            fail('parameterised read', "got $v, want 42");
        }
    });
    step('multi-row read', function () use ($pdo, $table, $rows, &$out) {
        // Outside a transaction the rows come from a replica: poll until
        // replication has brought the table and the rows there.
        $deadline = microtime(true) + 15;
        $polls = 0;
        $st = null;
        while (true) {
            $polls++;
            try {
                // Native prepares check the table at prepare time.
                $st = $st ?: $pdo->prepare("SELECT @@server_id, id, txt, n, dt FROM $table WHERE id >= ? ORDER BY id");
                $st->execute([1]);
                $got = $st->fetchAll(PDO::FETCH_NUM);
            } catch (PDOException $e) {
                if (($e->errorInfo[1] ?? 0) !== 1146 || microtime(true) > $deadline) { // no such table (yet)
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
        if ($polls > 1) {
            $GLOBALS['info'][] = "rows on the replica after $polls reads";
        }
        check_rows('multi-row read', array_map(fn($r) => array_slice($r, 1), $got));
    });
    step('drop table', fn() => $pdo->exec("DROP TABLE IF EXISTS $table"));
}

try {
    main();
} catch (Throwable $e) {
    fail('unexpected', get_class($e) . ': ' . $e->getMessage());
}
$out['ok'] = $out['errors'] === 0;
$out['details'] = implode('; ', array_merge($notes ?: [$mode === 'native'
    ? 'binary prepared statements (ATTR_EMULATE_PREPARES off)' : 'emulated prepares (text protocol)'], $info));
echo json_encode($out, JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
