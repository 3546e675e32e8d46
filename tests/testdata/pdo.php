<?php
// Drives sluice with PHP PDO (Debian's php-mysql). Connection details come
// from the environment; prints one JSON object with what it saw.
$host = getenv('SLUICE_HOST');
$port = getenv('SLUICE_PORT');
$user = getenv('SLUICE_USER');
$pass = getenv('SLUICE_PASSWORD');
$out = [];
try {
    $pdo = new PDO("mysql:host=$host;port=$port;dbname=sluice_test;charset=utf8mb4", $user, $pass, [
        PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
        PDO::ATTR_EMULATE_PREPARES => true,
    ]);
    $out['read_server_id'] = (int)$pdo->query('SELECT @@server_id')->fetchColumn();
    $pdo->exec('CREATE TABLE IF NOT EXISTS pdo_t (id INT PRIMARY KEY, sid INT, txt VARCHAR(64))');
    $pdo->exec('DELETE FROM pdo_t');
    $st = $pdo->prepare('INSERT INTO pdo_t VALUES (?, @@server_id, ?)');
    $st->execute([1, "h\u{00e9}llo"]);
    $out['write_server_id'] = (int)$pdo->query('/* sluice:master */ SELECT sid FROM pdo_t WHERE id = 1')->fetchColumn();
    $out['text'] = $pdo->query('/* sluice:master */ SELECT txt FROM pdo_t WHERE id = 1')->fetchColumn();
    $pdo->beginTransaction();
    $out['tx_server_id'] = (int)$pdo->query('SELECT @@server_id')->fetchColumn();
    $pdo->commit();
    $pdo->exec('DROP TABLE pdo_t');
    $out['ok'] = true;
} catch (PDOException $e) {
    $out['ok'] = false;
    $out['error_code'] = isset($e->errorInfo[1]) ? $e->errorInfo[1] : null;
    $out['error'] = $e->getMessage();
}
echo json_encode($out), "\n";
