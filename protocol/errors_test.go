package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// checkKinds reports the faults of an error table: a SQLSTATE that is not
// five digits or capitals or is of class 00 (success, which no ERR may
// carry), and two kinds with one code but another SQLSTATE or symbol.
func checkKinds(table []ErrorKind) error {
	var errs []error
	byCode := map[uint16]ErrorKind{}
	for _, k := range table {
		if !validSQLState(k.State) {
			errs = append(errs, fmt.Errorf("%d %s: SQLSTATE %q is not five digits or capitals of a class other than 00", k.Code, k.Symbol, k.State))
		}
		if k.Symbol == "" {
			errs = append(errs, fmt.Errorf("%d: no symbol", k.Code))
		}
		o, seen := byCode[k.Code]
		if !seen {
			byCode[k.Code] = k
			continue
		}
		if o != k {
			errs = append(errs, fmt.Errorf("code %d is %s %s and %s %s", k.Code, o.Symbol, o.State, k.Symbol, k.State))
		}
	}
	return errors.Join(errs...)
}

func validSQLState(s string) bool {
	if len(s) != 5 || s[:2] == "00" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

func TestErrorTable(t *testing.T) {
	if len(errorTable) < 40 {
		t.Fatalf("the table holds %d kinds", len(errorTable))
	}
	if err := checkKinds(errorTable); err != nil {
		t.Fatal(err)
	}
}

func TestCheckKindsFindsFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table []ErrorKind
		want  string
	}{
		{"short-state", []ErrorKind{{1, "HY00", "ER_A"}}, "SQLSTATE"},
		{"lower-case", []ErrorKind{{1, "hy000", "ER_A"}}, "SQLSTATE"},
		{"success-class", []ErrorKind{{1, "00000", "ER_A"}}, "SQLSTATE"},
		{"no-symbol", []ErrorKind{{1, "HY000", ""}}, "no symbol"},
		{"code-two-states", []ErrorKind{{1, "HY000", "ER_A"}, {1, "42000", "ER_A"}}, "code 1 is"},
		{"code-two-symbols", []ErrorKind{{1, "HY000", "ER_A"}, {1, "HY000", "ER_B"}}, "code 1 is"},
	} {
		err := checkKinds(tc.table)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
	}
	alias := []ErrorKind{{1, "HY000", "ER_A"}, {1, "HY000", "ER_A"}}
	if err := checkKinds(alias); err != nil {
		t.Errorf("two names of one kind: %v", err)
	}
}

// mariadbErrmsg is where MariaDB packages install the source of their
// error messages, with each error's SQLSTATE.
var mariadbErrmsg = []string{"/usr/share/mysql/errmsg-utf8.txt", "/usr/share/mariadb/errmsg-utf8.txt"}

// TestErrorTableMatchesMariaDB compares the table's symbols and SQLSTATEs
// with MariaDB's own where its errmsg-utf8.txt is installed. Codes 2000 to
// 3999 are skipped: 2xxx are the client library's, and sluice's 3xxx are
// MySQL's (MariaDB left most of those numbers unused).
func TestErrorTableMatchesMariaDB(t *testing.T) {
	var f *os.File
	for _, p := range mariadbErrmsg {
		if g, err := os.Open(p); err == nil {
			f = g
			break
		}
	}
	if f == nil {
		t.Skipf("no MariaDB errmsg-utf8.txt in %v", mariadbErrmsg)
	}
	defer f.Close()
	server, err := parseErrmsg(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range errorTable {
		if k.Code >= 2000 && k.Code < 4000 {
			continue
		}
		if m, ok := server[k.Code]; !ok || m != k {
			t.Errorf("%d %s %s, MariaDB has %+v", k.Code, k.Symbol, k.State, m)
		}
	}
}

// parseErrmsg reads MariaDB's errmsg-utf8.txt: an error is a line that
// starts with its symbol and, optionally, its SQLSTATE (and the ODBC
// state); its code counts up from the last start-error-number or
// skip-to-error-number line.
func parseErrmsg(f *os.File) (map[uint16]ErrorKind, error) {
	out := map[uint16]ErrorKind{}
	code := -1
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] == "start-error-number" || fields[0] == "skip-to-error-number" {
			n, err := strconv.Atoi(fields[1])
			if err != nil {
				return nil, err
			}
			code = n
			continue
		}
		line := sc.Text()
		if code < 0 || line[0] < 'A' || line[0] > 'Z' {
			continue
		}
		k := ErrorKind{Code: uint16(code), Symbol: fields[0], State: "HY000"}
		if len(fields) > 1 {
			k.State = fields[1]
		}
		out[k.Code] = k
		code++
	}
	return out, sc.Err()
}

// TestNewErrorKeepsStates pins the SQLSTATE NewError gave every code
// before the table, so a call not yet moved to a kind sends the same bytes.
func TestNewErrorKeepsStates(t *testing.T) {
	before := map[uint16]string{
		1040: "08004", 1043: "08S01", 1045: "28000", 1047: "08S01", 1046: "3D000", 1049: "42000",
		1153: "08S01", 1156: "08S01", 1158: "08S01", 1159: "08S01", 1251: "08004", 1235: "42000",
		1317: "70100", 1203: "42000", 1226: "42000", 3024: "HY000", 2013: "HY000", 3159: "HY000",
		1148: "42000", 1461: "42000", 2003: "HY000", 1104: "42000", 1048: "23000", 1364: "HY000",
		1366: "22007", 1526: "HY000", 1792: "25006",
		// No entry before: HY000.
		1835: "HY000", 1290: "HY000", 1105: "HY000", 1205: "HY000", 2026: "HY000", 1210: "HY000",
		1243: "HY000", 1421: "HY000", 1615: "HY000", 1094: "HY000", 1095: "HY000", 1129: "HY000",
		1146: "HY000", 1062: "HY000", 4078: "HY000",
	}
	for code, st := range before {
		e := NewError(code, "m %d", 1)
		want := AppendErr(nil, &SQLError{Code: code, State: st, Message: "m 1"})
		if got := AppendErr(nil, e); !bytes.Equal(got, want) {
			t.Errorf("NewError(%d): % x, want % x", code, got, want)
		}
	}
}

func TestToSQLError(t *testing.T) {
	sentinel := ERNotSupportedYet.Sentinel("cross-shard join")
	backend := &SQLError{Code: 1146, State: "42S02", Message: "Table 'x.y' doesn't exist"}
	for _, tc := range []struct {
		name string
		err  error
		want *SQLError
	}{
		{"sql-error", fmt.Errorf("wrapped: %w", backend), backend},
		{"too-large", fmt.Errorf("%w: 5 bytes", ErrPacketTooLarge),
			&SQLError{1153, "08S01", "Got a packet bigger than 'max_allowed_packet' bytes"}},
		{"out-of-order", ErrPacketOutOfOrder, &SQLError{1156, "08S01", "Got packets out of order"}},
		{"malformed", fmt.Errorf("%w: short", ErrMalformed),
			&SQLError{1835, "HY000", "Malformed communication packet: malformed packet: short"}},
		{"kinded", fmt.Errorf("parameter 1: %w", fmt.Errorf("%w: t.a and t.b", sentinel)),
			&SQLError{1235, "42000", "sluice: parameter 1: cross-shard join: t.a and t.b"}},
		{"other", errors.New("boom"), &SQLError{1105, "HY000", "sluice: boom"}},
		// The first kinded error in the chain decides.
		{"two-kinds", fmt.Errorf("%w: %w", ERBadNull.Sentinel("a"), sentinel), &SQLError{1048, "23000", "sluice: a: cross-shard join"}},
	} {
		if got := ToSQLError(tc.err); *got != *tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, *got, *tc.want)
		}
	}
}

func TestSentinel(t *testing.T) {
	a, b := ERBadNull.Sentinel("x"), ERBadNull.Sentinel("x")
	wrapped := fmt.Errorf("%w: col", a)
	if !errors.Is(wrapped, a) || errors.Is(wrapped, b) {
		t.Error("sentinels of one kind and text must stay distinct for errors.Is")
	}
	if a.Error() != "x" || wrapped.Error() != "x: col" {
		t.Errorf("texts %q, %q", a.Error(), wrapped.Error())
	}
	if k := KindOf(wrapped, ERUnknownError); k != ERBadNull {
		t.Errorf("KindOf: %+v", k)
	}
	if k := KindOf(errors.New("plain"), ERUnknownError); k != ERUnknownError {
		t.Errorf("KindOf without a kind: %+v", k)
	}
}
