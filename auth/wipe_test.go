package auth

import (
	"net"
	"strings"
	"testing"
)

// wipeHash is a password hash as SHOW GRANTS prints it.
const wipeHash = "*D821809F681A40A6E379B50D0463EFAE20BDD122"

// TestSanitizedCopy: the kept value holds no clause and shares no memory
// with the row it was read from, which is cleared after.
func TestSanitizedCopy(t *testing.T) {
	for _, line := range []string{
		"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + wipeHash + "'",
		"GRANT USAGE ON *.* TO `u`@`%` IDENTIFIED BY PASSWORD '" + wipeHash + "' WITH MAX_QUERIES_PER_HOUR 10",
		"GRANT SELECT ON `db`.* TO `u`@`%`",
	} {
		row := []byte(line)
		got := sanitizedCopy(row)
		want := strings.Clone(got)
		clear(row)
		if got != want {
			t.Fatalf("the value kept of %q changed when its row was cleared: %q", line, got)
		}
		if strings.Contains(got, wipeHash[1:]) || strings.Contains(got, "IDENTIFIED") {
			t.Fatalf("the value kept of %q holds the clause: %q", line, got)
		}
	}
	if sanitizedCopy(nil) != "" || sanitizedCopy([]byte{}) != "" {
		t.Fatal("an empty value is not empty")
	}
}

// TestWipingConnZeroesReads: what a wipingConn's reads delivered is zeroed
// when it is closed.
func TestWipingConnZeroesReads(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	w := &wipingConn{Conn: a}
	go func() { _, _ = b.Write([]byte("IDENTIFIED BY PASSWORD '" + wipeHash + "'")) }()
	buf := make([]byte, 128)
	n, err := w.Read(buf)
	if err != nil || n == 0 {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	if !strings.Contains(string(buf[:n]), "IDENTIFIED") {
		t.Fatalf("read %q", buf[:n])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range buf[:n] {
		if c != 0 {
			t.Fatalf("byte %d of the read is %q after Close", i, c)
		}
	}
}
