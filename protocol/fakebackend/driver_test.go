package fakebackend_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// testLogger sends the driver's complaints (the lost connection's
// "unexpected EOF") to the test's log.
type testLogger struct{ t *testing.T }

func (l testLogger) Print(v ...any) { l.t.Log(v...) }

// TestGoSQLDriver runs a common driver against the server: login, a query,
// a write, an error, a ping, a lost connection and the goodbye.
func TestGoSQLDriver(t *testing.T) {
	srv := start(t, fakebackend.Config{User: "app", Password: "s3cret"})
	srv.OnQuery("SELECT id, name FROM t ORDER BY id", fakebackend.Result{
		Columns: []fakebackend.Column{{Name: "id", Type: protocol.TypeLongLong, Charset: 63}, {Name: "name"}},
		Rows:    [][]any{{1, "a"}, {2, nil}},
	})
	srv.OnQuery("UPDATE t SET name = 'b'", fakebackend.OK(2, 0))
	srv.OnQuery("INSERT INTO t (name) VALUES ('c')", fakebackend.OK(1, 42))
	srv.OnQuery("SELECT * FROM nope", fakebackend.Err(protocol.NewError(1146, "Table 'shop.nope' doesn't exist")))
	srv.OnQuery("SELECT 'lost'", fakebackend.Result{Close: true})

	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = "app", "s3cret", "tcp", srv.Addr(), "shop"
	cfg.Timeout, cfg.ReadTimeout = 5*time.Second, 5*time.Second
	cfg.Logger = testLogger{t}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	rows, err := db.QueryContext(ctx, "SELECT id, name FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id   int64
		name sql.NullString
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.name); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []row{{1, sql.NullString{String: "a", Valid: true}}, {2, sql.NullString{}}}; !slices.Equal(got, want) {
		t.Errorf("rows %+v, want %+v", got, want)
	}

	res, err := db.ExecContext(ctx, "UPDATE t SET name = 'b'")
	if n, _ := res.RowsAffected(); err != nil || n != 2 {
		t.Errorf("UPDATE: %d rows, %v", n, err)
	}
	res, err = db.ExecContext(ctx, "INSERT INTO t (name) VALUES ('c')")
	if id, _ := res.LastInsertId(); err != nil || id != 42 {
		t.Errorf("INSERT: id %d, %v", id, err)
	}

	_, err = db.ExecContext(ctx, "SELECT * FROM nope")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1146 || me.Message != "Table 'shop.nope' doesn't exist" {
		t.Errorf("ERR: %v", err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}

	// The connection dies under a query; the pool dials a new one.
	if _, err := db.ExecContext(ctx, "SELECT 'lost'"); err == nil {
		t.Error("a query whose connection closed succeeded")
	}
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("ping after the lost connection: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	waitConns(t, srv, 0)

	var logins []uint32
	for _, c := range srv.Commands() {
		switch c.Command {
		case protocol.ComConnect:
			logins = append(logins, c.ConnID)
			if c.Arg != "app" || c.Database != "shop" {
				t.Errorf("login %+v", c)
			}
		case protocol.ComQuit:
			if c.ConnID != 2 {
				t.Errorf("COM_QUIT on connection %d, want 2", c.ConnID)
			}
		}
	}
	if !slices.Equal(logins, []uint32{1, 2}) {
		t.Errorf("logins on connections %v, want [1 2]", logins)
	}
	if q := srv.Queries(); len(q) != 5 || q[4] != "SELECT 'lost'" {
		t.Errorf("queries %q", q)
	}
}
