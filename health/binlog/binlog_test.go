package binlog

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-proxy/sluice/router"
)

// statusVars builds a query event's status variables as MariaDB writes
// them: Q_FLAGS2, Q_SQL_MODE, then others (here Q_CATALOG_NZ).
func statusVars(mode uint64, withFlags bool) []byte {
	var b []byte
	if withFlags {
		b = append(b, qFlags2Code, 0, 0, 0, 0)
	}
	b = append(b, qSQLModeCode)
	b = binary.LittleEndian.AppendUint64(b, mode)
	return append(b, 6, 3, 'd', 'e', 'f')
}

func TestSQLModeOf(t *testing.T) {
	for _, c := range []struct {
		vars   []byte
		mode   uint64
		ok     bool
		lexing router.LexModes
	}{
		{statusVars(modeANSIQuotes, true), modeANSIQuotes, true, router.LexANSIQuotes},
		{statusVars(modeNoBackslashEscape|modePipesAsConcat, false), modeNoBackslashEscape | modePipesAsConcat, true,
			router.LexNoBackslashEscapes | router.LexPipesAsConcat},
		// ORACLE as MariaDB stores it: the modes it implies are set too.
		{statusVars(modeOracle|modeANSIQuotes|modePipesAsConcat, true), modeOracle | modeANSIQuotes | modePipesAsConcat, true,
			router.LexOracle | router.LexANSIQuotes | router.LexPipesAsConcat},
		// STRICT_TRANS_TABLES and the like change nothing of the lexing.
		{statusVars(1<<22|1<<30, true), 1<<22 | 1<<30, true, 0},
		{nil, 0, false, 0},
		{[]byte{qFlags2Code, 0, 0}, 0, false, 0},
		{[]byte{qSQLModeCode, 1, 2, 3}, 0, false, 0},
		{[]byte{6, 3, 'd', 'e', 'f'}, 0, false, 0},
	} {
		mode, ok := sqlModeOf(c.vars)
		if mode != c.mode || ok != c.ok {
			t.Errorf("%x: %x %v, want %x %v", c.vars, mode, ok, c.mode, c.ok)
		}
		if got := lexModes(mode); got != c.lexing {
			t.Errorf("%x: lexing %b, want %b", c.vars, got, c.lexing)
		}
	}
}

func TestWrittenTablesUnderEventMode(t *testing.T) {
	w, err := writtenTables(`INSERT INTO "t" VALUES (1)`, "db", statusVars(modeANSIQuotes, true))
	if err != nil || !slices.Equal(w.Tables, []router.TableRef{{Schema: "db", Table: "t"}}) {
		t.Errorf("ANSI_QUOTES: %+v, %v", w, err)
	}
	if _, err := writtenTables(`INSERT INTO "t" VALUES (1)`, "db", statusVars(0, true)); err == nil {
		t.Error("a quoted string as a table name parsed under the default sql_mode")
	}
}

func TestBodyWrites(t *testing.T) {
	ref := func(s, n string) router.TableRef { return router.TableRef{Schema: s, Table: n} }
	for _, c := range []struct {
		body string
		want []router.TableRef
		ok   bool
	}{
		{"INSERT INTO b VALUES (NEW.id)", []router.TableRef{ref("s", "b")}, true},
		{"BEGIN\n  INSERT INTO b VALUES (NEW.id);\n  UPDATE o.c SET n = n + 1;\nEND", []router.TableRef{ref("s", "b"), ref("o", "c")}, true},
		{"begin delete from b where id = OLD.id; end", []router.TableRef{ref("s", "b")}, true},
		{"SET NEW.x = 1", nil, true},
		{"BEGIN IF NEW.x > 0 THEN INSERT INTO b VALUES (1); END IF; END", nil, false},
		{"CALL p(NEW.id)", nil, false},
		{"INSERT INTO b VALUES (f(NEW.id))", nil, false},
	} {
		got, ok := bodyWrites(c.body, "s")
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v %v, want %v %v", c.body, got, ok, c.want, c.ok)
		}
	}
}

func TestDefaultServerID(t *testing.T) {
	a, b := DefaultServerID("main", "host-a:6033"), DefaultServerID("main", "host-b:6033")
	if a == b {
		t.Errorf("two instances share server_id %d", a)
	}
	if a != DefaultServerID("main", "host-a:6033") {
		t.Error("DefaultServerID is not stable")
	}
	if DefaultServerID("main", "host-a:6033") == DefaultServerID("other", "host-a:6033") {
		t.Error("two clusters of one instance share a server_id")
	}
	for _, id := range []uint32{a, b, DefaultServerID("main", "")} {
		if id < 1<<31 {
			t.Errorf("server_id %d below 2^31", id)
		}
	}
}

func TestPositionText(t *testing.T) {
	if positionText(nil) != "" {
		t.Error("nil position")
	}
	p, err := mysql.ParseMariadbGTIDSet("0-1-5,1-2-7")
	if err != nil {
		t.Fatal(err)
	}
	if got := positionText(p.(*mysql.MariadbGTIDSet)); got != "0-1-5,1-2-7" {
		t.Errorf("position %q", got)
	}
}
